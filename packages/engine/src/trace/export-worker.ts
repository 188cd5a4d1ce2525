/**
 * An export thread (trace/record-batches.ts starts it): loads the module named in its
 * workerData — trace/span-export.ts for `config.tracing`, the proxy's otlp-logs-export.ts
 * for `accessLog.otlp` — which opens that kind's OTLP exporter (`openRecordExport`), then
 * passes it the batches of flat records the proxy's thread sends, each batch acknowledged
 * (`done`) so the proxy's thread can bound what is in flight. Only this thread loads the
 * OpenTelemetry SDK and its exporters.
 *
 * Messages in: { type: 'records', records: R[] }, { type: 'shutdown' }.
 * Messages out: { type: 'done', count, error }, { type: 'closed' }.
 */

import { parentPort, workerData } from 'node:worker_threads'
import type { RecordSink } from './record-export.ts'

type Message = { type: 'records', records: unknown[] } | { type: 'shutdown' }

export interface ExportWorkerData {
  /** URL of a module exporting `openRecordExport(options, done, gatherMs): Promise<RecordSink>`. */
  module: string
  /** Its options: plain data (cloned to this thread). */
  options: unknown
  /** How long the proxy's thread waits for a full batch (ms): the gathering here waits no longer. */
  gatherMs: number
}

// Nothing this thread prints is read: its stdout and stderr are not piped to the process's
// (record-batches.ts says why), so what it wrote would wait there for good. Failed exports
// reach the proxy as `done` messages with their error.
for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) console[method] = () => {}

const port = parentPort!
const data = workerData as ExportWorkerData
const { openRecordExport } = await import(data.module) as { openRecordExport: (options: unknown, done: (count: number, error: string | null) => void, gatherMs: number) => Promise<RecordSink<unknown>> }
const sink = await openRecordExport(data.options, (count, error) => {
  port.postMessage({ type: 'done', count, error })
}, data.gatherMs)

port.on('message', (msg: Message) => {
  if (msg.type === 'records') {
    sink.add(msg.records)
    return
  }
  sink.shutdown().catch(() => {}).finally(() => {
    port.postMessage({ type: 'closed' })
    port.close()
  })
})
