/**
 * Downstream HTTP/2: h2c with prior knowledge on an HTTP listener and h2 chosen by ALPN on an
 * HTTPS one, both proxied to an HTTP/1.1 backend, HTTP/1.1 still served on the same ports,
 * 421 for a misdirected request over h2, and `http2: false` turning both off.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import http from 'node:http'
import http2 from 'node:http2'
import https from 'node:https'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, randomBody, sha256, startEchoBackend } from '@portico/testkit/backends'
import { selfSignedCert } from '@portico/testkit/test-ca'

interface H2Answer { status: number, headers: http2.IncomingHttpHeaders, body: Buffer }

async function h2Request (session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<H2Answer> {
  return await new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined })
    const chunks: Buffer[] = []
    let head: http2.IncomingHttpHeaders = {}
    stream.on('response', h => { head = h })
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('end', () => resolve({ status: Number(head[':status']), headers: head, body: Buffer.concat(chunks) }))
    stream.on('error', reject)
    if (body !== undefined) stream.end(body)
  })
}

async function h2Connect (authority: string, options: http2.SecureClientSessionOptions = {}): Promise<http2.ClientHttp2Session> {
  return await new Promise((resolve, reject) => {
    const session = http2.connect(authority, options)
    session.once('connect', () => resolve(session))
    session.once('error', reject)
  })
}

async function http1Get (url: string, options: https.RequestOptions = {}): Promise<{ status: number, version: string, body: string }> {
  const mod = url.startsWith('https:') ? https : http
  return await new Promise((resolve, reject) => {
    mod.get(url, { ...options, agent: false }, res => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, version: res.httpVersion, body }))
    }).on('error', reject)
  })
}

describe('downstream HTTP/2', () => {
  let dir: string
  let cert: string
  let backend: Backend
  let plain: PorticoProcess
  let off: PorticoProcess
  let tlsPort: number

  before(async () => {
    dir = makeTempDir('portico-e2e-h2-')
    cert = selfSignedCert(dir, 'a.test', { key: 'rsa', sans: ['DNS:a.test', 'DNS:b.test', 'DNS:localhost'], files: { cert: 'cert.pem', key: 'key.pem' } }).cert
    backend = await startEchoBackend('h1-backend')
    tlsPort = await freePort()
    const tls = { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') }
    plain = await startPortico({
      config: port => ({
        gateways: {
          web: { port, address: '127.0.0.1' },
          a: { port: tlsPort, protocol: 'HTTPS', address: '127.0.0.1', hostname: 'a.test', tls },
          b: { port: tlsPort, protocol: 'HTTPS', address: '127.0.0.1', hostname: 'b.test', tls }
        },
        routes: [{ name: 'all', gateways: ['web', 'a', 'b'], backends: [{ host: backend.host }] }]
      })
    })
    off = await startPortico({
      config: port => ({
        gateways: { web: { port, address: '127.0.0.1', http2: false } },
        routes: [{ name: 'all', gateways: ['web'], backends: [{ host: backend.host }] }]
      })
    })
  })

  after(async () => {
    await plain?.stop()
    await off?.stop()
    await backend?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('h2c with prior knowledge: GET and a POST with a body reach the HTTP/1.1 backend', { timeout: 20_000 }, async () => {
    const session = await h2Connect(`http://127.0.0.1:${plain.port}`)
    try {
      const get = await h2Request(session, { ':method': 'GET', ':path': '/h2c?x=1', ':authority': 'example.test' })
      assert.equal(get.status, 200)
      assert.equal(get.headers.connection, undefined)
      const echoed = JSON.parse(get.body.toString()) as EchoedRequest
      assert.equal(echoed.url, '/h2c?x=1')
      assert.equal(echoed.headers.host, 'example.test')
      assert.ok(!Object.keys(echoed.headers).some(h => h.startsWith(':')), 'no pseudo-header reaches the backend')

      const body = randomBody(200_000)
      // No content-length: HTTP/2 frames the body itself.
      const post = await h2Request(session, { ':method': 'POST', ':path': '/upload', ':authority': 'example.test' }, body)
      assert.equal(post.status, 200)
      const got = JSON.parse(post.body.toString()) as EchoedRequest
      assert.equal(got.method, 'POST')
      assert.equal(got.bodyLength, body.length)
      assert.equal(got.bodySha256, sha256(body))
    } finally {
      session.close()
    }
    const h1 = await http1Get(`http://127.0.0.1:${plain.port}/h1`)
    assert.equal(h1.status, 200)
    assert.equal(h1.version, '1.1')
    assert.equal((JSON.parse(h1.body) as EchoedRequest).url, '/h1')
  })

  test('h2 by ALPN on HTTPS; HTTP/1.1 still served; a Host of another listener than the SNI name gets 421', { timeout: 20_000 }, async () => {
    const session = await h2Connect(`https://127.0.0.1:${tlsPort}`, { ca: cert, servername: 'a.test' })
    try {
      assert.equal(session.alpnProtocol, 'h2')
      const ok = await h2Request(session, { ':method': 'GET', ':path': '/tls', ':authority': 'a.test' })
      assert.equal(ok.status, 200)
      const echoed = JSON.parse(ok.body.toString()) as EchoedRequest
      assert.equal(echoed.headers.host, 'a.test')
      assert.equal(echoed.headers['x-forwarded-proto'], 'https')
      const misdirected = await h2Request(session, { ':method': 'GET', ':path': '/tls', ':authority': 'b.test' })
      assert.equal(misdirected.status, 421)
    } finally {
      session.close()
    }
    const h1 = await http1Get(`https://127.0.0.1:${tlsPort}/tls1`, { ca: cert, servername: 'a.test', headers: { host: 'a.test' } })
    assert.equal(h1.status, 200)
    assert.equal(h1.version, '1.1')
  })

  test('http2: false serves HTTP/1.1 only', { timeout: 20_000 }, async () => {
    const h1 = await http1Get(`http://127.0.0.1:${off.port}/h1`)
    assert.equal(h1.status, 200)
    const session = http2.connect(`http://127.0.0.1:${off.port}`)
    session.on('error', () => {})
    const failed = await new Promise<boolean>(resolve => {
      const stream = session.request({ ':path': '/' })
      stream.on('response', () => resolve(false))
      stream.on('error', () => resolve(true))
      stream.on('close', () => resolve(true))
      stream.end()
    })
    session.destroy()
    assert.ok(failed, 'the HTTP/2 preface is not served as HTTP/2')
  })
})
