/**
 * HTTP/2 to backends that speak nothing else (`policies.http.version: HTTP2`): h2c with prior
 * knowledge to an http backend, h2 by ALPN to an https one — Node's http2 servers without
 * HTTP/1.1 fallback, so an HTTP/1.1 call would fail. HTTP/1.1 clients are served through them,
 * bodies both ways, concurrent requests on the shared connection; and without the setting, an
 * h2c-only backend is unreachable (the default stays HTTP/1.1).
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { selfSignedCert } from '@portico/testkit/test-ca'

let h2c: http2.Http2Server
let h2: http2.Http2SecureServer
let portico: PorticoProcess
const versions: string[] = []

function answer (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void {
  versions.push(req.httpVersion)
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end(`${req.method} ${req.url} over ${req.httpVersion}: ${Buffer.concat(chunks).length} bytes`)
  })
}

before(async () => {
  const dir = makeTempDir()
  const { cert, key } = selfSignedCert(dir, 'localhost')
  h2c = http2.createServer(answer)
  h2 = http2.createSecureServer({ key, cert }, answer)
  await new Promise<void>(resolve => h2c.listen(0, '127.0.0.1', resolve))
  await new Promise<void>(resolve => h2.listen(0, '127.0.0.1', resolve))
  const h2cPort = (h2c.address() as AddressInfo).port
  const h2Port = (h2.address() as AddressInfo).port
  portico = await startPortico({
    dir,
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'h2c', matches: [{ path: { pathPrefix: '/h2c' } }], backends: [{ host: `127.0.0.1:${h2cPort}`, policies: { http: { version: 'HTTP2' } } }] },
        { name: 'h2', matches: [{ path: { pathPrefix: '/h2' } }], backends: [{ host: `127.0.0.1:${h2Port}`, policies: { http: { version: 'HTTP2' }, backendTLS: { insecure: true } } }] },
        { name: 'http1', matches: [{ path: { pathPrefix: '/http1' } }], backends: [{ host: `127.0.0.1:${h2cPort}` }] }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await new Promise(resolve => h2c?.close(resolve))
  await new Promise(resolve => h2?.close(resolve))
})

test('an HTTP/1.1 client reaches an h2c-only backend and an h2-only (TLS) one', async () => {
  const get = await request(`${portico.url}/h2c/x?y=1`)
  assert.equal(get.statusCode, 200)
  assert.equal(await get.body.text(), 'GET /h2c/x?y=1 over 2.0: 0 bytes')
  const post = await request(`${portico.url}/h2/upload`, { method: 'POST', body: Buffer.alloc(300_000, 1) })
  assert.equal(post.statusCode, 200)
  assert.equal(await post.body.text(), 'POST /h2/upload over 2.0: 300000 bytes')
})

test('concurrent requests share the HTTP/2 connections', async () => {
  const answers = await Promise.all(Array.from({ length: 40 }, async (_, i) => (await request(`${portico.url}/h2c/${i}`)).body.text()))
  assert.deepEqual(answers, Array.from({ length: 40 }, (_, i) => `GET /h2c/${i} over 2.0: 0 bytes`))
})

test('without the setting the backend is called over HTTP/1.1 (an h2c-only server cannot answer)', async () => {
  const before = versions.length
  const res = await request(`${portico.url}/http1/x`)
  await res.body.text()
  assert.ok(res.statusCode >= 500, `status ${res.statusCode}`)
  assert.equal(versions.length, before, 'the h2c-only server never saw an HTTP/2 request from that route')
})

test('http.version is checked: an unknown version is a config error', async () => {
  const { loadConfigText } = await import('@portico/engine')
  const r = loadConfigText('gateways: {default: {port: 3000}}\nroutes: [{backends: [{host: "127.0.0.1:1", policies: {http: {version: HTTP3}}}]}]\n', { baseDir: '/' })
  assert.equal(r.ok, false)
})
