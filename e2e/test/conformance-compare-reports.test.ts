/**
 * The check scripts/conformance runs after each suite run: the committed report still
 * describes the code when a fresh run agrees with it on every result, whatever its date.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { compareReports } from '../conformance/compare-reports.ts'
import { REPO_ROOT } from '@portico/testkit/portico'

const committedFile = join(REPO_ROOT, 'conformance/reports/v1.6.3/standard-gateway-http.yaml')
const committed = (): Record<string, any> => parse(readFileSync(committedFile, 'utf8'))

test('a fresh report that differs only in date, version and profile order agrees', () => {
  const fresh = committed()
  fresh.date = '2031-01-01T00:00:00Z'
  fresh.implementation.version = '9.9.9'
  fresh.profiles.reverse()
  fresh.profiles[0].extended.supportedFeatures?.reverse()
  assert.deepEqual(compareReports(committed(), fresh), [])
})

test('a test that now fails, a feature gained or lost, a count changed: each named', () => {
  const fresh = committed()
  const http = fresh.profiles.find((p: { name: string }) => p.name === 'GATEWAY-HTTP')
  http.core.statistics.Passed -= 1
  http.core.statistics.Failed += 1
  http.core.result = 'failure'
  http.core.failedTests = ['HTTPRouteSimpleSameNamespace']
  http.extended.supportedFeatures = [...http.extended.supportedFeatures.slice(1), 'GatewayListenerFilters']
  const differences = compareReports(committed(), fresh)
  assert.ok(differences.includes('profiles.GATEWAY-HTTP.core.result: "success" → "failure"'), differences.join('\n'))
  assert.ok(differences.some(d => d.startsWith('profiles.GATEWAY-HTTP.core.statistics.Failed: 0 → 1')), differences.join('\n'))
  assert.ok(differences.includes('profiles.GATEWAY-HTTP.core.failedTests: now also ["HTTPRouteSimpleSameNamespace"]'), differences.join('\n'))
  const features = differences.find(d => d.startsWith('profiles.GATEWAY-HTTP.extended.supportedFeatures:'))
  assert.match(features ?? '', /no longer \[".+"\]; now also \["GatewayListenerFilters"\]/)
})

test('the command exits 1 with the differences, 0 when the reports agree', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-compare-'))
  try {
    const same = committed()
    same.date = '2031-01-01T00:00:00Z'
    writeFileSync(join(dir, 'same.yaml'), stringify(same))
    const other = committed()
    other.profiles.pop()
    writeFileSync(join(dir, 'other.yaml'), stringify(other))
    const script = join(REPO_ROOT, 'e2e/conformance/compare-reports.ts')
    const ok = spawnSync(process.execPath, [script, committedFile, join(dir, 'same.yaml')], { encoding: 'utf8' })
    assert.equal(ok.status, 0, ok.stderr)
    const bad = spawnSync(process.execPath, [script, committedFile, join(dir, 'other.yaml')], { encoding: 'utf8' })
    assert.equal(bad.status, 1)
    assert.match(bad.stderr, /is not what this code gives/)
    assert.match(bad.stderr, /profiles\.GATEWAY-\w+: \{/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
