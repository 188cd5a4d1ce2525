/**
 * Header hygiene at the proxy boundary (src/http/headers.ts): which names stay on their own
 * hop, for requests, answers and trailers. The hop-by-hop names are matched by length and
 * value (no Set): every one of them, in the three copies, and names next to them are not.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { endToEndHeaders, responseEndToEnd, trailerFields } from '../src/http/headers.ts'

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'http2-settings', 'expect']
/** Names one character away from a hop-by-hop one, or of the same length: end-to-end. */
const NEAR = ['tf', 'ee', 'trailers', 'traile', 'upgrades', 'expects', 'connectio', 'connections', 'keep-alivf', 'http2-setting', 'proxy-connectiom', 'transfer-encodinh', 'content-length', 'x-te', 'host']

test('hop-by-hop names stay on their hop in a request, an answer and a trailer section; names next to them go on', () => {
  for (const name of HOP_BY_HOP) {
    // `te: trailers` is the one hop-by-hop field a request keeps (gRPC needs it).
    const value = name === 'te' ? 'gzip' : 'x'
    assert.deepEqual(endToEndHeaders({ [name]: value, 'x-a': '1' }), { 'x-a': '1' }, `request ${name}`)
    assert.deepEqual(responseEndToEnd({ [name]: value, 'x-a': '1' }), { 'x-a': '1' }, `answer ${name}`)
    assert.deepEqual(trailerFields({ [name]: value, 'x-a': '1' }), { 'x-a': '1' }, `trailer ${name}`)
  }
  assert.deepEqual(endToEndHeaders({ te: 'trailers', 'x-a': '1' }), { te: 'trailers', 'x-a': '1' })
  for (const name of NEAR) {
    assert.deepEqual(endToEndHeaders({ [name]: 'x' }), { [name]: 'x' }, `request ${name}`)
    assert.deepEqual(responseEndToEnd({ [name]: 'x' }), { [name]: 'x' }, `answer ${name}`)
  }
  // A trailer section also drops framing, routing and pseudo-headers; a clean one is the same object.
  assert.deepEqual(trailerFields({ 'content-length': '1', host: 'h', ':status': '200', 'grpc-status': '0' }), { 'grpc-status': '0' })
  const clean = { 'grpc-status': '0', trailers: 'x', tee: 'y' }
  assert.equal(trailerFields(clean), clean)
  // Names a Connection header lists go too.
  assert.deepEqual(responseEndToEnd({ connection: 'close, x-b', 'x-b': '1', 'x-a': '2' }), { 'x-a': '2' })
  assert.deepEqual(endToEndHeaders({ connection: 'x-b', 'x-b': '1', 'x-a': '2' }), { 'x-a': '2' })
  assert.deepEqual(endToEndHeaders({ ':authority': 'h', 'x-a': '2' }), { 'x-a': '2' })
})
