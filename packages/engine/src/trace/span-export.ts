/**
 * A recorded span's way out: the request's thread writes each ended span as a plain
 * `SpanRecord` (ids, name, times, status, attributes as key/value pairs) and hands them over
 * in batches; here they become the SDK's `ReadableSpan`s and go to an OpenTelemetry exporter
 * (OTLP over gRPC or HTTP/protobuf — the SDK's, never hand-written OTLP).
 *
 * Why records and not the SDK's own spans: in a running proxy the SDK's span objects, its
 * batch processor's encoding and the exporter's HTTP client cost several times their
 * in-process figures (they share V8's inline caches and inlining budget with the proxy's hot
 * path; docs/observability.md, Cost). So the request's thread only fills records, and the
 * encoding and export run on a thread of their own (trace/span-export-worker.ts) — the same
 * conversion and exporter in-thread when a test hands in an exporter.
 */

import { SpanKind, type Attributes, type HrTime, type SpanContext } from '@opentelemetry/api'
import { TraceState, millisToHrTime } from '@opentelemetry/core'
import { defaultResource, resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import type { SpanAttributeValue } from './otel.ts'

/** One ended span as the request's thread wrote it (structured-cloned to the export thread). */
export interface SpanRecord {
  traceId: string
  spanId: string
  /** '' for a span without a parent (a request that arrived without a trace). */
  parentSpanId: string
  /** The parent is the caller's (a request's server span continuing a trace). */
  parentRemote: boolean
  /** The caller's W3C tracestate, '' for none. */
  traceState: string
  name: string
  kind: SpanKind
  /** ms since the epoch, with the fraction (performance.timeOrigin + performance.now()). */
  start: number
  end: number
  /** SpanStatusCode: 0 unset, 2 error. */
  status: number
  statusMessage: string
  /** Attributes as key, value, key, value…; a later value of a key replaces an earlier one. */
  attributes: Array<string | SpanAttributeValue>
}

/** Where the export goes, as the config says it (`config.tracing`). */
export interface SpanExportOptions extends OtlpEndpointOptions {
  /** Resource attributes (service.name defaults to portico). */
  resources: Record<string, string>
}

/** Where an OTLP exporter sends, as the config says it (tracing's and the access log's). */
export interface OtlpEndpointOptions {
  otlpEndpoint: string
  otlpProtocol: 'grpc' | 'http'
  path?: string
  headers: Record<string, string>
}

/**
 * The options of an OTLP exporter of either protocol: OTLP/HTTP posts to the endpoint's
 * `path` (`defaultPath` when unset) with the headers; gRPC sends them as metadata.
 */
export async function otlpTarget (o: OtlpEndpointOptions, defaultPath: string): Promise<{ protocol: 'http', options: { url: string, headers: Record<string, string> } } | { protocol: 'grpc', options: { url: string, metadata: InstanceType<typeof import('@grpc/grpc-js').Metadata> } }> {
  const base = o.otlpEndpoint.replace(/\/+$/, '')
  if (o.otlpProtocol === 'http') return { protocol: 'http', options: { url: `${base}${o.path ?? defaultPath}`, headers: o.headers } }
  const { Metadata } = await import('@grpc/grpc-js')
  const metadata = new Metadata()
  for (const [k, v] of Object.entries(o.headers)) metadata.set(k, v)
  return { protocol: 'grpc', options: { url: base, metadata } }
}

/** The SDK's OTLP trace exporter for `config.tracing`. */
export async function otlpSpanExporter (options: OtlpEndpointOptions): Promise<SpanExporter> {
  const target = await otlpTarget(options, '/v1/traces')
  if (target.protocol === 'http') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto')
    return new OTLPTraceExporter(target.options)
  }
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-grpc')
  return new OTLPTraceExporter(target.options)
}

/** The resource every span is exported under. */
export function spanResource (resources: Record<string, string>): Resource {
  return defaultResource().merge(resourceFromAttributes({ 'service.name': 'portico', ...resources }))
}

const SCOPE = { name: 'portico' }
const NO_LINKS: never[] = []
const NO_EVENTS: never[] = []

/** A record as the SDK's exporters read a span. */
export function toReadableSpan (r: SpanRecord, resource: Resource): ReadableSpan {
  const traceState = r.traceState === '' ? undefined : new TraceState(r.traceState)
  const context: SpanContext = { traceId: r.traceId, spanId: r.spanId, traceFlags: 1, ...(traceState !== undefined ? { traceState } : {}) }
  const attributes: Attributes = {}
  const a = r.attributes
  for (let i = 0; i + 1 < a.length; i += 2) attributes[a[i] as string] = a[i + 1]
  const startTime = millisToHrTime(r.start)
  const endTime = millisToHrTime(r.end)
  return {
    name: r.name,
    kind: r.kind,
    spanContext: () => context,
    ...(r.parentSpanId !== '' ? { parentSpanContext: { traceId: r.traceId, spanId: r.parentSpanId, traceFlags: 1, isRemote: r.parentRemote, ...(traceState !== undefined ? { traceState } : {}) } } : {}),
    startTime,
    endTime,
    duration: millisToHrTime(Math.max(0, r.end - r.start)) satisfies HrTime,
    status: r.statusMessage !== '' ? { code: r.status, message: r.statusMessage } : { code: r.status },
    attributes,
    links: NO_LINKS,
    events: NO_EVENTS,
    ended: true,
    resource,
    instrumentationScope: SCOPE,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0
  }
}

/** Spans per export call (the batch processor's default). */
export const EXPORT_BATCH = 512

/**
 * Exports batches of records through an SDK exporter, one export call at a time (as the
 * SDK's batch processor does), calling `done(n)` as each `n` records leave — exported or
 * given up on (a collector that refuses or is away loses those spans, never the proxy's time).
 */
export class RecordExport {
  private readonly exporter: SpanExporter
  private readonly resource: Resource
  private readonly done: (n: number, error: string | null) => void
  private readonly queue: SpanRecord[][] = []
  private exporting = false
  private idle: Array<() => void> = []

  constructor (exporter: SpanExporter, resource: Resource, done: (n: number, error: string | null) => void) {
    this.exporter = exporter
    this.resource = resource
    this.done = done
  }

  add (records: SpanRecord[]): void {
    for (let i = 0; i < records.length; i += EXPORT_BATCH) this.queue.push(records.slice(i, i + EXPORT_BATCH))
    if (!this.exporting) this.next()
  }

  private next (): void {
    const batch = this.queue.shift()
    if (batch === undefined) {
      this.exporting = false
      for (const resolve of this.idle.splice(0)) resolve()
      return
    }
    this.exporting = true
    let spans: ReadableSpan[]
    try {
      spans = batch.map(r => toReadableSpan(r, this.resource))
    } catch (err) {
      this.done(batch.length, `span conversion failed: ${(err as Error).message}`)
      this.next()
      return
    }
    this.exporter.export(spans, result => {
      this.done(batch.length, result.code === 0 ? null : `span export failed: ${result.error?.message ?? 'unknown error'}`)
      this.next()
    })
  }

  /** Exports what is queued, then shuts the exporter down. */
  async shutdown (): Promise<void> {
    if (this.exporting) await new Promise<void>(resolve => this.idle.push(resolve))
    await this.exporter.shutdown()
  }
}
