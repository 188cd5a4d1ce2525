/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, server scenarios)
 * against our fixture server (e2e/conformance/mcp/everything-server.ts, the SDK v2 serving
 * both eras) directly and through Portico, for revisions 2025-06-18, 2025-11-25 and
 * 2026-07-28 (the latter two by their frozen requirement sets):
 *  - one target: Portico must pass exactly what the server passes (initialize-era clients
 *    through Portico's sessions, 2026-07-28 clients forwarded);
 *  - bridged: 2026-07-28 clients to an initialize-era-only copy of the server, with the
 *    listed differences;
 *  - multiplexed: both servers behind one route, whose differences must all be the listed
 *    name prefixes.
 * Expected differences live in e2e/conformance/mcp/expected-differences.ts; an unlisted
 * difference fails, and so does a listed one that went away.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { startEverythingServer, type EverythingServer } from '../conformance/mcp/everything-server.ts'
import { compare, runSuite, type SuiteResult, type SuiteRun } from '../conformance/mcp/suite.ts'
import { BRIDGED, DIRECT_FAILURES, MULTIPLEXED } from '../conformance/mcp/expected-differences.ts'

let both: EverythingServer
let legacyOnly: EverythingServer
let portico: PorticoProcess
/** Every suite run, started together in `before` (they are independent). */
const runs = new Map<string, Promise<SuiteResult>>()

before(async () => {
  both = await startEverythingServer()
  legacyOnly = await startEverythingServer({ eras: 'legacy' })
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'single', matches: [{ path: { pathPrefix: '/single' } }], backends: [{ mcp: { targets: [{ name: 'everything', mcp: { host: both.url } }] } }] },
        { name: 'bridged', matches: [{ path: { pathPrefix: '/bridged' } }], backends: [{ mcp: { targets: [{ name: 'everything', mcp: { host: legacyOnly.url } }] } }] },
        { name: 'mux', matches: [{ path: { pathPrefix: '/mux' } }], backends: [{ mcp: { targets: [{ name: 'a', mcp: { host: both.url } }, { name: 'b', mcp: { host: legacyOnly.url } }] } }] }
      ]
    })
  })
  // The suite's DNS-rebinding scenario needs a localhost URL.
  const gateway = `http://localhost:${portico.port}`
  const revisions: Array<[string, SuiteRun['select']]> = [
    ['2025-06-18', { specVersion: '2025-06-18' }],
    ['2025-11-25', { requirements: '2025-11-25' }],
    ['2026-07-28', { requirements: '2026-07-28' }]
  ]
  for (const [rev, select] of revisions) {
    runs.set(`direct ${rev}`, runSuite({ select, url: both.url }))
    runs.set(`single ${rev}`, runSuite({ select, url: `${gateway}/single/mcp` }))
  }
  runs.set('bridged 2026-07-28', runSuite({ select: { requirements: '2026-07-28' }, url: `${gateway}/bridged/mcp` }))
  runs.set('mux 2025-11-25', runSuite({ select: { requirements: '2025-11-25' }, url: `${gateway}/mux/mcp` }))
  runs.set('mux 2026-07-28', runSuite({ select: { requirements: '2026-07-28' }, url: `${gateway}/mux/mcp` }))
  for (const r of runs.values()) r.catch(() => {})
})

after(async () => {
  await portico?.stop()
  await both?.close()
  await legacyOnly?.close()
})

const result = (name: string) => runs.get(name)!

/** The scenarios that pass in `a` and not in `b` must be exactly `expected` (and none the other way). */
function assertDifferences (a: SuiteResult, b: SuiteResult, expected: Record<string, string>, what: string): void {
  const { lost, gained } = compare(a, b)
  const listed = Object.keys(expected).sort()
  const unexpected = lost.filter(s => !listed.includes(s))
  const details = unexpected.map(s => `${s}: ${b.scenarios.get(s)?.failures.join('; ') ?? 'not run'}`).join('\n')
  assert.deepEqual(unexpected, [], `${what}: scenarios the server passes but not through Portico:\n${details}`)
  assert.deepEqual(listed.filter(s => !lost.includes(s)), [], `${what}: listed as expected differences but no longer differ — take them off the list`)
  assert.deepEqual(gained, [], `${what}: passes through Portico but not directly?`)
}

for (const rev of ['2025-06-18', '2025-11-25', '2026-07-28']) {
  test(`the fixture server passes every scored scenario of ${rev} directly`, { timeout: 300_000 }, async () => {
    const direct = await result(`direct ${rev}`)
    const failing = [...direct.scenarios].filter(([, o]) => !o.passed).map(([n]) => n)
    const unexpected = failing.filter(n => !(n in DIRECT_FAILURES))
    assert.deepEqual(unexpected, [], unexpected.map(n => `${n}: ${direct.scenarios.get(n)!.failures.join('; ')}`).join('\n'))
    assert.ok(direct.scenarios.size > 10, `only ${direct.scenarios.size} scenarios ran:\n${direct.summary}`)
  })

  test(`one target through Portico: the same verdicts as direct (${rev})`, { timeout: 300_000 }, async () => {
    assertDifferences(await result(`direct ${rev}`), await result(`single ${rev}`), {}, `single target, ${rev}`)
  })
}

test('2026-07-28 clients bridged to an initialize-era server: only the listed differences', { timeout: 300_000 }, async () => {
  assertDifferences(await result('direct 2026-07-28'), await result('bridged 2026-07-28'), BRIDGED, 'bridged, 2026-07-28')
})

for (const rev of ['2025-11-25', '2026-07-28']) {
  test(`two targets behind one route: only the name-prefix differences (${rev})`, { timeout: 300_000 }, async () => {
    assertDifferences(await result(`direct ${rev}`), await result(`mux ${rev}`), MULTIPLEXED[rev]!, `multiplexed, ${rev}`)
  })
}

test('the suite runs in reasonable time', { timeout: 300_000 }, async () => {
  const all = await Promise.all([...runs.values()])
  const slowest = Math.max(...all.map(r => r.seconds))
  assert.ok(slowest < 120, `the slowest suite run took ${slowest.toFixed(1)} s`)
})
