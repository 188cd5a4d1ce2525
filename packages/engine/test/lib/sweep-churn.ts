/**
 * Run by sweep.test.ts in a Node of its own (testkit old-space.ts): a sweep whose items join
 * and leave as a proxy's backend calls do (50 in flight, each holding a request's worth of
 * objects), one full GC while they do, then 200,000 more calls with only the young
 * generation's GC. Prints how much the old generation grew (MB). With the items in a Set,
 * every table the Set rebuilt kept its members and the next table alive from the old
 * generation on, and the old space grew by ~15 MB; in an array, not.
 */

import { Sweeps } from '../../src/http/sweep.ts'
import { oldSpaceGrowthMb } from '../../../testkit/src/old-space.ts'

interface Call { slot: number, request: object[] }

const sweep = new Sweeps<Call>(() => {}, { get: c => c.slot, set: (c, slot) => { c.slot = slot } }).get(60_000)
const inFlight: Call[] = []

function call (): void {
  const c: Call = { slot: -1, request: Array.from({ length: 64 }, (_, k) => ({ k })) }
  sweep.add(c)
  inFlight.push(c)
  if (inFlight.length > 50) sweep.delete(inFlight.shift()!)
}

process.stdout.write(`${(await oldSpaceGrowthMb(call, 20_000, 200_000)).toFixed(1)}\n`)
process.exit(0)
