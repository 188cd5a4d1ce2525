/**
 * Backend TLS as BackendTLSPolicy needs it: subjectAltNames (Hostname, URI; one match is
 * enough, the SNI name then does not have to match) and a configured server name that holds
 * whatever Host header a request carries (undici would otherwise send the Host as SNI).
 * Certificates are made by openssl at test time.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import https from 'node:https'
import http2 from 'node:http2'
import type { TLSSocket } from 'node:tls'
import { X509Certificate } from 'node:crypto'
import { UpstreamPools, sanCheck } from '../src/http/upstream-pools.ts'
import { collect } from './lib/dispatch.ts'
import { validateIR } from '../src/ir/validate.ts'
import type { BackendIR, ProxyIR } from '../src/ir/types.ts'
import type { BackendTlsIR } from '../src/ir/traffic.ts'
import { createTestCa } from '../../testkit/src/test-ca.ts'

let dir: string
let ca: string
let server: https.Server
let port: number
const snis: Array<string | false> = []
const h2Servers: http2.Http2SecureServer[] = []

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'portico-san-'))
  createTestCa(dir, 'ca', { subject: '/CN=san-test-ca' })
    .issue('server', { subject: '/CN=abc.example.com', sans: ['DNS:abc.example.com', 'URI:spiffe://abc.example.com/test-identity'] })
  ca = readFileSync(join(dir, 'ca.pem'), 'utf8')
  server = https.createServer({ cert: readFileSync(join(dir, 'server.pem')), key: readFileSync(join(dir, 'server.key')) }, (req, res) => {
    snis.push((req.socket as TLSSocket).servername ?? false)
    res.end('ok')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as { port: number }).port
})

after(() => {
  for (const s of h2Servers) s.close()
  server.close()
  rmSync(dir, { recursive: true, force: true })
})

function backend (key: string, tls: BackendTlsIR): BackendIR {
  return { key, kind: 'service', name: key, protocol: 'https', endpoints: [{ host: '127.0.0.1', port }], target: `127.0.0.1:${port}`, tls }
}

async function call (b: BackendIR, host: string): Promise<number | string> {
  const pools = new UpstreamPools()
  try {
    return (await collect(pools.get(b), { headers: { host } })).status
  } catch (err) {
    return (err as { code?: string }).code ?? (err as Error).message
  } finally {
    await pools.destroy()
  }
}

test('sanCheck: a Hostname SAN matches a DNS name, a URI SAN a URI exactly; one match is enough', () => {
  const cert = new X509Certificate(readFileSync(join(dir, 'server.pem'))).toLegacyObject()
  assert.equal(sanCheck([{ type: 'Hostname', value: 'abc.example.com' }])('other.example.com', cert), undefined)
  assert.equal(sanCheck([{ type: 'URI', value: 'spiffe://abc.example.com/test-identity' }])('x', cert), undefined)
  assert.equal(sanCheck([{ type: 'URI', value: 'spiffe://def.example.com/test-identity' }, { type: 'Hostname', value: 'abc.example.com' }])('x', cert), undefined)
  assert.match(String(sanCheck([{ type: 'Hostname', value: 'def.example.com' }])('abc.example.com', cert)), /matches none of the subjectAltNames/)
  assert.ok(sanCheck([{ type: 'URI', value: 'spiffe://abc.example.com' }])('abc.example.com', cert) instanceof Error)
})

test('the configured server name is the SNI and the name verified, whatever the Host header', async () => {
  snis.length = 0
  assert.equal(await call(backend('pinned', { ca, serverName: 'abc.example.com' }), 'https-listener.org'), 200)
  assert.deepEqual(snis, ['abc.example.com'])
  assert.equal(await call(backend('wrong-name', { ca, serverName: 'mismatch.example.com' }), 'abc.example.com'), 'ERR_TLS_CERT_ALTNAME_INVALID')
})

test('subjectAltNames replace the server name in verification; a mismatch fails the call', async () => {
  assert.equal(await call(backend('san-uri', { ca, serverName: 'other.example.com', subjectAltNames: [{ type: 'URI', value: 'spiffe://abc.example.com/test-identity' }] }), 'x.test'), 200)
  assert.equal(await call(backend('san-miss', { ca, serverName: 'abc.example.com', subjectAltNames: [{ type: 'Hostname', value: 'def.example.com' }] }), 'x.test'), 'ERR_TLS_CERT_ALTNAME_INVALID')
  // The chain is still verified: a name that matches does not excuse an unknown CA.
  assert.equal(await call(backend('san-no-ca', { serverName: 'abc.example.com', subjectAltNames: [{ type: 'Hostname', value: 'abc.example.com' }] }), 'x.test'), 'UNABLE_TO_VERIFY_LEAF_SIGNATURE')
})

test('validateIR: subjectAltNames need a known type and a value (a URI for type URI)', () => {
  const ir: ProxyIR = {
    version: 'v',
    binds: [],
    backends: [backend('b', { subjectAltNames: [{ type: 'URI', value: 'not a uri' }, { type: 'DNS' as 'URI', value: 'x' }, { type: 'Hostname', value: '' }, { type: 'Hostname', value: 'ok.example.com' }] })]
  }
  assert.deepEqual(validateIR(ir).map(d => d.path.join('.')), [
    'backends.0.tls.subjectAltNames.0.value',
    'backends.0.tls.subjectAltNames.1.type',
    'backends.0.tls.subjectAltNames.2.value'
  ])
})

test('a backend whose TLS settings change (a rotated client certificate, a new CA) gets a new pool', async () => {
  const pools = new UpstreamPools()
  try {
    const before = backend('rotating', { ca, serverName: 'abc.example.com' })
    const first = pools.get(before)
    pools.sync([before])
    assert.equal(pools.get(before), first, 'same settings: the warm pool stays')
    const after = backend('rotating', { ca, serverName: 'abc.example.com', cert: 'new', key: 'new' })
    pools.sync([after])
    assert.notEqual(pools.get(after), first)
  } finally {
    await pools.destroy()
  }
})

test('HTTP/2 (and gRPC) to several endpoints with a server name: a balancer over pools that each pin it, with and without passive health', async () => {
  // The Gateway API's BackendTLSPolicyGRPCRoute: a GRPCRoute to a Service with two ready pods
  // under a BackendTLSPolicy answered 503 `dispatcher.compose is not a function`.
  const seen: Array<{ server: number, sni: string | false }> = []
  const cert = readFileSync(join(dir, 'server.pem'))
  const key = readFileSync(join(dir, 'server.key'))
  const ports: number[] = []
  for (let i = 0; i < 2; i++) {
    const s = http2.createSecureServer({ cert, key }, (req, res) => {
      seen.push({ server: i, sni: (req.socket as TLSSocket).servername ?? false })
      res.end(`h2 ${i}`)
    })
    h2Servers.push(s)
    await new Promise<void>(resolve => s.listen(0, '127.0.0.1', resolve))
    ports.push((s.address() as { port: number }).port)
  }
  const endpoints = ports.map(p => ({ host: '127.0.0.1', port: p }))
  const variants: Array<[string, Partial<BackendIR>, boolean]> = [
    ['h2', { h2: true }, false],
    ['h2-health', { h2: true, health: { consecutiveFailures: 3, ejectionMs: 60_000 } }, false],
    ['grpc', {}, true],
    ['grpc-health', { health: { consecutiveFailures: 3, ejectionMs: 60_000 } }, true]
  ]
  for (const [name, extra, grpc] of variants) {
    seen.length = 0
    const pools = new UpstreamPools()
    try {
      const b: BackendIR = { ...backend(name, { ca, serverName: 'abc.example.com' }), endpoints, ...extra }
      const bodies = []
      for (let i = 0; i < 4; i++) bodies.push((await collect(pools.get(b, grpc), { headers: { host: 'https-listener.org' } })).body)
      assert.deepEqual(bodies, ['h2 0', 'h2 1', 'h2 0', 'h2 1'], `${name}: round robin`)
      assert.deepEqual(new Set(seen.map(s => s.sni)), new Set(['abc.example.com']), `${name}: the server name is the SNI on every endpoint`)
    } finally {
      await pools.destroy()
    }
  }
})
