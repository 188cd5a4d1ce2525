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

import { SpanKind, type Attributes, type HrTime, type SpanContext, type SpanStatus } from '@opentelemetry/api'
import { TraceState, millisToHrTime, type InstrumentationScope } from '@opentelemetry/core'
import { defaultResource, resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import type { SpanAttributeValue } from './otel.ts'

/**
 * One ended span as the request's thread wrote it: a flat array, fields at the indexes of
 * `RECORD` and the attributes after them as key, value, key, value… (a later value of a key
 * replaces an earlier one). Flat because it is structured-cloned to the export thread, and
 * one array clones about three times faster than an object holding an array of attributes.
 */
export type SpanRecord = [
  traceId: string,
  spanId: string,
  /** '' for a span without a parent (a request that arrived without a trace). */
  parentSpanId: string,
  /** The parent is the caller's (a request's server span continuing a trace). */
  parentRemote: boolean,
  /** The caller's W3C tracestate, '' for none. */
  traceState: string,
  name: string,
  kind: SpanKind,
  /** ms since the epoch, with the fraction (performance.timeOrigin + performance.now()). */
  start: number,
  end: number,
  /** SpanStatusCode: 0 unset, 2 error. */
  status: number,
  statusMessage: string,
  ...attributes: Array<string | SpanAttributeValue>
]

/** Where each field of a SpanRecord is. */
export const RECORD = { traceId: 0, spanId: 1, parentSpanId: 2, parentRemote: 3, traceState: 4, name: 5, kind: 6, start: 7, end: 8, status: 9, statusMessage: 10, attributes: 11 } as const

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

/**
 * A record as the SDK's exporters read a span. A class, every field set in the constructor
 * and the constants on its prototype: one shape for every span, so the serializer's reads
 * stay monomorphic, and about a sixth of the cost of an object literal built with spreads
 * (bench/tracing-spans.ts measures the export path).
 */
class RecordReadableSpan implements ReadableSpan {
  readonly name: string
  readonly kind: SpanKind
  readonly parentSpanContext: SpanContext | undefined
  readonly startTime: HrTime
  readonly endTime: HrTime
  readonly duration: HrTime
  readonly status: SpanStatus
  readonly attributes: Attributes
  readonly resource: Resource
  private readonly context: SpanContext

  constructor (r: SpanRecord, resource: Resource) {
    const traceId = r[RECORD.traceId]
    const parentSpanId = r[RECORD.parentSpanId]
    const state = r[RECORD.traceState]
    const traceState = state === '' ? undefined : new TraceState(state)
    const start = r[RECORD.start]
    const end = r[RECORD.end]
    const message = r[RECORD.statusMessage]
    this.context = { traceId, spanId: r[RECORD.spanId], traceFlags: 1, traceState }
    this.parentSpanContext = parentSpanId === '' ? undefined : { traceId, spanId: parentSpanId, traceFlags: 1, isRemote: r[RECORD.parentRemote], traceState }
    this.name = r[RECORD.name]
    this.kind = r[RECORD.kind]
    this.startTime = millisToHrTime(start)
    this.endTime = millisToHrTime(end)
    this.duration = millisToHrTime(Math.max(0, end - start))
    this.status = message !== '' ? { code: r[RECORD.status], message } : { code: r[RECORD.status] }
    const attributes: Attributes = {}
    for (let i = RECORD.attributes; i + 1 < r.length; i += 2) attributes[r[i] as string] = r[i + 1]
    this.attributes = attributes
    this.resource = resource
  }

  spanContext (): SpanContext {
    return this.context
  }

  get links (): never[] { return NO_LINKS }
  get events (): never[] { return NO_EVENTS }
  get ended (): boolean { return true }
  get instrumentationScope (): InstrumentationScope { return SCOPE }
  get droppedAttributesCount (): number { return 0 }
  get droppedEventsCount (): number { return 0 }
  get droppedLinksCount (): number { return 0 }
}

/** A record as the SDK's exporters read a span. */
export function toReadableSpan (r: SpanRecord, resource: Resource): ReadableSpan {
  return new RecordReadableSpan(r, resource)
}

/** Spans per export call, at most (the SDK's batch processor's default). */
export const EXPORT_BATCH = 512

/** How long records may wait for a full export batch (the proxy's thread has held them up to a second already). */
export const GATHER_MS = 100

/**
 * Exports records through an SDK exporter, one export call at a time (as the SDK's batch
 * processor does), EXPORT_BATCH at once or what came within GATHER_MS — every export call
 * costs its own encoding setup and HTTP request, so a busy proxy's spans go in full
 * batches. `done(n)` is called as each `n` records leave — exported or given up on (a
 * collector that refuses or is away loses those spans, never the proxy's time).
 */
export class RecordExport {
  private readonly exporter: SpanExporter
  private readonly resource: Resource
  private readonly done: (n: number, error: string | null) => void
  private readonly gatherMs: number
  private pending: SpanRecord[] = []
  private exporting = false
  private timer: NodeJS.Timeout | null = null
  private flushing = false
  private idle: Array<() => void> = []

  constructor (exporter: SpanExporter, resource: Resource, done: (n: number, error: string | null) => void, gatherMs = GATHER_MS) {
    this.exporter = exporter
    this.resource = resource
    this.done = done
    this.gatherMs = gatherMs
  }

  add (records: SpanRecord[]): void {
    if (this.pending.length === 0) this.pending = records
    else for (const r of records) this.pending.push(r)
    if (this.exporting) return
    if (this.pending.length >= EXPORT_BATCH || this.flushing) this.next()
    else this.timer ??= setTimeout(() => this.next(), this.gatherMs)
  }

  private next (): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    if (this.pending.length === 0) {
      this.exporting = false
      for (const resolve of this.idle.splice(0)) resolve()
      return
    }
    const batch = this.pending.length <= EXPORT_BATCH ? this.pending : this.pending.slice(0, EXPORT_BATCH)
    this.pending = batch === this.pending ? [] : this.pending.slice(EXPORT_BATCH)
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
      // A full batch goes at once; less waits for more (or the shutdown).
      if (this.pending.length >= EXPORT_BATCH || this.flushing || this.pending.length === 0) this.next()
      else {
        this.exporting = false
        this.timer ??= setTimeout(() => this.next(), this.gatherMs)
      }
    })
  }

  /** Exports what is queued, then shuts the exporter down. */
  async shutdown (): Promise<void> {
    this.flushing = true
    if (!this.exporting) this.next()
    if (this.exporting) await new Promise<void>(resolve => this.idle.push(resolve))
    await this.exporter.shutdown()
  }
}
