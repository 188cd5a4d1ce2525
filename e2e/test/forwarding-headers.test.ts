/**
 * Header hygiene at the proxy boundary: hop-by-hop headers (and every header named in
 * Connection) stay on their hop in both directions, X-Forwarded-For/-Proto/-Host are set,
 * and the Host header reaches the backend exactly as the client sent it.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { nodeRequest } from '@portico/testkit/client'

describe('forwarding headers', () => {
  let portico: PorticoProcess
  let echo: Backend
  let hoppy: Backend

  before(async () => {
    echo = await startEchoBackend('echo')
    // A backend whose response carries hop-by-hop headers of its own.
    hoppy = await startBackend((req, res) => {
      req.resume()
      res.writeHead(200, {
        connection: 'keep-alive, x-resp-hop',
        'x-resp-hop': 'backend-only',
        'keep-alive': 'timeout=3, max=7',
        'proxy-connection': 'keep-alive',
        'x-resp-e2e': 'kept',
        'content-length': '2'
      })
      res.end('ok')
    })
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'hoppy', matches: [{ path: { pathPrefix: '/hoppy' } }], backends: [{ host: hoppy.host }] },
          { name: 'echo', backends: [{ host: echo.host }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await echo?.close()
    await hoppy?.close()
  })

  async function echoed (headers: Record<string, string>): Promise<EchoedRequest> {
    const res = await nodeRequest({ port: portico.port, path: '/headers', headers })
    assert.equal(res.status, 200, res.text)
    return JSON.parse(res.text) as EchoedRequest
  }

  test('hop-by-hop request headers and headers named in Connection are not forwarded', { timeout: 10_000 }, async () => {
    const got = await echoed({
      connection: 'keep-alive, x-custom, X-Other',
      'x-custom': 'for this hop only',
      'x-other': 'also this hop only',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      te: 'gzip',
      'x-end-to-end': 'forwarded'
    })
    for (const name of ['x-custom', 'x-other', 'keep-alive', 'proxy-connection', 'te']) {
      assert.equal(got.headers[name], undefined, `${name} was forwarded: ${JSON.stringify(got.headers)}`)
    }
    assert.doesNotMatch(String(got.headers.connection ?? ''), /x-custom|x-other/i)
    assert.equal(got.headers['x-end-to-end'], 'forwarded')
  })

  test('"te: trailers" is forwarded (gRPC needs it)', { timeout: 10_000 }, async () => {
    const got = await echoed({ te: 'trailers' })
    assert.equal(got.headers.te, 'trailers')
  })

  test('hop-by-hop response headers from the backend are not passed to the client', { timeout: 10_000 }, async () => {
    const res = await nodeRequest({ port: portico.port, path: '/hoppy' })
    assert.equal(res.status, 200)
    assert.equal(res.text, 'ok')
    assert.equal(res.headers['x-resp-hop'], undefined)
    assert.equal(res.headers['proxy-connection'], undefined)
    assert.doesNotMatch(String(res.headers.connection ?? ''), /x-resp-hop/i)
    assert.notEqual(res.headers['keep-alive'], 'timeout=3, max=7', 'the backend\'s Keep-Alive header reached the client')
    assert.equal(res.headers['x-resp-e2e'], 'kept')
  })

  test('X-Forwarded-For, -Proto and -Host are set from the client connection', { timeout: 10_000 }, async () => {
    const got = await echoed({ host: 'shop.example.com' })
    assert.equal(got.headers['x-forwarded-for'], '127.0.0.1')
    assert.equal(got.headers['x-forwarded-proto'], 'http')
    assert.equal(got.headers['x-forwarded-host'], 'shop.example.com')
  })

  test('an existing X-Forwarded-For gets the client address appended', { timeout: 10_000 }, async () => {
    const got = await echoed({ 'x-forwarded-for': '203.0.113.7' })
    assert.equal(got.headers['x-forwarded-for'], '203.0.113.7, 127.0.0.1')
  })

  test('the Host header reaches the backend exactly as the client sent it', { timeout: 10_000 }, async () => {
    for (const host of ['shop.example.com', 'Mixed.Example.COM:8443', `127.0.0.1:${portico.port}`]) {
      const got = await echoed({ host })
      assert.equal(got.headers.host, host)
      // Exactly one Host header, not the backend's address added beside it.
      const hosts = got.rawHeaders.filter((_v, i) => i % 2 === 0 && got.rawHeaders[i]!.toLowerCase() === 'host')
      assert.equal(hosts.length, 1, `raw headers: ${JSON.stringify(got.rawHeaders)}`)
    }
  })

  test('method, path and query string are forwarded unchanged', { timeout: 10_000 }, async () => {
    const res = await nodeRequest({ port: portico.port, method: 'PATCH', path: '/a/b%20c/?x=1&y=%2F&x=2', body: 'patch-body', headers: { 'content-type': 'text/plain' } })
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.method, 'PATCH')
    assert.equal(got.url, '/a/b%20c/?x=1&y=%2F&x=2')
    assert.equal(got.bodyLength, 'patch-body'.length)
  })
})
