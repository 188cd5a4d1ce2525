/**
 * The HTTP/1.1 backend client (http/h1-pool.ts) against raw TCP servers that write exactly
 * the bytes a test wants: what it refuses (the framing tricks behind response splitting and
 * smuggling), what it sends (its own framing only, no header a caller could inject), and how
 * it keeps, reuses and retires connections.
 */

import { test, describe, after } from 'node:test'
import assert from 'node:assert/strict'
import net, { type AddressInfo, type Socket } from 'node:net'
import { Readable } from 'node:stream'
import type { Dispatcher } from 'undici'
import { H1Pool } from '../src/http/h1-pool.ts'
import type { LendingHandler } from '../src/http/h1-connection.ts'
import { collect } from './lib/dispatch.ts'
import { H1ResponseParser } from '../src/http/h1-response-parser.ts'
import { classifyFailure } from '../src/http/call-failure.ts'
import { vouchTraceparent } from '../src/ir/http-grammar.ts'
import { waitUntil } from '../../testkit/src/wait.ts'

const call = collect

interface RawServer { origin: string, requests: string[], connections: number, sockets: Socket[], close: () => Promise<void> }

/**
 * A server that answers each request head it reads with `answer(head, socket)`'s bytes (it
 * reads a body only by Content-Length or chunked to its end, enough for these tests).
 */
async function rawServer (answer: (head: string, socket: Socket, n: number) => string | Buffer | null): Promise<RawServer> {
  const state: RawServer = { origin: '', requests: [], connections: 0, sockets: [], close: async () => {} }
  const server = net.createServer(socket => {
    state.connections++
    state.sockets.push(socket)
    let buf = ''
    socket.on('error', () => {})
    socket.on('data', d => {
      buf += d.toString('latin1')
      for (;;) {
        const end = buf.indexOf('\r\n\r\n')
        if (end === -1) return
        const head = buf.slice(0, end)
        let rest = buf.slice(end + 4)
        const length = /\r\ncontent-length: (\d+)/i.exec(head)
        let body = ''
        if (length !== null) {
          if (rest.length < Number(length[1])) return
          body = rest.slice(0, Number(length[1]))
          rest = rest.slice(Number(length[1]))
        } else if (/\r\ntransfer-encoding: chunked/i.test(head)) {
          const last = rest.indexOf('0\r\n\r\n')
          if (last === -1) return
          body = rest.slice(0, last + 5)
          rest = rest.slice(last + 5)
        }
        buf = rest
        state.requests.push(head + '\r\n\r\n' + body)
        const out = answer(head, socket, state.requests.length)
        if (out !== null) socket.write(out)
      }
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  state.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  state.close = () => new Promise(resolve => {
    for (const s of state.sockets) s.destroy()
    server.close(() => resolve())
  })
  return state
}

const OK = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'
const servers: RawServer[] = []
const pools: H1Pool[] = []
async function setup (answer: Parameters<typeof rawServer>[0], options = {}): Promise<{ server: RawServer, pool: H1Pool }> {
  const server = await rawServer(answer)
  const pool = new H1Pool(server.origin, options)
  servers.push(server)
  pools.push(pool)
  return { server, pool }
}
/**
 * A GET that pauses at its answer's head: the chunks delivered so far, `resume`, and its end.
 * `extra` adds handler methods (`chunkReleased` asks to be lent the connection's read buffer).
 */
function pausedGet (pool: H1Pool, extra: Partial<LendingHandler> = {}): { got: string[], resume: () => void, done: Promise<void> } {
  let controller: Dispatcher.DispatchController | null = null
  const got: string[] = []
  const done = new Promise<void>((resolve, reject) => {
    pool.dispatch({ method: 'GET', path: '/', headers: {} }, {
      onRequestStart: c => { controller = c },
      onResponseStart: c => { c.pause() },
      onResponseData: (_c, chunk) => { got.push(chunk.toString()) },
      onResponseEnd: () => resolve(),
      onResponseError: (_c, e) => reject(e),
      ...extra
    } as Dispatcher.DispatchHandler)
  })
  return { got, resume: () => controller!.resume(), done }
}
after(async () => {
  await Promise.all(pools.map(p => p.destroy()))
  await Promise.all(servers.map(s => s.close()))
})

describe('h1 client: responses it refuses', () => {
  const refused: Array<[string, string]> = [
    ['content-length and transfer-encoding together', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n'],
    ['two different content-lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok'],
    ['a content-length that is not digits', 'HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nok'],
    ['obsolete line folding', 'HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\ncontent-length: 2\r\n\r\nok'],
    ['whitespace before the colon', 'HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok'],
    ['a bare LF ending a header line', 'HTTP/1.1 200 OK\ncontent-length: 2\r\n\r\nok'],
    ['a bare LF with no CRLF at all', 'HTTP/1.1 200 OK\nx: y\n\nok'],
    ['a control character in a value', 'HTTP/1.1 200 OK\r\nx-a: a\x00b\r\ncontent-length: 2\r\n\r\nok'],
    ['a malformed status line', 'HTTP/1.1 2000 OK\r\ncontent-length: 2\r\n\r\nok'],
    ['an unknown HTTP version', 'HTTP/2.0 200 OK\r\ncontent-length: 2\r\n\r\nok'],
    ['chunked before another coding', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n2\r\nok\r\n0\r\n\r\n'],
    ['a chunk size that is not hex', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n'],
    ['a chunk size that overflows', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10000000000000002\r\nok\r\n0\r\n\r\n'],
    ['chunk data longer than its size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nok\r\n0\r\n\r\n'],
    ['a 101 nobody asked for', 'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n']
  ]
  for (const [name, bytes] of refused) {
    test(name, async () => {
      const { pool } = await setup(() => bytes)
      const err = await call(pool).then(() => null, (e: Error) => e)
      assert.ok(err !== null, 'refused')
      const failure = classifyFailure(err, null)
      // Refused before any byte of it reached the caller: the client gets a 502.
      assert.equal((err as { code?: string }).code, 'PORTICO_UPSTREAM_PROTOCOL', err.message)
      assert.equal(failure.status, 502)
    })
  }

  test('chunk extensions that never end', async () => {
    const { pool } = await setup(() => `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;${'x'.repeat(20_000)}`)
    await assert.rejects(call(pool), { code: 'PORTICO_UPSTREAM_PROTOCOL', message: /chunk extensions longer/ })
  })

  test('a header section over the limit', async () => {
    const { pool } = await setup(() => `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(20_000)}\r\ncontent-length: 2\r\n\r\nok`)
    await assert.rejects(call(pool), { code: 'PORTICO_UPSTREAM_PROTOCOL', message: /header section larger/ })
  })
})

describe('h1 client: what it sends', () => {
  test('its own framing only: a caller cannot set transfer-encoding, connection or content-length', async () => {
    const { server, pool } = await setup(() => OK)
    await call(pool, { method: 'POST', headers: { 'transfer-encoding': 'chunked', connection: 'close', 'content-length': '999', 'x-keep': 'yes' }, body: Buffer.from('hello') })
    const sent = server.requests[0]!
    assert.match(sent, /^POST \/ HTTP\/1\.1\r\n/)
    assert.match(sent, /\r\ncontent-length: 5\r\n/)
    assert.doesNotMatch(sent, /transfer-encoding|connection: close|999/i)
    assert.match(sent, /\r\nx-keep: yes\r\n/)
    assert.match(sent, /\r\n\r\nhello$/)
  })

  test('header names go out lower-case; the framing ones in any case are the client\'s own; a name that is no token is refused', async () => {
    const { server, pool } = await setup(() => OK)
    await call(pool, { method: 'POST', headers: { 'X-Mixed-Case': 'a', 'Content-Length': '999', 'PROXY-CONNECTION': 'x', Expect: '100-continue', Upgrade: 'h2c', 'Keep-Alive': '1', 'Transfer-Encoding': 'gzip', Connection: 'close', HOST: 'named.example', 'x-lower': 'b' }, body: Buffer.from('hi') })
    const sent = server.requests[0]!
    assert.equal(sent, 'POST / HTTP/1.1\r\nx-mixed-case: a\r\nx-lower: b\r\nhost: named.example\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nhi')
    for (const name of ['', 'x\u00e9', 'X\u00c9', 'a:b', 'a"b', '(x)']) {
      await assert.rejects(call(pool, { headers: { [name]: '1' } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' }, JSON.stringify(name))
    }
    assert.equal(server.requests.length, 1)
  })

  test('a CR or LF in a header value, a bad name or request target is refused, nothing sent', async () => {
    const { server, pool } = await setup(() => OK)
    await assert.rejects(call(pool, { headers: { 'x-a': 'a\r\nx-injected: 1' } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' })
    await assert.rejects(call(pool, { headers: { 'x a': '1' } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' })
    await assert.rejects(call(pool, { path: '/a b HTTP/1.1\r\nx: y' }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' })
    // Values built at run time (V8 keeps concatenations and slices as strings of their own
    // kinds) are checked as literal ones are: a lone LF, NUL, DEL, a character above U+00FF,
    // in one value of several.
    const prefix = 'p'.repeat(20)
    for (const bad of [`${prefix}\nx-injected: 1`, `${prefix}\r\n`.slice(3), `${prefix}\u0000`, `${prefix}\u007f`, `${prefix}\u0100`]) {
      await assert.rejects(call(pool, { headers: { 'x-a': bad } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' }, JSON.stringify(bad))
      await assert.rejects(call(pool, { headers: { 'x-a': ['fine', bad] } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' }, JSON.stringify(bad))
    }
    // obs-text and tabs are field content.
    assert.equal((await call(pool, { headers: { 'x-a': `${prefix}\t\u00e9` } })).body, 'ok')
    // The pool still works, and none of the refused ones reached the server.
    assert.equal((await call(pool)).body, 'ok')
    assert.equal(server.requests.length, 2)
  })

  test('tracing\'s vouched traceparent is written unchecked; any other traceparent is checked', async () => {
    const { server, pool } = await setup(() => OK)
    const own = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    vouchTraceparent(own)
    await call(pool, { headers: { traceparent: own } })
    assert.match(server.requests[0]!, new RegExp(`\\r\\ntraceparent: ${own}\\r\\n`))
    // A caller's or a policy's traceparent (not the vouched string) is checked as any value,
    // and the vouched value under another name takes the usual path (its name checked).
    await assert.rejects(call(pool, { headers: { traceparent: `${own}\r\nx-injected: 1` } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' })
    await assert.rejects(call(pool, { headers: { traceparent: [own, 'x\ny'] } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' })
    await assert.rejects(call(pool, { headers: { 'bad name': own } }), { code: 'PORTICO_INVALID_UPSTREAM_HEADER' })
    assert.equal(server.requests.length, 1)
  })

  test('a stream without a length goes chunked; one with a length must match it', async () => {
    const { server, pool } = await setup(() => OK)
    await call(pool, { method: 'POST', body: Readable.from([Buffer.from('ab'), Buffer.from(''), Buffer.from('cd')]) })
    assert.match(server.requests[0]!, /transfer-encoding: chunked\r\n/)
    assert.match(server.requests[0]!, /\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n$/)
    await assert.rejects(call(pool, { method: 'POST', headers: { 'content-length': '3' }, body: Readable.from([Buffer.from('abcd')]) }), { code: 'PORTICO_REQUEST_LENGTH_MISMATCH' })
    await assert.rejects(call(pool, { method: 'POST', headers: { 'content-length': '5' }, body: Readable.from([Buffer.from('abcd')]) }), { code: 'PORTICO_REQUEST_LENGTH_MISMATCH' })
    await assert.rejects(call(pool, { method: 'GET', headers: { 'content-length': '5' } }), { code: 'PORTICO_REQUEST_LENGTH_MISMATCH' })
  })

  test('a string or typed-array body is sent as its bytes, with its length', async () => {
    const { server, pool } = await setup(() => OK)
    await call(pool, { method: 'PUT', body: 'héllo' })
    await call(pool, { method: 'PUT', body: new Uint8Array([104, 105]) })
    assert.match(server.requests[0]!, /\r\ncontent-length: 6\r\n[\s\S]*\r\n\r\nh\xc3\xa9llo$/)
    assert.match(server.requests[1]!, /\r\ncontent-length: 2\r\n[\s\S]*\r\n\r\nhi$/)
  })

  test('a body stream that already ended sends what it declared (nothing), one already destroyed fails the call', async () => {
    const { server, pool } = await setup(() => OK)
    const ended = Readable.from([])
    ended.resume()
    await new Promise(resolve => ended.once('end', resolve))
    assert.equal((await call(pool, { method: 'POST', headers: { 'content-length': '0' }, body: ended })).body, 'ok')
    assert.match(server.requests[0]!, /\r\ncontent-length: 0\r\n/)
    const broken = new Readable({ read () {} })
    broken.destroy()
    await assert.rejects(call(pool, { method: 'POST', body: broken }), { code: 'ERR_STREAM_PREMATURE_CLOSE' })
  })

  test('the Host header is the caller\'s, else the origin\'s; an empty POST says content-length: 0', async () => {
    const { server, pool } = await setup(() => OK)
    await call(pool, { headers: { host: 'example.test' } })
    await call(pool, { method: 'POST' })
    assert.match(server.requests[0]!, /\r\nhost: example\.test\r\n/)
    assert.match(server.requests[1]!, new RegExp(`\\r\\nhost: ${new URL(server.origin).host}\\r\\n`))
    assert.match(server.requests[1]!, /\r\ncontent-length: 0\r\n/)
  })
})

describe('h1 client: answers and connections', () => {
  test('keep-alive: one connection carries sequential calls; close ends it', async () => {
    const { server, pool } = await setup((_h, _s, n) => n === 3 ? 'HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok' : OK)
    for (let i = 0; i < 4; i++) assert.equal((await call(pool)).body, 'ok')
    assert.equal(server.connections, 2)
  })

  test('a server\'s Keep-Alive timeout wins when shorter, less a second: timeout=1 keeps nothing idle', async () => {
    const { server, pool } = await setup(() => 'HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1, max=100\r\ncontent-length: 2\r\n\r\nok')
    await call(pool)
    await call(pool)
    assert.equal(server.connections, 2)
    await waitUntil(() => pool.stats.connected === 0, 5_000, () => `the connection not kept (${JSON.stringify(pool.stats)})`)
  })

  test('chunked answers with trailers; interim 1xx answers are skipped', async () => {
    const { pool } = await setup(() => 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\ngrpc-status: 0\r\nx-t: 1\r\n\r\n')
    const a = await call(pool)
    assert.equal(a.status, 200)
    assert.equal(a.body, 'abcde')
    assert.deepEqual(a.trailers, { 'grpc-status': '0', 'x-t': '1' })
  })

  test('header names come lower-case whatever their case: the common Title-Case ones and any other', async () => {
    const { pool } = await setup(() => 'HTTP/1.1 200 OK\r\nDate: Fri, 27 Nov 2026 12:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\ncontent-type: text/plain\r\nCONTENT-LENGTH: 2\r\nX-Custom-Thing: 1\r\nDatE2: x\r\nKeep-alivE: y\r\ndatf: z\r\n\r\nok')
    const a = await call(pool)
    assert.equal(a.body, 'ok')
    assert.deepEqual(Object.keys(a.headers).sort(), ['connection', 'content-length', 'content-type', 'date', 'date2', 'datf', 'keep-alive', 'x-custom-thing'])
    assert.deepEqual(a.headers['keep-alive'], ['timeout=5', 'y'])
    assert.equal(a.headers['content-length'], '2')
  })

  test('every byte in a field name, a field value and a trailer is taken or refused as RFC 9110 says (the parser\'s byte tables)', () => {
    const TCHARS = '!#$%&\'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
    // A mixed-case spelling of each common name comes out as the constant; one byte off does not.
    const names = ['dAtE', 'CoNnEcTiOn', 'kEeP-aLiVe', 'CONTENT-type', 'Content-LENGTH', 'transfer-ENCODING']
    const parse = (head: Buffer, trailer?: Buffer): { headers: Record<string, unknown>, trailers: Record<string, unknown> } | Error => {
      let headers: Record<string, unknown> = {}
      let trailers: Record<string, unknown> = {}
      const parser = new H1ResponseParser({ onHead: h => { headers = h.headers }, onData: () => {}, onEnd: t => { trailers = t } })
      parser.expect('GET', false)
      try {
        parser.execute(trailer === undefined ? head : Buffer.concat([head, trailer]))
      } catch (err) {
        return err as Error
      }
      return { headers, trailers }
    }
    const prefix = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n')
    const chunked = Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n')
    for (let b = 0; b < 256; b++) {
      const byte = Buffer.from([b])
      const name = parse(Buffer.concat([prefix, Buffer.from('x'), byte, Buffer.from('y: 1\r\n\r\n')]))
      const tchar = b < 128 && TCHARS.includes(String.fromCharCode(b))
      // A colon ends the name there (`x:y: 1` is the field x): no case for a name byte.
      if (b === 58) assert.equal((name as { headers: Record<string, unknown> }).headers.x, 'y: 1')
      else if (tchar) assert.deepEqual((name as { headers: Record<string, unknown> }).headers[`x${String.fromCharCode(b).toLowerCase()}y`], '1', `name byte ${b}`)
      else assert.ok(name instanceof Error, `name byte ${b} refused`)
      const allowed = b === 9 || (b >= 32 && b !== 127)
      const value = parse(Buffer.concat([prefix, Buffer.from('x: a'), byte, Buffer.from('b\r\n\r\n')]))
      if (allowed) assert.equal((value as { headers: Record<string, unknown> }).headers.x, `a${byte.toString('latin1')}b`, `value byte ${b}`)
      else assert.ok(value instanceof Error, `value byte ${b} refused`)
      const trailer = parse(chunked, Buffer.concat([Buffer.from('t: a'), byte, Buffer.from('b\r\n\r\n')]))
      if (allowed) assert.equal((trailer as { trailers: Record<string, unknown> }).trailers.t, `a${byte.toString('latin1')}b`, `trailer byte ${b}`)
      else assert.ok(trailer instanceof Error, `trailer byte ${b} refused`)
    }
    for (const name of names) {
      // Each with a value its name allows (framing names frame the answer).
      const field = /^content-length$/i.test(name) ? `${name}: 0\r\n` : /^transfer-encoding$/i.test(name) ? `${name}: chunked\r\n` : `${name}: v\r\ncontent-length: 0\r\n`
      const out = parse(Buffer.from(`HTTP/1.1 200 OK\r\n${field}\r\n${/^transfer/i.test(name) ? '0\r\n\r\n' : ''}`))
      assert.ok(!(out instanceof Error), name)
      assert.equal(out.headers[name.toLowerCase()], /^content-length$/i.test(name) ? '0' : /^transfer/i.test(name) ? 'chunked' : 'v', name)
      assert.ok(Object.keys(out.headers).includes(name.toLowerCase()), name)
      const off = parse(Buffer.from(`HTTP/1.1 200 OK\r\n${name.slice(0, -1)}_: v\r\ncontent-length: 0\r\n\r\n`))
      assert.equal((off as { headers: Record<string, unknown> }).headers[`${name.slice(0, -1).toLowerCase()}_`], 'v', `${name} one byte off`)
    }
  })

  test('one byte at a time parses the same', async () => {
    const bytes = 'HTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 2\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n'
    const events: string[] = []
    const parser = new H1ResponseParser({
      onHead: h => events.push(`head ${h.statusCode} ${JSON.stringify(h.headers)}`),
      onData: c => events.push(`data ${c.toString()}`),
      onEnd: t => events.push(`end ${JSON.stringify(t)}`)
    })
    parser.expect('GET', false)
    const buf = Buffer.from(bytes)
    for (let i = 0; i < buf.length; i++) assert.equal(parser.execute(buf.subarray(i, i + 1)), 1)
    assert.deepEqual(events, ['head 200 {"x-a":["1","2"],"transfer-encoding":"chunked"}', 'data a', 'data b', 'data c', 'end {"x-t":"1"}'])
  })

  test('a body to the end of the connection; a 204 announcing one leaves the connection unusable', async () => {
    const { server, pool } = await setup((_h, s, n) => {
      if (n === 1) {
        s.end('HTTP/1.1 200 OK\r\n\r\nto the end')
        return null
      }
      return 'HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n'
    })
    assert.equal((await call(pool)).body, 'to the end')
    assert.equal((await call(pool)).status, 204)
    assert.equal((await call(pool)).status, 204)
    assert.equal(server.connections, 3)
  })

  test('a reused connection the server closed: an idempotent call is sent again, a POST is not', async () => {
    const { server, pool } = await setup((_h, s, n) => {
      if (n === 2 || n === 4) {
        // Closed as the request arrived, without an answer: what a keep-alive race looks like.
        s.destroy()
        return null
      }
      return OK
    })
    assert.equal((await call(pool)).body, 'ok')
    assert.equal((await call(pool)).body, 'ok', 'the GET went again on a new connection')
    assert.equal(server.requests.length, 3)
    await assert.rejects(call(pool, { method: 'POST', body: Buffer.from('x') }), { code: 'PORTICO_UPSTREAM_CLOSED' })
    assert.equal(server.requests.length, 4)
  })

  test('pause holds the answer\'s bytes until resume', async () => {
    const { pool } = await setup(() => `HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nabcdef`)
    const { got, resume, done } = pausedGet(pool)
    await new Promise(resolve => setTimeout(resolve, 50))
    assert.deepEqual(got, [], 'nothing while paused')
    resume()
    await done
    assert.deepEqual(got, ['abcdef'])
  })

  test('a body to the end of the connection, paused when the connection ends: complete on resume', async () => {
    const { pool } = await setup((_h, s) => {
      // The body, then (while the caller is paused, nothing held) the end of the connection.
      s.write('HTTP/1.1 200 OK\r\n\r\nall of it')
      setTimeout(() => s.end(), 20)
      return null
    })
    let controller: Dispatcher.DispatchController | null = null
    const got: string[] = []
    const done = new Promise<void>((resolve, reject) => {
      pool.dispatch({ method: 'GET', path: '/', headers: {} }, {
        onRequestStart: c => { controller = c },
        onResponseData: (c, chunk) => {
          got.push(chunk.toString())
          c.pause()
        },
        onResponseEnd: () => resolve(),
        onResponseError: (_c, e) => reject(e)
      })
    })
    await new Promise(resolve => setTimeout(resolve, 60))
    controller!.resume()
    await done
    assert.equal(got.join(''), 'all of it')
  })

  test('abort ends the call with its reason and the connection with it', async () => {
    const { server, pool } = await setup(() => null)
    let controller: Dispatcher.DispatchController | null = null
    const pending = call(pool, {}, c => { controller = c })
    await new Promise(resolve => setTimeout(resolve, 30))
    controller!.abort(new Error('gone'))
    await assert.rejects(pending, { message: 'gone' })
    await new Promise(resolve => setTimeout(resolve, 30))
    assert.equal(server.sockets[0]!.destroyed, true)
  })

  test('no answer head in time: a headers timeout (504)', async () => {
    const { pool } = await setup(() => null, { headersTimeout: 100 })
    const err = await call(pool).then(() => null, (e: Error) => e)
    assert.equal((err as { code?: string })?.code, 'PORTICO_UPSTREAM_HEADERS_TIMEOUT')
    assert.equal(classifyFailure(err!, null).status, 504)
  })

  test('at most `connections` at once; the rest wait their turn', async () => {
    const held: Socket[] = []
    const { server, pool } = await setup((_h, s) => {
      held.push(s)
      return null
    }, { connections: 2 })
    const calls = [call(pool), call(pool), call(pool)]
    await waitUntil(() => held.length === 2 && pool.stats.pending === 1, 5_000, () => `two calls at the server, one waiting (${held.length} held, ${JSON.stringify(pool.stats)})`)
    assert.equal(server.connections, 2)
    assert.equal(pool.stats.pending, 1)
    for (const s of held.splice(0)) s.write(OK)
    // The third call goes out on a connection the first two freed.
    await waitUntil(() => held.length === 1, 5_000, 'the third call at the server')
    for (const s of held.splice(0)) s.write(OK)
    assert.deepEqual((await Promise.all(calls)).map(a => a.body), ['ok', 'ok', 'ok'])
    assert.equal(server.connections, 2)
  })

  test('a refused connection fails the call with the socket error; close waits for calls under way', async () => {
    const { server, pool } = await setup(() => OK)
    await server.close()
    await assert.rejects(call(pool), { code: 'ECONNREFUSED' })
    await pool.close()
    await assert.rejects(call(pool), { code: 'PORTICO_POOL_CLOSED' })
  })

  test('upgrade: a 101 hands over the socket, with the bytes that came after the head', async () => {
    const { pool } = await setup(() => 'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\nearly')
    const socket = await new Promise<Socket>((resolve, reject) => {
      pool.dispatch({ method: 'GET', path: '/ws', headers: {}, upgrade: 'websocket' }, {
        onRequestUpgrade: (_c, status, headers, s) => {
          assert.equal(status, 101)
          assert.equal(headers.upgrade, 'websocket')
          resolve(s as Socket)
        },
        onResponseError: (_c, e) => reject(e)
      })
    })
    const first = await new Promise<string>(resolve => socket.once('data', d => resolve(d.toString())).resume())
    assert.equal(first, 'early')
    socket.destroy()
    assert.equal(pool.stats.connected, 0)
  })
})

describe('h1 client: one read buffer per connection (ReadBuffer, net onread)', () => {
  /** An answer of `parts` written `gapMs` apart, so the client reads each on its own. */
  const slow = (parts: string[], gapMs = 15) => (_h: string, s: Socket): null => {
    s.write(`HTTP/1.1 200 OK\r\ncontent-length: ${parts.join('').length}\r\n\r\n`)
    parts.forEach((p, i) => setTimeout(() => s.write(p), gapMs * (i + 1)))
    return null
  }
  const PARTS = ['aaaa', 'bbbb', 'cccc', 'dddd']

  /** Dispatches one GET with `handler`'s callbacks; resolves with the chunks as given (not copied). */
  function lend (pool: H1Pool, handler: Partial<Dispatcher.DispatchHandler> & { chunkReleased?: () => boolean }): Promise<Buffer[]> {
    const chunks: Buffer[] = []
    return new Promise((resolve, reject) => {
      pool.dispatch({ method: 'GET', path: '/', headers: {} }, {
        ...handler,
        onResponseData: (c, chunk) => { chunks.push(chunk) },
        onResponseEnd: () => resolve(chunks),
        onResponseError: (_c, e) => reject(e)
      } as Dispatcher.DispatchHandler)
    })
  }

  test('a handler that keeps chunks (no chunkReleased) gets each in a buffer of its own: all intact', async () => {
    const { pool } = await setup(slow(PARTS))
    const chunks = await lend(pool, {})
    assert.equal(chunks.map(c => c.toString()).join(''), PARTS.join(''))
    assert.equal(new Set(chunks.map(c => c.buffer)).size, chunks.length, 'no two chunks share a buffer')
  })

  test('a handler that lets go of its chunks (chunkReleased: true) gets them in one reused buffer', async () => {
    const { pool } = await setup(slow(PARTS))
    const seen: string[] = []
    const chunks = await lend(pool, { chunkReleased: () => { seen.push(''); return true } })
    assert.ok(chunks.length >= 3, `${chunks.length} reads`)
    assert.equal(new Set(chunks.map(c => c.buffer)).size, 1, 'every read into the same buffer')
    assert.ok(seen.length >= chunks.length)
  })

  test('a lent chunk the handler still holds (chunkReleased: false) is not overwritten by later reads', async () => {
    const { pool } = await setup(slow(PARTS))
    let hold = true
    const chunks = await lend(pool, { chunkReleased: () => !hold })
    hold = false
    assert.deepEqual(chunks.map(c => c.toString()).join(''), PARTS.join(''))
    assert.equal(new Set(chunks.map(c => c.buffer)).size, chunks.length)
  })

  test('a head split across reads, and bytes held while paused, keep their buffer', async () => {
    const { pool } = await setup((_h, s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-')
      setTimeout(() => s.write('length: 8\r\n\r\nabcd'), 15)
      setTimeout(() => s.write('efgh'), 30)
      return null
    })
    // A handler that says it let go of its chunks: lent the connection's reused buffer.
    const { got, resume, done } = pausedGet(pool, { chunkReleased: () => true })
    await new Promise(resolve => setTimeout(resolve, 60))
    assert.deepEqual(got, [])
    resume()
    await done
    assert.equal(got.join(''), 'abcdefgh')
  })

  test('an upgrade does not take an idle connection that reads into its own buffer: a new one, in its place when full', async () => {
    const { server, pool } = await setup(head => head.includes('upgrade: websocket')
      ? 'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\nearly'
      : OK, { connections: 1 })
    assert.equal((await call(pool)).body, 'ok')
    assert.equal(pool.stats.free, 1)
    const socket = await new Promise<Socket>((resolve, reject) => {
      pool.dispatch({ method: 'GET', path: '/ws', headers: {}, upgrade: 'websocket' }, {
        onRequestUpgrade: (_c, _status, _headers, s) => resolve(s as Socket),
        onResponseError: (_c, e) => reject(e)
      })
    })
    const first = await new Promise<string>(resolve => socket.once('data', d => resolve(d.toString())).resume())
    assert.equal(first, 'early')
    assert.equal(server.connections, 2, 'the upgrade on a connection of its own')
    socket.destroy()
    assert.equal((await call(pool)).body, 'ok')
  })
})

describe('h1 client: bytes nobody asked for (issue 49)', () => {
  /** An answer that names the request it answers (its path without the slash). */
  const named = (head: string): string => {
    const id = head.split(' ')[1]!.slice(1)
    return `HTTP/1.1 200 OK\r\ncontent-length: ${id.length}\r\n\r\n${id}`
  }
  const STRAY = 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstray'
  const settle = (): Promise<void> => new Promise(resolve => setTimeout(resolve, 50))

  /**
   * Two calls at once, so two connections; then `trigger` makes the first send bytes nobody
   * asked for. The second connection's backend holds a stray too and sends it just before
   * its next answer, as a backend without TCP_NODELAY does once the next request's ACK
   * reaches it: reused, that connection would answer the next call with the stray.
   */
  async function twoConnections (trigger: (first: Socket) => void, answer: (head: string) => string = named): Promise<{ server: RawServer, pool: H1Pool }> {
    const holding = new Set<Socket>()
    const carried = new Map<string, Socket>()
    const { server, pool } = await setup((head, s) => {
      carried.set(head.split(' ')[1]!, s)
      if (!holding.has(s)) return answer(head)
      holding.delete(s)
      return STRAY + answer(head)
    })
    assert.deepEqual((await Promise.all([call(pool, { path: '/a' }), call(pool, { path: '/b' })])).map(a => a.body), ['a', 'b'])
    assert.equal(server.connections, 2)
    holding.add(carried.get('/b')!)
    trigger(carried.get('/a')!)
    await settle()
    return { server, pool }
  }

  test('bytes on an idle connection end it, and the backend\'s other connections are not reused', async () => {
    const { server, pool } = await twoConnections(first => first.write(STRAY))
    assert.equal((await call(pool, { path: '/c' })).body, 'c', 'never the stray')
    assert.equal((await call(pool, { path: '/d' })).body, 'd')
    assert.equal(server.connections, 4, 'while the backend is in doubt, each connection carries one call')
  })

  test('bytes after a complete answer in the same write: the answer is passed on, no connection to that backend is reused', async () => {
    const { server, pool } = await twoConnections(() => {}, head => named(head) + (head.startsWith('GET /a ') ? STRAY : ''))
    assert.equal((await call(pool, { path: '/c' })).body, 'c', 'never the stray')
    assert.equal(server.connections, 3)
  })

  test('a HEAD answer that carries a body: the answer has none, and no connection to that backend is reused', async () => {
    const { server, pool } = await setup(head => head.startsWith('HEAD ') ? 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstray' : named(head))
    const head = await call(pool, { method: 'HEAD', path: '/h' })
    assert.equal(head.status, 200)
    assert.equal(head.body, '')
    assert.equal((await call(pool, { path: '/a' })).body, 'a')
    assert.equal((await call(pool, { path: '/b' })).body, 'b')
    assert.equal(server.connections, 3)
  })

  test('empty lines after an answer or on an idle connection are dropped (RFC 9112 §9.2): the connection is kept', async () => {
    const { server, pool } = await setup(head => named(head) + '\r\n')
    assert.equal((await call(pool, { path: '/a' })).body, 'a')
    server.sockets[0]!.write('\r\n\r\n')
    await settle()
    assert.equal((await call(pool, { path: '/b' })).body, 'b')
    assert.equal((await call(pool, { path: '/c' })).body, 'c')
    assert.equal(server.connections, 1)
  })

  test('the doubt lasts `strayHold` ms: then connections are kept again', async () => {
    const { server, pool } = await setup(named, { strayHold: 300 })
    assert.equal((await call(pool, { path: '/a' })).body, 'a')
    server.sockets[0]!.write(STRAY)
    await settle()
    assert.equal(pool.stats.connected, 0)
    for (const id of ['b', 'c']) assert.equal((await call(pool, { path: `/${id}` })).body, id)
    assert.equal(server.connections, 3, 'b and c each on a connection of its own')
    await new Promise(resolve => setTimeout(resolve, 300))
    for (const id of ['d', 'e']) assert.equal((await call(pool, { path: `/${id}` })).body, id)
    assert.equal(server.connections, 4, 'd and e on one kept connection')
  })

  test('an idle connection holding unread bytes is not reused (even if its reader stopped)', async () => {
    const { server, pool } = await setup(named, { headersTimeout: 500 })
    assert.equal((await call(pool, { path: '/a' })).body, 'a')
    // Nothing in the pool pauses an idle socket; if anything did, 'data' would not fire and
    // the bytes would wait in the stream's buffer.
    const conn = (pool as unknown as { idle: Array<{ socket: Socket }> }).idle[0]!
    conn.socket.pause()
    server.sockets[0]!.write(STRAY)
    await settle()
    // A socket that reads into the connection's own buffer (h1-connection.ts ReadBuffer)
    // leaves them in the kernel once stopped: stopped is enough to distrust it.
    assert.ok(conn.socket.readableLength > 0 || conn.socket.isPaused())
    assert.equal((await call(pool, { path: '/b' })).body, 'b')
    assert.equal(server.connections, 2)
  })
})
