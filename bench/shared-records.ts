/**
 * What a data-plane worker's backend-stats update costs (engine/backend-stats.ts, once per
 * proxied request with `workers` ≥ 2): the shared record it writes lives in the primary's
 * growable SharedArrayBuffer (workers/slot-table.ts), read through
 *   - after: fixed-length views, made again when the buffer grows (Records#refresh);
 *   - before: length-tracking views, through which each access asks V8's runtime for the
 *     buffer's length;
 *   - one loop: the same update without shared memory (`workers: 1`), for reference.
 * Each variant runs in a process of its own (one function seeing both kinds of view would
 * be compiled for both), in interleaved rounds; prints CPU ns per update, medians of the
 * rounds, and each against `after`.
 *
 *   node bench/shared-records.ts [--rounds 4] [--updates 2000000]
 */

import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { BackendStats, Engine, RECORD_BYTES } from '@portico/engine'
import { fmt, median, ratio, rounded, table } from './lib/report.ts'

const VARIANTS = ['after', 'before', 'one loop'] as const
type Variant = typeof VARIANTS[number]

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '4' }, updates: { type: 'string', default: '2000000' }, variant: { type: 'string' } } })
const UPDATES = Number(values.updates)

/** One variant, in this process: CPU ns per update over UPDATES updates, after as many to warm up. */
function measure (variant: Variant): number {
  const stats = new BackendStats()
  if (variant !== 'one loop') {
    const buffer = new SharedArrayBuffer(RECORD_BYTES, { maxByteLength: 1024 * RECORD_BYTES })
    // The shared backend state a worker's engine makes of the primary's buffer (Engine's `shared` option).
    const state = new Engine({ shared: { backends: buffer } }).sharedBackends!
    buffer.grow(64 * RECORD_BYTES)
    state.setSlots({ 'stats\0backend/bench': 40 })
    if (variant === 'before') {
      state.records.i32 = new Int32Array(buffer)
      state.records.f64 = new Float64Array(buffer)
    }
    stats.shared = state
  }
  const run = (n: number): void => {
    for (let i = 0; i < n; i++) stats.recordCall('backend/bench', (i & 63) === 0, 1 + (i & 7))
  }
  run(UPDATES)
  const start = process.cpuUsage()
  run(UPDATES)
  const used = process.cpuUsage(start)
  if (stats.get('backend/bench').requests !== 2 * UPDATES) throw new Error(`${variant}: the updates did not all land`)
  return (used.user + used.system) * 1000 / UPDATES
}

if (values.variant !== undefined) {
  process.stdout.write(`${measure(values.variant as Variant)}\n`)
} else {
  const self = fileURLToPath(import.meta.url)
  const results = new Map<Variant, number[]>(VARIANTS.map(v => [v, []]))
  for (let round = 0; round < Number(values.rounds); round++) {
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()
    for (const variant of order) {
      const out = execFileSync(process.execPath, [self, '--variant', variant, '--updates', String(UPDATES)], { encoding: 'utf8' })
      results.get(variant)!.push(Number(out.trim()))
    }
  }
  const after = median(results.get('after')!)
  console.log(`shared-records: Node ${process.version}; a backend-stats update (BackendStats#recordCall), ${UPDATES} timed after as many to warm up, each variant in its own process, median of ${values.rounds} interleaved rounds`)
  console.log(table(['views', 'CPU ns per update', 'rounds', 'against after'], VARIANTS.map(v => {
    const ns = median(results.get(v)!)
    return [v, fmt(ns, 1), results.get(v)!.map(n => fmt(n, 1)).join(' '), `×${fmt(ratio(ns, after), 2)}`]
  })))
  console.log(JSON.stringify({ bench: 'shared-records', node: process.version, updates: UPDATES, nsPerUpdate: rounded(Object.fromEntries(VARIANTS.map(v => [v, median(results.get(v)!)])), 1) }))
}
