/**
 * Weighted random choice (Gateway API backendRef weights): each item is chosen with
 * probability weight / total; weight 0 is never chosen; all-zero (or none) yields null.
 */
export class WeightedPicker<T> {
  private readonly items: T[]
  private readonly cumulative: number[]
  readonly total: number
  readonly all: readonly T[]
  private readonly random: () => number

  constructor (entries: ReadonlyArray<{ item: T, weight: number }>, random: () => number = Math.random) {
    this.random = random
    this.items = []
    this.cumulative = []
    let total = 0
    for (const { item, weight } of entries) {
      if (weight <= 0) continue
      total += weight
      this.items.push(item)
      this.cumulative.push(total)
    }
    this.total = total
    this.all = entries.map(e => e.item)
  }

  /**
   * One item by weight. With `avoid`, one of the others by their weights, as long as any
   * is left (a retry tries another backend first, like Envoy's previous_hosts predicate).
   */
  pick (avoid?: ReadonlySet<T>): T | null {
    if (avoid !== undefined && avoid.size > 0) return this.pickAvoiding(avoid)
    const n = this.items.length
    if (n === 0) return null
    if (n === 1) return this.items[0]!
    const r = this.random() * this.total
    // Few backends per route: a linear scan beats a binary search here.
    for (let i = 0; i < n; i++) if (r < this.cumulative[i]!) return this.items[i]!
    return this.items[n - 1]!
  }

  private pickAvoiding (avoid: ReadonlySet<T>): T | null {
    const left: number[] = []
    let total = 0
    for (let i = 0; i < this.items.length; i++) {
      if (avoid.has(this.items[i]!)) continue
      left.push(i)
      total += this.cumulative[i]! - (i === 0 ? 0 : this.cumulative[i - 1]!)
    }
    if (left.length === 0) return this.pick()
    let r = this.random() * total
    for (const i of left) {
      r -= this.cumulative[i]! - (i === 0 ? 0 : this.cumulative[i - 1]!)
      if (r < 0) return this.items[i]!
    }
    return this.items[left.at(-1)!]!
  }
}
