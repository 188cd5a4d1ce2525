/**
 * The mesh CA identity's timing and reasons without a CA (the real istiod is in
 * e2e/test/mesh-identity.test.ts): when a certificate is renewed, the jittered backoff of
 * retries, the CA's server name derived from its address, the reasons a failure gives, and —
 * with a fake clock — a missing token file failing with its reason and retried on schedule.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { caServerName, failureReason, IstioCaIdentity, OUT_OF_MESH_RETRY_MAX_MS, renewalDelay, retryDelay, type Clock, type MeshIdentityStatus } from '../src/mesh/istio-ca-identity.ts'
import { MeshCaError } from '../src/mesh/ca-client.ts'

test('renewal at the configured fraction of the certificate\'s life, never in the past', () => {
  const hour = 3600_000
  assert.equal(renewalDelay(0, 24 * hour, 0, 0.5), 12 * hour)
  assert.equal(renewalDelay(0, 24 * hour, 6 * hour, 0.5), 6 * hour)
  assert.equal(renewalDelay(0, 24 * hour, 0, 0.8), Math.round(0.8 * 24 * hour))
  assert.equal(renewalDelay(0, 24 * hour, 20 * hour, 0.5), 0)
})

test('retries back off from min doubling to max, with half of each wait random', () => {
  assert.equal(retryDelay(1, 1000, 60_000, 0), 500)
  assert.equal(retryDelay(1, 1000, 60_000, 1), 1000)
  assert.equal(retryDelay(3, 1000, 60_000, 1), 4000)
  assert.equal(retryDelay(3, 1000, 60_000, 0.5), 3000)
  assert.equal(retryDelay(20, 1000, 60_000, 1), 60_000)
  assert.equal(retryDelay(2000, 1000, 60_000, 0), 30_000)
})

test('the CA\'s server name: from the address, the cluster suffix dropped; an override wins', () => {
  assert.equal(caServerName('istiod.istio-system.svc:15012'), 'istiod.istio-system.svc')
  assert.equal(caServerName('istiod-canary.mesh.svc.cluster.local:15012'), 'istiod-canary.mesh.svc')
  assert.equal(caServerName('ca.example.com:443'), 'ca.example.com')
  assert.equal(caServerName('10.0.0.1:15012'), '10.0.0.1')
  assert.equal(caServerName('[::1]:15012'), '::1')
  assert.equal(caServerName('127.0.0.1:15012', 'istiod.istio-system.svc'), 'istiod.istio-system.svc')
})

test('failure reasons name the cause: token refused, CA unreachable, CA error', () => {
  assert.match(failureReason(new MeshCaError('mesh CA x: request authenticate failure', 16)).reason, /^token refused: mesh CA x: request authenticate failure \(istiod logs why: a token audience other than istio-ca/)
  assert.equal(failureReason(new MeshCaError('m', 16)).result, 'refused')
  assert.deepEqual(failureReason(new MeshCaError('mesh CA x: No connection established', 14)), { result: 'unreachable', reason: 'CA unreachable: mesh CA x: No connection established' })
  assert.equal(failureReason(new MeshCaError('mesh CA x: Deadline exceeded', 4)).result, 'unreachable')
  assert.deepEqual(failureReason(new MeshCaError('mesh CA x: bad', 13)), { result: 'error', reason: 'CA error: mesh CA x: bad' })
})

/** A clock whose time moves only when the test says; `advance` runs the timers due. */
function fakeClock (): { clock: Clock, advance: (ms: number) => Promise<void>, timers: Array<{ at: number, fn: () => void, id: number }> } {
  let now = 1_000_000
  const timers: Array<{ at: number, fn: () => void, id: number }> = []
  let ids = 0
  const clock: Clock = {
    now: () => now,
    setTimeout: (fn, ms) => { const t = { at: now + ms, fn, id: ++ids }; timers.push(t); return t.id },
    clearTimeout: (h) => { const i = timers.findIndex(t => t.id === h); if (i >= 0) timers.splice(i, 1) }
  }
  async function advance (ms: number): Promise<void> {
    now += ms
    for (const t of timers.filter(t => t.at <= now)) {
      timers.splice(timers.indexOf(t), 1)
      t.fn()
    }
    await new Promise(resolve => setImmediate(resolve))
  }
  return { clock, advance, timers }
}

test('with a fake clock: a missing token fails with its reason, retried with backoff, stopped cleanly', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-mesh-id-'))
  const { clock, advance, timers } = fakeClock()
  writeFileSync(join(dir, 'root.pem'), 'not used')
  const calls: string[] = []
  const id = new IstioCaIdentity({
    settings: { address: '127.0.0.1:1', trustDomain: 'cluster.local', clusterId: 'Kubernetes', namespace: 'gw', serviceAccount: 'portico', tokenFile: join(dir, 'token'), rootFile: join(dir, 'root.pem'), retryMinMs: 1000, retryMaxMs: 8000 },
    clock,
    random: () => 1,
    onCall: r => calls.push(r)
  })
  const states: MeshIdentityStatus[] = []
  id.on('state', s => states.push(s))
  try {
    assert.equal(id.spiffeId, 'spiffe://cluster.local/ns/gw/sa/portico')
    assert.deepEqual(id.state(), { state: 'pending', reason: 'waiting for the first certificate from the mesh CA' })
    id.start()
    await advance(0)
    assert.equal(id.state().state, 'failed')
    assert.match(id.state().reason!, /^token unreadable: ENOENT.* \(a projected service-account token with audience istio-ca at .*token\)$/)
    assert.equal(id.current(), null)
    assert.deepEqual(calls, ['error'])
    assert.equal(states.length, 1, 'one state change')
    // Retries at 1 s, then 2 s, 4 s, 8 s, 8 s (random = 1: the full wait).
    for (const [i, wait] of [1000, 2000, 4000, 8000, 8000].entries()) {
      await advance(wait - 1)
      assert.equal(calls.length, i + 1, `not before ${wait} ms`)
      await advance(1)
    }
    assert.equal(calls.length, 6)
    assert.equal(states.length, 1, 'the same reason is no new state')
  } finally {
    id.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  assert.equal(timers.length, 0, 'stop clears the timer')
  assert.throws(() => new IstioCaIdentity({ settings: { address: 'a:1', trustDomain: 'cluster.local', clusterId: 'K', namespace: 'Bad_NS', serviceAccount: 'sa', tokenFile: 't', rootFile: 'r' } }), /namespace "Bad_NS" is not a DNS-1123 name/)
})

test('without a valid certificate retries come at least every 10 s, whatever the backoff\'s maximum', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-mesh-id-'))
  const { clock, advance } = fakeClock()
  writeFileSync(join(dir, 'root.pem'), 'not used')
  const calls: string[] = []
  const id = new IstioCaIdentity({
    // The default maximum (60 s): out of the mesh it would otherwise grow to a minute.
    settings: { address: '127.0.0.1:1', trustDomain: 'cluster.local', clusterId: 'Kubernetes', namespace: 'gw', serviceAccount: 'portico', tokenFile: join(dir, 'token'), rootFile: join(dir, 'root.pem') },
    clock,
    random: () => 1,
    onCall: r => calls.push(r)
  })
  try {
    id.start()
    await advance(0)
    assert.equal(calls.length, 1)
    for (const [i, wait] of [1000, 2000, 4000, 8000, OUT_OF_MESH_RETRY_MAX_MS, OUT_OF_MESH_RETRY_MAX_MS, OUT_OF_MESH_RETRY_MAX_MS].entries()) {
      await advance(wait - 1)
      assert.equal(calls.length, i + 1, `not before ${wait} ms`)
      await advance(1)
      assert.equal(calls.length, i + 2, `at ${wait} ms`)
    }
  } finally {
    id.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})
