/**
 * OTLP export off the request thread. A span processor (ThreadSpanProcessor) copies each
 * ended, sampled span into a compact record and posts them in batches to a worker thread
 * that owns the SDK's OTLP exporter (trace/otel-export-worker.ts): protobuf serialization,
 * compression and the HTTP or gRPC calls run there, not between requests.
 *
 * Why: with every request sampled, the BatchSpanProcessor kept each span until its batch
 * was exported (up to a second, long enough for V8 to promote spans to the old generation),
 * then serialized 512 at once on the event loop. Posted within milliseconds, spans die young;
 * the serializer runs on another core. bench/tracing.ts measures it.
 *
 * The queue is bounded as the batch processor's is (maxQueueSize): batches not yet exported
 * count against it, and spans past it are dropped (counted), never buffered without limit.
 */

import { Worker } from 'node:worker_threads'
import type { Context } from '@opentelemetry/api'
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace'
import type { OtlpEndpointOptions } from './otel-sdk.ts'

/** One span as posted: what the OTLP serializer reads of a ReadableSpan, nothing more. */
export type CompactSpan = [
  traceId: string,
  spanId: string,
  traceFlags: number,
  traceState: string,
  parentSpanId: string,
  parentRemote: boolean,
  name: string,
  kind: number,
  startTime: [number, number],
  endTime: [number, number],
  attributes: ReadableSpan['attributes'],
  statusCode: number,
  statusMessage: string,
  events: Array<[name: string, time: [number, number], attributes: ReadableSpan['attributes'] | null]> | null,
  droppedAttributes: number,
  scope: string
]

/** What the export worker is started with. */
export interface ExportWorkerInit extends OtlpEndpointOptions {
  /** Resource attributes (service.name and config.tracing.resources). */
  resources: Record<string, string>
}

export interface ThreadSpanProcessorOptions {
  /** How long a span may wait for its batch to fill (ms). */
  delayMs?: number
  /** Spans per batch. */
  batchSize?: number
  /** Spans posted but not yet exported, at most. */
  maxQueueSize?: number
}

const WORKER_URL = new URL('./otel-export-worker.ts', import.meta.url)

export class ThreadSpanProcessor implements SpanProcessor {
  private readonly worker: Worker
  private readonly delayMs: number
  private readonly batchSize: number
  private readonly maxQueued: number
  private pending: CompactSpan[] = []
  private timer: NodeJS.Timeout | null = null
  /** Spans posted to the worker whose export has not finished. */
  private queued = 0
  /** Spans dropped because the queue was full or the worker failed. */
  dropped = 0
  private failed: Error | null = null
  private nextRequest = 0
  private readonly waiting = new Map<number, () => void>()
  private readonly flushLater = (): void => {
    this.timer = null
    this.post()
  }

  constructor (init: ExportWorkerInit, options: ThreadSpanProcessorOptions = {}) {
    this.delayMs = options.delayMs ?? 200
    this.batchSize = options.batchSize ?? 256
    this.maxQueued = options.maxQueueSize ?? 8192
    this.worker = new Worker(WORKER_URL, { workerData: init, stdin: false })
    // A tracing thread never keeps the process alive; shutdown flushes it.
    this.worker.unref()
    this.worker.on('message', (m: { exported?: number, reply?: number }) => {
      if (m.exported !== undefined) this.queued -= m.exported
      if (m.reply !== undefined) {
        this.waiting.get(m.reply)?.()
        this.waiting.delete(m.reply)
      }
    })
    this.worker.on('error', err => { this.failed = err })
    this.worker.on('exit', () => {
      this.failed ??= new Error('the OTLP export thread exited')
      for (const resolve of this.waiting.values()) resolve()
      this.waiting.clear()
    })
  }

  onStart (_span: Span, _parent: Context): void {}

  onEnd (span: ReadableSpan): void {
    const sc = span.spanContext()
    if ((sc.traceFlags & 1) === 0) return
    if (this.failed !== null || this.queued + this.pending.length >= this.maxQueued) {
      this.dropped++
      return
    }
    const parent = span.parentSpanContext
    this.pending.push([
      sc.traceId, sc.spanId, sc.traceFlags, sc.traceState?.serialize() ?? '',
      parent?.spanId ?? '', parent?.isRemote === true,
      span.name, span.kind, span.startTime, span.endTime, span.attributes,
      span.status.code, span.status.message ?? '',
      span.events.length === 0 ? null : span.events.map(e => [e.name, e.time, e.attributes ?? null]),
      span.droppedAttributesCount, span.instrumentationScope.name
    ])
    if (this.pending.length >= this.batchSize) this.post()
    else if (this.timer === null) this.timer = setTimeout(this.flushLater, this.delayMs).unref()
  }

  private post (): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    if (this.pending.length === 0 || this.failed !== null) return
    this.queued += this.pending.length
    this.worker.postMessage({ spans: this.pending })
    this.pending = []
  }

  private ask (what: 'flush' | 'shutdown'): Promise<void> {
    if (this.failed !== null) return Promise.resolve()
    const id = this.nextRequest++
    return new Promise(resolve => {
      this.waiting.set(id, resolve)
      this.worker.postMessage({ [what]: id })
    })
  }

  async forceFlush (): Promise<void> {
    this.post()
    await this.ask('flush')
  }

  async shutdown (): Promise<void> {
    this.post()
    await this.ask('shutdown')
    await this.worker.terminate()
  }
}
