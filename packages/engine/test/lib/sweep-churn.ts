/**
 * Run by sweep.test.ts in a Node of its own (`--expose-gc`, 1 MB semi-spaces): a sweep whose
 * items join and leave as a proxy's backend calls do (50 in flight, each holding a request's
 * worth of objects), one full GC while they do -- as one comes under load -- then 200,000
 * more calls with only the young generation's GC. Prints how much the old generation grew
 * (MB). With the items in a Set, every table the Set rebuilt kept its members and the next
 * table alive from the old generation on, and the old space grew by ~20 MB; in an array, not.
 */

import { getHeapSpaceStatistics } from 'node:v8'
import { Sweeps } from '../../src/http/sweep.ts'

interface Call { slot: number, request: object[] }

const sweep = new Sweeps<Call>(() => {}, { get: c => c.slot, set: (c, slot) => { c.slot = slot } }).get(60_000)
const inFlight: Call[] = []
const oldSpace = (): number => getHeapSpaceStatistics().find(s => s.space_name === 'old_space')!.space_used_size

function call (): void {
  const c: Call = { slot: -1, request: Array.from({ length: 64 }, (_, k) => ({ k })) }
  sweep.add(c)
  inFlight.push(c)
  if (inFlight.length > 50) sweep.delete(inFlight.shift()!)
}

for (let i = 0; i < 20_000; i++) call()
;(globalThis as { gc?: () => void }).gc!()
const before = oldSpace()
for (let i = 0; i < 200_000; i++) call()
process.stdout.write(`${((oldSpace() - before) / 1048576).toFixed(1)}\n`)
process.exit(0)
