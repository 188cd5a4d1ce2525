/**
 * The requests in progress, for /debug/tasks. A slot array with a free list rather than a
 * Set: a Set whose entries come and go thousands of times a second keeps reallocating its
 * table, and under load that showed up as long garbage-collection pauses.
 */

export class InFlightRequests<T extends { inFlightSlot: number }> {
  private readonly slots: Array<T | null> = []
  private readonly free: number[] = []
  private count = 0

  add (item: T): void {
    const slot = this.free.pop() ?? this.slots.length
    this.slots[slot] = item
    item.inFlightSlot = slot
    this.count++
  }

  remove (item: T): void {
    const slot = item.inFlightSlot
    if (slot < 0 || this.slots[slot] !== item) return
    this.slots[slot] = null
    this.free.push(slot)
    item.inFlightSlot = -1
    this.count--
  }

  get size (): number {
    return this.count
  }

  * [Symbol.iterator] (): IterableIterator<T> {
    for (const item of this.slots) if (item !== null) yield item
  }
}
