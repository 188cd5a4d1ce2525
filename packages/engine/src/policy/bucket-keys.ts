/**
 * Buckets per key (`localRateLimit` with `key`): one bucket per distinct value of the key
 * (a JWT subject, an API key's name, a model), in a table of fixed size so that a client
 * sending ever new keys cannot grow memory — the table is `maxKeys` records (64 bytes each)
 * taken when the config is compiled, and never more.
 *
 * The table is set-associative, as a CPU cache is: a key's hash picks one set of `WAYS`
 * records and the key lives in one of them, found by a 48-bit tag of the hash. A key not in
 * its set takes a free record, or else the set's least recently used one (its bucket is
 * dropped: that key starts again with a full bucket if it comes back). A lookup reads at most
 * `WAYS` records — no scan of the table, no list to keep in order — which is also what lets
 * the table live in the records the data-plane workers share (util/shared-records.ts): the
 * caller holds the policy's lock while it looks up and updates, so every worker finds the same
 * bucket for the same key. Keys are never stored, only hashes (SHA-256), so a 100 KB model
 * name costs its hashing and 64 bytes.
 */

import { hash } from 'node:crypto'
import { Records } from '../util/shared-records.ts'

/** Records per set: the eviction choice is the least recently used of these. */
export const WAYS = 8

/** Float64 slots of a keyed record besides the bucket's own (1: tokens, 2: last fill, 3: cost remainder). */
const TAG = 4
const USED = 5

/** A key's place: the set it belongs to and its tag (never 0: 0 marks a free record). */
export interface KeyHash {
  set: number
  tag: number
}

/** How many records a table for `maxKeys` takes (whole sets). */
export function tableRecords (maxKeys: number): number {
  return Math.ceil(maxKeys / WAYS) * WAYS
}

export function keyHash (key: string, records: number): KeyHash {
  const digest = hash('sha256', key, 'buffer')
  const tag = digest.readUIntBE(0, 6) || 1
  return { set: digest.readUInt32BE(6) % (records / WAYS), tag }
}

/** What a lookup found: the record, and whether it was made for this key now (and whether it dropped another key's bucket). */
export interface KeyedRecord {
  record: number
  fresh: boolean
  evicted: boolean
}

/**
 * The record of `key` in the table of `count` records starting at `first`; a fresh record
 * (set up by `init`) when the key has none. The caller holds the lock.
 */
export function lookupKey (records: Records, first: number, h: KeyHash, now: number, init: (record: number) => void): KeyedRecord {
  const f64 = records.f64
  const base = first + h.set * WAYS
  let victim = -1
  let victimUsed = Infinity
  for (let way = 0; way < WAYS; way++) {
    const record = base + way
    const tag = f64[Records.float(record, TAG)]!
    if (tag === h.tag) {
      f64[Records.float(record, USED)] = now
      return { record, fresh: false, evicted: false }
    }
    const used = tag === 0 ? -Infinity : f64[Records.float(record, USED)]!
    if (used < victimUsed) {
      victim = record
      victimUsed = used
    }
  }
  const evicted = victimUsed !== -Infinity
  init(victim)
  f64[Records.float(victim, TAG)] = h.tag
  f64[Records.float(victim, USED)] = now
  return { record: victim, fresh: true, evicted }
}

/** Keys held now (tests, traces): records whose tag is set. */
export function keysHeld (records: Records, first: number, count: number): number {
  let n = 0
  for (let r = first; r < first + count; r++) if (records.f64[Records.float(r, TAG)] !== 0) n++
  return n
}

/**
 * A key's value as the bucket's name: a non-empty string, number or bool; otherwise why the
 * request is not limited by the bucket.
 */
export function keyText (value: unknown, source: string): string | { skip: string } {
  if (value instanceof Error) return { skip: `key ${source}: ${value.message}` }
  const text = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean' ? String(value) : null
  if (text === null) return { skip: `key ${source} is ${value === null || value === undefined ? 'null' : `a ${typeof value}`}, not a string` }
  if (text === '') return { skip: `key ${source} is empty` }
  return text
}

/**
 * A bucket's key for this request: its expression evaluated (an error is a value like any
 * other, and skips the bucket with its message), then read as text by keyText. The request
 * stage and the llm stage both read keys this way.
 */
export function evaluateKey (key: { evaluate: (vars: Record<string, unknown>) => unknown, source: string }, vars: Record<string, unknown>): string | { skip: string } {
  let value: unknown
  try {
    value = key.evaluate(vars)
  } catch (err) {
    value = err
  }
  return keyText(value, key.source)
}

/** A key as traces show it: long ones cut (a model name can be 100 KB). */
export function shownKey (key: string): string {
  return key.length <= 64 ? JSON.stringify(key) : `${JSON.stringify(key.slice(0, 64))}… (${key.length} characters)`
}
