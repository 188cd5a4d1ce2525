/**
 * The export thread's side of `accessLog.otlp` (loaded by the engine's
 * trace/export-worker.ts): access-log records (otlp-logs.ts LogRecord) become the SDK's
 * `ReadableLogRecord`s and go to its OTLP log exporter (gRPC or HTTP/protobuf to
 * `<endpoint>/v1/logs`), batched as spans are (the engine's RecordExport).
 */

import { SeverityNumber, type Attributes, type HrTime, type SpanContext } from '@opentelemetry/api'
import type { Resource } from '@opentelemetry/resources'
import type { LogRecordExporter, ReadableLogRecord } from '@opentelemetry/sdk-logs'
import { RecordExport, millisToHrTime, otlpExporter, otlpResource, type RecordSink } from '@portico/engine/record-export'
import { LOG_RECORD, type LogRecord, type OtlpLogsOptions } from './otlp-logs.ts'

const SCOPE = { name: 'portico.access' }

/** A record as the SDK's log exporters read one; one shape for every record. */
class RecordReadableLog implements ReadableLogRecord {
  readonly hrTime: HrTime
  readonly hrTimeObserved: HrTime
  readonly spanContext: SpanContext | undefined
  readonly severityText = 'INFO'
  readonly severityNumber = SeverityNumber.INFO
  readonly body: string
  readonly resource: Resource
  readonly instrumentationScope = SCOPE
  readonly attributes: Attributes
  readonly droppedAttributesCount = 0

  constructor (r: LogRecord, resource: Resource) {
    this.hrTime = millisToHrTime(r[LOG_RECORD.time])
    this.hrTimeObserved = this.hrTime
    const traceId = r[LOG_RECORD.traceId]
    this.spanContext = traceId === '' ? undefined : { traceId, spanId: r[LOG_RECORD.spanId], traceFlags: r[LOG_RECORD.traceFlags] }
    this.body = r[LOG_RECORD.body]
    const attributes: Attributes = {}
    for (let i = LOG_RECORD.attributes; i + 1 < r.length; i += 2) attributes[r[i] as string] = r[i + 1]
    this.attributes = attributes
    this.resource = resource
  }
}

function otlpLogExporter (options: OtlpLogsOptions): Promise<LogRecordExporter> {
  return otlpExporter<LogRecordExporter>(options, '/v1/logs', {
    http: async () => (await import('@opentelemetry/exporter-logs-otlp-proto')).OTLPLogExporter,
    grpc: async () => (await import('@opentelemetry/exporter-logs-otlp-grpc')).OTLPLogExporter
  })
}

/** Access-log records' export, with `exporter` (tests) or the OTLP exporter of the options. */
export function logExport (exporter: LogRecordExporter, resources: Record<string, string>, done: (n: number, error: string | null) => void, gatherMs?: number): RecordExport<LogRecord, ReadableLogRecord> {
  const resource = otlpResource(resources)
  return new RecordExport({ exporter, convert: r => new RecordReadableLog(r, resource), done, what: 'access log record', ...(gatherMs !== undefined ? { gatherMs } : {}) })
}

/** The export thread's entry to this kind of record (the engine's trace/export-worker.ts). */
export async function openRecordExport (options: OtlpLogsOptions, done: (n: number, error: string | null) => void, gatherMs: number): Promise<RecordSink<LogRecord>> {
  return logExport(await otlpLogExporter(options), options.resources, done, gatherMs)
}
