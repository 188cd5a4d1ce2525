/**
 * Many coarse clocks on one timer: items that share a period are checked together by one
 * interval, instead of each making (and clearing) a timer of its own. Joining and leaving is a
 * push and a swap in an array (util/slot-set.ts: not a Set, whose rebuilt tables kept every
 * request alive), so a clock every request has -- the default wait for a backend's
 * response headers, a response stream's idle timeout -- costs next to nothing when the request
 * ends long before it could fire (the common case: a timer made and cleared per request cost
 * about 1 µs). An item is checked every `periodMs`; a check that fires removes the item.
 * The interval is unref'd, and stops when a round finds nothing to check.
 */

import { performance } from '../util/clock.ts'
import { SlotSet, type SlotAccess } from '../util/slot-set.ts'

export type SweepCheck<T> = (item: T, now: number) => void

/**
 * How often a coarse clock is checked: a quarter of its limit (at least 10 ms), so it fires
 * between 1 and 1.25 times the limit after its start.
 */
export function pollPeriod (limitMs: number): number {
  return Math.max(10, Math.floor(limitMs / 4))
}

export class Sweep<T> {
  readonly periodMs: number
  private readonly check: SweepCheck<T>
  private readonly items: SlotSet<T>
  private timer: NodeJS.Timeout | null = null

  /** `slot`: where an item keeps its place in this sweep (util/slot-set.ts). */
  constructor (periodMs: number, check: SweepCheck<T>, slot: SlotAccess<T>) {
    this.periodMs = periodMs
    this.check = check
    this.items = new SlotSet(slot)
  }

  add (item: T): void {
    this.items.add(item)
    if (this.timer === null) this.timer = setInterval(runSweep, this.periodMs, this).unref()
  }

  delete (item: T): void {
    this.items.delete(item)
  }

  get size (): number {
    return this.items.size
  }

  /** One round: every item checked with the same clock reading. */
  run (now: number): void {
    if (this.items.size === 0) {
      clearInterval(this.timer!)
      this.timer = null
      return
    }
    this.items.forEach(item => this.check(item, now))
  }
}

function runSweep<T> (sweep: Sweep<T>): void {
  sweep.run(performance.now())
}

/**
 * One sweep per period, made on first use: the periods in use are the few durations a config
 * names (the defaults and each route's overrides), so the map stays small.
 */
export class Sweeps<T> {
  private readonly byPeriod = new Map<number, Sweep<T>>()
  private readonly check: SweepCheck<T>
  private readonly slot: SlotAccess<T>

  constructor (check: SweepCheck<T>, slot: SlotAccess<T>) {
    this.check = check
    this.slot = slot
  }

  get (periodMs: number): Sweep<T> {
    let sweep = this.byPeriod.get(periodMs)
    if (sweep === undefined) this.byPeriod.set(periodMs, sweep = new Sweep(periodMs, this.check, this.slot))
    return sweep
  }
}
