/**
 * Slow clients (issue 14, item 8): a request body that trickles in held a backend connection
 * for as long as the client liked, and a request head could take a minute. Now a streamed
 * body that goes quiet for `timeout.http.requestBodyIdleTimeout` gets 408 and its backend
 * call is cut (the backend sees its request aborted), and a head not complete within
 * `timeout.http.requestHeadersTimeout` gets 408 and the connection is closed.
 *
 * Raw sockets write exact bytes, so the client controls every pause.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { gateway, startPortico, type PorticoProcess } from '../lib/portico.ts'
import { deferred, sleep, startBackend, withTimeout, type Backend } from '../lib/backends.ts'

const IDLE_MS = 500

/** Connects, writes `head`, and collects what comes back until the server closes. */
function openRaw (port: number): { socket: Socket, received: () => string, closed: Promise<number> } {
  const socket = connect({ host: '127.0.0.1', port })
  socket.setNoDelay(true)
  let text = ''
  socket.on('data', (c: Buffer) => { text += c.toString('latin1') })
  socket.on('error', () => {})
  const closed = new Promise<number>(resolve => socket.once('close', () => resolve(performance.now())))
  return { socket, received: () => text, closed }
}

describe('security: slow clients', () => {
  let portico: PorticoProcess
  let backend: Backend
  /** Settles when the backend's current upload request ends: 'complete' or 'aborted'. */
  let upload = deferred<'complete' | 'aborted'>()

  before(async () => {
    backend = await startBackend((req, res) => {
      let done = false
      req.on('end', () => {
        done = true
        upload.resolve('complete')
        res.end('stored')
      })
      req.on('close', () => { if (!done) upload.resolve('aborted') })
      req.resume()
    })
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port, { timeout: { http: { requestBodyIdleTimeout: `${IDLE_MS}ms`, requestHeadersTimeout: '1s' } } }) },
        routes: [{ name: 'upload', backends: [{ host: backend.host }] }]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await backend?.close()
  })

  test('a body that stops arriving gets 408 and its backend request is aborted', { timeout: 20_000 }, async () => {
    upload = deferred()
    const raw = openRaw(portico.port)
    raw.socket.write('POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 100\r\n\r\nab')
    const lastByte = performance.now()
    // The client now goes quiet (as one sending a byte every 10 s would be).
    const closedAt = await withTimeout(raw.closed, 10_000, `connection still open; received ${JSON.stringify(raw.received())}`)
    assert.match(raw.received(), /^HTTP\/1\.1 408 /, raw.received())
    assert.match(raw.received(), /request body timeout/)
    // Generous bounds on a loaded machine: not before the idle timeout, well before "minutes".
    const waited = closedAt - lastByte
    assert.ok(waited >= IDLE_MS * 0.8, `answered after ${waited.toFixed(0)} ms, before the ${IDLE_MS} ms idle timeout`)
    assert.ok(waited < IDLE_MS * 12, `answered after ${waited.toFixed(0)} ms`)
    // The backend's connection was released: its request ended without the body.
    assert.equal(await withTimeout(upload.promise, 5_000, 'the backend request is still open'), 'aborted')
    // The access log says why (it is written in batches: wait for it).
    await portico.waitForOutput(/"status":408[^\n]*"error":"request body idle timeout/, { timeoutMs: 5_000 })
  })

  test('a body whose bytes keep coming, each within the idle timeout, is not cut', { timeout: 20_000 }, async () => {
    upload = deferred()
    const raw = openRaw(portico.port)
    const chunks = 8
    raw.socket.write(`POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: ${chunks}\r\nConnection: close\r\n\r\n`)
    // In all longer than the idle timeout, but never quiet for that long.
    for (let i = 0; i < chunks; i++) {
      await sleep(IDLE_MS / 4)
      raw.socket.write('x')
    }
    await withTimeout(raw.closed, 10_000, 'no answer')
    assert.match(raw.received(), /^HTTP\/1\.1 200 /, raw.received())
    assert.equal(await upload.promise, 'complete')
  })

  test('a request head that never completes gets 408 and the connection is closed', { timeout: 20_000 }, async () => {
    const raw = openRaw(portico.port)
    raw.socket.write('GET / HTTP/1.1\r\nHost: gw.test\r\n')
    const started = performance.now()
    // A header line every 200 ms: the connection is never idle, the head never ends.
    const trickle = setInterval(() => { if (!raw.socket.destroyed) raw.socket.write('X-Slow: y\r\n') }, 200)
    try {
      const closedAt = await withTimeout(raw.closed, 15_000, 'the slow head is still being read')
      assert.ok(closedAt - started < 10_000, `closed after ${(closedAt - started).toFixed(0)} ms`)
    } finally {
      clearInterval(trickle)
    }
    assert.match(raw.received(), /^HTTP\/1\.1 408 /, raw.received())
  })

  test('the gateway still serves after the slow clients', { timeout: 10_000 }, async () => {
    upload = deferred()
    const raw = openRaw(portico.port)
    raw.socket.write('POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok')
    await withTimeout(raw.closed, 5_000, 'no answer')
    assert.match(raw.received(), /^HTTP\/1\.1 200 [\s\S]*stored$/, raw.received())
  })
})
