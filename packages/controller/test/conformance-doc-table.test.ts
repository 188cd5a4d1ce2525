/**
 * docs/conformance.md's table of every Gateway API v1.7.0 feature stays true:
 * - it has one row per FeatureName of conformance/v1.7.0-features.json (written from the Go
 *   module by `node scripts/gateway-api-features.ts`, so CI needs no Go module cache), with
 *   the list's channel and test count;
 * - its Portico column says "yes" exactly for the features SUPPORTED_FEATURES claims, and
 *   claimed names that are not v1.7.0's (v1.6's, kept for the v1.6.3 suite) are explained;
 * - where the v1.7.0 reports are committed, its run counts are the reports' (so regenerating
 *   the reports after a new claim makes this fail until the table follows).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { SUPPORTED_FEATURES } from '../src/features.ts'

const ROOT = new URL('../../../', import.meta.url)
const DOC = fileURLToPath(new URL('docs/conformance.md', ROOT))
const LIST = fileURLToPath(new URL('conformance/v1.7.0-features.json', ROOT))
const REPORTS = fileURLToPath(new URL('conformance/reports/v1.7.0/', ROOT))
const HEADING = '## Every v1.7.0 feature beside agentgateway and Envoy Gateway'

interface FeatureEntry { name: string, channel: string, profiles: Record<string, 'core' | 'extended'>, tests: string[] }
interface TestEntry { shortName: string, features: string[] }
interface FeatureList { features: FeatureEntry[], tests: TestEntry[] }
interface Row { name: string, channel: string, profiles: string, tests: string, portico: string, run: string }

const list = JSON.parse(readFileSync(LIST, 'utf8')) as FeatureList

function section (): string {
  const doc = readFileSync(DOC, 'utf8')
  const start = doc.indexOf(`\n${HEADING}\n`)
  assert.ok(start >= 0, `docs/conformance.md has no section "${HEADING}"`)
  const end = doc.indexOf('\n## ', start + HEADING.length + 1)
  return doc.slice(start, end < 0 ? undefined : end)
}

function rows (text: string): Row[] {
  return text.split('\n').filter(line => line.startsWith('| `')).map(line => {
    const cells = line.slice(1, line.endsWith('|') ? -1 : undefined).split(' | ').map(c => c.trim())
    const [feature, channel, profiles, tests, portico, run] = cells
    assert.ok(cells.length === 9 && run !== undefined && portico !== undefined && tests !== undefined && profiles !== undefined && channel !== undefined,
      `row with ${cells.length} cells, not 9: ${line}`)
    const name = feature?.match(/^`([^`]+)`$/)?.[1]
    assert.ok(name !== undefined, `first cell is not a \`FeatureName\`: ${line}`)
    return { name, channel, profiles, tests, portico, run }
  })
}

test('the feature list is consistent: each feature\'s tests are the tests that need it', () => {
  assert.ok(list.features.length > 0 && list.tests.length > 0)
  const names = new Set(list.features.map(f => f.name))
  for (const t of list.tests) for (const f of t.features) assert.ok(names.has(f), `${t.shortName} needs unknown ${f}`)
  for (const f of list.features) {
    assert.deepEqual(f.tests, list.tests.filter(t => t.features.includes(f.name)).map(t => t.shortName), f.name)
  }
})

test('docs/conformance.md: one row per v1.7.0 feature, with its channel and test count', () => {
  const table = rows(section())
  const seen = new Map<string, number>()
  for (const r of table) seen.set(r.name, (seen.get(r.name) ?? 0) + 1)
  for (const [name, n] of seen) assert.equal(n, 1, `${name} has ${n} rows`)
  const names = list.features.map(f => f.name)
  assert.deepEqual(names.filter(n => !seen.has(n)), [], 'features of v1.7.0 missing from the table (node scripts/gateway-api-features.ts wrote the list)')
  assert.deepEqual([...seen.keys()].filter(n => !names.includes(n)), [], 'rows for names that are not v1.7.0 features')
  for (const r of table) {
    const f = list.features.find(x => x.name === r.name)!
    assert.equal(r.channel, f.channel, `${r.name}: channel`)
    assert.equal(r.tests, String(f.tests.length), `${r.name}: suite tests`)
  }
})

test('docs/conformance.md: the Portico column is SUPPORTED_FEATURES', () => {
  const text = section()
  for (const r of rows(text)) {
    assert.match(r.portico, /^(yes|no)\b/, `${r.name}: Portico cell must start with yes or no`)
    const claimed = SUPPORTED_FEATURES.includes(r.name)
    assert.equal(r.portico.startsWith('yes'), claimed, `${r.name}: the table says ${r.portico}, SUPPORTED_FEATURES ${claimed ? 'claims' : 'does not claim'} it`)
  }
  // Claimed names v1.7.0 does not have (v1.6's) must be explained in the section.
  const v17 = new Set(list.features.map(f => f.name))
  for (const f of SUPPORTED_FEATURES.filter(f => !v17.has(f))) {
    assert.ok(text.includes(`\`${f}\``), `SUPPORTED_FEATURES claims ${f}, not a v1.7.0 feature: say why in the section`)
  }
})

interface Profile {
  name: string
  core: { statistics: { Passed: number }, failedTests?: string[], skippedTests?: string[] }
  extended?: { statistics: { Passed: number }, failedTests?: string[], skippedTests?: string[], supportedFeatures?: string[] }
}

/**
 * Per feature, the tests needing it that ran and passed in a report's run: a test runs when
 * every feature it needs is claimed (the suite's rule); a report shows the claims as its
 * profiles (core features) and their `supportedFeatures`. Checked against the report's own
 * per-profile statistics, so a wrong model fails here rather than giving wrong counts.
 */
function runCounts (file: string): Map<string, number> {
  const report = parse(readFileSync(file, 'utf8')) as { profiles: Profile[] }
  const claimed = new Set<string>()
  const notPassed = new Set<string>()
  for (const p of report.profiles) {
    for (const f of list.features) if (f.profiles[p.name] === 'core') claimed.add(f.name)
    for (const f of p.extended?.supportedFeatures ?? []) claimed.add(f)
    for (const part of [p.core, p.extended]) for (const t of [...part?.failedTests ?? [], ...part?.skippedTests ?? []]) notPassed.add(t)
  }
  const passed = list.tests.filter(t => t.features.every(f => claimed.has(f)) && !notPassed.has(t.shortName))
  for (const p of report.profiles) {
    const level = (f: string): string | undefined => list.features.find(x => x.name === f)?.profiles[p.name]
    const inProfile = passed.filter(t => t.features.every(f => level(f) !== undefined))
    const core = inProfile.filter(t => t.features.every(f => level(f) === 'core')).length
    assert.equal(core, p.core.statistics.Passed, `${file} ${p.name}: core tests counted here vs the report`)
    assert.equal(inProfile.length - core, p.extended?.statistics.Passed ?? 0, `${file} ${p.name}: extended tests counted here vs the report`)
  }
  return new Map(list.features.map(f => [f.name, passed.filter(t => t.features.includes(f.name)).length]))
}

test('docs/conformance.md: the v1.7.0 run column is the committed reports\'', t => {
  const files = ['standard', 'experimental'].map(c => `${REPORTS}${c}-gateway-http.yaml`)
  if (!files.every(existsSync)) {
    t.skip('no conformance/reports/v1.7.0/ in this checkout')
    return
  }
  const [standard, experimental] = files.map(runCounts)
  assert.ok(standard !== undefined && experimental !== undefined)
  for (const r of rows(section())) {
    const f = list.features.find(x => x.name === r.name)!
    const gatewayProfile = Object.keys(f.profiles).some(p => p.startsWith('GATEWAY-'))
    if (!gatewayProfile && !r.name.startsWith('Mesh')) {
      assert.equal(r.run, '—', `${r.name} is in no GATEWAY-* profile: no report counts its tests`)
      continue
    }
    const want: string = `${standard.get(r.name)} / ${experimental.get(r.name)}`
    assert.equal(r.run, want, `${r.name}: the reports give ${want} (standard / experimental)`)
  }
})
