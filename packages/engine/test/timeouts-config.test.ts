/**
 * The defaults that bound every wait (docs/configuration.md#timeouts): a gateway's
 * `timeout.http` fields and a route's `policies.timeout` overrides reach the IR with `off`
 * (and the Gateway API's `0s`) as 0, a config that sets none keeps its IR, and the listener's
 * settings fill in the defaults. The runtime side is e2e/test/security-slow-client.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'
import { frontendSettings, DEFAULT_BACKEND_REQUEST_TIMEOUT_MS, DEFAULT_REQUEST_BODY_MIN_RATE, DEFAULT_STREAM_IDLE_TIMEOUT_MS } from '../src/http/frontend.ts'

function load (gatewayExtra: string, routePolicies: string) {
  const text = `gateways:\n  default: {port: 3000${gatewayExtra}}\nroutes:\n  - name: r\n    policies: ${routePolicies}\n    backends: [{host: "127.0.0.1:8080"}]\n`
  const result = loadConfigText(text, { baseDir: '/' })
  assert.ok(result.ok, result.ok ? '' : result.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n'))
  const listener = result.config.ir.binds[0]!.listeners[0]!
  return { frontend: listener.frontend, route: listener.routes[0]!.timeouts }
}

test('gateway defaults and route overrides reach the IR; off and 0s are 0 (no limit)', () => {
  const set = load(', timeout: {http: {requestBodyMinRate: 1000, backendRequestTimeout: 20m, streamIdleTimeout: "off"}}',
    '{timeout: {backendRequestTimeout: 0s, requestBodyIdleTimeout: 30s, requestBodyMinRate: 0, streamIdleTimeout: 1h}}')
  assert.deepEqual(set.frontend, { requestBodyMinRate: 1000, backendRequestTimeoutMs: 1_200_000, streamIdleTimeoutMs: 0 })
  assert.deepEqual(set.route, { backendRequestMs: 0, requestBodyIdleMs: 30_000, requestBodyMinRate: 0, streamIdleMs: 3_600_000 })
  assert.deepEqual(frontendSettings(set.frontend), { ...frontendSettings(undefined), requestBodyMinRate: 1000, backendRequestTimeoutMs: 1_200_000, streamIdleTimeoutMs: 0 })
})

test('a config that sets none keeps its IR, and the listener gets the defaults', () => {
  const none = load('', '{}')
  assert.equal(none.frontend, undefined)
  assert.equal(none.route, undefined)
  const defaults = frontendSettings(undefined)
  assert.equal(defaults.requestBodyMinRate, DEFAULT_REQUEST_BODY_MIN_RATE)
  assert.equal(defaults.backendRequestTimeoutMs, DEFAULT_BACKEND_REQUEST_TIMEOUT_MS)
  assert.equal(defaults.streamIdleTimeoutMs, DEFAULT_STREAM_IDLE_TIMEOUT_MS)
})

test('a rate that is not a whole number of bytes, or a duration that is not one, is refused with its position', () => {
  const result = loadConfigText('gateways:\n  default:\n    port: 3000\n    timeout: {http: {requestBodyMinRate: -1, streamIdleTimeout: soon}}\n', { baseDir: '/' })
  assert.equal(result.ok, false)
  const lines = result.ok ? [] : result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
  assert.ok(lines.some(l => /^c\.yaml:4:\d+: gateways\.default\.timeout\.http\.requestBodyMinRate: /.test(l)), lines.join('\n'))
  assert.ok(lines.some(l => /^c\.yaml:4:\d+: gateways\.default\.timeout\.http\.streamIdleTimeout: /.test(l)), lines.join('\n'))
})
