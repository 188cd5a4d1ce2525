/**
 * `config.tracing` and `config.accessLog` as settings: agentgateway's defaults, the JSON
 * variables cluster mode passes (TRACING, ACCESS_LOG) winning over the file and checked
 * against the schema, a bad CEL field refused at start, export headers (API keys) never
 * shown by /config_dump.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { REDACTED_VALUE } from '@portico/engine'
import { receivedSettings, resolveSettings, transferableSettings } from '../src/settings.ts'
import { staticConfig } from '../src/admin/config-dump.ts'

test('tracing: agentgateway\'s defaults (gRPC, randomSampling false, clientSampling true)', () => {
  const s = resolveSettings({ tracing: { otlpEndpoint: 'http://collector:4317' } }, {}, false)
  assert.deepEqual(s.tracing, { otlpEndpoint: 'http://collector:4317', otlpProtocol: 'grpc', headers: {}, randomSampling: false, clientSampling: true, resources: {} })
  assert.equal(resolveSettings({}, {}, false).tracing, null, 'off unless configured')
})

test('TRACING (JSON) wins over the file and is checked against the schema', () => {
  const s = resolveSettings({ tracing: { otlpEndpoint: 'http://file:4317' } }, { TRACING: '{"otlpEndpoint":"http://env:4318","otlpProtocol":"http","randomSampling":0.25}' }, false)
  assert.equal(s.tracing?.otlpEndpoint, 'http://env:4318')
  assert.equal(s.tracing?.randomSampling, 0.25)
  assert.throws(() => resolveSettings({}, { TRACING: '{"otlpEndpoint":"http://x:1","randomSampling":2}' }, false), /TRACING: .*randomSampling/)
  assert.throws(() => resolveSettings({}, { TRACING: 'not json' }, false), /TRACING: not JSON/)
})

test('accessLog: CEL compiled at start; a bad expression names itself', () => {
  const s = resolveSettings({ accessLog: { fields: { add: { user: 'jwt.sub' }, remove: ['src'] } } }, {}, false)
  assert.equal(s.accessLog.fields?.add[0]?.[0], 'user')
  assert.deepEqual(s.accessLog.fields?.remove, ['src'])
  assert.throws(() => resolveSettings({ accessLog: { fields: { add: { user: 'nope.sub' } } } }, {}, false), /config\.accessLog \/ ACCESS_LOG: invalid CEL expression "nope\.sub": unknown variable "nope"/)
  assert.equal(resolveSettings({}, {}, false).accessLog.fields, null)
})

test('/config_dump shows the export headers\' names, never their values', () => {
  const s = resolveSettings({
    tracing: { otlpEndpoint: 'http://collector:4317', headers: { 'x-api-key': 'secret-trace-key' } },
    accessLog: { otlp: { otlpEndpoint: 'http://collector:4317', headers: { authorization: 'Bearer secret-log-key' } } }
  }, {}, false)
  const dump = JSON.stringify(staticConfig(s))
  assert.doesNotMatch(dump, /secret-trace-key|secret-log-key/)
  const config = staticConfig(s) as { tracing: { headers: Record<string, string> }, accessLog: { otlp: { headers: Record<string, string> } } }
  assert.equal(config.tracing.headers['x-api-key'], REDACTED_VALUE)
  assert.equal(config.accessLog.otlp.headers.authorization, REDACTED_VALUE)
})

test('OTEL_BSP_SCHEDULE_DELAY and OTEL_BLRP_SCHEDULE_DELAY set how long spans and access-log records wait to be handed over; anything but milliseconds stops the start', () => {
  const file = { tracing: { otlpEndpoint: 'http://collector:4317' }, accessLog: { otlp: { otlpEndpoint: 'http://collector:4317' } } }
  const s = resolveSettings(file, { OTEL_BSP_SCHEDULE_DELAY: '250', OTEL_BLRP_SCHEDULE_DELAY: '50' }, false)
  assert.equal(s.tracing?.scheduledDelayMs, 250)
  assert.equal(s.accessLog.otlp?.scheduledDelayMs, 50)
  const plain = resolveSettings(file, {}, false)
  assert.equal(plain.tracing?.scheduledDelayMs, undefined)
  assert.equal(plain.accessLog.otlp?.scheduledDelayMs, undefined)
  assert.equal(resolveSettings({}, { OTEL_BSP_SCHEDULE_DELAY: '250' }, false).tracing, null, 'no tracing, nothing to delay')
  // A data-plane worker gets them too (its settings cross as a structured clone).
  const worker = receivedSettings(structuredClone(transferableSettings(s)))
  assert.equal(worker.tracing?.scheduledDelayMs, 250)
  assert.equal(worker.accessLog.otlp?.scheduledDelayMs, 50)
  for (const bad of ['-1', '1.5', '5s', '99999999']) {
    assert.throws(() => resolveSettings(file, { OTEL_BSP_SCHEDULE_DELAY: bad }, false), /OTEL_BSP_SCHEDULE_DELAY: .* is not a number of milliseconds/)
  }
})
