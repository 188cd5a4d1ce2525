/**
 * Fixed-size records of numbers that the data-plane workers share (config.workers > 1):
 * rate-limit buckets, passive-health state, backend stats. With one event loop the same
 * records live in ordinary memory and the locks cost nothing; across worker threads they live
 * in a SharedArrayBuffer and a record's first Int32 is a lock, held only for the few
 * arithmetic steps of one update.
 *
 * A record is 64 bytes (a cache line): Int32 0 is the lock, Int32 1 a counter, and Float64
 * slots 1..7 values.
 */

import { PorticoError } from './errors.ts'

export const RECORD_BYTES = 64
const INTS_PER_RECORD = RECORD_BYTES / 4
const FLOATS_PER_RECORD = RECORD_BYTES / 8

/** Spins before a contended lock waits (a holder keeps it for well under a microsecond). */
const SPINS = 100
/** A wait's timeout, and how many in a row mean the holder is gone. */
const WAIT_MS = 5
const WAITS_BEFORE_BREAKING = 200

/** Fixed-length views of all of `buffer` as long as it is now (Records says why not length-tracking ones). */
function viewsOf (buffer: ArrayBuffer | SharedArrayBuffer): [Int32Array, Float64Array] {
  return [new Int32Array(buffer, 0, buffer.byteLength >> 2), new Float64Array(buffer, 0, buffer.byteLength >> 3)]
}

export class Records {
  /**
   * Views of the buffer as long as it was when they were made: a growable buffer that has
   * grown since is seen whole after `refresh()`. Not length-tracking views, which would see
   * it grow by themselves: on a growable SharedArrayBuffer each access through one asks V8's
   * runtime for the buffer's length, and every proxied request of a data-plane worker makes
   * several (a backend-stats update: 285 ns through them, 69 ns through these;
   * bench/shared-records.ts, docs/multicore.md).
   */
  i32: Int32Array
  f64: Float64Array
  /** Whether other threads see these records (then updates lock). */
  readonly shared: boolean
  private readonly buffer: ArrayBuffer | SharedArrayBuffer

  constructor (buffer: ArrayBuffer | SharedArrayBuffer) {
    this.buffer = buffer
    ;[this.i32, this.f64] = viewsOf(buffer)
    this.shared = typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer
  }

  /**
   * After the buffer grew (SharedArrayBuffer#grow, here or in another thread): views of all
   * of it. Called before records beyond the old length are used -- by the primary after it
   * grows the buffer, by every thread when it takes the key -> record table of a config.
   */
  refresh (): void {
    if (this.f64.byteLength === this.buffer.byteLength) return
    ;[this.i32, this.f64] = viewsOf(this.buffer)
  }

  static allocate (count: number, shared: boolean): Records {
    const bytes = Math.max(1, count) * RECORD_BYTES
    return new Records(shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes))
  }

  get count (): number {
    return Math.floor(this.f64.length / FLOATS_PER_RECORD)
  }

  /** Index of Float64 `slot` (1..7) of `record`. */
  static float (record: number, slot: number): number {
    return record * FLOATS_PER_RECORD + slot
  }

  /** Index of Int32 `slot` (1..15) of `record`. */
  static int (record: number, slot: number): number {
    return record * INTS_PER_RECORD + slot
  }

  /**
   * A futex-style mutex (0 free, 1 held, 2 held with waiters): a brief spin, then the thread
   * sleeps in Atomics.wait rather than spinning, since workers may outnumber the cores and a
   * holder that was descheduled would otherwise be waited for by spinning a whole time slice.
   * A data plane must not hang on a worker thread that was terminated while holding one: after
   * about a second of waiting the lock is taken to be abandoned and broken (at worst one update
   * of the dead worker is lost).
   */
  lock (record: number): void {
    if (!this.shared) return
    const i32 = this.i32
    const at = record * INTS_PER_RECORD
    let c = Atomics.compareExchange(i32, at, 0, 1)
    if (c === 0) return
    for (let spins = 0; spins < SPINS; spins++) {
      c = Atomics.compareExchange(i32, at, 0, 1)
      if (c === 0) return
    }
    if (c !== 2) c = Atomics.exchange(i32, at, 2)
    let waits = 0
    while (c !== 0) {
      if (Atomics.wait(i32, at, 2, WAIT_MS) === 'timed-out' && ++waits >= WAITS_BEFORE_BREAKING) {
        Atomics.store(i32, at, 0)
        waits = 0
      }
      c = Atomics.exchange(i32, at, 2)
    }
  }

  unlock (record: number): void {
    if (!this.shared) return
    const at = record * INTS_PER_RECORD
    if (Atomics.exchange(this.i32, at, 0) === 2) Atomics.notify(this.i32, at, 1)
  }
}

/**
 * Records for one compile of a config (its localRateLimit buckets): compilers take records
 * in compile order, and the memory is made once the compile is done -- or, on a worker, it is
 * the memory the primary made for the same config (the same IR compiles to the same
 * sequence, which `seal` checks), already initialised.
 */
export class RecordArena {
  private used = 0
  private readonly inits: Array<(records: Records) => void> = []
  private readonly given: SharedArrayBuffer | undefined
  records: Records | null = null

  constructor (given?: SharedArrayBuffer) {
    this.given = given
  }

  /** Takes `count` records; `init` writes their starting values once the memory exists. Returns the first. */
  allocate (count: number, init: (records: Records, first: number) => void): number {
    const first = this.used
    this.used += count
    this.inits.push(r => init(r, first))
    return first
  }

  get count (): number {
    return this.used
  }

  /** Makes (or adopts) the memory. `shared`: memory other threads can be given. */
  seal (shared: boolean): Records {
    if (this.given !== undefined) {
      if (this.given.byteLength !== Math.max(1, this.used) * RECORD_BYTES) {
        throw new PorticoError('PORTICO_SHARED_STATE_MISMATCH', `shared state mismatch: this config needs ${this.used} records, the primary made ${this.given.byteLength / RECORD_BYTES}`)
      }
      this.records = new Records(this.given)
    } else {
      this.records = Records.allocate(this.used, shared)
      for (const init of this.inits) init(this.records)
    }
    this.inits.length = 0
    return this.records
  }

  /** The memory to hand to other threads (shared seals only). */
  get buffer (): SharedArrayBuffer | null {
    const b = this.records?.f64.buffer
    return b instanceof SharedArrayBuffer ? b : null
  }
}

/** Milliseconds on the monotonic clock every thread of the process reads the same. */
export function monotonicMs (): number {
  return Number(process.hrtime.bigint()) / 1e6
}
