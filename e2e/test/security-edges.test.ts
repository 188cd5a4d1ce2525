/**
 * Smaller edges (issue 14, item 10):
 * - X-Forwarded-Proto/-Host a client sends are replaced at the edge, unless the gateway is
 *   told proxies in front of it set them (`clientIPDetection.xForwardedFor.numTrustedHops`);
 * - only allowed upgrades (WebSocket by default) reach a backend as upgrades: `Upgrade: h2c`
 *   is forwarded as a plain request without its upgrade headers (no h2c smuggling);
 * - a chunked body with a bad chunk size gets a 400 answer, not a silently closed socket;
 * - the `Bearer` scheme is case-insensitive (RFC 7235 §2.1).
 *
 * Raw-socket cases write exact bytes with node:net.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocket, WebSocketServer } from 'ws'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startBackend } from '@portico/testkit/backends'
import { nodeRequest, rawExchange } from '@portico/testkit/client'
import { withTimeout } from '@portico/testkit/wait'
import { startIdp, type Idp, type IdpClient } from '../lib/idp.ts'

const alice: IdpClient = { id: 'alice', secret: 'alice-secret', permissions: ['read'] }

describe('security: edges', () => {
  let portico: PorticoProcess
  let trustedPort: number
  let backend: Backend
  let idp: Idp
  /** Upgrade requests the backend saw (it would switch to anything it is asked for). */
  const upgradesSeen: string[] = []
  /** Paths of the plain requests the backend saw. */
  const requestsSeen: string[] = []

  before(async () => {
    idp = await startIdp({ clients: [alice] })
    backend = await startBackend((req, res) => {
      requestsSeen.push(req.url ?? '')
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const echoed: EchoedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, bodyLength: Buffer.concat(chunks).length } as unknown as EchoedRequest
        setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(echoed)), req.url?.startsWith('/echo/slow') === true ? 300 : 0)
      })
    })
    // WebSocket upgrades go to `ws`; a backend that speaks h2c would answer 101 to h2c.
    const wss = new WebSocketServer({ noServer: true })
    wss.on('connection', socket => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })))
    backend.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      upgradesSeen.push(String(req.headers.upgrade))
      if (String(req.headers.upgrade).toLowerCase() === 'websocket') {
        wss.handleUpgrade(req, socket, head, ws => wss.emit('connection', ws, req))
        return
      }
      socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n')
    })
    trustedPort = await freePort()
    const provider = { issuer: idp.issuer, audiences: [idp.audience], jwks: { url: idp.jwksUrl } }
    portico = await startPortico({
      config: port => ({
        gateways: {
          default: gateway(port),
          behindProxy: gateway(trustedPort, { clientIPDetection: { xForwardedFor: { numTrustedHops: 1 } } })
        },
        routes: [
          { name: 'jwt', gateways: ['default'], matches: [{ path: { pathPrefix: '/jwt' } }], policies: { jwtAuth: { mode: 'strict', ...provider } }, backends: [{ host: backend.host }] },
          { name: 'echo', gateways: ['default', 'behindProxy'], backends: [{ host: backend.host }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await backend?.close()
    await idp?.stop()
  })

  async function echoed (port: number, headers: Record<string, string>): Promise<EchoedRequest> {
    const res = await nodeRequest({ port, path: '/echo', headers })
    assert.equal(res.status, 200, res.text)
    return JSON.parse(res.text) as EchoedRequest
  }

  test('X-Forwarded-Proto and -Host from a client are replaced by default', { timeout: 10_000 }, async () => {
    const got = await echoed(portico.port, { host: 'gw.test', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'bank.example', 'x-forwarded-for': '203.0.113.7' })
    assert.equal(got.headers['x-forwarded-proto'], 'http')
    assert.equal(got.headers['x-forwarded-host'], 'gw.test')
    // X-Forwarded-For keeps what came before and appends the peer (read it from the right).
    assert.equal(got.headers['x-forwarded-for'], '203.0.113.7, 127.0.0.1')
  })

  test('with numTrustedHops: 1 the X-Forwarded-Proto and -Host of the proxy in front are kept', { timeout: 10_000 }, async () => {
    const got = await echoed(trustedPort, { host: 'gw.internal', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'shop.example' })
    assert.equal(got.headers['x-forwarded-proto'], 'https')
    assert.equal(got.headers['x-forwarded-host'], 'shop.example')
    const bare = await echoed(trustedPort, { host: 'gw.internal' })
    assert.equal(bare.headers['x-forwarded-proto'], 'http')
    assert.equal(bare.headers['x-forwarded-host'], 'gw.internal')
  })

  test('Upgrade: h2c is forwarded as a plain request without its upgrade headers, and the connection closes after it', { timeout: 15_000 }, async () => {
    const before = upgradesSeen.length
    const first = await rawExchange(portico.port, 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n')
    assert.match(first, /^HTTP\/1\.1 200 /, first)
    assert.doesNotMatch(first, /101 Switching Protocols/)
    assert.match(first, /\r\nconnection: close\r\n/i, first)
    assert.equal(upgradesSeen.length, before, `the backend was asked to upgrade: ${upgradesSeen.slice(before).join(', ')}`)
    const json = first.slice(first.indexOf('{'), first.lastIndexOf('}') + 1)
    const got = JSON.parse(json) as EchoedRequest
    assert.equal(got.headers.upgrade, undefined)
    assert.equal(got.headers['http2-settings'], undefined)
    assert.doesNotMatch(String(got.headers.connection ?? ''), /upgrade/i)
  })

  test('a client that pipelines behind a refused upgrade is not left waiting: the upgrade request is answered and the connection closes', { timeout: 15_000 }, async () => {
    // Node's parser stops at the head of an upgrade request and drops what followed it in
    // the same read: without the close, this client would wait for its second answer forever.
    const answer = await rawExchange(portico.port, 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nGET /echo HTTP/1.1\r\nHost: gw.test\r\n\r\n')
    assert.match(answer, /^HTTP\/1\.1 200 /, answer)
    assert.match(answer, /\r\nconnection: close\r\n/i, answer)
    // Nor is a request the client writes while that answer is under way sent to a backend
    // whose answer could never reach the client.
    const before = requestsSeen.length
    const slow = await new Promise<string>((resolve, reject) => {
      import('node:net').then(({ connect }) => {
        const socket = connect({ host: '127.0.0.1', port: portico.port })
        let text = ''
        socket.on('data', (c: Buffer) => { text += c.toString('latin1') })
        socket.on('error', () => {})
        socket.on('close', () => resolve(text))
        socket.write('GET /echo/slow HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n')
        setTimeout(() => socket.write('GET /echo/after HTTP/1.1\r\nHost: gw.test\r\n\r\n'), 100)
        setTimeout(() => { socket.destroy(); reject(new Error(`still open; got ${JSON.stringify(text)}`)) }, 5_000).unref()
      }, reject)
    })
    assert.match(slow, /^HTTP\/1\.1 200 /, slow)
    assert.deepEqual(requestsSeen.slice(before), ['/echo/slow'])
  })

  test('an HTTP/2 preface right behind an Upgrade: h2c request is a 400 that closes the connection', { timeout: 15_000 }, async () => {
    const before = requestsSeen.length
    const upgradesBefore = upgradesSeen.length
    const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
    for (const upgrade of ['h2c', 'websocket-not-quite']) {
      const answer = await rawExchange(portico.port, `GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: ${upgrade}\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n${preface}`)
      assert.match(answer, /^HTTP\/1\.1 400 /, `${upgrade}: ${JSON.stringify(answer)}`)
      assert.match(answer, /\r\nconnection: close\r\n/i, answer)
      assert.equal(answer.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, answer)
    }
    assert.equal(requestsSeen.length, before, `the backend was called: ${requestsSeen.slice(before).join(', ')}`)
    assert.equal(upgradesSeen.length, upgradesBefore)
  })

  test('an upgrade pipelined behind a request still being answered is served after that answer (no uncaught exception)', { timeout: 15_000 }, async () => {
    const fromStdout = portico.stdout.length
    const before = upgradesSeen.length
    const answer = await new Promise<string>((resolve, reject) => {
      import('node:net').then(({ connect }) => {
        const socket = connect({ host: '127.0.0.1', port: portico.port })
        let text = ''
        const timer = setTimeout(() => { socket.destroy(); reject(new Error(`no 101; got ${JSON.stringify(text)}`)) }, 8_000)
        socket.on('data', (c: Buffer) => {
          text += c.toString('latin1')
          if (text.includes('101 Switching Protocols')) { clearTimeout(timer); socket.destroy(); resolve(text) }
        })
        socket.on('error', () => {})
        socket.write('GET /echo HTTP/1.1\r\nHost: gw.test\r\n\r\n' +
          'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n')
      }, reject)
    })
    assert.match(answer, /^HTTP\/1\.1 200 [^]*HTTP\/1\.1 101 Switching Protocols/, answer)
    assert.equal(upgradesSeen.length, before + 1)
    await new Promise(resolve => setTimeout(resolve, 100))
    const errors = portico.stdout.slice(fromStdout).split('\n').filter(line => /"level":(5\d|6\d)\b/.test(line))
    assert.deepEqual(errors, [])
  })

  test('HTTP/1.1 leniencies are a 400 that closes the connection; nothing pipelined behind them is served', { timeout: 30_000 }, async () => {
    const pipelined = 'GET /echo/pipelined HTTP/1.1\r\nHost: gw.test\r\n\r\n'
    const cases: Record<string, string> = {
      'HTTP/0.9 request line': 'GET /echo\r\n\r\n',
      'HTTP/0.9 request line with headers': 'GET /echo\r\nHost: gw.test\r\n\r\n',
      'Connection: Host': 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Host\r\n\r\n',
      'Connection: keep-alive, Content-Length': 'POST /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: keep-alive, Content-Length\r\nContent-Length: 3\r\n\r\nabc',
      'Connection: Transfer-Encoding': 'POST /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
      'Connection: X-Forwarded-For': 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: X-Forwarded-For\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n',
      'Connection: x-forwarded-proto (any case)': 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: x-FORWARDED-proto\r\n\r\n',
      'Connection: Forwarded': 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Forwarded\r\n\r\n',
      'Connection naming a pseudo-header': 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: :authority\r\n\r\n',
      'Connection naming ten fields': `GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: ${Array.from({ length: 10 }, (_, i) => `x-${i}`).join(', ')}\r\n\r\n`,
      '%00 in the path': 'GET /echo/a%00b HTTP/1.1\r\nHost: gw.test\r\n\r\n',
      'a raw NUL in the path': 'GET /echo/a\x00b HTTP/1.1\r\nHost: gw.test\r\n\r\n',
      'a bad Host': 'GET /echo HTTP/1.1\r\nHost: gw test\r\n\r\n',
      'two Host lines': 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nHost: other.test\r\n\r\n',
      'a bad escape in the path': 'GET /echo/%zz HTTP/1.1\r\nHost: gw.test\r\n\r\n'
    }
    for (const [name, request] of Object.entries(cases)) {
      const before = requestsSeen.length
      const answer = await rawExchange(portico.port, request + pipelined)
      assert.match(answer, /^HTTP\/1\.1 400 /, `${name}: ${JSON.stringify(answer)}`)
      assert.match(answer, /\r\nconnection: close\r\n/i, `${name}: ${JSON.stringify(answer)}`)
      assert.equal(answer.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `${name}: ${JSON.stringify(answer)}`)
      assert.deepEqual(requestsSeen.slice(before), [], `${name}: the backend was called`)
    }
    // What stays allowed: Connection naming fields of the client's own, %00 in the query.
    for (const request of [
      'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: close, X-Private\r\nX-Private: 1\r\n\r\n',
      'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: TE, close\r\nTE: trailers\r\n\r\n',
      'GET /echo?x=%00 HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n'
    ]) {
      const answer = await rawExchange(portico.port, request)
      assert.match(answer, /^HTTP\/1\.1 200 /, `${JSON.stringify(request)}: ${JSON.stringify(answer)}`)
      assert.doesNotMatch(answer, /"x-private"/)
    }
  })

  test('an upgrade listing h2c beside websocket is not an allowed upgrade', { timeout: 10_000 }, async () => {
    const before = upgradesSeen.length
    const answer = await rawExchange(portico.port, 'GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade, close\r\nUpgrade: h2c, websocket\r\n\r\n')
    assert.match(answer, /^HTTP\/1\.1 200 /, answer)
    assert.equal(upgradesSeen.length, before)
  })

  test('WebSocket upgrades still work', { timeout: 10_000 }, async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${portico.port}/echo`)
    await withTimeout(new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    }), 5_000, 'WebSocket did not open')
    const reply = withTimeout(new Promise<string>(resolve => ws.once('message', data => resolve(String(data)))), 5_000, 'no message')
    ws.send('ping')
    assert.equal(await reply, 'ping')
    ws.close()
  })

  test('a bad chunk size gets a 400 answer (in the first packet or after a good chunk)', { timeout: 15_000 }, async () => {
    const head = 'POST /echo HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n'
    for (const body of ['zz\r\nhello\r\n0\r\n\r\n', '5\r\nhello\r\n-1\r\nx\r\n0\r\n\r\n', '5\r\nhello\r\n5 5\r\nhello\r\n0\r\n\r\n']) {
      const answer = await rawExchange(portico.port, head + body)
      assert.match(answer, /^HTTP\/1\.1 400 /, `${JSON.stringify(body)} got ${JSON.stringify(answer)}`)
      assert.match(answer, /connection: close/i)
    }
  })

  test('a bad chunk size after the request was dispatched gets a 400 answer', { timeout: 15_000 }, async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      import('node:net').then(({ connect }) => {
        const socket = connect({ host: '127.0.0.1', port: portico.port })
        let text = ''
        socket.on('data', (c: Buffer) => { text += c.toString('latin1') })
        socket.on('error', () => {})
        socket.on('close', () => resolve(text))
        socket.write('POST /echo HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n')
        // The backend call is under way when the garbage arrives.
        setTimeout(() => socket.write('not-a-size\r\n\r\n'), 300)
        setTimeout(() => { socket.destroy(); reject(new Error(`still open; got ${JSON.stringify(text)}`)) }, 8_000).unref()
      }, reject)
    })
    assert.match(answer, /^HTTP\/1\.1 400 /, JSON.stringify(answer))
  })

  test('the Bearer scheme is case-insensitive (RFC 7235)', { timeout: 10_000 }, async () => {
    const token = await idp.token(alice)
    for (const scheme of ['Bearer', 'bearer', 'bEaReR', 'BEARER']) {
      const res = await nodeRequest({ port: portico.port, path: '/jwt/x', headers: { authorization: `${scheme} ${token}` } })
      assert.equal(res.status, 200, `${scheme}: ${res.status} ${res.text}`)
    }
    const none = await nodeRequest({ port: portico.port, path: '/jwt/x', headers: { authorization: `Basic ${token}` } })
    assert.equal(none.status, 401)
  })
})
