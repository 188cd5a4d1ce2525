/**
 * A backend's health (engine/backend-stats.ts) is the weighted share of recent calls that
 * succeeded, exact from the first call: one failed call is 0, not the 0.90 a moving average
 * started at 1 gave.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { BackendStats } from '../src/engine/backend-stats.ts'

function healthAfter (outcomes: boolean[]): number {
  const stats = new BackendStats()
  for (const ok of outcomes) stats.recordCall('b', !ok, 1)
  return Math.round(stats.get('b').health * 100) / 100
}

test('health: the weighted share of recent successes, from the first call on', () => {
  assert.equal(new BackendStats().get('b').health, 1, 'no call: nothing failed')
  assert.equal(healthAfter([false]), 0)
  assert.equal(healthAfter([true]), 1)
  assert.equal(healthAfter([true, false]), 0.47, 'the newer call weighs more (1 against 0.9)')
  assert.equal(healthAfter([false, true]), 0.53)
  assert.equal(healthAfter([...Array(50).fill(true), false]), 0.9, 'one failure after a long good run')
  assert.equal(healthAfter([...Array(50).fill(true), false, ...Array(20).fill(true)]), 0.99, 'and it fades')
  assert.equal(healthAfter([...Array(50).fill(false), ...Array(10).fill(true)]), 0.65, 'recovery shows within about ten calls')
})

test('with passive health, at most the share of endpoints not ejected', () => {
  const stats = new BackendStats()
  stats.endpointHealth = () => ({ healthy: 1, total: 4, ejected: ['a', 'b', 'c'] })
  stats.recordCall('b', false, 1)
  assert.equal(stats.get('b').health, 0.25)
})
