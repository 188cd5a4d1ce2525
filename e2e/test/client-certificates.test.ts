/**
 * Client certificate validation on HTTPS listeners (tls.root, tls.clientCertMode) and 421 for
 * misdirected requests, over real TLS on loopback. A CA, a client certificate it signed, and a
 * client certificate of another CA are made at test time by openssl.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import https from 'node:https'
import { makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'

interface Pem { cert: string, key: string }

function openssl (dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore', timeout: 30_000 })
}

/** A self-signed CA (named `subject`), and a client certificate signed by it, under `name`-*.pem. */
function caAndClient (dir: string, name: string, subject = `/CN=${name} CA`): { ca: string, client: Pem } {
  openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-days', '1', '-keyout', `${name}-ca.key`, '-out', `${name}-ca.pem`, '-subj', subject])
  openssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-keyout', `${name}-client.key`, '-out', `${name}-client.csr`, '-subj', `/CN=${name} client`])
  openssl(dir, ['x509', '-req', '-in', `${name}-client.csr`, '-CA', `${name}-ca.pem`, '-CAkey', `${name}-ca.key`, '-CAcreateserial', '-days', '1', '-sha256', '-out', `${name}-client.pem`])
  return { ca: readFileSync(join(dir, `${name}-ca.pem`), 'utf8'), client: { cert: readFileSync(join(dir, `${name}-client.pem`), 'utf8'), key: readFileSync(join(dir, `${name}-client.key`), 'utf8') } }
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
    openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-days', '1', '-keyout', 'key.pem', '-out', 'cert.pem', '-subj', '/CN=a.test',
      '-addext', 'subjectAltName=DNS:a.test,DNS:b.test,DNS:*.wild.test,DNS:other.test'])
    server = readFileSync(join(dir, 'cert.pem'), 'utf8')
    good = caAndClient(dir, 'good')
    other = caAndClient(dir, 'other')
    // Another CA with the trusted CA's name (as the conformance suite makes its CAs): OpenSSL
    // finds it by name and fails the signature check, an error Node leaves queued.
    impostor = caAndClient(dir, 'impostor', '/CN=good CA')
    backendA = await startEchoBackend('a')
    backendB = await startEchoBackend('b')
    // Each portico writes its config into a directory of its own; the PEM files are absolute.
    const tls = (mode: 'AllowValidOnly' | 'AllowInsecureFallback') => ({ cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem'), root: join(dir, 'good-ca.pem'), clientCertMode: mode })
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
