/**
 * The export thread of `config.tracing` (trace/otel-sdk.ts starts it): receives batches of
 * span records from the proxy's thread and exports them with the SDK's OTLP exporter, each
 * batch acknowledged (`done`) so the proxy's thread can bound what is in flight.
 *
 * Messages in: { type: 'spans', spans: SpanRecord[] }, { type: 'shutdown' }.
 * Messages out: { type: 'done', count, error }, { type: 'closed' }.
 */

import { parentPort, workerData } from 'node:worker_threads'
import { RecordExport, otlpSpanExporter, spanResource } from './span-export.ts'
import type { SpanExportOptions, SpanRecord } from './span-record.ts'

type Message = { type: 'spans', spans: SpanRecord[] } | { type: 'shutdown' }

const port = parentPort!
const options = (workerData as { options: SpanExportOptions }).options
const records = new RecordExport(await otlpSpanExporter(options), spanResource(options.resources), (count, error) => {
  port.postMessage({ type: 'done', count, error })
})

port.on('message', (msg: Message) => {
  if (msg.type === 'spans') {
    records.add(msg.spans)
    return
  }
  records.shutdown().catch(() => {}).finally(() => {
    port.postMessage({ type: 'closed' })
    port.close()
  })
})
