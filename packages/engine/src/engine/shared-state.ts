/**
 * Backend state the data-plane workers share (config.workers > 1): each endpoint's passive
 * health (failures in a row, ejection) and each backend's stats (requests, failures, health
 * score, latency). Records live in one growable SharedArrayBuffer; the primary assigns each
 * key a record before a config that names it is prepared (so every worker finds the same
 * record for the same key) and frees records of keys that left only a few versions later.
 * With one event loop there is none of this: pools and stats keep their own state.
 */

import type { BackendIR, ProxyIR } from '../ir/types.ts'
import { SharedEndpointState, type EndpointState } from '../http/endpoint-balancer.ts'
import { originsOf } from '../http/upstream-pools.ts'
import { Records } from '../util/shared-records.ts'

export const healthKey = (backendKey: string, origin: string): string => `health\0${backendKey}\0${origin}`
export const statsKey = (backendKey: string): string => `stats\0${backendKey}`

/** Float64 slots of a stats record (`ok` and `weight`: the weighted sums behind health, backend-stats.ts). */
export const STATS = { requests: 1, failures: 2, health: 3, latencyMs: 4, ok: 5, weight: 6 } as const

/** Every key a config's backends need a record for. */
export function sharedBackendKeys (ir: ProxyIR): string[] {
  const keys: string[] = []
  for (const b of ir.backends) {
    keys.push(statsKey(b.key))
    if (b.kind !== 'mcp' && b.health !== undefined) for (const origin of originsOf(b)) keys.push(healthKey(b.key, origin))
  }
  return keys
}

/** Starting values of a new record for `key` (memory starts zeroed). */
export function initSharedRecord (records: Records, record: number, key: string): void {
  for (let i = 1; i < 8; i++) records.f64[Records.float(record, i)] = 0
  records.i32[Records.int(record, 1)] = 0
  if (key.startsWith('stats\0')) {
    records.f64[Records.float(record, STATS.health)] = 1
    records.f64[Records.float(record, STATS.latencyMs)] = NaN
  }
}

export class SharedBackendState {
  readonly records: Records
  private slots = new Map<string, number>()
  /** Stats records by backend key (the request path looks them up without building a key). */
  private stats = new Map<string, number>()

  constructor (buffer: SharedArrayBuffer) {
    this.records = new Records(buffer)
  }

  /** The primary's key -> record table for the config being prepared (a superset of the one in force). */
  setSlots (slots: Record<string, number>): void {
    // The primary grew the buffer, if it had to, before it assigned these records.
    this.records.refresh()
    this.slots = new Map(Object.entries(slots))
    this.stats = new Map()
    for (const [key, record] of this.slots) if (key.startsWith('stats\0')) this.stats.set(key.slice('stats\0'.length), record)
  }

  statsRecord (backendKey: string): number | undefined {
    return this.stats.get(backendKey)
  }

  record (key: string): number | undefined {
    return this.slots.get(key)
  }

  endpointState (backendKey: string, origin: string): EndpointState | undefined {
    const record = this.slots.get(healthKey(backendKey, origin))
    return record === undefined ? undefined : new SharedEndpointState(this.records, record)
  }

  /** Passive health of a backend's endpoints as every worker sees it, or null without it. */
  endpointHealth (backend: BackendIR, now = Date.now()): { healthy: number, total: number, ejected: string[] } | null {
    if (backend.health === undefined) return null
    const ejected: string[] = []
    let total = 0
    for (const origin of originsOf(backend)) {
      const record = this.slots.get(healthKey(backend.key, origin))
      if (record === undefined) continue
      total++
      if (this.records.f64[Records.float(record, 1)]! > now) ejected.push(origin)
    }
    return { healthy: total - ejected.length, total, ejected }
  }
}
