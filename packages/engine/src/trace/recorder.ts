import type { TraceEvent, TraceMessage, TraceSeverity } from './events.ts'

/** The severity of an answer's status in a trace: 5xx error, 4xx warn, else info. */
export function severityOf (status: number): TraceSeverity {
  return status >= 500 ? 'error' : status >= 400 ? 'warn' : 'info'
}

export type TraceSink = (event: TraceEvent) => void

/**
 * Collects one request's trace events. It exists only while some watcher is armed (see
 * TraceHub), so requests pay nothing when nobody traces. Until a watcher claims the request
 * (its filter can only be judged once the route is known), events are buffered; once claimed
 * they stream live; if nobody claims it the recorder is dropped.
 */
export class TraceRecorder {
  private readonly t0 = process.hrtime.bigint()
  private buffer: TraceEvent[] | null = []
  private sink: TraceSink | null = null
  private last = 0
  private finished = false
  onFinish: (() => void) | null = null

  /** µs since the request started (non-decreasing). */
  now (): number {
    const t = Number((process.hrtime.bigint() - this.t0) / 1000n)
    if (t > this.last) this.last = t
    return this.last
  }

  emit (message: TraceMessage, options?: { severity?: TraceSeverity, eventStart?: number }): void {
    if (this.finished) return
    const event: TraceEvent = {
      eventStart: options?.eventStart ?? null,
      eventEnd: this.now(),
      severity: options?.severity ?? 'info',
      message
    }
    if (this.sink !== null) this.sink(event)
    else this.buffer?.push(event)
    if (message.type === 'requestFinished') {
      this.finished = true
      this.onFinish?.()
    }
  }

  get claimed (): boolean {
    return this.sink !== null
  }

  /** Hands the buffered and all later events to `sink`. */
  attach (sink: TraceSink): void {
    const pending = this.buffer ?? []
    this.buffer = null
    this.sink = sink
    for (const event of pending) sink(event)
  }
}
