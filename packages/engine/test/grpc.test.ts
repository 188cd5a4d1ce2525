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
  assert.equal(grpcKind('application/grpc-web-text'), 'grpc-web-text')
  assert.equal(grpcKind('application/grpc-web-text+proto'), 'grpc-web-text')
  for (const other of [undefined, 'application/json', 'application/grpcx', 'application/grpc-webx', 'application/grpc-web-textx']) assert.equal(grpcKind(other), null, String(other))
  assert.equal(grpcContentTypeOf('application/grpc-web-text+proto'), 'application/grpc+proto')
  assert.equal(grpcContentTypeOf('application/grpc-web+proto'), 'application/grpc+proto')
  assert.equal(grpcContentTypeOf('application/grpc-web'), 'application/grpc')
  const frame = grpcWebTrailerFrame({ 'grpc-status': '0', 'X-Multi': ['a', 'b'], skipped: undefined })
  assert.equal(frame[0], 0x80)
  assert.equal(frame.readUInt32BE(1), frame.length - 5)
  assert.equal(frame.subarray(5).toString('latin1'), 'grpc-status:0\r\nx-multi:a\r\nx-multi:b\r\n')
})

test('Base64Stream: chunks split anywhere decode and encode as the whole would', async () => {
  const { Base64Stream } = await import('../src/http/grpc.ts')
  const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251))
  const text = bytes.toString('base64')
  for (const cut of [1, 2, 3, 5, 7, 64]) {
    const d = new Base64Stream()
    const parts: Buffer[] = []
    for (let i = 0; i < text.length; i += cut) parts.push(d.decode(Buffer.from(text.slice(i, i + cut))))
    assert.ok(Buffer.concat(parts).equals(bytes), `decode in ${cut}-char chunks`)
    const e = new Base64Stream()
    let out = ''
    for (let i = 0; i < bytes.length; i += cut) out += e.encode(bytes.subarray(i, i + cut))
    out += e.flush()
    assert.equal(out, text, `encode in ${cut}-byte chunks`)
  }
  // Two padded segments back to back (grpc-web-text frames encoded one by one).
  const d = new Base64Stream()
  assert.equal(d.decode(Buffer.from(Buffer.from('ab').toString('base64') + Buffer.from('cde').toString('base64'))).toString(), 'abcde')
})

test('grpc-message: only bytes outside 0x20-0x7E and % are percent-encoded, after UTF-8 (the gRPC spec)', async () => {
  const { grpcMessageEncode } = await import('../src/http/grpc.ts')
  assert.equal(grpcMessageEncode('no route: /a/b?c=d#e'), 'no route: /a/b?c=d#e')
  assert.equal(grpcMessageEncode('upstream connect error: ECONNREFUSED 127.0.0.1:1'), 'upstream connect error: ECONNREFUSED 127.0.0.1:1')
  assert.equal(grpcMessageEncode('100% done'), '100%25 done')
  assert.equal(grpcMessageEncode('a\r\nb\tc\x7f'), 'a%0D%0Ab%09c%7F')
  assert.equal(grpcMessageEncode('café ✓'), 'caf%C3%A9 %E2%9C%93')
  assert.equal(grpcMessageEncode(''), '')
  // Every printable ASCII byte but % stays as it is; what grpc-js decodes (decodeURI) gives the text back.
  let printable = ''
  for (let c = 0x20; c <= 0x7e; c++) if (c !== 0x25) printable += String.fromCharCode(c)
  assert.equal(grpcMessageEncode(printable), printable)
  for (const text of ['no route: x', '100% done', 'café ✓ a\nb']) assert.equal(decodeURIComponent(grpcMessageEncode(text)), text)
})
