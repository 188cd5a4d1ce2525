/**
 * What tracing costs one request in-process, without a load generator or sockets: the calls
 * the pipeline makes for a proxied GET (the server span from the request's headers, the
 * backend call's client span and its traceparent, the server span's attributes, both ends)
 * run in a loop, and this process's CPU per request is reported for
 *   - unsampled: the sampler drops every request (what 99 % of requests cost at 1 %),
 *   - recorded: every request sampled, its span records turned into the SDK's spans and
 *     handed (in this thread) to an exporter that drops them,
 *   - exported: every request sampled and exported over OTLP/HTTP (protobuf) to a sink in
 *     another process — from the export thread, whose CPU is counted too (process.cpuUsage
 *     covers every thread of the process);
 *   - serialized: the OpenTelemetry SDK's own OTLP protobuf serializer
 *     (`ProtobufTraceSerializer`, what its OTLP/HTTP exporter runs on each batch) alone, over
 *     the recorded requests' spans, batches of 512 — the least an export through the SDK
 *     costs a request, whichever thread runs it. Issue 21's 100 % budget (≤ 15 % fewer
 *     requests/s) is measured against this figure in docs/observability.md (Cost).
 * bench/tracing.ts measures the same through a running proxy under load, where the figures
 * come out larger (see docs/observability.md, Cost).
 *
 * Run: node bench/tracing-spans.ts [--requests 200000]
 */

import { parseArgs } from 'node:util'
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { createRequestTracing, type TracingOptions } from '@portico/engine/otel-sdk'
import { endServerSpan, httpClientAttributes, type ServerSpanView } from '@portico/engine/otel'
import { fmt, rounded } from './lib/report.ts'

/** A span as the SDK's exporters and serializer read one. */
type ReadableSpan = Parameters<typeof ProtobufTraceSerializer.serializeRequest>[0][number]
import { startOtlpSink } from './lib/servers.ts'

const { values } = parseArgs({ options: { requests: { type: 'string', default: '200000' } } })
const REQUESTS = Number(values.requests)

const headers = { host: '127.0.0.1:8080', 'user-agent': 'wrk', accept: '*/*' }
const view: ServerSpanView = {
  method: 'GET', scheme: 'http', host: '127.0.0.1:8080', hostname: '127.0.0.1', originalPath: '/', query: '', sourceAddress: '127.0.0.1', sourcePort: 50000,
  status: 200, reason: 'Upstream', error: null, routeKey: 'default/bench', req: { httpVersion: '1.1', headers, socket: { localPort: 8080 } },
  listener: { ir: { gateway: 'default', name: 'default' } }, matchedPath: { kind: 'prefix', value: '/' }, backend: { name: 'bench' }, mcp: null, grpc: null
}

/** One proxied GET's tracing calls, as the pipeline makes them. */
function requestOnce (tracing: Awaited<ReturnType<typeof createRequestTracing>>): void {
  const span = tracing.startRequest(headers, 'GET')
  const upstream: Record<string, string | undefined> = { ...headers }
  const call = span.child('GET', 'client', { ...httpClientAttributes('GET', { scheme: 'http', host: '127.0.0.1', port: 9000, pathAndQuery: '/' }), 'portico.backend': 'bench' })
  span.inject(upstream, call)
  call?.setAttributes({ 'http.response.status_code': 200 })
  call?.end()
  if (span.recording) endServerSpan(span, view)
  span.end()
}

/** Microseconds of this process's CPU per request, over `REQUESTS` of them after a warm-up. */
async function measure (options: TracingOptions): Promise<number> {
  const tracing = await createRequestTracing({ ...options, scheduledDelayMs: 100 })
  const one = (): void => requestOnce(tracing)
  // Batches of a thousand with 20 ms between, as requests arrive: the batching timer and
  // the export thread get their turns, and the export keeps up (a loop that records faster
  // than the thread encodes would fill the span queue, and what overflows is dropped, not
  // exported). CPU time is what is measured, so the pauses cost nothing.
  const run = async (n: number): Promise<void> => {
    for (let done = 0; done < n; done += 1000) {
      for (let i = 0; i < 1000; i++) one()
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  }
  await run(Math.min(20_000, REQUESTS))
  const before = process.cpuUsage()
  await run(REQUESTS)
  await tracing.shutdown()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / REQUESTS
}

/**
 * Microseconds of CPU per request the SDK's OTLP protobuf serializer takes over the spans of
 * recorded requests (two a request), in export calls of 512 spans as the export thread makes
 * them; the spans are made once, through an exporter that keeps them.
 */
async function serializerCost (base: Omit<TracingOptions, 'randomSampling'>): Promise<number> {
  const spans: ReadableSpan[] = []
  const keep = { export: (batch: ReadableSpan[], done: (r: { code: number }) => void) => { spans.push(...batch); done({ code: 0 }) }, shutdown: async () => {} }
  const tracing = await createRequestTracing({ ...base, randomSampling: true, scheduledDelayMs: 5, exporter: keep as unknown as NonNullable<TracingOptions['exporter']> })
  for (let i = 0; i < 2048; i++) requestOnce(tracing)
  await tracing.shutdown()
  const batches: ReadableSpan[][] = []
  for (let at = 0; at + 512 <= spans.length; at += 512) batches.push(spans.slice(at, at + 512))
  const serialize = (rounds: number): void => {
    for (let r = 0; r < rounds; r++) for (const batch of batches) ProtobufTraceSerializer.serializeRequest(batch)
  }
  serialize(50)
  const rounds = Math.max(1, Math.round(REQUESTS / 2048))
  const before = process.cpuUsage()
  serialize(rounds)
  const used = process.cpuUsage(before)
  return (used.user + used.system) / (rounds * batches.length * 256)
}

async function main (): Promise<void> {
  // The collector's side runs in a process of its own.
  const sink = await startOtlpSink()
  try {
    const base = { otlpEndpoint: `http://127.0.0.1:${sink.port}`, otlpProtocol: 'http' as const, headers: {}, clientSampling: true, resources: {} }
    const drop = { export: (_spans: unknown[], done: (r: { code: number }) => void) => done({ code: 0 }), shutdown: async () => {} }
    const unsampled = await measure({ ...base, randomSampling: false })
    const recorded = await measure({ ...base, randomSampling: true, exporter: drop as unknown as NonNullable<TracingOptions['exporter']> })
    const exported = await measure({ ...base, randomSampling: true })
    const serialized = await serializerCost(base)
    console.log(`tracing in-process: Node ${process.version}, ${REQUESTS} requests each; CPU µs per request (this process; the sink runs apart)`)
    console.log(`unsampled ${fmt(unsampled, 2)}, recorded ${fmt(recorded, 2)} (spans and attributes), exported ${fmt(exported, 2)} (+ batching, OTLP protobuf encoding, export)`)
    console.log(`serialized ${fmt(serialized, 2)}: the SDK's OTLP protobuf serializer alone on a recorded request's two spans — the least any export through the SDK costs`)
    console.log(JSON.stringify(rounded({ bench: 'tracing-spans', requests: REQUESTS, unsampledUs: unsampled, recordedUs: recorded, exportedUs: exported, serializedUs: serialized })))
  } finally {
    await sink.child.stop()
  }
}

await main()
