/**
 * Client certificate validation on HTTPS listeners (tls.root, tls.clientCertMode) and 421 for
 * misdirected requests, over real TLS on loopback. A CA, a client certificate it signed, and a
 * client certificate of another CA are made at test time by openssl.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import https from 'node:https'
import { makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { createTestCa, selfSignedCert } from '@portico/testkit/test-ca'

interface Pem { cert: string, key: string }

/** A self-signed CA (named `subject`), and a client certificate signed by it, under `name`-*.pem. */
function caAndClient (dir: string, name: string, subject = `/CN=${name} CA`): { ca: string, client: Pem } {
  const ca = createTestCa(dir, `${name}-ca`, { subject, key: 'rsa' })
  const client = ca.issue(`${name}-client`, { subject: `/CN=${name} client` })
  return { ca: ca.cert, client: { cert: client.cert, key: client.key } }
}

/** One GET over a fresh TLS connection: the status and backend name, or the error's code. */
async function get (port: number, options: { servername: string, host: string, ca: string, client?: Pem }): Promise<{ status: number, backend: string } | { error: string }> {
  return await new Promise(resolve => {
    const req = https.request({
      host: '127.0.0.1',
      port,
      path: '/',
      servername: options.servername,
      headers: { host: options.host },
      ca: options.ca,
      ...(options.client !== undefined ? { cert: options.client.cert, key: options.client.key } : {}),
      agent: false
    }, res => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => {
        let backend = ''
        try { backend = (JSON.parse(body) as EchoedRequest).name } catch {}
        resolve({ status: res.statusCode ?? 0, backend })
      })
    })
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }))
    req.end()
  })
}

describe('client certificates and misdirected requests', () => {
  let dir: string
  let server: string
  let good: { ca: string, client: Pem }
  let other: { ca: string, client: Pem }
  let impostor: { ca: string, client: Pem }
  let backendA: Backend
  let backendB: Backend
  let strict: PorticoProcess
  let fallback: PorticoProcess

  before(async () => {
    dir = makeTempDir('portico-e2e-mtls-')
    const pem = selfSignedCert(dir, 'server', { subject: '/CN=a.test', key: 'rsa', sans: ['DNS:a.test', 'DNS:b.test', 'DNS:*.wild.test', 'DNS:other.test'] })
    server = pem.cert
    good = caAndClient(dir, 'good')
    other = caAndClient(dir, 'other')
    // Another CA with the trusted CA's name (as the conformance suite makes its CAs): OpenSSL
    // finds it by name and fails the signature check, an error Node leaves queued.
    impostor = caAndClient(dir, 'impostor', '/CN=good CA')
    backendA = await startEchoBackend('a')
    backendB = await startEchoBackend('b')
    // Each portico writes its config into a directory of its own; the PEM files are absolute.
    const tls = (mode: 'AllowValidOnly' | 'AllowInsecureFallback') => ({ cert: pem.certFile, key: pem.keyFile, root: join(dir, 'good-ca.pem'), clientCertMode: mode })
    strict = await startPortico({
      config: port => ({
        gateways: {
          any: { port, protocol: 'HTTPS', address: '127.0.0.1', tls: tls('AllowValidOnly') },
          b: { port, protocol: 'HTTPS', address: '127.0.0.1', hostname: 'b.test', tls: tls('AllowValidOnly') }
        },
        routes: [
          { name: 'a', gateways: ['any'], hostnames: ['a.test'], backends: [{ host: backendA.host }] },
          { name: 'b', gateways: ['b'], backends: [{ host: backendB.host }] }
        ]
      })
    })
    fallback = await startPortico({
      config: port => ({
        gateways: { default: { port, protocol: 'HTTPS', address: '127.0.0.1', tls: tls('AllowInsecureFallback') } },
        routes: [{ name: 'a', backends: [{ host: backendA.host }] }]
      })
    })
  })

  after(async () => {
    await strict?.stop()
    await fallback?.stop()
    await backendA?.close()
    await backendB?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('AllowValidOnly: a certificate of the root CA is served; none, or one of another CA, fails the handshake', { timeout: 20_000 }, async () => {
    assert.deepEqual(await get(strict.port, { servername: 'a.test', host: 'a.test', ca: server, client: good.client }), { status: 200, backend: 'a' })
    assert.deepEqual(await get(strict.port, { servername: 'b.test', host: 'b.test', ca: server, client: good.client }), { status: 200, backend: 'b' })
    assert.ok('error' in await get(strict.port, { servername: 'a.test', host: 'a.test', ca: server }))
    assert.ok('error' in await get(strict.port, { servername: 'a.test', host: 'a.test', ca: server, client: other.client }))
    assert.ok('error' in await get(strict.port, { servername: 'b.test', host: 'b.test', ca: server, client: other.client }))
    assert.ok('error' in await get(strict.port, { servername: 'a.test', host: 'a.test', ca: server, client: impostor.client }))
  })

  test('AllowInsecureFallback: every client is served, with a valid certificate, another CA\'s or none', { timeout: 20_000 }, async () => {
    for (const client of [good.client, other.client, impostor.client, undefined]) {
      assert.deepEqual(await get(fallback.port, { servername: 'a.test', host: 'a.test', ca: server, ...(client !== undefined ? { client } : {}) }), { status: 200, backend: 'a' })
    }
  })

  test('a Host another listener serves than the SNI name picked gets 421; a Host of the same listener is routed', { timeout: 20_000 }, async () => {
    const client = good.client
    assert.deepEqual(await get(strict.port, { servername: 'a.test', host: 'b.test', ca: server, client }), { status: 421, backend: '' })
    assert.deepEqual(await get(strict.port, { servername: 'b.test', host: 'a.test', ca: server, client }), { status: 421, backend: '' })
    assert.deepEqual(await get(strict.port, { servername: 'b.test', host: 'other.test', ca: server, client }), { status: 421, backend: '' })
    // other.test and a.test are both the catch-all listener's: no misdirection, plain routing.
    assert.deepEqual(await get(strict.port, { servername: 'other.test', host: 'a.test', ca: server, client }), { status: 200, backend: 'a' })
    assert.equal((await get(strict.port, { servername: 'a.test', host: 'other.test', ca: server, client }) as { status: number }).status, 404)
  })
})
