/**
 * How the mesh reads in porticoctl (and, through @portico/trace-view, in the web UI): a mesh
 * backend's ENDPOINT, and `proxy mesh`'s state lines for every state.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { backendTargetText, meshExpiryText, meshTone, relativeText } from '@portico/trace-view'
import { backendsTable } from '../src/config/format.ts'
import { meshText } from '../src/mesh/command.ts'

const ECHO = 'spiffe://cluster.local/ns/apps/sa/echo'
const mesh = (identity: string) => ({ identity, hbonePort: 15008 })

test('a mesh backend\'s ENDPOINT: hbone → the identity its peer must present, then the target', () => {
  const b = { key: 'http://127.0.0.1:8080', kind: 'static', name: '127.0.0.1:8080', target: '127.0.0.1:8080', endpoints: [{ host: '127.0.0.1', port: 8080, mesh: mesh(ECHO) }], stats: { requests: 2, failures: 0, health: 1, latencyMs: 1.5 } }
  assert.equal(backendTargetText(b), `hbone → ${ECHO} (127.0.0.1:8080)`)
  assert.equal(backendsTable({ backends: [b] }).split('\n')[1], `Backend   127.0.0.1:8080   -           hbone → ${ECHO} (127.0.0.1:8080)   1.00     2          1.5ms`)
})

test('several mesh endpoints: each identity once; only some in the mesh says how many', () => {
  const other = 'spiffe://cluster.local/ns/apps/sa/other'
  const service = (endpoints: unknown[]) => ({ kind: 'service', target: 'web.apps:80', endpoints })
  assert.equal(backendTargetText(service([{ host: 'a', port: 80, mesh: mesh(ECHO) }, { host: 'b', port: 80, mesh: mesh(ECHO) }])), `hbone → ${ECHO} (web.apps:80)`)
  assert.equal(backendTargetText(service([{ host: 'a', port: 80, mesh: mesh(ECHO) }, { host: 'b', port: 80, mesh: mesh(other) }])), `hbone → ${ECHO}, ${other} (web.apps:80)`)
  assert.equal(backendTargetText(service([{ host: 'a', port: 80, mesh: mesh(ECHO) }, { host: 'b', port: 80 }])), `hbone → ${ECHO} (1 of 2 endpoints) (web.apps:80)`)
  // No mesh endpoint (or a malformed one from another version): the plain target.
  assert.equal(backendTargetText(service([{ host: 'a', port: 80 }, null, { mesh: { identity: 7 } }])), 'web.apps:80')
})

const NOW = Date.parse('2026-12-05T12:00:00.000Z')

test('proxy mesh: a ready identity — state, SPIFFE ID, expiry with how long until, source', () => {
  const text = meshText({ source: 'files', state: 'ready', spiffeId: 'spiffe://cluster.local/ns/gw/sa/portico', notAfter: '2026-12-06T13:30:00.000Z', files: { cert: '/etc/mesh/cert.pem' } }, { now: NOW })
  assert.equal(text, [
    'STATE:     ready',
    'IDENTITY:  spiffe://cluster.local/ns/gw/sa/portico',
    'EXPIRES:   2026-12-06T13:30:00.000Z (in 1d 1h)',
    'SOURCE:    files /etc/mesh/cert.pem',
    ''
  ].join('\n'))
})

test('proxy mesh: failed and pending show the reason; ready with failing renewals too', () => {
  const failed = meshText({ source: 'ca', state: 'failed', reason: 'CA unreachable: mesh CA istiod.istio-system.svc:15012: connect ECONNREFUSED', spiffeId: 'spiffe://cluster.local/ns/gw/sa/portico', ca: { address: 'istiod.istio-system.svc:15012' } }, { now: NOW })
  assert.match(failed, /^STATE: {5}failed\n/)
  assert.match(failed, /\nEXPIRES: {3}-\n/)
  assert.match(failed, /\nSOURCE: {4}istiod CA istiod\.istio-system\.svc:15012\n/)
  assert.match(failed, /\nREASON: {4}CA unreachable: mesh CA istiod\.istio-system\.svc:15012: connect ECONNREFUSED\n$/)
  assert.match(meshText({ source: 'ca', state: 'pending' }, { now: NOW }), /^STATE: {5}pending\nIDENTITY: {2}-\n/)
  assert.match(meshText({ source: 'ca', state: 'ready', reason: 'renewal failing: token refused', notAfter: '2026-12-05T11:59:00.000Z' }, { now: NOW }), /EXPIRES: {3}2026-12-05T11:59:00\.000Z \(expired 1m ago\)\n.*\nREASON: {4}renewal failing: token refused\n$/s)
})

test('proxy mesh: no mesh configured (or a proxy without it) says so', () => {
  assert.equal(meshText({ source: 'none' }), 'STATE:  not configured (no config.mesh, MESH_ENABLED not set)\n')
  assert.equal(meshText(null), 'STATE:  not configured (no config.mesh, MESH_ENABLED not set)\n')
})

test('on a terminal STATE has the UI badge\'s colour: ready green, pending yellow, failed red', () => {
  assert.equal(meshTone('ready'), 'ok')
  assert.equal(meshTone('pending'), 'warn')
  assert.equal(meshTone('failed'), 'bad')
  assert.match(meshText({ source: 'ca', state: 'ready' }, { colour: true }), /^STATE: {5}\x1b\[32mready\x1b\[39m\n/)
  assert.match(meshText({ source: 'ca', state: 'pending' }, { colour: true }), /\x1b\[33mpending/)
  assert.match(meshText({ source: 'ca', state: 'failed' }, { colour: true }), /\x1b\[31mfailed/)
})

test('relative times: the two largest units', () => {
  assert.equal(relativeText(0), 'in 0s')
  assert.equal(relativeText(45_000), 'in 45s')
  assert.equal(relativeText(90 * 60_000), 'in 1h 30m')
  assert.equal(relativeText(-(3 * 86_400_000 + 5_000)), 'expired 3d ago')
  assert.equal(meshExpiryText('not a date'), 'not a date')
  assert.equal(meshExpiryText(undefined), '-')
})
