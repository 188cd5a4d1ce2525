/**
 * Portico's HTTP/1.1 server side (src/h1-server.ts) against Node's own HTTP/1.1 server, byte
 * for byte: the same raw requests go to both, each with the same handler, and what comes back
 * on the wire must be the same (the Date header aside) — framing (Content-Length for a body
 * given whole, chunked otherwise, none for HEAD, 204 and 304), Connection and Keep-Alive,
 * HTTP/1.0, pipelined requests in order, a 400 without Host, 100-continue and 417,
 * malformed and oversized heads, repeated header fields joined as IncomingMessage joins them,
 * request bodies (chunked and by length), trailers. Then what differs on purpose, and the
 * limits: the head deadline, the keep-alive idle limit, backpressure, a client that leaves.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import net, { type AddressInfo, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { H1Server, type H1ServerOptions } from '../src/h1-server.ts'
import type { InboundRequest, InboundResponse } from '@portico/engine/serving'

type Handler = (req: InboundRequest, res: InboundResponse) => void

/** What the proxy's listener answers for a broken request (listeners.ts), for both servers. */
function onClientError (err: NodeJS.ErrnoException, socket: Socket | import('node:stream').Duplex): void {
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request'
  if (socket.writable && (socket as Socket & { _httpMessage?: unknown })._httpMessage == null) socket.end(`HTTP/1.1 ${status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`)
  else socket.destroy()
}

interface Running { port: number, close: () => Promise<void>, h1?: H1Server }

async function nodeServer (handler: Handler): Promise<Running> {
  const server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 10_000, noDelay: true }, handler as unknown as http.RequestListener)
  server.on('clientError', onClientError)
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as AddressInfo).port, close: async () => { server.closeAllConnections(); await new Promise(resolve => server.close(resolve)) } }
}

async function porticoServer (handler: Handler, options: Partial<H1ServerOptions> = {}): Promise<Running> {
  const h1 = new H1Server({ headersTimeoutMs: () => 10_000, keepAliveTimeoutMs: 65_000, onRequest: handler, shouldUpgrade: () => false, onUpgrade: (_req, socket) => socket.destroy(), onClientError, ...options })
  const sockets = new Set<Socket>()
  const server = net.createServer({ noDelay: true }, socket => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    h1.serve(socket)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as AddressInfo).port, h1, close: async () => { for (const s of sockets) s.destroy(); h1.close(); await new Promise(resolve => server.close(resolve)) } }
}

/** Sends `bytes` (pieces with a pause between them) and collects the answer until the connection closes or stays quiet for `quietMs`. */
async function exchange (port: number, pieces: Array<string | Buffer>, quietMs = 150): Promise<{ text: string, closed: boolean }> {
  const socket = net.connect(port, '127.0.0.1')
  socket.on('error', () => {})
  let text = ''
  let closed = false
  let last = Date.now()
  socket.on('data', d => { text += d.toString('latin1'); last = Date.now() })
  socket.on('close', () => { closed = true })
  await new Promise(resolve => socket.once('connect', resolve))
  for (const piece of pieces) {
    socket.write(piece)
    await sleep(30)
  }
  last = Date.now()
  while (!closed && Date.now() - last < quietMs) await sleep(10)
  socket.destroy()
  return { text: text.replace(/^Date: .*\r\n/gmi, 'Date: -\r\n'), closed }
}

/** The same requests to both servers, the same handler: the same bytes back. */
async function same (name: string, handler: Handler, pieces: Array<string | Buffer>): Promise<string> {
  const a = await nodeServer(handler)
  const b = await porticoServer(handler)
  try {
    const expected = await exchange(a.port, pieces)
    const actual = await exchange(b.port, pieces)
    assert.deepEqual(actual, expected, name)
    return actual.text
  } finally {
    await a.close()
    await b.close()
  }
}

const echoHead: Handler = (req, res) => {
  const body = JSON.stringify({ method: req.method, url: req.url, version: req.httpVersion, headers: req.headers, raw: req.rawHeaders })
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(body)
}

const GET = (path = '/', extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: a.test\r\n${extra}\r\n`

test('framing: a body given whole, in pieces, none for HEAD, 204 and 304, and HTTP/1.0', async () => {
  const whole: Handler = (_req, res) => res.end('hello')
  const pieces: Handler = (_req, res) => { res.writeHead(200, { 'x-a': '1' }); res.write('hel'); res.write(Buffer.from('lo')); res.end('!') }
  const status = (code: number): Handler => (_req, res) => { res.writeHead(code, { 'x-b': '2' }); res.end() }
  const text = await same('whole', whole, [GET()])
  assert.match(text, /Content-Length: 5\r\n/)
  assert.match(text, /Connection: keep-alive\r\nKeep-Alive: timeout=65\r\n/)
  assert.match(await same('pieces', pieces, [GET()]), /Transfer-Encoding: chunked/)
  await same('strings in pieces, utf8 by default and latin1 when asked', (_req, res) => { res.writeHead(200); res.write('h\u00e9llo '); res.write('w\u00f6rld \u2713'); res.write('caf\u00e9', 'latin1'); res.end('.') }, [GET()])
  await same('HEAD', pieces, ['HEAD / HTTP/1.1\r\nHost: a\r\n\r\n'])
  await same('204', status(204), [GET()])
  await same('304', status(304), [GET()])
  await same('HTTP/1.0', pieces, ['GET / HTTP/1.0\r\n\r\n'])
  await same('HTTP/1.0 keep-alive', whole, ['GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n', 'GET /2 HTTP/1.0\r\n\r\n'])
  await same('HTTP/1.0 TE chunked', pieces, ['GET / HTTP/1.0\r\nTE: chunked\r\n\r\n'])
  await same('Connection: close from the client', whole, [GET('/', 'Connection: close\r\n')])
  await same('Connection: close from the handler', (_req, res) => { res.writeHead(200, { connection: 'close' }); res.end('x') }, [GET(), GET('/2')])
  await same('Content-Length from the handler, written in pieces', (_req, res) => { res.writeHead(200, { 'content-length': '4' }); res.write('ab'); res.end('cd') }, [GET()])
})

test('heads: setHeader then writeHead, arrays, Set-Cookie, status messages, headers joined as IncomingMessage joins them', async () => {
  await same('setHeader + writeHead', (_req, res) => { res.setHeader('X-One', '1'); res.setHeader('x-two', ['a', 'b']); res.writeHead(201, { 'x-one': 'replaced', 'x-three': 3 }); res.end('y') }, [GET()])
  await same('flat array', (_req, res) => { res.writeHead(200, ['x-a', '1', 'x-a', '2', 'set-cookie', 'c=1']); res.end() }, [GET()])
  await same('set-cookie list', (_req, res) => { res.writeHead(200, { 'set-cookie': ['a=1', 'b=2'], cookie: ['x', 'y'] }); res.end() }, [GET()])
  await same('status message', (_req, res) => { res.writeHead(299, 'Fine Enough', { a: 'b' }); res.end() }, [GET()])
  await same('unknown status', (_req, res) => { res.writeHead(599); res.end() }, [GET()])
  await same('implicit head with statusCode', (_req, res) => { res.statusCode = 404; res.setHeader('content-type', 'text/plain'); res.end('nope') }, [GET()])
  await same('repeated request fields', echoHead, [GET('/p?q=1', 'X-Forwarded-For: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2\r\nCookie: a=1\r\nCookie: b=2\r\nUser-Agent: one\r\nUser-Agent: two\r\nSet-Cookie: s=1\r\nSet-Cookie: s=2\r\nAccept: a\r\nACCEPT: b\r\nX-Custom: 1\r\nx-custom: 2\r\nContent-Type: t1\r\n')])
  await same('a head split over many writes', echoHead, ['GET /sp', 'lit HTTP/1.1\r\nHo', 'st: a\r\nX-Long: ', 'x'.repeat(3000), '\r\n\r\n'])
  await same('trailers', (_req, res) => { res.writeHead(200, { trailer: 'x-t' }); res.write('a'); res.addTrailers({ 'x-t': 'done' }); res.end() }, [GET()])
})

test('pipelined requests are answered in order; refusals as Node refuses them', async () => {
  const slowFirst: Handler = (req, res) => { setTimeout(() => res.end(`answer ${req.url}`), req.url === '/1' ? 60 : 0) }
  const text = await same('pipelined', slowFirst, [GET('/1') + GET('/2') + GET('/3')])
  assert.ok(text.indexOf('answer /1') < text.indexOf('answer /2') && text.indexOf('answer /2') < text.indexOf('answer /3'), text)
  await same('HTTP/1.1 without Host', echoHead, ['GET / HTTP/1.1\r\n\r\n'])
  await same('Expect: 100-continue', (req, res) => { let n = 0; req.on('data', (c: Buffer) => { n += c.length }); req.on('end', () => res.end(`got ${n}`)) }, ['POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n', 'abc'])
  await same('another expectation', echoHead, [GET('/', 'Expect: the-unexpected\r\n')])
  await same('malformed request line', echoHead, ['GET /a b c HTTP/1.1\r\nHost: a\r\n\r\n'])
  await same('a bare LF in a header', echoHead, ['GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n'])
  await same('a head past 16 KiB', echoHead, [GET('/', `X-Big: ${'b'.repeat(17 * 1024)}\r\n`)])
  await same('two Content-Lengths that differ', echoHead, ['POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'])
  await same('Content-Length and chunked', echoHead, ['POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'])
})

test('request bodies: by length and chunked, read in pieces; a bad chunk after the head is a client error', async () => {
  const count: Handler = (req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => res.end(`${req.method} ${Buffer.concat(chunks).toString()}`))
  }
  await same('by length', count, ['POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello', ' world'])
  await same('chunked', count, ['POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n', '6\r\n world\r\n0\r\n\r\n'])
  await same('chunked with trailers', count, ['POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-T: 1\r\n\r\n'])
  await same('a bad chunk size after the head (the request in progress: the connection goes)', count, ['POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n', 'zz\r\nhello\r\n0\r\n\r\n'])
  await same('answered before the body was read, then the next request', (req, res) => res.end(req.url), ['POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab', 'cde' + GET('/2')])
})

test('the head deadline cuts a silent connection and a slow head with a 408; the idle limit closes a rested keep-alive connection', async () => {
  const b = await porticoServer((_req, res) => res.end('ok'), { headersTimeoutMs: () => 300, keepAliveTimeoutMs: 200 })
  try {
    let started = Date.now()
    const silent = await exchange(b.port, [], 5_000)
    assert.ok(silent.closed && /^HTTP\/1.1 408 /.test(silent.text), silent.text)
    assert.ok(Date.now() - started >= 250, 'not before the deadline')
    const slow = await exchange(b.port, ['GET / HTTP/1.1\r\n'], 5_000)
    assert.ok(slow.closed && /^HTTP\/1.1 408 /.test(slow.text), slow.text)
    started = Date.now()
    const rested = await exchange(b.port, [GET()], 5_000)
    assert.ok(rested.closed && /^HTTP\/1.1 200 /.test(rested.text) && !/408/.test(rested.text), rested.text)
    // Closed for idleness (200 ms + Node's 1 s buffer), not by the head deadline.
    assert.ok(Date.now() - started >= 1_000, `closed after ${Date.now() - started} ms`)
  } finally {
    await b.close()
  }
})

test('a body reader that falls behind stops the socket; a response that waits for the client\'s window gets drain', async () => {
  let received = 0
  let drained = false
  const b = await porticoServer((req, res) => {
    // Reads nothing for a while: the parser's pushes beyond the buffer stop the reads.
    setTimeout(() => {
      req.on('data', (c: Buffer) => { received += c.length })
      req.on('end', () => {
        res.writeHead(200)
        const big = Buffer.alloc(1 << 20, 'x')
        let n = 0
        const more = (): void => {
          while (n < 8) {
            n++
            if (!res.write(big)) { res.once('drain', () => { drained = true; more() }); return }
          }
          res.end()
        }
        more()
      })
    }, 100)
  })
  try {
    const socket = net.connect(b.port, '127.0.0.1')
    await new Promise(resolve => socket.once('connect', resolve))
    const body = Buffer.alloc(4 << 20, 'y')
    socket.write(`POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${body.length}\r\n\r\n`)
    socket.write(body)
    let got = 0
    await new Promise<void>(resolve => {
      socket.on('data', d => { got += d.length; if (got > 8 << 20) resolve() })
      // Read slowly at first, so the writes back fill the socket.
      socket.pause()
      setTimeout(() => socket.resume(), 300)
    })
    socket.destroy()
    assert.equal(received, body.length)
    assert.ok(drained, 'the response waited for drain')
  } finally {
    await b.close()
  }
})

test('a client that leaves: the request is aborted if its body was not all read, the response closes without finishing, as on Node\'s server', async () => {
  const run = async (start: (handler: Handler) => Promise<Running>): Promise<string[]> => {
    const events: string[] = []
    const server = await start((req, res) => {
      req.on('aborted', () => events.push('req aborted'))
      req.on('error', (err: NodeJS.ErrnoException) => events.push(`req error ${err.code}`))
      res.on('finish', () => events.push('res finish'))
      res.on('close', () => events.push(`res close destroyed=${res.destroyed} finished=${res.writableFinished}`))
    })
    try {
      const socket = net.connect(server.port, '127.0.0.1')
      await new Promise(resolve => socket.once('connect', resolve))
      socket.write('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab')
      await sleep(50)
      socket.destroy()
      await sleep(50)
      if (server.h1 !== undefined) assert.equal(server.h1.connections.size, 0)
      return events.sort()
    } finally {
      await server.close()
    }
  }
  const expected = await run(nodeServer)
  assert.deepEqual(await run(porticoServer), expected)
  assert.deepEqual(expected, ['req aborted', 'req error ECONNRESET', 'res close destroyed=true finished=false'])
})

test('an upgrade leaves with the bytes past its head; one the listener refuses is served as a plain request', async () => {
  let handed: { url: string, head: string } | null = null
  const b = await porticoServer((req, res) => res.end(`plain ${req.url}`), {
    shouldUpgrade: req => req.headers.upgrade === 'websocket',
    onUpgrade: (req, socket, head) => {
      handed = { url: req.url ?? '', head: head.toString() }
      socket.end('HTTP/1.1 101 Switching Protocols\r\n\r\nswitched')
    }
  })
  try {
    const up = await exchange(b.port, [GET('/ws', 'Upgrade: websocket\r\nConnection: Upgrade\r\n') + 'FRAME'])
    assert.deepEqual(handed, { url: '/ws', head: 'FRAME' })
    assert.match(up.text, /switched$/)
    const refused = await exchange(b.port, [GET('/h2c', 'Upgrade: h2c\r\nConnection: Upgrade\r\n')])
    assert.match(refused.text, /plain \/h2c$/)
  } finally {
    await b.close()
  }
})

test('node:http\'s server diagnostics channels are published as Node\'s server publishes them', async () => {
  const dc = await import('node:diagnostics_channel')
  const run = async (start: (handler: Handler) => Promise<Running>): Promise<string[]> => {
    const seen: string[] = []
    const names = ['http.server.request.start', 'http.server.response.created', 'http.server.response.finish']
    const subscribers = names.map(name => {
      const fn = (message: unknown): void => { seen.push(`${name} ${(message as { request: InboundRequest }).request.url}`) }
      dc.subscribe(name, fn)
      return () => dc.unsubscribe(name, fn)
    })
    const server = await start((_req, res) => res.end('x'))
    try {
      await exchange(server.port, [GET('/a') + GET('/b')])
      return seen
    } finally {
      for (const unsubscribe of subscribers) unsubscribe()
      await server.close()
    }
  }
  const expected = await run(nodeServer)
  assert.deepEqual((await run(porticoServer)).sort(), expected.sort())
  assert.equal(expected.length, 6)
})
