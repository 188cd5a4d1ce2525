/**
 * An unordered set for objects that join and leave it all the time (one per request or per
 * connection), kept in an array: each member carries its own index (its slot), adding is a
 * push and deleting moves the last member into the freed slot.
 *
 * Why not a `Set`. V8 keeps a Set's members in a hash table that it rebuilds once deleted
 * entries fill it, and the table it leaves points at the one that replaces it (so that live
 * iterators can follow) and keeps the members it held. A Set with steady traffic makes a new
 * table every few dozen deletes, and each old table holds the members of its day and the
 * next table. Once one of those tables is in the old generation (every full GC under load
 * promotes the current one), the young-generation GC takes its pointers as roots whether or
 * not anything still uses it: every later table survives, with every member it held (a
 * backend call's clocks, through them the request), is promoted, and holds the next one, until
 * the next full GC, which the promoted garbage brings on within a fraction of a second -- and
 * which starts the chain again. Measured (bench/README.md, "2026-12-06: the Set that kept
 * every request"): with the call clocks in a Set, a proxy under load promoted ~2 KB per
 * request and ran a full GC every ~130 ms after the first one. An array's slots are cleared
 * as members leave, and its backing store points at nothing newer than its members.
 *
 * `slot` reads and writes a member's index (-1: not a member); a member may be in several
 * SlotSets at once with a field for each.
 */

export interface SlotAccess<T> {
  get(item: T): number
  set(item: T, slot: number): void
}

export class SlotSet<T> {
  private readonly items: T[] = []
  private readonly slot: SlotAccess<T>

  constructor (slot: SlotAccess<T>) {
    this.slot = slot
  }

  get size (): number {
    return this.items.length
  }

  has (item: T): boolean {
    const i = this.slot.get(item)
    return i >= 0 && i < this.items.length && this.items[i] === item
  }

  add (item: T): void {
    if (this.has(item)) return
    this.slot.set(item, this.items.length)
    this.items.push(item)
  }

  /** Removes `item`; false when it was not a member. */
  delete (item: T): boolean {
    if (!this.has(item)) return false
    const i = this.slot.get(item)
    const last = this.items.pop()!
    if (last !== item) {
      this.items[i] = last
      this.slot.set(last, i)
    }
    this.slot.set(item, -1)
    return true
  }

  /**
   * Calls `fn` on each member, last first. `fn` may delete members (none is skipped; the one
   * a delete moves into a slot still ahead is visited twice) and add some (they are not
   * visited).
   */
  forEach (fn: (item: T) => void): void {
    const items = this.items
    for (let i = items.length - 1; i >= 0; i--) {
      if (i >= items.length) continue
      fn(items[i]!)
    }
  }

  /** The members now, as a new array (for callers that act on them after the walk). */
  toArray (): T[] {
    return this.items.slice()
  }
}
