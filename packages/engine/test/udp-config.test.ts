/**
 * UDP gateways and udpRoutes in a standalone file: a valid file becomes stream routes of kind
 * `udp` with the gateway's flow settings; what can never work is refused at load with
 * `file:line:col: field: why`.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'

function load (yaml: string) {
  return loadConfigText(yaml, { baseDir: '/', readFile: () => '' })
}

function errors (yaml: string): string[] {
  const result = load(yaml)
  assert.equal(result.ok, false, 'expected the config to be rejected')
  if (result.ok) return []
  return result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
}

test('a UDP gateway with udpRoutes: the first route with its backends by weight, the flow settings on the listener', () => {
  const result = load([
    'gateways:',
    '  dns: {port: 5353, protocol: UDP, udp: {idleTimeout: 30s, maxFlows: 100}}',
    'udpRoutes:',
    '  - {name: resolvers, gateways: dns, backends: [{host: "10.0.0.1:53", weight: 3}, {endpoints: ["10.0.0.2:53", "10.0.0.3:53"]}]}'
  ].join('\n'))
  assert.ok(result.ok, JSON.stringify(!result.ok && result.diagnostics))
  if (!result.ok) return
  const bind = result.config.ir.binds.find(b => b.port === 5353)!
  assert.equal(bind.protocol, 'UDP')
  const listener = bind.listeners[0]!
  assert.deepEqual(listener.udp, { idleTimeoutMs: 30_000, maxFlows: 100 })
  assert.deepEqual(listener.streamRoutes, [{
    key: 'udp:resolvers',
    name: 'resolvers',
    kind: 'udp',
    hostnames: [],
    backends: [
      { backend: 'udp://10.0.0.1:53', weight: 3, policies: {} },
      { backend: 'udp://10.0.0.2:53,10.0.0.3:53', weight: 1, policies: {} }
    ],
    order: 0
  }])
  assert.deepEqual(result.config.ir.backends.find(b => b.key === 'udp://10.0.0.1:53')?.endpoints, [{ host: '10.0.0.1', port: 53 }])
})

test('udpRoutes attach only to UDP gateways, and other routes not to them', () => {
  const out = errors([
    'gateways:',
    '  dns: {port: 5353, protocol: UDP}',
    '  raw: {port: 9000, protocol: TCP}',
    'routes:',
    '  - {gateways: dns, backends: [{host: "http://10.0.0.9:80"}]}',
    'tcpRoutes:',
    '  - {gateways: dns, backends: [{host: "10.0.0.1:53"}]}',
    'udpRoutes:',
    '  - {gateways: raw, backends: [{host: "10.0.0.1:53"}]}'
  ].join('\n'))
  assert.ok(out.some(e => /routes\[0\].*protocol UDP: it forwards datagrams, not HTTP requests \(use udpRoutes\)/.test(e)), out.join('\n'))
  assert.ok(out.some(e => /tcpRoutes\[0\].*protocol UDP; tcpRoutes attach to TCP or TLS gateways \(datagrams go in udpRoutes\)/.test(e)), out.join('\n'))
  assert.ok(out.some(e => /udpRoutes\[0\].*protocol TCP; udpRoutes attach to UDP gateways/.test(e)), out.join('\n'))
})

test('what a UDP gateway cannot use is refused, and so is udp on another protocol', () => {
  const out = errors([
    'gateways:',
    '  dns: {port: 5353, protocol: UDP, hostname: a.test, timeout: {http: {requestHeadersTimeout: 5s}}}',
    '  dns2: {port: 5353, protocol: UDP}',
    '  web: {port: 8080, udp: {maxFlows: 10}}',
    'udpRoutes:',
    '  - {gateways: dns, backends: [{host: "udp://10.0.0.1:53"}]}'
  ].join('\n'))
  assert.ok(out.some(e => /gateways\.dns\.hostname.*a datagram carries no name/.test(e)), out.join('\n'))
  assert.ok(out.some(e => /gateways\.dns\.timeout.*datagrams are forwarded/.test(e)), out.join('\n'))
  assert.ok(out.some(e => /gateways\.dns2.*a UDP port serves one gateway/.test(e)), out.join('\n'))
  assert.ok(out.some(e => /gateways\.web\.udp.*only used with protocol UDP/.test(e)), out.join('\n'))
  assert.ok(out.some(e => /udpRoutes\[0\]\.backends\[0\]\.host.*a UDP backend is host:port/.test(e)), out.join('\n'))
})
