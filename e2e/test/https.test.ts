/**
 * An HTTPS listener with a self-signed certificate made at test time by openssl: clients that
 * trust the certificate get proxied responses (large bodies included), the backend sees
 * X-Forwarded-Proto: https, and a client that does not trust it is refused by TLS.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { Agent, request } from 'undici'
import { makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, randomBody, sha256, startEchoBackend } from '@portico/testkit/backends'
import { rawExchange } from '@portico/testkit/client'
import { selfSignedCert } from '@portico/testkit/test-ca'

describe('https listener', () => {
  let portico: PorticoProcess
  let backend: Backend
  let dir: string
  let cert: string
  let agent: Agent

  before(async () => {
    dir = makeTempDir('portico-e2e-tls-')
    cert = selfSignedCert(dir, 'localhost', { key: 'rsa', sans: ['DNS:localhost', 'IP:127.0.0.1'], files: { cert: 'cert.pem', key: 'key.pem' } }).cert
    agent = new Agent({ connect: { ca: cert } })
    backend = await startEchoBackend('tls-backend')
    portico = await startPortico({
      dir,
      // Relative paths resolve against the config file's directory.
      config: port => ({
        gateways: { secure: { port, protocol: 'HTTPS', address: '127.0.0.1', tls: { cert: 'cert.pem', key: 'key.pem' } } },
        routes: [{ name: 'secure', gateways: ['secure'], backends: [{ host: backend.host }] }]
      })
    })
    assert.match(portico.stdout, /listening on https:\/\/127\.0\.0\.1:\d+/)
  })

  after(async () => {
    await agent?.destroy()
    await portico?.stop()
    await backend?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('a client trusting the self-signed certificate is proxied; the backend sees x-forwarded-proto https', { timeout: 10_000 }, async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const res = await request(`https://${host}:${portico.port}/secure/path?x=1`, { dispatcher: agent })
      assert.equal(res.statusCode, 200)
      const got = await res.body.json() as EchoedRequest
      assert.equal(got.name, 'tls-backend')
      assert.equal(got.url, '/secure/path?x=1')
      assert.equal(got.headers['x-forwarded-proto'], 'https')
      assert.equal(got.headers.host, `${host}:${portico.port}`)
    }
  })

  test('a 4 MiB upload over TLS is echoed to the backend intact', { timeout: 20_000 }, async () => {
    const body = randomBody(4 * 1024 * 1024)
    const res = await request(`https://127.0.0.1:${portico.port}/upload`, { dispatcher: agent, method: 'POST', body })
    assert.equal(res.statusCode, 200)
    const got = await res.body.json() as EchoedRequest
    assert.equal(got.bodyLength, body.length)
    assert.equal(got.bodySha256, sha256(body))
  })

  test('the listener presents the configured certificate', { timeout: 10_000 }, async () => {
    const fingerprint = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: portico.port, servername: 'localhost', ca: cert }, () => {
        const peer = socket.getPeerCertificate()
        socket.destroy()
        resolve(peer.fingerprint256)
      })
      socket.on('error', reject)
    })
    const expected = execFileSync('openssl', ['x509', '-noout', '-fingerprint', '-sha256', '-in', join(dir, 'cert.pem')], { encoding: 'utf8' })
    assert.equal(`sha256 Fingerprint=${fingerprint}`.toLowerCase(), expected.trim().toLowerCase())
  })

  test('a client that does not trust the certificate fails the TLS handshake', { timeout: 10_000 }, async () => {
    const strict = new Agent()
    try {
      await assert.rejects(request(`https://127.0.0.1:${portico.port}/`, { dispatcher: strict }), /self[- ]signed|certificate/i)
    } finally {
      await strict.destroy()
    }
  })

  test('plain HTTP on the HTTPS port gets no HTTP answer', { timeout: 10_000 }, async () => {
    const answer = await rawExchange(portico.port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n').catch(() => '')
    assert.doesNotMatch(answer, /^HTTP\/1\.1 200/)
  })
})
