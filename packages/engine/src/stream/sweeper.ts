import { performance } from '../util/clock.ts'

/**
 * One timer for the deadlines of many connections (stream-proxy.ts: the client hello, the TLS
 * handshake, the backend connect, the idle timeout) instead of a timer each. A Node timer
 * costs a list insertion whenever it is set, cleared or refreshed — and a socket's timeout is
 * refreshed on every read and write: removing them took a tenth off Portico's CPU per short
 * connection (bench/tcp.ts). Each item is checked once a period, so a deadline is acted on up
 * to a period late; the interval runs only while there are items.
 */
export class Sweeper<T> {
  private readonly items = new Set<T>()
  private readonly periodMs: number
  private readonly check: (item: T, now: number) => void
  private timer: NodeJS.Timeout | null = null

  /** `check` gets each item once per `periodMs`, with `performance.now()`. */
  constructor (periodMs: number, check: (item: T, now: number) => void) {
    this.periodMs = periodMs
    this.check = check
  }

  add (item: T): void {
    this.items.add(item)
    this.timer ??= setInterval(this.sweep, this.periodMs).unref()
  }

  delete (item: T): void {
    this.items.delete(item)
  }

  get size (): number {
    return this.items.size
  }

  private readonly sweep = (): void => {
    // Stopped lazily, at a sweep that finds nothing: connections coming and going one at a
    // time would otherwise start and stop the interval each time.
    if (this.items.size === 0) {
      clearInterval(this.timer!)
      this.timer = null
      return
    }
    const now = performance.now()
    for (const item of this.items) this.check(item, now)
  }
}
