/**
 * The tracing pieces that decide without a collector: Portico's sampler (agentgateway's
 * randomSampling / clientSampling), the W3C propagation of a request's span (continued trace,
 * unsampled flag, the caller's tracestate and baggage), `http.route` templates and the query
 * redaction of span attributes.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api'
import { hrTimeToMilliseconds } from '@opentelemetry/core'
import type { ReadableSpan } from '@opentelemetry/sdk-trace'
import { createRequestTracing, PorticoSampler } from '../src/trace/otel-sdk.ts'
import { endServerSpan, httpRoute, redactQuery, setBackendCallAttributes, type ServerSpanView } from '../src/trace/otel.ts'
import { LAYOUTS } from '../src/trace/attribute-layouts.ts'
import { vouchedTraceparentLine } from '../src/ir/http-grammar.ts'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const remote = (sampled: boolean) => trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE, spanId: '00f067aa0ba902b7', traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true })
const decide = (s: PorticoSampler, context = ROOT_CONTEXT) => s.sampleRequest(trace.getSpanContext(context))

test('sampler: randomSampling for requests without a trace, clientSampling for the others', () => {
  assert.equal(decide(new PorticoSampler(false, true)), false)
  assert.equal(decide(new PorticoSampler(true, true)), true)
  assert.equal(decide(new PorticoSampler(false, true), remote(true)), true, 'the caller sampled it')
  assert.equal(decide(new PorticoSampler(true, true), remote(false)), false, 'the caller did not')
  assert.equal(decide(new PorticoSampler(true, false), remote(false)), true, 'clientSampling false: randomSampling decides')
  assert.equal(decide(new PorticoSampler(false, false), remote(true)), false)
  assert.equal(decide(new PorticoSampler(false, 0), remote(true)), false, 'a ratio of 0 keeps none')
  let kept = 0
  const half = new PorticoSampler(0.5, true)
  for (let i = 0; i < 2000; i++) if (decide(half)) kept++
  assert.ok(kept > 800 && kept < 1200, `${kept} of 2000 at 0.5`)
})

test('a request span continues the caller\'s trace and writes the call\'s traceparent, tracestate and baggage', async () => {
  const spans: unknown[] = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: false, clientSampling: true, resources: {}, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const span = tracing.startRequest({ traceparent: `00-${TRACE}-00f067aa0ba902b7-00`, tracestate: 'v=1', baggage: 'user=ada' }, 'GET')
  assert.equal(span.traceId, TRACE)
  assert.equal(span.recording, false)
  assert.equal(span.child('GET', 'client', {}), null, 'no child spans of an unsampled request')
  const headers: Record<string, string> = { traceparent: 'stale', tracestate: 'stale' }
  span.inject(headers)
  assert.match(headers.traceparent!, new RegExp(`^00-${TRACE}-(?!00f067aa0ba902b7)[0-9a-f]{16}-00$`))
  assert.equal(headers.tracestate, 'v=1')
  assert.equal(headers.baggage, 'user=ada')
  // A broken traceparent starts a new trace; its tracestate is not carried over.
  const fresh = tracing.startRequest({ traceparent: 'garbage', tracestate: 'v=1' }, 'GET')
  const out: Record<string, string> = { tracestate: 'v=1' }
  fresh.inject(out)
  assert.notEqual(fresh.traceId, TRACE)
  assert.equal(out.tracestate, undefined)
  // No trace at all: a new one, flagged unsampled, with ids of its own each time.
  const seen = new Set<string>()
  for (let i = 0; i < 600; i++) {
    const own = tracing.startRequest({}, 'GET')
    const h: Record<string, string> = {}
    own.inject(h)
    assert.match(h.traceparent!, new RegExp(`^00-${own.traceId}-${own.spanId}-00$`))
    assert.match(own.traceId, /^(?!0+$)[0-9a-f]{32}$/)
    assert.match(own.spanId, /^(?!0+$)[0-9a-f]{16}$/)
    // The HTTP/1.1 head writes the vouched value as this line, whole (from the pool of lines).
    assert.equal(vouchedTraceparentLine(h.traceparent!), `traceparent: ${h.traceparent!}\r\n`)
    seen.add(own.traceId)
    own.end()
  }
  assert.equal(seen.size, 600, 'every request a trace id of its own')
  await tracing.shutdown()
  assert.equal(spans.length, 0)
})

test('a sampled request is decided once: its span and the children under it are all recorded', async () => {
  const spans: Array<{ name: string, parentSpanContext?: { spanId: string } }> = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: 0.5, clientSampling: true, resources: {}, scheduledDelayMs: 10, exporter: { export: (s, cb) => { spans.push(...s as never[]); cb({ code: 0 }) }, shutdown: async () => {} } })
  let recorded = 0
  for (let i = 0; i < 400; i++) {
    const span = tracing.startRequest({}, 'GET')
    const child = span.child('GET', 'client', {})
    assert.equal(child !== null, span.recording, 'a child exactly when the request is recorded')
    if (span.recording) recorded++
    child?.end()
    span.end()
  }
  await tracing.shutdown()
  assert.ok(recorded > 140 && recorded < 260, `${recorded} of 400 at 0.5`)
  assert.equal(spans.length, 2 * recorded, 'each recorded request exported with its child')
})

test('recorded and unsampled requests take ids from pools of their own: across both, every id is valid and used once', async () => {
  // Two pools (trace/otel-sdk.ts says why): each refilled several times here.
  const spans: ReadableSpan[] = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: 0.5, clientSampling: true, resources: {}, scheduledDelayMs: 10, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const traceIds: string[] = []
  const spanIds: string[] = []
  for (let i = 0; i < 1500; i++) {
    const span = tracing.startRequest({}, 'GET')
    if (!span.recording) {
      const h: Record<string, string> = {}
      span.inject(h)
      assert.equal(vouchedTraceparentLine(h.traceparent!), `traceparent: 00-${span.traceId}-${span.spanId}-00\r\n`)
      traceIds.push(span.traceId)
      spanIds.push(span.spanId)
    }
    span.child('GET', 'client', {})?.end()
    span.end()
  }
  await tracing.shutdown()
  const recorded = spans.filter(s => s.kind === SpanKind.SERVER)
  assert.ok(recorded.length > 600 && recorded.length < 900, `${recorded.length} of 1500 recorded at 0.5`)
  traceIds.push(...recorded.map(s => s.spanContext().traceId))
  spanIds.push(...spans.map(s => s.spanContext().spanId))
  for (const id of traceIds) assert.match(id, /^(?!0+$)[0-9a-f]{32}$/)
  for (const id of spanIds) assert.match(id, /^(?!0+$)[0-9a-f]{16}$/)
  assert.equal(new Set(traceIds).size, traceIds.length, 'no trace id twice')
  assert.equal(new Set(spanIds).size, spanIds.length, 'no span id twice')
})

test('the id pools convert to hex within Node\'s 512-character stack buffer: no refill mallocs a 12 KB one', async () => {
  // A larger conversion is a malloc, and one of 12 KB every 256 requests made glibc consolidate
  // its free lists each time (trace/otel-sdk.ts hexOf; docs/tracing-cost-log.md, sixteenth session).
  const sizes: number[] = []
  const toString = Buffer.prototype.toString
  Buffer.prototype.toString = function (this: Buffer, encoding?: BufferEncoding, start?: number, end?: number) {
    if (encoding === 'hex') sizes.push(Math.min(end ?? this.length, this.length) - (start ?? 0))
    return toString.call(this, encoding, start, end)
  }
  try {
    const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: 0.5, clientSampling: true, resources: {}, scheduledDelayMs: 10, exporter: { export: (_s, cb) => cb({ code: 0 }), shutdown: async () => {} } })
    for (let i = 0; i < 1200; i++) {
      const span = tracing.startRequest({}, 'GET')
      span.inject({})
      span.child('GET', 'client', {})?.end()
      span.end()
    }
    await tracing.shutdown()
  } finally {
    Buffer.prototype.toString = toString
  }
  assert.ok(sizes.length >= 2 * 24, `both pools refilled (${sizes.length} hex conversions)`)
  assert.ok(sizes.every(n => n <= 256), `largest hex conversion ${Math.max(...sizes)} bytes`)
})

test('http.route is the route\'s template, never the request path; credential-like query values are redacted', () => {
  assert.equal(httpRoute({ kind: 'prefix', value: '/api/' }), '/api/*')
  assert.equal(httpRoute({ kind: 'prefix', value: '/' }), '/*')
  assert.equal(httpRoute({ kind: 'exact', value: '/login' }), '/login')
  assert.equal(httpRoute({ kind: 'regex', value: '/u/[0-9]+' }), undefined)
  assert.equal(httpRoute(null), undefined)
  assert.equal(redactQuery('a=1&api_key=k&Signature=s&x-amz-signature=z&access_token=t&token&b'), 'a=1&api_key=REDACTED&Signature=REDACTED&x-amz-signature=REDACTED&access_token=REDACTED&token&b')
  assert.equal(redactQuery('%74oken=secret'), '%74oken=REDACTED', 'an escaped name is decoded before it is checked')
})

test('recorded spans reach the exporter as the SDK\'s spans: parent, remote parent, status, attributes (a later value wins)', async () => {
  const spans: ReadableSpan[] = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: false, clientSampling: true, resources: { 'deployment.environment.name': 'test' }, scheduledDelayMs: 5, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const span = tracing.startRequest({ traceparent: `00-${TRACE}-00f067aa0ba902b7-01`, tracestate: 'v=1' }, 'GET')
  assert.equal(span.recording, true)
  const call = span.child('GET', 'client', { 'server.port': 9000, 'url.full': undefined })!
  call.setAttributes({ 'server.port': 9001 })
  call.setError('UpstreamFailure', 'connection refused')
  call.end()
  span.updateName('GET /api/*')
  span.setAttributes({ 'http.response.status_code': 502, 'portico.route': null })
  span.end()
  span.end()
  await tracing.shutdown()
  assert.equal(spans.length, 2, 'each span once, however often it is ended')
  const [client, server] = spans as [ReadableSpan, ReadableSpan]
  assert.equal(server.name, 'GET /api/*')
  assert.equal(server.kind, SpanKind.SERVER)
  assert.equal(server.spanContext().traceId, TRACE)
  assert.equal(server.spanContext().traceState?.serialize(), 'v=1')
  assert.deepEqual({ spanId: server.parentSpanContext?.spanId, remote: server.parentSpanContext?.isRemote }, { spanId: '00f067aa0ba902b7', remote: true })
  assert.deepEqual(server.attributes, { 'http.response.status_code': 502 })
  assert.equal(server.resource.attributes['service.name'], 'portico')
  assert.equal(server.resource.attributes['deployment.environment.name'], 'test')
  assert.equal(client.kind, SpanKind.CLIENT)
  assert.deepEqual({ spanId: client.parentSpanContext?.spanId, remote: client.parentSpanContext?.isRemote }, { spanId: span.spanId, remote: false })
  assert.deepEqual(client.attributes, { 'server.port': 9001, 'error.type': 'UpstreamFailure' })
  assert.deepEqual(client.status, { code: SpanStatusCode.ERROR, message: 'connection refused' })
  assert.ok(hrTimeToMilliseconds(server.endTime) >= hrTimeToMilliseconds(client.endTime) && hrTimeToMilliseconds(client.startTime) >= hrTimeToMilliseconds(server.startTime))
  assert.ok(Math.abs(hrTimeToMilliseconds(server.duration) - (hrTimeToMilliseconds(server.endTime) - hrTimeToMilliseconds(server.startTime))) < 0.001, 'duration is end - start')
  assert.deepEqual(server.status, { code: SpanStatusCode.UNSET })
})

test('the server span and the backend call send their attributes as layouts: the SDK\'s spans get them by name, fields.remove and later values apply', async () => {
  LAYOUTS.forEach((layout, id) => {
    if (layout === undefined) return
    assert.equal(layout.id, id, 'a layout sits at its id')
    assert.equal(new Set(layout.keys).size, layout.keys.length, 'no key twice')
  })
  const spans: ReadableSpan[] = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 5, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const span = tracing.startRequest({}, 'PURGE')
  const call = span.child('PURGE', 'client', {})!
  setBackendCallAttributes(call, 'PURGE', { scheme: 'http', host: '::1', port: 9000, pathAndQuery: '/a?token=x&b=1' }, 1, 'api')
  call.setAttributes({ 'http.response.status_code': 200 })
  call.end()
  const view: ServerSpanView = {
    method: 'PURGE', scheme: 'https', host: 'example.com:8443', hostname: 'example.com', originalPath: '/mcp', query: 'key=secret', sourceAddress: '10.0.0.1', sourcePort: 50000,
    status: 502, reason: 'UpstreamFailure', error: 'refused', routeKey: 'default/r', req: { httpVersion: '2.0', headers: { 'user-agent': 'curl/8' }, socket: { localPort: 8443 } },
    listener: { ir: { gateway: 'default', name: 'web' } }, matchedPath: { kind: 'prefix', value: '/mcp/' }, backend: { name: 'api' },
    mcp: { method: 'tools/call', target: 'everything', name: 'echo', kind: 'tool' }, grpc: null
  }
  endServerSpan(span, view, ['user_agent.original', 'portico.mcp.target'])
  span.setAttributes({ 'portico.reason': 'Overridden' })
  span.end()
  await tracing.shutdown()
  const [client, server] = spans as [ReadableSpan, ReadableSpan]
  assert.deepEqual(client.attributes, {
    'http.request.method': '_OTHER', 'http.request.method_original': 'PURGE', 'server.address': '::1', 'server.port': 9000,
    'url.full': 'http://[::1]:9000/a?token=REDACTED&b=1', 'http.request.resend_count': 1, 'portico.backend': 'api', 'http.response.status_code': 200
  })
  assert.equal(server.name, 'HTTP /mcp/*')
  assert.deepEqual(server.attributes, {
    'http.request.method': '_OTHER', 'http.request.method_original': 'PURGE', 'url.scheme': 'https', 'url.path': '/mcp', 'url.query': 'key=REDACTED',
    'server.address': 'example.com', 'server.port': 8443, 'client.address': '10.0.0.1', 'network.protocol.version': '2', 'http.route': '/mcp/*',
    'http.response.status_code': 502, 'portico.gateway': 'default', 'portico.route': 'default/r', 'portico.backend': 'api', 'portico.reason': 'Overridden',
    'mcp.method.name': 'tools/call', 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'echo', 'error.type': '502'
  })
  assert.deepEqual(server.status, { code: SpanStatusCode.ERROR, message: 'refused' })
})

test('server span names are worked out once per route match, and stay apart by method and by match', async () => {
  const spans: ReadableSpan[] = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 5, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const api = { kind: 'prefix', value: '/api/' }
  const login = { kind: 'exact', value: '/login' }
  const requests: Array<[string, ServerSpanView['matchedPath']]> = [['POST', api], ['GET', api], ['POST', api], ['GET', login], ['PURGE', login], ['GET', null]]
  for (const [method, matchedPath] of requests) {
    const span = tracing.startRequest({}, method)
    endServerSpan(span, {
      method, scheme: 'http', host: 'a', hostname: 'a', originalPath: '/', query: '', sourceAddress: '', sourcePort: 0, status: 200, reason: 'Upstream', error: null,
      routeKey: null, req: { httpVersion: '1.1', headers: {}, socket: null }, listener: { ir: { gateway: 'g', name: 'l' } }, matchedPath, backend: null, mcp: null, grpc: null
    })
    span.end()
  }
  await tracing.shutdown()
  assert.deepEqual(spans.map(s => [s.name, s.attributes['http.route']]), [
    ['POST /api/*', '/api/*'], ['GET /api/*', '/api/*'], ['POST /api/*', '/api/*'], ['GET /login', '/login'], ['HTTP /login', '/login'], ['GET', undefined]
  ])
})

test('a collector that does not answer holds at most 8192 spans; the rest are dropped, never waited for', async () => {
  const waiting: Array<(r: { code: number }) => void> = []
  let exported = 0
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 5, exporter: { export: (s, cb) => { exported += s.length; waiting.push(cb) }, shutdown: async () => {} } })
  const outcomes: Record<string, number> = {}
  tracing.onSpans = (result, count) => { outcomes[result] = (outcomes[result] ?? 0) + count }
  for (let i = 0; i < 10_000; i++) tracing.startRequest({}, 'GET').end()
  assert.equal(waiting.length, 1, 'one export at a time')
  while (waiting.length > 0) waiting.shift()!({ code: 0 })
  await tracing.shutdown()
  assert.equal(exported, 8192)
  assert.deepEqual(outcomes, { dropped: 10_000 - 8192, exported: 8192 }, 'each span counted once, as what became of it')
})

test('relayed spans (a data-plane worker\'s, to its primary) are exported and counted where they arrive, once; the relaying side counts none', async () => {
  const spans: ReadableSpan[] = []
  const primary = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 5, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const counted: Record<string, Record<string, number>> = { primary: {}, worker: {} }
  primary.onSpans = (result, count) => { counted.primary![result] = (counted.primary![result] ?? 0) + count }
  const batches: unknown[][] = []
  // The worker side: batches go through a function (the worker's message port), no export thread.
  const worker = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 60_000, relay: records => { batches.push(records); primary.acceptRelayed(records) } })
  worker.onSpans = (result, count) => { counted.worker![result] = (counted.worker![result] ?? 0) + count }
  const ids = new Set<string>()
  for (let i = 0; i < 100; i++) {
    const span = worker.startRequest({}, 'GET')
    ids.add(span.spanId)
    span.end()
  }
  // 64 a batch: one handed over at once, the rest when the worker stops.
  assert.equal(batches.length, 1)
  await worker.shutdown()
  assert.equal(batches.length, 2)
  await primary.shutdown()
  assert.deepEqual(new Set(spans.map(s => s.spanContext().spanId)), ids)
  assert.deepEqual(counted, { primary: { exported: 100 }, worker: {} })
})

test('the export thread sends OTLP/HTTP protobuf to the endpoint, flushes at shutdown, and reports a failed export', async () => {
  const bodies: Buffer[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks))
      res.writeHead(req.url === '/v1/traces' ? 200 : 404, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  try {
    const tracing = await createRequestTracing({ otlpEndpoint: `http://127.0.0.1:${port}`, otlpProtocol: 'http', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 60_000 })
    for (let i = 0; i < 3; i++) {
      const span = tracing.startRequest({}, 'GET')
      span.updateName(`GET /thread-${i}`)
      span.end()
    }
    await tracing.shutdown()
    const all = Buffer.concat(bodies).toString('latin1')
    for (let i = 0; i < 3; i++) assert.ok(all.includes(`GET /thread-${i}`), `span ${i} exported before the thread stopped`)
    // The wrong path: the collector answers 404, and the proxy hears of it once.
    const errors: string[] = []
    const refused = await createRequestTracing({ otlpEndpoint: `http://127.0.0.1:${port}`, otlpProtocol: 'http', path: '/nowhere', headers: {}, randomSampling: true, clientSampling: true, resources: {}, scheduledDelayMs: 1, onExportError: message => errors.push(message) })
    let failed = 0
    refused.onSpans = (result, count) => { if (result === 'failed') failed += count }
    refused.startRequest({}, 'GET').end()
    for (let i = 0; i < 200 && errors.length === 0; i++) await new Promise(resolve => setTimeout(resolve, 25))
    refused.startRequest({}, 'GET').end()
    await refused.shutdown()
    assert.equal(errors.length, 1, `one report a minute: ${JSON.stringify(errors)}`)
    assert.equal(failed, 2, 'both spans counted as failed exports')
    assert.match(errors[0]!, /span export failed/)
  } finally {
    server.close()
  }
})
