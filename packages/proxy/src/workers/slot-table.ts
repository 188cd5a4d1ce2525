/**
 * The primary's table of backend-state records (engine/shared-state.ts): each key a config
 * names (a backend's stats, an endpoint's passive health) gets a record in the growable
 * buffer every worker shares, before the config is prepared anywhere. A key keeps its record
 * as long as configs name it, so reloads keep ejections and figures. A key that leaves is
 * freed, and its record is given to another key only two config versions later, once no
 * worker can still be writing to it for the old key.
 */

import { initSharedRecord, RECORD_BYTES, Records } from '@portico/engine'

/** Records a generation must be past before a freed record is reused. */
const REUSE_AFTER = 2
/** Room the buffer may grow to (a million records); only the part in use is committed. */
const MAX_BYTES = 64 * 1024 * 1024

export class SlotTable {
  readonly buffer: SharedArrayBuffer
  private readonly records: Records
  private readonly byKey = new Map<string, number>()
  private readonly freed: Array<{ record: number, generation: number }> = []
  private next = 0

  constructor () {
    this.buffer = new SharedArrayBuffer(64 * RECORD_BYTES, { maxByteLength: MAX_BYTES })
    this.records = new Records(this.buffer)
  }

  /** Records for `keys` (new ones initialised); returns the whole table. */
  assign (keys: Iterable<string>, generation: number): Record<string, number> {
    for (const key of keys) {
      if (this.byKey.has(key)) continue
      const reusable = this.freed.length > 0 && this.freed[0]!.generation + REUSE_AFTER <= generation ? this.freed.shift()!.record : undefined
      const record = reusable ?? this.next++
      if ((record + 1) * RECORD_BYTES > this.buffer.byteLength) {
        this.buffer.grow(Math.min(MAX_BYTES, Math.max((record + 1) * RECORD_BYTES, this.buffer.byteLength * 2)))
        this.records.refresh()
      }
      initSharedRecord(this.records, record, key)
      this.byKey.set(key, record)
    }
    return Object.fromEntries(this.byKey)
  }

  /** Frees the records of keys the config in force (`generation`) no longer names. */
  retain (keys: Set<string>, generation: number): void {
    for (const [key, record] of this.byKey) {
      if (keys.has(key)) continue
      this.byKey.delete(key)
      this.freed.push({ record, generation })
    }
  }
}
