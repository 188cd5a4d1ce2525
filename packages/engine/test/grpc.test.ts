/** gRPC helpers: grpc-timeout parsing (gRPC over HTTP/2), content types and the gRPC-Web trailer frame. */

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

test('content types: gRPC, binary gRPC-Web, and what is neither', async () => {
  const { grpcKind, grpcContentTypeOf, grpcWebTrailerFrame } = await import('../src/http/grpc.ts')
  assert.equal(grpcKind('application/grpc'), 'grpc')
  assert.equal(grpcKind('application/grpc+proto'), 'grpc')
  assert.equal(grpcKind('application/grpc;charset=utf-8'), 'grpc')
  assert.equal(grpcKind('application/grpc-web'), 'grpc-web')
  assert.equal(grpcKind('application/grpc-web+proto'), 'grpc-web')
  for (const other of [undefined, 'application/json', 'application/grpcx', 'application/grpc-web-text', 'application/grpc-webx']) assert.equal(grpcKind(other), null, String(other))
  assert.equal(grpcContentTypeOf('application/grpc-web+proto'), 'application/grpc+proto')
  assert.equal(grpcContentTypeOf('application/grpc-web'), 'application/grpc')
  const frame = grpcWebTrailerFrame({ 'grpc-status': '0', 'X-Multi': ['a', 'b'], skipped: undefined })
  assert.equal(frame[0], 0x80)
  assert.equal(frame.readUInt32BE(1), frame.length - 5)
  assert.equal(frame.subarray(5).toString('latin1'), 'grpc-status:0\r\nx-multi:a\r\nx-multi:b\r\n')
})
