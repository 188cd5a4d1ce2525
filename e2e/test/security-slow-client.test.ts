/**
 * Slow clients (issue 14, item 8): a request body that trickles in held a backend connection
 * for as long as the client liked, and a request head could take a minute. Now a streamed
 * body that goes quiet for `timeout.http.requestBodyIdleTimeout` gets 408 and its backend
 * call is cut (the backend sees its request aborted), and a head not complete within
 * `timeout.http.requestHeadersTimeout` gets 408 and the connection is closed.
 *
 * Issue 49: every wait has a default bound (docs/configuration.md#timeouts). A body that is
 * never quiet for the idle timeout but trickles (a byte every 50 ms here, every 2 s in the
 * report) falls below `requestBodyMinRate` and gets 408; a backend that sends its head and
 * then stalls has its stream cut after `streamIdleTimeout` (HTTP/1.1: closed without the last
 * chunk; HTTP/2: the stream reset) and its connection closed; a backend that never answers
 * gets 504 after the gateway's `backendRequestTimeout`; and an SSE stream whose keep-alives
 * come within the idle timeout outlives it many times over. Bodies read whole before any
 * backend is called (retries, an LLM backend, MCP) are under the same body limits.
 *
 * Raw sockets write exact bytes, so the client controls every pause.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import http2 from 'node:http2'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { deferred, sleep, withTimeout } from '@portico/testkit/wait'

const IDLE_MS = 500
/** The stalling and SSE routes' `streamIdleTimeout`. */
const STREAM_IDLE_MS = 400
/** The gateway's default `backendRequestTimeout` in this file. */
const BACKEND_WAIT_MS = 1000

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
  /** Answers /stall, /never and /sse: a head then nothing, nothing at all, keep-alives. */
  let streams: Backend
  /** Settles when the backend's current upload request ends: 'complete' or 'aborted'. */
  let upload = deferred<'complete' | 'aborted'>()
  /** Settles when the streams backend's current response closes: 'finished' or 'cut'. */
  let streamEnd = deferred<'finished' | 'cut'>()

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
    streams = await startBackend((req, res) => {
      res.on('close', () => streamEnd.resolve(res.writableFinished ? 'finished' : 'cut'))
      if (req.url === '/stall') {
        // The head and a first chunk, then silence, the connection left open.
        res.writeHead(200, { 'content-type': 'text/plain' })
        res.write('partial')
      } else if (req.url === '/sse') {
        // Keep-alive comments every quarter of the idle timeout, for 4 idle timeouts.
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
        res.write('data: start\n\n')
        let sent = 0
        const timer = setInterval(() => {
          if (++sent < 16) {
            res.write(': keep-alive\n\n')
            return
          }
          clearInterval(timer)
          res.end('data: done\n\n')
        }, STREAM_IDLE_MS / 4)
        res.on('close', () => clearInterval(timer))
      }
      // /never: no answer at all.
    })
    const stream = { timeout: { streamIdleTimeout: `${STREAM_IDLE_MS}ms` } }
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port, { timeout: { http: { requestBodyIdleTimeout: `${IDLE_MS}ms`, requestHeadersTimeout: '1s', backendRequestTimeout: `${BACKEND_WAIT_MS}ms` } } }) },
        routes: [
          { name: 'stall', matches: [{ path: { exact: '/stall' } }], policies: stream, backends: [{ host: streams.host }] },
          { name: 'sse', matches: [{ path: { exact: '/sse' } }], policies: stream, backends: [{ host: streams.host }] },
          { name: 'never', matches: [{ path: { exact: '/never' } }], backends: [{ host: streams.host }] },
          // Bodies read whole before a backend is called: for retries, and by an LLM backend.
          { name: 'replayed', matches: [{ path: { exact: '/replayed' } }], policies: { retry: { attempts: 1 } }, backends: [{ host: backend.host }] },
          { name: 'llm', matches: [{ path: { exact: '/v1/chat/completions' } }], backends: [{ ai: { name: 'llm', provider: { openAI: {} }, hostOverride: backend.host } }] },
          { name: 'mcp', matches: [{ path: { exact: '/mcp' } }], backends: [{ mcp: { targets: [{ name: 'never-called', mcp: { host: `http://${backend.host}/mcp` } }] } }] },
          // A route for slow devices: no minimum rate (the idle timeout still applies).
          { name: 'devices', matches: [{ path: { exact: '/devices' } }], policies: { timeout: { requestBodyMinRate: 0 } }, backends: [{ host: backend.host }] },
          { name: 'upload', backends: [{ host: backend.host }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await backend?.close()
    await streams?.close()
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

  test('a body whose bytes keep coming, each within the idle timeout and above the minimum rate, is not cut, though it lasts longer than the default wait for the answer', { timeout: 20_000 }, async () => {
    upload = deferred()
    const raw = openRaw(portico.port)
    // 200 bytes every 125 ms: 1,600 bytes/s, over requestBodyMinRate's default 240, for 1.75 s:
    // longer than the default wait for the answer too, which starts when the body is in.
    const chunks = 14
    const chunk = 'x'.repeat(200)
    raw.socket.write(`POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: ${chunks * chunk.length}\r\nConnection: close\r\n\r\n`)
    // In all longer than the idle timeout, but never quiet for that long.
    for (let i = 0; i < chunks; i++) {
      await sleep(IDLE_MS / 4)
      raw.socket.write(chunk)
    }
    await withTimeout(raw.closed, 10_000, 'no answer')
    assert.match(raw.received(), /^HTTP\/1\.1 200 /, raw.received())
    assert.equal(await upload.promise, 'complete')
  })

  test('a body that trickles, never quiet for the idle timeout but below the minimum rate, gets 408 and its backend request is aborted', { timeout: 20_000 }, async () => {
    upload = deferred()
    const raw = openRaw(portico.port)
    raw.socket.write('POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 100000\r\n\r\n')
    // A byte every 50 ms: 20 bytes/s, never 500 ms quiet (the report's client: a byte every 2 s).
    const trickle = setInterval(() => { if (!raw.socket.destroyed) raw.socket.write('x') }, 50)
    try {
      await withTimeout(raw.closed, 10_000, `the trickling body is still being read; received ${JSON.stringify(raw.received())}`)
    } finally {
      clearInterval(trickle)
    }
    assert.match(raw.received(), /^HTTP\/1\.1 408 /, raw.received())
    assert.match(raw.received(), /request body timeout/)
    assert.equal(await withTimeout(upload.promise, 5_000, 'the backend request is still open'), 'aborted')
    await portico.waitForOutput(/"status":408[^\n]*"error":"request body too slow/, { timeoutMs: 5_000 })
  })

  for (const path of ['/replayed', '/v1/chat/completions', '/mcp']) {
    test(`a body read whole before the backend is called (${path}) gets the same 408 when it trickles or goes quiet`, { timeout: 20_000 }, async () => {
      const before = backend.requests.length
      for (const trickle of [true, false]) {
        const raw = openRaw(portico.port)
        // (MCP answers only a local Host: DNS rebinding protection.)
        raw.socket.write(`POST ${path} HTTP/1.1\r\nHost: ${path === '/mcp' ? 'localhost' : 'gw.test'}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{`)
        const timer = trickle ? setInterval(() => { if (!raw.socket.destroyed) raw.socket.write(' ') }, 50) : undefined
        try {
          await withTimeout(raw.closed, 10_000, `the body is still being read; received ${JSON.stringify(raw.received())}`)
        } finally {
          clearInterval(timer)
        }
        assert.match(raw.received(), /^HTTP\/1\.1 408 [\s\S]*request body (timeout|idle timeout|too slow)/i, raw.received())
      }
      assert.equal(backend.requests.length, before, 'no backend was called')
    })
  }

  test('a route that sets requestBodyMinRate: 0 takes the same trickle to the end', { timeout: 20_000 }, async () => {
    upload = deferred()
    const raw = openRaw(portico.port)
    const bytes = 30
    raw.socket.write(`POST /devices HTTP/1.1\r\nHost: gw.test\r\nContent-Length: ${bytes}\r\nConnection: close\r\n\r\n`)
    for (let i = 0; i < bytes; i++) {
      await sleep(50)
      raw.socket.write('x')
    }
    await withTimeout(raw.closed, 10_000, 'no answer')
    assert.match(raw.received(), /^HTTP\/1\.1 200 /, raw.received())
    assert.equal(await upload.promise, 'complete')
  })

  test('a backend that sends its head and stalls: the stream ends without its last chunk and the backend connection is closed', { timeout: 20_000 }, async () => {
    streamEnd = deferred()
    const raw = openRaw(portico.port)
    raw.socket.write('GET /stall HTTP/1.1\r\nHost: gw.test\r\n\r\n')
    await withTimeout(raw.closed, 10_000, `the stalled stream is still open; received ${JSON.stringify(raw.received())}`)
    const text = raw.received()
    assert.match(text, /^HTTP\/1\.1 200 /, text)
    assert.match(text, /transfer-encoding: chunked/i, text)
    assert.match(text, /partial/, text)
    // Truncated: the client can tell the answer is incomplete.
    assert.doesNotMatch(text, /\r\n0\r\n\r\n$/, text)
    assert.equal(await withTimeout(streamEnd.promise, 5_000, 'the backend connection is still open'), 'cut')
    await portico.waitForOutput(/"path":"\/stall"[^\n]*"error":"response stream idle timeout/, { timeoutMs: 5_000 })
  })

  test('over HTTP/2, a stalled stream is reset (RST_STREAM) and the backend connection is closed', { timeout: 20_000 }, async () => {
    streamEnd = deferred()
    const client = http2.connect(`http://127.0.0.1:${portico.port}`)
    client.on('error', () => {})
    try {
      const stream = client.request({ ':path': '/stall', ':authority': 'gw.test' })
      stream.on('error', () => {})
      let body = ''
      let ended = false
      stream.on('data', (c: Buffer) => { body += c.toString() })
      stream.on('end', () => { ended = true })
      const status = await withTimeout(new Promise<number>(resolve => stream.once('response', h => resolve(Number(h[':status'])))), 5_000, 'no response head')
      assert.equal(status, 200)
      await withTimeout(new Promise(resolve => stream.once('close', resolve)), 10_000, 'the stalled h2 stream is still open')
      assert.equal(body, 'partial')
      assert.equal(ended, false, 'the stream ended cleanly: the client cannot tell it was cut')
      assert.notEqual(stream.rstCode, http2.constants.NGHTTP2_NO_ERROR, `rstCode ${stream.rstCode}`)
      assert.equal(await withTimeout(streamEnd.promise, 5_000, 'the backend connection is still open'), 'cut')
    } finally {
      client.close()
    }
  })

  test('a backend that never answers gets 504 after the gateway\'s default backendRequestTimeout', { timeout: 20_000 }, async () => {
    streamEnd = deferred()
    const raw = openRaw(portico.port)
    raw.socket.write('GET /never HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n')
    await withTimeout(raw.closed, 10_000, 'still waiting for the backend')
    assert.match(raw.received(), /^HTTP\/1\.1 504 [\s\S]*upstream call timeout$/, raw.received())
    // The backend's request was given up: its connection closed.
    assert.equal(await withTimeout(streamEnd.promise, 5_000, 'the backend connection is still open'), 'cut')
  })

  test('an SSE stream whose keep-alives come within the idle timeout outlives it four times over', { timeout: 20_000 }, async () => {
    streamEnd = deferred()
    const raw = openRaw(portico.port)
    raw.socket.write('GET /sse HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n')
    await withTimeout(raw.closed, 10_000, 'the SSE stream did not end')
    const text = raw.received()
    assert.match(text, /^HTTP\/1\.1 200 /, text)
    assert.equal(text.match(/: keep-alive/g)?.length, 15, text)
    // Complete: the last event and the terminating chunk.
    assert.match(text, /data: done\n\n\r\n0\r\n\r\n$/, text)
    assert.equal(await streamEnd.promise, 'finished')
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
