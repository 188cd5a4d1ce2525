/**
 * A hostile or broken backend cannot split responses through Portico (RFC 9112 §6, the
 * HTTP/1.1 client's strict parser, http/h1-response-parser.ts): a response framed two ways
 * (Content-Length and Transfer-Encoding, differing Content-Lengths), with a folded header
 * line or bare LFs, is answered 502 and its bytes go nowhere; bytes a backend sends after a
 * complete response never become the answer to the next request on that connection.
 *
 * The backend is a raw TCP server answering each request line with exact bytes.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import net from 'node:net'
import http2 from 'node:http2'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { nodeRequest, rawExchange } from '@portico/testkit/client'
import { waitUntil } from '@portico/testkit/wait'
import { startRawBackend, type RawBackend } from '../lib/raw-backend.ts'

const ANSWERS: Record<string, string> = {
  '/ok': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
  '/both': 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled',
  '/two-lengths': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 30\r\n\r\nokHTTP/1.1 200 OK\r\n\r\nsmuggled',
  '/folded': 'HTTP/1.1 200 OK\r\nx-a: 1\r\n x-injected: 1\r\ncontent-length: 2\r\n\r\nok',
  '/bare-lf': 'HTTP/1.1 200 OK\nx-a: 1\ncontent-length: 2\n\nok',
  // A complete response, then a second one nobody asked for.
  '/extra': 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirstHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled'
}

describe('security: responses a backend cannot split', () => {
  let portico: PorticoProcess
  let backend: RawBackend

  before(async () => {
    backend = await startRawBackend((path, socket) => { socket.write(ANSWERS[path] ?? ANSWERS['/ok']!) })
    const host = backend.host
    portico = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host }] }] }) })
  })

  after(async () => {
    await portico?.stop()
    backend?.server.close()
  })

  for (const path of ['/both', '/two-lengths', '/folded', '/bare-lf']) {
    test(`${path}: 502, nothing of it reaches the client, the next request gets its own answer`, async () => {
      const res = await nodeRequest({ port: portico.port, path })
      assert.equal(res.status, 502)
      assert.match(res.text, /invalid response from backend/)
      assert.doesNotMatch(res.text, /smuggled/)
      assert.equal(res.headers['x-injected'], undefined)
      const next = await nodeRequest({ port: portico.port, path: '/ok' })
      assert.equal(next.status, 200)
      assert.equal(next.text, 'ok')
    })
  }

  test('bytes after a complete response end that connection: the next request is not answered with them', async () => {
    const first = await nodeRequest({ port: portico.port, path: '/extra' })
    assert.equal(first.text, 'first')
    const before = backend.connections()
    for (let i = 0; i < 3; i++) {
      const next = await nodeRequest({ port: portico.port, path: '/ok' })
      assert.equal(next.text, 'ok', 'never the smuggled answer')
    }
    assert.ok(backend.connections() > before, 'the connection that carried extra bytes was not reused')
  })
})

/**
 * What a hostile backend's head and framing become for the client (RFC 9112 §4, §7.1; RFC
 * 9110 §6.5.1, §8.6): a status outside 100–599 is a 502, not an interim answer nor a code
 * passed on; a framing error before the first body byte is a 502 the client gets and the
 * access log names (the head is written with the first body byte, so nothing is out yet);
 * a 204/304 goes out without Content-Length/Transfer-Encoding; framing and hop-by-hop fields
 * in trailers are dropped.
 *
 * The backend is a raw TCP server; an answer given as several parts is written with 100 ms
 * between them (a head before its body, as a streaming backend sends it).
 */
const HOSTILE: Record<string, string | string[]> = {
  '/ok': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
  '/status-099': 'HTTP/1.1 099 Odd\r\ncontent-length: 2\r\n\r\nok',
  '/status-000': 'HTTP/1.1 000 Zero\r\ncontent-length: 2\r\n\r\nok',
  '/status-600': 'HTTP/1.1 600 Beyond\r\ncontent-length: 2\r\n\r\nok',
  '/status-999': 'HTTP/1.1 999 Beyond\r\ncontent-length: 2\r\n\r\nok',
  '/status-2000': 'HTTP/1.1 2000 OK\r\ncontent-length: 2\r\n\r\nok',
  '/status-20': 'HTTP/1.1 20 OK\r\ncontent-length: 2\r\n\r\nok',
  '/long-extension': `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;${'x'.repeat(20_000)}\r\nhello\r\n0\r\n\r\n`,
  '/chunk-overflow': 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffffffff\r\nhello\r\n0\r\n\r\n',
  '/chunk-overflow-later': ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n', 'fffffffffffffffffff\r\nhello\r\n0\r\n\r\n'],
  '/short-body': ['HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n'],
  // A stream whose first event is long in coming: its head must not wait for it.
  '/quiet-stream': ['HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'],
  '/no-content': 'HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nx-kept: 1\r\n\r\n',
  '/no-content-chunked': 'HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\nx-kept: 1\r\n\r\n',
  '/not-modified': 'HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\netag: "a"\r\n\r\n',
  '/trailers': 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-checksum\r\n\r\n2\r\nok\r\n0\r\ncontent-length: 99\r\ntransfer-encoding: chunked\r\nconnection: close\r\nkeep-alive: timeout=1\r\nhost: evil.test\r\nx-checksum: abc\r\n\r\n'
}

describe('security: a hostile backend\'s status line, framing and trailers', () => {
  let portico: PorticoProcess
  let backend: RawBackend

  before(async () => {
    backend = await startRawBackend((path, socket) => {
      const answer = HOSTILE[path] ?? HOSTILE['/ok']!
      const parts = typeof answer === 'string' ? [answer] : answer
      parts.forEach((part, i) => setTimeout(() => socket.destroyed || socket.write(part), i * 100))
      // A short body ends with the connection.
      if (path === '/short-body') setTimeout(() => socket.end(), 100)
    })
    const host = backend.host
    portico = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [
      // Portico's own 204/304 follow the same rule as a backend's.
      { name: 'local-204', matches: [{ path: { exact: '/local-no-content' } }], policies: { directResponse: { status: 204, body: 'ignored' } } },
      { name: 'local-304', matches: [{ path: { exact: '/local-not-modified' } }], policies: { directResponse: { status: 304 } } },
      { name: 'all', backends: [{ host }] }
    ] }) })
  })

  after(async () => {
    await portico?.stop()
    backend?.server.close()
  })

  /** The access log line of the one request to `path`, once it is written (lines go out in batches). */
  async function accessLine (path: string): Promise<Record<string, unknown>> {
    const find = () => portico.logs().find(l => l.msg === 'request' && l.path === path)
    await waitUntil(() => find() !== undefined, 5_000, `an access log line for ${path}`)
    return find()!
  }

  for (const path of ['/status-099', '/status-000', '/status-600', '/status-999', '/status-2000', '/status-20']) {
    test(`${path}: a status outside 100–599 (or not three digits) is a 502, at once`, async () => {
      const reply = await rawExchange(portico.port, `GET ${path} HTTP/1.1\r\nhost: gw.test\r\nconnection: close\r\n\r\n`, 3_000)
      assert.match(reply, /^HTTP\/1\.1 502 /)
      assert.equal((await accessLine(path)).status, 502)
    })
  }

  for (const path of ['/long-extension', '/chunk-overflow', '/chunk-overflow-later']) {
    test(`${path}: a framing error before the first body byte is a 502 the client gets and the access log says`, async () => {
      const reply = await rawExchange(portico.port, `GET ${path} HTTP/1.1\r\nhost: gw.test\r\nconnection: close\r\n\r\n`, 3_000)
      assert.match(reply, /^HTTP\/1\.1 502 /)
      assert.doesNotMatch(reply, /hello/)
      assert.equal((await accessLine(path)).status, 502)
    })
  }

  test('a backend that closes after its head, before any body byte: the client gets the proxy\'s 503 and the log says 503', async () => {
    const reply = await rawExchange(portico.port, 'GET /short-body HTTP/1.1\r\nhost: gw.test\r\nconnection: close\r\n\r\n', 3_000)
    assert.match(reply, /^HTTP\/1\.1 503 /)
    assert.equal((await accessLine('/short-body')).status, 503)
  })

  test('a stream\'s head (text/event-stream) still reaches the client before its first byte of body (HTTP/1.1 and HTTP/2)', async () => {
    const head = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(portico.port, '127.0.0.1')
      let got = ''
      const timer = setTimeout(() => { socket.destroy(); reject(new Error(`no head within 2 s: ${JSON.stringify(got)}`)) }, 2_000)
      socket.on('error', reject)
      socket.on('data', (d: Buffer) => {
        got += d.toString('latin1')
        if (!got.includes('\r\n\r\n')) return
        clearTimeout(timer)
        socket.destroy()
        resolve(got)
      })
      socket.write('GET /quiet-stream HTTP/1.1\r\nhost: gw.test\r\n\r\n')
    })
    assert.match(head, /^HTTP\/1\.1 200 /)
    const session = http2.connect(`http://127.0.0.1:${portico.port}`)
    session.on('error', () => {})
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':path': '/quiet-stream', ':authority': 'gw.test' })
        stream.setTimeout(2_000, () => reject(new Error('no HTTP/2 head within 2 s')))
        stream.on('response', h => resolve(Number(h[':status'])))
        stream.on('error', reject)
      })
      assert.equal(status, 200)
    } finally {
      session.destroy()
    }
  })

  for (const path of ['/no-content', '/no-content-chunked', '/not-modified', '/local-no-content', '/local-not-modified']) {
    test(`${path}: a 204/304 reaches the client without Content-Length or Transfer-Encoding (HTTP/1.1 and HTTP/2)`, async () => {
      const reply = await rawExchange(portico.port, `GET ${path} HTTP/1.1\r\nhost: gw.test\r\nconnection: close\r\n\r\n`, 3_000)
      const head = reply.slice(0, reply.indexOf('\r\n\r\n')).toLowerCase()
      assert.match(head, /^http\/1\.1 (204|304) /)
      assert.doesNotMatch(head, /\r\ncontent-length:/)
      assert.doesNotMatch(head, /\r\ntransfer-encoding:/)
      assert.equal(reply.slice(reply.indexOf('\r\n\r\n') + 4), '', 'no body')
      const h2 = await h2Get(portico.port, path)
      assert.ok([204, 304].includes(Number(h2.headers[':status'])))
      assert.equal(h2.headers['content-length'], undefined)
    })
  }

  test('framing and hop-by-hop fields in trailers are dropped; the others reach HTTP/1.1 and HTTP/2 clients', async () => {
    const reply = await rawExchange(portico.port, 'GET /trailers HTTP/1.1\r\nhost: gw.test\r\nte: trailers\r\nconnection: close\r\n\r\n', 3_000)
    const body = reply.slice(reply.indexOf('\r\n\r\n') + 4).toLowerCase()
    assert.match(body, /^2\r\nok\r\n0\r\n/)
    const trailers = body.slice(body.indexOf('0\r\n') + 3)
    assert.match(trailers, /x-checksum: abc\r\n/)
    for (const name of ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'host']) assert.doesNotMatch(trailers, new RegExp(`(^|\\n)${name}:`), name)
    const h2 = await h2Get(portico.port, '/trailers')
    assert.equal(Number(h2.headers[':status']), 200)
    assert.equal(h2.body, 'ok')
    assert.equal(h2.trailers['x-checksum'], 'abc')
    for (const name of ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'host']) assert.equal(h2.trailers[name], undefined, name)
  })
})

/** One HTTP/2 (h2c) GET: the head, the body, the trailers. */
async function h2Get (port: number, path: string): Promise<{ headers: http2.IncomingHttpHeaders, body: string, trailers: http2.IncomingHttpHeaders }> {
  const session = http2.connect(`http://127.0.0.1:${port}`)
  session.on('error', () => {})
  try {
    return await new Promise((resolve, reject) => {
      const stream = session.request({ ':path': path, ':authority': 'gw.test' })
      stream.setTimeout(3_000, () => reject(new Error(`no end of the HTTP/2 answer to ${path} within 3 s`)))
      let headers: http2.IncomingHttpHeaders = {}
      let trailers: http2.IncomingHttpHeaders = {}
      let body = ''
      stream.setEncoding('utf8')
      stream.on('response', h => { headers = h })
      stream.on('trailers', t => { trailers = t })
      stream.on('data', (d: string) => { body += d })
      stream.on('end', () => resolve({ headers, body, trailers }))
      stream.on('error', reject)
    })
  } finally {
    session.close()
  }
}
