/**
 * HTTP/2 attacks on a Portico listener (h2c with prior knowledge; the same HTTP/2 server
 * code serves h2 on HTTPS): raw frames written by hand, and a well-behaved client on another
 * connection that must keep being served meanwhile.
 *
 * - Rapid reset (CVE-2023-44487): streams opened and reset at once, by the thousand.
 * - CONTINUATION flood (CVE-2024-27983 and kin): a header block that never ends.
 * - HPACK bomb: a small header block that decompresses to megabytes by referencing one big
 *   dynamic-table entry over and over.
 * - Too many concurrent streams: more than SETTINGS_MAX_CONCURRENT_STREAMS opened at once.
 * Each must be refused (stream or connection error, GOAWAY) without the backend seeing the
 * attack's requests, and without starving the other client.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { FLAG, FRAME, frame, getRequest, hpack, openRawH2 } from '../lib/h2-frames.ts'

let backend: Backend
let portico: PorticoProcess
let backendRequests = 0

before(async () => {
  backend = await startBackend((req, res) => {
    backendRequests++
    // Slow enough that concurrent streams pile up.
    setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'), req.url === '/slow' ? 200 : 0)
  })
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'all', backends: [{ host: backend.host }] }]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

/** The well-behaved client: it must get its answers while an attack runs. */
async function probe (): Promise<number> {
  const session = http2.connect(`http://127.0.0.1:${portico.port}`)
  session.on('error', () => {})
  try {
    const start = performance.now()
    for (let i = 0; i < 5; i++) {
      await new Promise<void>((resolve, reject) => {
        const stream = session.request({ ':path': '/probe', ':authority': 'gw.test' })
        stream.on('response', h => assert.equal(h[':status'], 200))
        stream.resume()
        stream.on('end', resolve)
        stream.on('error', reject)
      })
    }
    return performance.now() - start
  } finally {
    session.destroy()
  }
}

test('rapid reset: thousands of streams opened and reset at once end the attacker\'s connection; others are served', { timeout: 60_000 }, async () => {
  const baseline = await probe()
  const h2 = await openRawH2(portico.port)
  const before = backendRequests
  const block = getRequest('/reset', 'gw.test')
  const probing = (async () => { await new Promise(resolve => setTimeout(resolve, 50)); return await probe() })()
  let sent = 0
  for (let id = 1; id < 2 * 20_000 && !h2.isClosed(); id += 2) {
    const ok = await h2.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, block), frame(FRAME.RST_STREAM, 0, id, Buffer.from([0, 0, 0, 8]))]))
    if (!ok) break
    sent++
  }
  const during = await probing
  await Promise.race([h2.closed, new Promise(resolve => setTimeout(resolve, 5000))])
  assert.ok(h2.isClosed() || h2.goaway() !== null, `the attacker's connection is still open after ${sent} reset streams`)
  // Reset streams must not become backend requests by the thousand.
  // Cut after ~100 streams (Portico's premature-reset rule): a few hundred at most, never thousands.
  assert.ok(backendRequests - before < 400, `${backendRequests - before} backend requests from reset streams`)
  assert.ok(during < Math.max(baseline * 50, 2000), `probe took ${during.toFixed(0)} ms during the attack (baseline ${baseline.toFixed(0)} ms)`)
})

test('CONTINUATION flood: a header block that never ends is cut off', { timeout: 60_000 }, async () => {
  const h2 = await openRawH2(portico.port)
  await h2.write(frame(FRAME.HEADERS, 0, 1, getRequest('/cont', 'gw.test')))
  const filler = frame(FRAME.CONTINUATION, 0, 1, hpack.literal('x-filler', 'a'.repeat(1000)))
  let bytes = 0
  while (!h2.isClosed() && bytes < 64 * 1024 * 1024) {
    if (!await h2.write(filler)) break
    bytes += filler.length
  }
  await Promise.race([h2.closed, new Promise(resolve => setTimeout(resolve, 5000))])
  assert.ok(h2.isClosed(), `still open after ${bytes} bytes of CONTINUATION`)
  assert.ok(bytes < 16 * 1024 * 1024, `the server read ${bytes} bytes of one header block before cutting it`)
  assert.ok(await probe() < 5000)
})

test('HPACK bomb: one big table entry referenced a thousand times is refused, not expanded', { timeout: 60_000 }, async () => {
  const before = backendRequests
  const h2 = await openRawH2(portico.port)
  const big = hpack.incremental('x-bomb', 'b'.repeat(3900))
  // Index 62: the first dynamic-table entry (the one just added).
  const refs = Buffer.concat(Array.from({ length: 1000 }, () => hpack.indexed(62)))
  const block = getRequest('/bomb', 'gw.test', [big, refs])
  assert.ok(block.length < 16 * 1024, 'the block itself is small')
  await h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block))
  await Promise.race([h2.closed, new Promise(resolve => setTimeout(resolve, 3000))])
  const reset = h2.frames.find(f => f.type === FRAME.RST_STREAM && f.stream === 1)
  const answered = h2.frames.find(f => f.type === FRAME.HEADERS && f.stream === 1)
  assert.ok(h2.isClosed() || h2.goaway() !== null || reset !== undefined || answered !== undefined, 'no answer at all to the bomb')
  if (answered !== undefined) {
    // An answer is fine only as a refusal (431), never as a proxied request.
    assert.notEqual(answered.payload[0], 0x88, 'a 200 for a 3.9 MB header list')
  }
  assert.equal(backendRequests - before, 0, 'the bomb reached the backend')
  h2.socket.destroy()
  assert.ok(await probe() < 5000)
})

test('more concurrent streams than SETTINGS_MAX_CONCURRENT_STREAMS: the extra ones are refused', { timeout: 60_000 }, async () => {
  const h2 = await openRawH2(portico.port)
  const block = getRequest('/slow', 'gw.test')
  const frames: Buffer[] = []
  for (let i = 0; i < 300; i++) frames.push(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1 + 2 * i, block))
  await h2.write(Buffer.concat(frames))
  const refusedNow = (): number => h2.frames.filter(f => f.type === FRAME.RST_STREAM && f.payload.readUInt32BE(0) === 7 /* REFUSED_STREAM */).length
  await waitUntil(() => refusedNow() > 0 || h2.goaway() !== null || h2.isClosed(), 10_000, 'streams past the limit refused or the connection closed')
  const refused = refusedNow()
  const answered = new Set(h2.frames.filter(f => f.type === FRAME.HEADERS).map(f => f.stream)).size
  assert.ok(answered <= 100 || h2.goaway() !== null, `${answered} streams served at once (limit 100)`)
  assert.ok(refused > 0 || h2.goaway() !== null || h2.isClosed(), 'streams past the limit were neither refused nor the connection closed')
  h2.socket.destroy()
})
