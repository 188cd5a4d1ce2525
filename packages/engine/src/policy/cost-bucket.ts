/**
 * A `localRateLimit` bucket of `type: cost`: a budget in the pricing currency, taken by the
 * exact cost of each answer (llm/cost.ts: an integer of 10^-12 currency units, "picos").
 *
 * The amount lives in a shared record (util/shared-records.ts) as two Float64 slots — whole
 * currency units and the picos under one unit — because one Float64 holds picos exactly only
 * up to 2^53 (about 9007 units): a budget of 10,000 would already round. Split, the whole
 * part is exact to 2^53 units and the remainder below 10^12 < 2^53, so a budget drawn down by
 * a million calls of 0.000000150 each ends exactly where the sum of the calls says. The
 * arithmetic is done in BigInt while the caller holds the policy's lock.
 *
 * Fills work as for token buckets (policy/local-rate-limit.ts): `perFill` at each
 * `fillIntervalMs` boundary, never above `max`; an answer that cost more than was left
 * leaves a debt, paid by later fills before the next request is admitted.
 */

import { Records } from '../util/shared-records.ts'

const UNITS = 1
const LAST_FILL = 2
const REMAINDER = 3
const PICOS_PER_UNIT = 1_000_000_000_000n

export interface CostBudget {
  maxPicos: bigint
  perFillPicos: bigint
  fillIntervalMs: number
}

/** Millionths of a currency unit (the IR's) in picos. */
export function microsToPicos (micros: number): bigint {
  return BigInt(micros) * 1_000_000n
}

export class CostBucket {
  private readonly budget: CostBudget
  private readonly records: () => Records
  private readonly record: number

  constructor (budget: CostBudget, records: () => Records, record: number) {
    this.budget = budget
    this.records = records
    this.record = record
  }

  get max (): bigint {
    return this.budget.maxPicos
  }

  /** Full, fills counted from `now`. */
  init (now: number): void {
    this.amount = this.budget.maxPicos
    this.records().f64[Records.float(this.record, LAST_FILL)] = now
  }

  /** What the bucket holds, in picos (negative: a debt). */
  get amount (): bigint {
    const f64 = this.records().f64
    return BigInt(f64[Records.float(this.record, UNITS)]!) * PICOS_PER_UNIT + BigInt(f64[Records.float(this.record, REMAINDER)]!)
  }

  set amount (picos: bigint) {
    // Floor division, so the remainder is never negative.
    let units = picos / PICOS_PER_UNIT
    let rest = picos - units * PICOS_PER_UNIT
    if (rest < 0n) {
      units -= 1n
      rest += PICOS_PER_UNIT
    }
    const f64 = this.records().f64
    f64[Records.float(this.record, UNITS)] = Number(units)
    f64[Records.float(this.record, REMAINDER)] = Number(rest)
  }

  /** Adds the fills due since the last one. */
  refill (now: number): void {
    const f64 = this.records().f64
    const at = Records.float(this.record, LAST_FILL)
    const elapsed = now - f64[at]!
    const interval = this.budget.fillIntervalMs
    if (elapsed < interval) return
    const fills = Math.floor(elapsed / interval)
    f64[at] = f64[at]! + fills * interval
    const filled = this.amount + BigInt(fills) * this.budget.perFillPicos
    this.amount = filled > this.budget.maxPicos ? this.budget.maxPicos : filled
  }

  /** Nothing left: a request is refused. */
  get empty (): boolean {
    return this.amount <= 0n
  }

  take (picos: bigint): void {
    this.amount = this.amount - picos
  }

  /** Milliseconds until the bucket holds `need` picos (at least one fill away). */
  untilHolding (need: bigint, now: number): number {
    const short = need - this.amount
    const per = this.budget.perFillPicos
    const fills = short <= 0n ? 1 : Math.max(1, Number((short + per - 1n) / per))
    return this.records().f64[Records.float(this.record, LAST_FILL)]! + fills * this.budget.fillIntervalMs - now
  }
}
