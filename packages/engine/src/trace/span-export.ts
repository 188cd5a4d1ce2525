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
 * encoding and export run on a thread of their own (trace/export-worker.ts, batching in
 * trace/record-export.ts) — the same conversion and exporter in-thread when a test hands in
 * an exporter.
 */

import type { Attributes, HrTime, SpanContext, SpanKind, SpanStatus } from '@opentelemetry/api'
import { TraceState, hrTimeToMilliseconds, millisToHrTime, type InstrumentationScope } from '@opentelemetry/core'
import type { Resource } from '@opentelemetry/resources'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import { LAYOUTS } from './attribute-layouts.ts'
import { RecordExport, otlpExporter, otlpResource, type RecordSink } from './record-export.ts'
import { RECORD, type OtlpEndpointOptions, type SpanExportOptions, type SpanRecord } from './span-record.ts'

/** The SDK's OTLP trace exporter for `config.tracing`. */
export function otlpSpanExporter (options: OtlpEndpointOptions): Promise<SpanExporter> {
  return otlpExporter<SpanExporter>(options, '/v1/traces', {
    http: async () => (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter,
    grpc: async () => (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter
  })
}

const SCOPE = { name: 'portico' }
const NO_LINKS: never[] = []
const NO_EVENTS: never[] = []
const STATUS_UNSET: SpanStatus = Object.freeze({ code: 0 })

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
    this.status = message !== '' ? { code: r[RECORD.status], message } : r[RECORD.status] === 0 ? STATUS_UNSET : { code: r[RECORD.status] }
    const attributes: Attributes = {}
    const layout = r[RECORD.layout]
    if (layout !== 0) {
      const keys = LAYOUTS[layout]?.keys
      const values = r[RECORD.layoutValues]
      // A plain Error on purpose: the layouts are written by this module's own recorder, no input reaches it.
      if (keys === undefined || values === null) throw new Error(`unknown attribute layout ${layout}`)
      for (let i = 0; i < keys.length; i++) {
        const v = values[i]
        if (v !== undefined) attributes[keys[i]!] = v
      }
    }
    for (let i = RECORD.attributes; i + 1 < r.length; i += 2) attributes[r[i] as string] = r[i + 1]
    this.attributes = attributes
    this.resource = resource
  }

  spanContext (): SpanContext {
    return this.context
  }

  /** Worked out when read: the OTLP serializer reads the start and end times, never this. */
  get duration (): HrTime {
    return millisToHrTime(Math.max(0, hrTimeToMilliseconds(this.endTime) - hrTimeToMilliseconds(this.startTime)))
  }

  get links (): never[] { return NO_LINKS }
  get events (): never[] { return NO_EVENTS }
  get ended (): boolean { return true }
  get instrumentationScope (): InstrumentationScope { return SCOPE }
  get droppedAttributesCount (): number { return 0 }
  get droppedEventsCount (): number { return 0 }
  get droppedLinksCount (): number { return 0 }
}

/**
 * Spans' export: records converted to the SDK's spans and sent with `exporter`, each batch
 * reported to `done`. The export thread opens it with the OTLP exporter of `config.tracing`
 * (trace/export-worker.ts calls `openRecordExport`); tests hand in an exporter.
 */
export function spanExport (exporter: SpanExporter, resources: Record<string, string>, done: (n: number, error: string | null) => void, gatherMs?: number): RecordExport<SpanRecord, ReadableSpan> {
  const resource = otlpResource(resources)
  return new RecordExport({ exporter, convert: r => new RecordReadableSpan(r, resource), done, what: 'span', ...(gatherMs !== undefined ? { gatherMs } : {}) })
}

/** The export thread's entry to this kind of record (trace/export-worker.ts). */
export async function openRecordExport (options: SpanExportOptions, done: (n: number, error: string | null) => void, gatherMs: number): Promise<RecordSink<SpanRecord>> {
  return spanExport(await otlpSpanExporter(options), options.resources, done, gatherMs)
}
