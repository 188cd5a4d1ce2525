/** grpc-timeout parsing (gRPC over HTTP/2's TimeoutValue and TimeoutUnit). */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { grpcTimeoutMs } from '../src/http/call-timers.ts'

test('grpc-timeout: digits and a unit, anything else ignored', () => {
  assert.equal(grpcTimeoutMs('150m'), 150)
  assert.equal(grpcTimeoutMs('2S'), 2000)
  assert.equal(grpcTimeoutMs('1M'), 60_000)
  assert.equal(grpcTimeoutMs('1H'), 3_600_000)
  assert.equal(grpcTimeoutMs('5000u'), 5)
  assert.equal(grpcTimeoutMs('99999999n'), 99.999999)
  for (const bad of [undefined, '', '10', 'm', '123456789m', '1.5S', '-1S', '10s']) assert.equal(grpcTimeoutMs(bad), undefined, String(bad))
})
