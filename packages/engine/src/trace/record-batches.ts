/**
 * Flat records (ended spans, access-log records) on their way from the request's thread to
 * an exporter: gathered into batches of HANDOVER_BATCH (or what came within `delayMs`),
 * handed to an export thread (trace/export-worker.ts) — or to a sink in this thread, when a
 * test gives one — with at most MAX_QUEUE waiting; beyond that they are dropped (a
 * collector that cannot keep up loses records, never the proxy's time).
 *
 * Nothing of the OpenTelemetry SDK is loaded here: in a running proxy its objects and
 * encoders cost several times their in-process figures on the request's thread
 * (docs/observability.md, Cost), so only the export thread loads them.
 */

import type { Worker } from 'node:worker_threads'
import type { ExportWorkerData } from './export-worker.ts'
import { startWorkerThread } from '../util/emitter-init.ts'
import type { RecordSink } from './record-export.ts'
import type { SpanOutcome } from './otel.ts'

/** Records handed over but not yet exported, at most (more are dropped, as the SDK's batch processors do). */
const MAX_QUEUE = 8192
/**
 * Records handed to the export thread at a time. Small, so a busy proxy's records leave
 * before the young generation's next scavenge would copy them (and promote them to the old
 * one); the export thread gathers them into export calls of up to 512 (RecordExport).
 */
const HANDOVER_BATCH = 64
/** The export thread's time to send what it holds when the proxy stops. */
const SHUTDOWN_MS = 10_000
const ERROR_EVERY_MS = 60_000

export interface RecordBatchesOptions<R> {
  /**
   * Where the records go: a module the export thread loads (`openRecordExport(options, done,
   * gatherMs)`, trace/export-worker.ts) with its options (plain data), or a sink in this
   * thread (tests). Either gets `delayMs` as `gatherMs`: the export side gathers no longer
   * than this side waits (nor than its GATHER_MS). Or `relay`: each batch handed to a
   * function that takes it to another thread's RecordBatches (`addRelayed`), which exports
   * it and counts what becomes of it — a data-plane worker's to its primary's, so that no
   * thread serving requests starts an export thread (docs/tracing-cost-log.md, eighth
   * round).
   */
  sink: { module: URL, options: unknown } | { local: (done: (count: number, error: string | null) => void, gatherMs: number) => RecordSink<R> } | { relay: (records: R[]) => void }
  /** How long a record may wait for a full batch (ms). */
  delayMs: number
  /** What a record is, for error messages ('span', 'access log record'). */
  what: string
  /** A failed export or a failed export thread (records are lost, the proxy goes on); at most once a minute. */
  onError?: (message: string) => void
}

export class RecordBatches<R> {
  private batch: R[] = []
  /** Records handed over and not yet reported done. */
  private outstanding = 0
  private timer: NodeJS.Timeout | null = null
  private readonly delayMs: number
  private readonly send: (batch: R[]) => void
  private readonly close: () => Promise<void>
  private readonly onError: ((message: string) => void) | undefined
  private lastError = -Infinity
  private closed = false
  /** Each record's fate, counted (the proxy's metrics). */
  onOutcome: ((result: SpanOutcome, count: number) => void) | null = null

  constructor (options: RecordBatchesOptions<R>) {
    this.delayMs = options.delayMs
    this.onError = options.onError
    const done = (count: number, error: string | null): void => {
      this.outstanding -= count
      this.onOutcome?.(error === null ? 'exported' : 'failed', count)
      if (error !== null) this.error(error)
    }
    const sink = options.sink
    if ('relay' in sink) {
      // Counted where they are exported; here they only leave the queue.
      this.send = batch => {
        this.outstanding -= batch.length
        sink.relay(batch)
      }
      this.close = async () => {}
    } else if ('local' in sink) {
      const records = sink.local(done, this.delayMs)
      this.send = batch => records.add(batch)
      this.close = () => records.shutdown()
    } else {
      // Started with the first batch: a proxy that records nothing (tracing's default
      // sampling records only what callers sampled) never pays the thread's memory (~35 MB).
      // Started through startWorkerThread, so that the Worker does not take EventEmitter's
      // shared field accesses past what V8 checks inline, and with them every request's
      // ServerResponse and IncomingMessage (util/emitter-init.ts; docs/tracing-cost-log.md,
      // eighth and thirteenth rounds).
      let thread: Worker | null = null
      // A thread that failed (its exporter could not start, say) takes nothing more: what it
      // held and all that comes after count as failed exports.
      let failed: string | null = null
      // A thread that is gone is not waited for at shutdown: its 'exit' has come and gone.
      let exited = false
      this.send = batch => {
        if (failed !== null) return done(batch.length, failed)
        if (thread === null) {
          thread = startExportThread(sink, this.delayMs, done, message => {
            failed = message
            done(this.outstanding, message)
          }, options.what)
          thread.once('exit', () => { exited = true })
        }
        thread.postMessage({ type: 'records', records: batch })
      }
      this.close = async () => { if (thread !== null && !exited) await stopExportThread(thread) }
    }
  }

  add (record: R): void {
    if (this.closed || this.outstanding + this.batch.length >= MAX_QUEUE) {
      this.onOutcome?.('dropped', 1)
      return
    }
    this.batch.push(record)
    if (this.batch.length >= HANDOVER_BATCH) this.flush()
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), this.delayMs).unref()
  }

  /** Records another thread gathered and relayed here (its `relay` sink): exported from here, as if added here. */
  addRelayed (records: R[]): void {
    for (const record of records) this.add(record)
  }

  private flush (): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    if (this.batch.length === 0) return
    const batch = this.batch
    this.batch = []
    this.outstanding += batch.length
    this.send(batch)
  }

  private error (message: string): void {
    const at = Date.now()
    if (at - this.lastError < ERROR_EVERY_MS) return
    this.lastError = at
    this.onError?.(message)
  }

  /** Hands over what is gathered and waits for the export to send it (or give up). */
  async shutdown (): Promise<void> {
    this.flush()
    this.closed = true
    await this.close()
  }
}

/** An export thread; it holds the process open only while stopping. */
function startExportThread (sink: { module: URL, options: unknown }, gatherMs: number, done: (count: number, error: string | null) => void, fail: (message: string) => void, what: string): Worker {
  const workerData: ExportWorkerData = { module: sink.module.href, options: sink.options, gatherMs }
  // stdout/stderr true: the thread's stdio is not piped into the process's. The process's
  // stdout carries its JSON log lines, and whatever the SDK printed there would land among
  // them unparsed; the thread's failures come back as messages (export-worker.ts silences
  // its console). Not piping also keeps its stdio streams out of Node's Readable code, which
  // every request's IncomingMessage runs; no cost of that was measurable, though
  // (docs/tracing-cost-log.md, ninth round).
  const thread = startWorkerThread(new URL('./export-worker.ts', import.meta.url), { workerData, stdin: false, stdout: true, stderr: true })
  thread.unref()
  thread.on('message', (msg: { type: string, count?: number, error?: string | null }) => {
    if (msg.type === 'done') done(msg.count!, msg.error ?? null)
  })
  thread.on('error', err => fail(`the ${what} export thread failed: ${err.message}`))
  return thread
}

async function stopExportThread (thread: Worker): Promise<void> {
  thread.ref()
  const stopped = new Promise<void>(resolve => {
    thread.once('exit', () => resolve())
    thread.on('message', (msg: { type: string }) => { if (msg.type === 'closed') resolve() })
  })
  const timer = setTimeout(() => { void thread.terminate() }, SHUTDOWN_MS)
  thread.postMessage({ type: 'shutdown' })
  await stopped
  clearTimeout(timer)
  await thread.terminate()
}
