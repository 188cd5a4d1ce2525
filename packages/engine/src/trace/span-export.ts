/**
 * A recorded span's way out: the request's thread writes each ended span as a plain
 * `SpanRecord` (trace/span-record.ts: ids, name, times, status, attributes as key/value
 * pairs) and hands them over in batches; here they become the SDK's `ReadableSpan`s and go
 * to an OpenTelemetry exporter (OTLP over gRPC or HTTP/protobuf — the SDK's, never
 * hand-written OTLP). Loaded by the export thread, and on the request's thread only when a
 * test hands in an exporter.
 *
 * Why records and not the SDK's own spans: in a running proxy the SDK's span objects, its
 * batch processor's encoding and the exporter's HTTP client cost several times their
 * in-process figures (they share V8's inline caches and inlining budget with the proxy's hot
 * path; docs/observability.md, Cost). So the request's thread only fills records, and the
 * encoding and export run on a thread of their own (trace/span-export-worker.ts) — the same
 * conversion and exporter in-thread when a test hands in an exporter.
 */

import type { Attributes, HrTime, SpanContext, SpanKind, SpanStatus } from '@opentelemetry/api'
import { TraceState, millisToHrTime, type InstrumentationScope } from '@opentelemetry/core'
import { defaultResource, resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import { RECORD, otlpTarget, type OtlpEndpointOptions, type SpanRecord } from './span-record.ts'

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
      spans = batch.map(r => new RecordReadableSpan(r, this.resource))
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
