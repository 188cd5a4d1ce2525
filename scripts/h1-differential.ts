/**
 * The differential test of the backend client's response parser against llhttp
 * (packages/engine/test/lib/h1-differential.ts), for as long as you like:
 *
 *   node scripts/h1-differential.ts [--seed N] [--count N]
 *
 * Prints each case the two parsers disagree on (its mutations, bytes and both outcomes)
 * and exits 1 if there was one. A disagreement becomes a fixed case in
 * packages/engine/test/h1-differential.test.ts once it is decided which side is right.
 * CI runs the unit test's fixed seed and count; this is the longer run.
 */

import { parseArgs } from 'node:util'
import { runDifferential, tally } from '../packages/engine/test/lib/h1-differential.ts'

const { values } = parseArgs({ options: { seed: { type: 'string', default: String(Date.now() % 2 ** 31) }, count: { type: 'string', default: '20000' } } })
const seed = Number(values.seed)
const count = Number(values.count)
const started = performance.now()
const findings = await runDifferential(seed, count)
const found = findings.filter(f => f.verdict.startsWith('disagree'))
for (const d of found) {
  console.log(`case ${d.n} [${d.c.mutations.join(', ')}] ${d.c.method}: ${d.verdict}`)
  console.log(`  bytes: ${JSON.stringify(d.c.bytes.toString('latin1').slice(0, 400))}`)
}
console.log(JSON.stringify(tally(findings)))
console.log(`seed ${seed}: ${count} cases, ${found.length} disagreements, ${((performance.now() - started) / 1000).toFixed(1)} s`)
process.exitCode = found.length > 0 ? 1 : 0
