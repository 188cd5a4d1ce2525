/**
 * The OTLP export thread (trace/otel-export-thread.ts starts it): rebuilds the spans the
 * request thread posts as the ReadableSpans the SDK's OTLP exporter serializes, exports
 * each batch as it comes, and reports how many spans left the queue.
 */

import { parentPort, workerData } from 'node:worker_threads'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import type { ReadableSpan } from '@opentelemetry/sdk-trace'
import type { CompactSpan, ExportWorkerInit } from './otel-export-thread.ts'
import { otlpExporter } from './otel-sdk.ts'

const init = workerData as ExportWorkerInit
const port = parentPort!
const resource = defaultResource().merge(resourceFromAttributes({ 'service.name': 'portico', ...init.resources }))
const exporter = await otlpExporter(init)
const scopes = new Map<string, ReadableSpan['instrumentationScope']>()

function scopeOf (name: string): ReadableSpan['instrumentationScope'] {
  let scope = scopes.get(name)
  if (scope === undefined) scopes.set(name, scope = { name })
  return scope
}

function readable (s: CompactSpan): ReadableSpan {
  const [traceId, spanId, traceFlags, traceState, parentSpanId, parentRemote, name, kind, startTime, endTime, attributes, code, message, events, droppedAttributes, scope] = s
  const context = { traceId, spanId, traceFlags, isRemote: false, ...(traceState !== '' ? { traceState: { serialize: () => traceState } } : {}) }
  return {
    name,
    kind,
    spanContext: () => context,
    parentSpanContext: parentSpanId === '' ? undefined : { traceId, spanId: parentSpanId, traceFlags, isRemote: parentRemote },
    startTime,
    endTime,
    duration: [endTime[0] - startTime[0], endTime[1] - startTime[1]],
    ended: true,
    status: message === '' ? { code } : { code, message },
    attributes,
    links: [],
    events: events === null ? [] : events.map(([n, time, a]) => ({ name: n, time, ...(a !== null ? { attributes: a } : {}) })),
    resource,
    instrumentationScope: scopeOf(scope),
    droppedAttributesCount: droppedAttributes,
    droppedEventsCount: 0,
    droppedLinksCount: 0
  } as unknown as ReadableSpan
}

port.on('message', (m: { spans?: CompactSpan[], flush?: number, shutdown?: number }) => {
  if (m.spans !== undefined) {
    const spans = m.spans.map(readable)
    // Success or not (a collector down), the spans have left the queue.
    exporter.export(spans, () => port.postMessage({ exported: spans.length }))
  }
  if (m.flush !== undefined) {
    const id = m.flush
    const flushed = exporter.forceFlush?.() ?? Promise.resolve()
    flushed.catch(() => {}).finally(() => port.postMessage({ reply: id }))
  }
  if (m.shutdown !== undefined) {
    const id = m.shutdown
    exporter.shutdown().catch(() => {}).finally(() => port.postMessage({ reply: id }))
  }
})
