/**
 * Clients that reset their connection (issue 49): at any point — right after connecting,
 * after waiting for the 408 of a silent connection, in the middle of a request head or body,
 * with a request in flight, on HTTP/1.1, h2c, TLS and h2 — a reset is the client's business.
 * It must never surface as an uncaught exception (the gateway used to log one stack trace at
 * error level per connection that was reset after its 408 on a plain-HTTP listener, where the
 * h2c preface sniffing had already let go of the socket; and one per upgrade request pipelined
 * behind a request still being answered, whose socket Node hands over without its error
 * listener).
 *
 * Thousands of connections on loopback, in bounded batches; then the gateway's stdout has no
 * line at error level and neither stream has a stack trace.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { selfSignedCert } from '@portico/testkit/test-ca'
import { FLAG, FRAME, frame, getRequest } from '../lib/h2-frames.ts'

const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
/** Total connections, and how many are open at once. */
const CONNECTIONS = 5_000
const BATCH = 100
/** The listeners' request-head limit: short, so waiting for the 408 costs little. */
const HEAD_TIMEOUT_MS = 200

let dir: string
let backend: Backend
let portico: PorticoProcess
let tlsPort: number

before(async () => {
  dir = makeTempDir('portico-e2e-resets-')
  // An EC key: thousands of handshakes stay cheap.
  selfSignedCert(dir, 'localhost', { key: 'ec', files: { cert: 'cert.pem', key: 'key.pem' } })
  // Slow enough that a request is still in flight when its client resets.
  backend = await startBackend((req, res) => {
    req.resume()
    req.on('end', () => setTimeout(() => res.end('ok'), 20))
  })
  tlsPort = await freePort()
  const timeout = { http: { requestHeadersTimeout: `${HEAD_TIMEOUT_MS}ms` } }
  portico = await startPortico({
    dir,
    env: { LOG_LEVEL: 'info' },
    config: port => ({
      gateways: {
        plain: { port, address: '127.0.0.1', timeout },
        secure: { port: tlsPort, protocol: 'HTTPS', address: '127.0.0.1', timeout, tls: { cert: 'cert.pem', key: 'key.pem' } }
      },
      routes: [{ name: 'all', gateways: ['plain', 'secure'], backends: [{ host: backend.host }] }]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

/** When the client resets: what it sends first, then what it waits for. */
interface Kind {
  name: string
  tls?: 'http/1.1' | 'h2'
  send?: string | Buffer
  /** Reset once the received text matches (the 408), or after `afterMs`. */
  until?: RegExp
  afterMs?: number
}

const h2Request = Buffer.concat([
  Buffer.from(PREFACE, 'latin1'),
  frame(FRAME.SETTINGS, 0, 0),
  frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, getRequest('/x', 'gw.test'))
])

const KINDS: Kind[] = [
  { name: 'connect, reset' },
  { name: 'silent until the 408, reset', until: /^HTTP\/1\.1 408 / },
  { name: 'half a request head until the 408, reset', send: 'GET /x HTTP/1.1\r\nHo', until: /^HTTP\/1\.1 408 / },
  { name: 'half a request head, reset', send: 'GET /x HTTP/1.1\r\nHo', afterMs: 5 },
  { name: 'request in flight, reset', send: 'GET /x HTTP/1.1\r\nHost: gw.test\r\n\r\n', afterMs: 5 },
  { name: 'half a body, reset', send: 'POST /x HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 100\r\n\r\nabc', afterMs: 5 },
  { name: 'an upgrade pipelined behind a request in flight, reset', send: 'GET /x HTTP/1.1\r\nHost: gw.test\r\n\r\nGET /x HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n', afterMs: 5 },
  { name: 'h2c stream in flight, reset', send: h2Request, afterMs: 5 },
  { name: 'half the h2c preface, reset', send: PREFACE.slice(0, 10), afterMs: 5 },
  { name: 'TLS, silent until the 408, reset', tls: 'http/1.1', until: /^HTTP\/1\.1 408 / },
  { name: 'TLS, request in flight, reset', tls: 'http/1.1', send: 'GET /x HTTP/1.1\r\nHost: gw.test\r\n\r\n', afterMs: 5 },
  { name: 'TLS, half a body, reset', tls: 'http/1.1', send: 'POST /x HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 100\r\n\r\nabc', afterMs: 5 },
  { name: 'h2, stream in flight, reset', tls: 'h2', send: h2Request, afterMs: 5 },
  { name: 'TLS handshake begun, reset', tls: 'http/1.1', afterMs: -1 }
]

/** One connection of `kind`, reset (RST) by the client; resolves once it is closed. */
async function resetConnection (kind: Kind): Promise<void> {
  await new Promise<void>(resolve => {
    const raw: Socket = connect({ host: '127.0.0.1', port: kind.tls === undefined ? portico.port : tlsPort })
    raw.on('error', () => {})
    let done = false
    const timer = setTimeout(() => reset(), 5_000)
    const reset = (): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      // resetAndDestroy needs the TCP handle: a TLS connection is reset underneath its TLS socket.
      if (!raw.destroyed) raw.resetAndDestroy()
      resolve()
    }
    raw.once('close', () => reset())
    raw.once('connect', () => {
      if (kind.tls === undefined) return start(raw)
      const secure = tlsConnect({ socket: raw, servername: 'localhost', rejectUnauthorized: false, ALPNProtocols: [kind.tls] })
      secure.on('error', () => {})
      // The client hello is on its way: reset in the middle of the handshake.
      if (kind.afterMs === -1) return setImmediate(reset)
      secure.once('secureConnect', () => start(secure))
    })
    function start (socket: Socket): void {
      let text = ''
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1')
        if (kind.until?.test(text) === true) reset()
      })
      if (kind.send !== undefined) socket.write(kind.send)
      if (kind.until === undefined) {
        if (kind.afterMs === undefined) reset()
        else setTimeout(reset, kind.afterMs)
      }
    }
  })
}

test(`${CONNECTIONS} connections reset by their clients at every stage log nothing at error level and no stack trace`, { timeout: 180_000 }, async () => {
  const fromStdout = portico.stdout.length
  const fromStderr = portico.stderr.length
  for (let started = 0; started < CONNECTIONS; started += BATCH) {
    const batch: Array<Promise<void>> = []
    for (let i = started; i < Math.min(started + BATCH, CONNECTIONS); i++) batch.push(resetConnection(KINDS[i % KINDS.length]!))
    await Promise.all(batch)
  }
  // Let the gateway notice the last resets (and its head deadline fire on what is left).
  await new Promise(resolve => setTimeout(resolve, HEAD_TIMEOUT_MS * 3))
  const stdout = portico.stdout.slice(fromStdout)
  const stderr = portico.stderr.slice(fromStderr)
  const errors = stdout.split('\n').filter(line => /"level":(5\d|6\d)\b/.test(line))
  assert.deepEqual(errors.slice(0, 3), [], `${errors.length} error-level lines`)
  assert.doesNotMatch(stdout + stderr, /\n\s+at [^\n]+:\d+:\d+|\\n\s+at [^"]+:\d+:\d+/, 'a stack trace was printed')
  assert.equal(stderr.trim(), '', stderr.slice(0, 2_000))
  assert.equal(portico.exit, null, 'the gateway is still running')
  // And it still serves.
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: portico.port })
    let text = ''
    socket.on('data', (c: Buffer) => { text += c.toString('latin1') })
    socket.on('error', reject)
    socket.on('close', () => resolve(text))
    socket.write('GET /x HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n')
  })
  assert.match(answer, /^HTTP\/1\.1 200 /)
})
