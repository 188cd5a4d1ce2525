/**
 * The access log as OpenTelemetry log records (`config.accessLog.otlp`): each line's fields
 * become the record's attributes, its message the body, and the request's trace id and span
 * id (when tracing is on) its trace context, so a log backend joins it to the trace.
 *
 * This thread only writes each line as a flat `LogRecord` and hands them over in batches
 * (the engine's RecordBatches, as the spans go); the SDK's log records, the protobuf
 * encoding and the exporter run on an export thread (otlp-logs-export.ts). Encoded on the
 * request's thread by the SDK's LoggerProvider, the export made a proxied GET ~1.7× as many
 * instructions (docs/observability.md, Access log).
 */

import type { RequestSpan } from '@portico/engine'
import { RecordBatches } from '@portico/engine/record-batches'
import type { OtlpEndpointOptions } from '@portico/engine/otel-sdk'

export interface OtlpLogsOptions extends OtlpEndpointOptions {
  /** Resource attributes (config.tracing's, when set); service.name defaults to portico. */
  resources: Record<string, string>
  /** How long a record may wait for a full batch on this thread (ms, default 1000; OTEL_BLRP_SCHEDULE_DELAY). */
  scheduledDelayMs?: number
}

/**
 * One access-log line as this thread hands it over: a flat array (it is structured-cloned
 * to the export thread; one array clones faster than an object of objects), the fields at
 * the indexes of LOG_RECORD and the attributes after them as key, value, key, value…
 */
export type LogRecord = [
  /** ms since the epoch. */
  time: number,
  /** '' when the request has no trace. */
  traceId: string,
  spanId: string,
  /** W3C trace flags: 1 sampled, 0 not. */
  traceFlags: number,
  body: string,
  ...attributes: Array<string | number | boolean>
]

/** Where each field of a LogRecord is. */
export const LOG_RECORD = { time: 0, traceId: 1, spanId: 2, traceFlags: 3, body: 4, attributes: 5 } as const

export interface OtlpLogs {
  emit(message: string, fields: Record<string, unknown>, span: RequestSpan | null): void
  /** Records another thread wrote and relayed here (a data-plane worker's): exported from here. */
  acceptRelayed(records: unknown[]): void
  shutdown(): Promise<void>
}

export interface StartOtlpLogsOptions {
  /** Records that could not be exported (lost; the proxy goes on); at most once a minute. */
  onError?: (message: string) => void
  /**
   * Hands each batch to another thread that exports them (its OtlpLogs.acceptRelayed)
   * instead of starting an export thread here: a data-plane worker's go to its primary.
   */
  relay?: (records: LogRecord[]) => void
}

export function startOtlpLogs (options: OtlpLogsOptions, start: StartOtlpLogsOptions = {}): OtlpLogs {
  const batches = new RecordBatches<LogRecord>({
    // The options are plain data (the settings' accessLog.otlp): cloned to the export thread as they are.
    sink: start.relay !== undefined ? { relay: start.relay } : { module: new URL('./otlp-logs-export.ts', import.meta.url), options },
    delayMs: options.scheduledDelayMs ?? 1000,
    what: 'access log record',
    ...(start.onError !== undefined ? { onError: start.onError } : {})
  })
  return {
    emit (message, fields, span) {
      const record: LogRecord = span === null ? [Date.now(), '', '', 0, message] : [Date.now(), span.traceId, span.spanId, span.recording ? 1 : 0, message]
      for (const key in fields) {
        const v = fields[key]
        if (v === undefined || v === null) continue
        record.push(key, typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : JSON.stringify(v))
      }
      batches.add(record)
    },
    acceptRelayed: records => batches.addRelayed(records as LogRecord[]),
    shutdown: () => batches.shutdown()
  }
}
