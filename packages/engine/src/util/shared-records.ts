/**
 * Fixed-size records of numbers that the data-plane workers share (config.workers > 1):
 * rate-limit buckets, passive-health state, backend stats. With one event loop the same
 * records live in ordinary memory and the locks cost nothing; across worker threads they live
 * in a SharedArrayBuffer and a record's first Int32 is a spin lock, held only for the few
 * arithmetic steps of one update.
 *
 * A record is 64 bytes (a cache line): Int32 0 is the lock, Int32 1 a counter, and Float64
 * slots 1..7 values.
 */

export const RECORD_BYTES = 64
const INTS_PER_RECORD = RECORD_BYTES / 4
const FLOATS_PER_RECORD = RECORD_BYTES / 8

/**
 * Spins before a lock is taken to be abandoned. A holder keeps it for well under a
 * microsecond; a worker thread that was terminated mid-update never releases it, and a
 * data plane must not hang on that, so after about a millisecond of spinning the lock is
 * broken (at worst one update of the dead worker is lost).
 */
const SPIN_LIMIT = 1 << 20

export class Records {
  readonly i32: Int32Array
  readonly f64: Float64Array
  /** Whether other threads see these records (then updates lock). */
  readonly shared: boolean

  constructor (buffer: ArrayBuffer | SharedArrayBuffer) {
    // Length-tracking views: a growable SharedArrayBuffer that grows is seen whole.
    this.i32 = new Int32Array(buffer)
    this.f64 = new Float64Array(buffer)
    this.shared = typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer
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

  lock (record: number): void {
    if (!this.shared) return
    const at = record * INTS_PER_RECORD
    let spins = 0
    while (Atomics.compareExchange(this.i32, at, 0, 1) !== 0) {
      if (++spins > SPIN_LIMIT) {
        Atomics.store(this.i32, at, 0)
        spins = 0
      }
    }
  }

  unlock (record: number): void {
    if (this.shared) Atomics.store(this.i32, record * INTS_PER_RECORD, 0)
  }
}

/**
 * Records for one compile of a config (its localRateLimit buckets): compilers take records
 * in compile order, and the memory is made once the compile is done — or, on a worker, it is
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
        throw new Error(`shared state mismatch: this config needs ${this.used} records, the primary made ${this.given.byteLength / RECORD_BYTES}`)
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
