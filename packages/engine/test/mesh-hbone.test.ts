/**
 * The HBONE data path (mesh/hbone-pool.ts through http/upstream-pools.ts): connections to
 * endpoints marked `mesh` are HTTP/2 CONNECT streams over mTLS to a real node:http2 peer
 * (testkit/src/hbone-peer.ts, as ztunnel on port 15008) that verifies the gateway's client
 * certificate against the test mesh CA and pipes to a real HTTP echo server.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { UpstreamPools } from '../src/http/upstream-pools.ts'
import { classifyFailure } from '../src/http/call-failure.ts'
import { FileMeshIdentity, StaticMeshIdentity, meshCertificate } from '../src/mesh/identity.ts'
import type { BackendIR } from '../src/ir/types.ts'
import { formatDiagnostic, loadConfigText } from '../src/index.ts'
import { formatIrDiagnostic, validateIR } from '../src/ir/validate.ts'
import { collect } from './lib/dispatch.ts'
import { makeTestCa, startHbonePeer, type HbonePeer, type TestCa } from '../../testkit/src/hbone-peer.ts'
import { waitUntil } from '../../testkit/src/wait.ts'

const ECHO_ID = 'spiffe://cluster.local/ns/apps/sa/echo'
const GATEWAY_ID = 'spiffe://cluster.local/ns/gw/sa/portico'

let ca: TestCa
let echo: http.Server
let echoPort: number
let h2echo: http2.Http2Server
let h2echoPort: number
let peer: HbonePeer
let impostor: HbonePeer
let gw1: ReturnType<TestCa['issue']>
let gw2: ReturnType<TestCa['issue']>
const plainHits: string[] = []

before(async () => {
  ca = makeTestCa()
  const echoCert = ca.issue('echo', ECHO_ID)
  const otherCert = ca.issue('other', 'spiffe://cluster.local/ns/apps/sa/other')
  gw1 = ca.issue('gw1', GATEWAY_ID)
  gw2 = ca.issue('gw2', GATEWAY_ID)
  echo = http.createServer((req, res) => {
    plainHits.push(req.socket.remoteAddress ?? '')
    const delay = Number(new URL(req.url!, 'http://x').searchParams.get('delay') ?? 0)
    setTimeout(() => res.end(JSON.stringify({ path: req.url, host: req.headers.host })), delay)
  })
  await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
  echoPort = (echo.address() as AddressInfo).port
  h2echo = http2.createServer((req, res) => res.end(JSON.stringify({ path: req.url, h2: req.httpVersion })))
  await new Promise<void>(resolve => h2echo.listen(0, '127.0.0.1', resolve))
  h2echoPort = (h2echo.address() as AddressInfo).port
  peer = await startHbonePeer({ cert: echoCert.cert, key: echoCert.key, root: ca.root })
  impostor = await startHbonePeer({ cert: otherCert.cert, key: otherCert.key, root: ca.root })
})

after(async () => {
  await peer.close()
  await impostor.close()
  echo.close()
  h2echo.close()
  rmSync(ca.dir, { recursive: true, force: true })
})

function meshBackend (key: string, hbonePort: number, port = echoPort, extra: Partial<BackendIR> = {}): BackendIR {
  return { key, kind: 'static', name: key, protocol: 'http', endpoints: [{ host: '127.0.0.1', port, mesh: { identity: ECHO_ID, hbonePort } }], target: `127.0.0.1:${port}`, ...extra }
}

function identity (): StaticMeshIdentity {
  return new StaticMeshIdentity(meshCertificate({ cert: gw1.cert, key: gw1.key, root: ca.root }))
}

test('a request reaches the echo through an HBONE tunnel; the peer sees the gateway\'s SPIFFE ID; plain backends stay plain', async () => {
  const pools = new UpstreamPools({ mesh: identity() })
  const before = { sessions: peer.sessions, connects: peer.clients.length }
  try {
    const a = await collect(pools.get(meshBackend('m1', peer.port)), { path: '/hello', headers: { host: 'echo.apps' } })
    assert.equal(a.status, 200)
    assert.deepEqual(JSON.parse(a.body), { path: '/hello', host: 'echo.apps' })
    assert.equal(peer.clients.length, before.connects + 1)
    assert.equal(peer.clients.at(-1), GATEWAY_ID)
    assert.equal(peer.authorities.at(-1), `127.0.0.1:${echoPort}`)
    // A plain backend beside it: no CONNECT, the echo gets the request on its own.
    const plain: BackendIR = { key: 'p', kind: 'static', name: 'p', protocol: 'http', endpoints: [{ host: '127.0.0.1', port: echoPort }], target: `127.0.0.1:${echoPort}` }
    const p = await collect(pools.get(plain), { path: '/plain' })
    assert.equal(p.status, 200)
    assert.equal(peer.clients.length, before.connects + 1)
  } finally {
    await pools.destroy()
  }
})

test('several requests, concurrent and in turn, share one HTTP/2 connection to the peer', async () => {
  const pools = new UpstreamPools({ mesh: identity() })
  const sessions = peer.sessions
  try {
    const d = pools.get(meshBackend('m2', peer.port))
    const answers = await Promise.all([1, 2, 3, 4, 5].map(i => collect(d, { path: `/c${i}?delay=50` })))
    assert.ok(answers.every(a => a.status === 200))
    for (let i = 0; i < 3; i++) assert.equal((await collect(d, { path: `/s${i}` })).status, 200)
    assert.equal(peer.sessions - sessions, 1, 'one HBONE connection')
    assert.equal(pools.hbone!.stats().connections, 1)
  } finally {
    await pools.destroy()
  }
})

test('the peer\'s max concurrent streams is honoured: a full connection gets a sibling', async () => {
  const echoCert = ca.issue('echo-small', ECHO_ID)
  const small = await startHbonePeer({ cert: echoCert.cert, key: echoCert.key, root: ca.root, maxConcurrentStreams: 2 })
  const pools = new UpstreamPools({ mesh: identity() })
  try {
    const d = pools.get(meshBackend('m3', small.port))
    const answers = await Promise.all([1, 2, 3, 4, 5].map(i => collect(d, { path: `/c${i}?delay=100` })))
    assert.ok(answers.every(a => a.status === 200))
    assert.equal(small.sessions, 3, '5 tunnels at once, 2 per connection')
  } finally {
    await pools.destroy()
    await small.close()
  }
})

test('a peer presenting another identity is refused before any CONNECT', async () => {
  const pools = new UpstreamPools({ mesh: identity() })
  try {
    const err = await collect(pools.get(meshBackend('m4', impostor.port)), { path: '/secret' }).then(() => null, e => e as Error & { code: string })
    assert.ok(err !== null)
    assert.equal(err.code, 'PORTICO_MESH_PEER_IDENTITY')
    assert.match(err.message, /presented spiffe:\/\/cluster\.local\/ns\/apps\/sa\/other, expected spiffe:\/\/cluster\.local\/ns\/apps\/sa\/echo/)
    assert.equal(impostor.authorities.length, 0, 'the request was never sent')
    const f = classifyFailure(err, null)
    assert.equal(f.status, 503)
    assert.match(f.detail, /PORTICO_MESH_PEER_IDENTITY/)
  } finally {
    await pools.destroy()
  }
})

test('a CONNECT answered 503 is a 502 that says so', async () => {
  const pools = new UpstreamPools({ mesh: identity() })
  peer.refuse = 503
  try {
    const err = await collect(pools.get(meshBackend('m5', peer.port)), { path: '/x' }).then(() => null, e => e as Error & { code: string })
    assert.ok(err !== null)
    assert.equal(err.code, 'PORTICO_HBONE_CONNECT_REFUSED')
    const f = classifyFailure(err, null)
    assert.equal(f.status, 502)
    assert.match(f.body, /answered the HBONE CONNECT to 127\.0\.0\.1:\d+ with 503/)
  } finally {
    peer.refuse = null
    await pools.destroy()
  }
})

test('without a mesh identity a mesh endpoint fails (never plain text to it)', async () => {
  const pools = new UpstreamPools()
  const hits = plainHits.length
  try {
    const err = await collect(pools.get(meshBackend('m6', peer.port)), { path: '/x' }).then(() => null, e => e as Error & { code: string })
    assert.equal(err?.code, 'PORTICO_MESH_NO_IDENTITY')
    assert.equal(classifyFailure(err, null).status, 503)
    assert.equal(plainHits.length, hits)
  } finally {
    await pools.destroy()
  }
})

test('a certificate rotation keeps traffic flowing; new connections use the new certificate', async () => {
  const files = { cert: gw1.certFile, key: gw1.keyFile, root: `${ca.dir}/ca.pem` }
  const id = new FileMeshIdentity(files)
  const pools = new UpstreamPools({ mesh: id })
  try {
    const d = pools.get(meshBackend('m7', peer.port))
    assert.equal((await collect(d, { path: '/before' })).status, 200)
    const oldPrint = peer.fingerprints.at(-1)
    const sessions = peer.sessions
    // A request in flight on the old connection while the certificate rotates.
    const hits = plainHits.length
    const slow = collect(d, { path: '/slow?delay=300' })
    await waitUntil(() => plainHits.length > hits, 5_000, 'the slow request at the echo server')
    Object.assign(id, { files: { ...files, cert: gw2.certFile, key: gw2.keyFile } })
    assert.equal(id.reload(), true)
    const fresh = await collect(d, { path: '/after' })
    assert.equal(fresh.status, 200)
    assert.equal(peer.sessions - sessions, 1, 'a new connection after the rotation')
    assert.notEqual(peer.fingerprints.at(-1), oldPrint, 'made with the new certificate')
    assert.equal(peer.clients.at(-1), GATEWAY_ID)
    assert.equal((await slow).status, 200, 'the tunnel open across the rotation ran to its end')
    // The old connection closes once its last stream is done; only the new one remains.
    await waitUntil(() => pools.hbone!.stats().connections === 1, 5_000, () => `the old connection to close (${JSON.stringify(pools.hbone!.stats())})`)
  } finally {
    await pools.destroy()
  }
})

test('an h2c backend speaks HTTP/2 inside the tunnel (undici over the CONNECT stream)', async () => {
  const pools = new UpstreamPools({ mesh: identity() })
  try {
    const d = pools.get(meshBackend('m8', peer.port, h2echoPort, { h2c: true }))
    const a = await collect(d, { path: '/h2', headers: { host: 'echo.apps' } })
    assert.equal(a.status, 200)
    assert.deepEqual(JSON.parse(a.body), { path: '/h2', h2: '2.0' })
    assert.equal(peer.authorities.at(-1), `127.0.0.1:${h2echoPort}`)
  } finally {
    await pools.destroy()
  }
})

test('config: a host or endpoints backend marked mesh gets mesh endpoints and a key of its own; elsewhere it is an error', () => {
  const text = [
    'gateways:\n  default: {port: 3000}',
    'routes:',
    '  - {name: a, matches: [{path: {pathPrefix: /a}}], backends: [{host: "10.0.0.5:8080", mesh: {identity: "spiffe://cluster.local/ns/apps/sa/echo"}}]}',
    '  - {name: b, matches: [{path: {pathPrefix: /b}}], backends: [{endpoints: ["10.0.0.6:80", "10.0.0.7:80"], mesh: {identity: "spiffe://cluster.local/ns/apps/sa/web", hbonePort: 15009}}]}',
    '  - {name: c, matches: [{path: {pathPrefix: /c}}], backends: [{host: "10.0.0.5:8080"}]}'
  ].join('\n') + '\n'
  const result = loadConfigText(text, { baseDir: '/' })
  assert.ok(result.ok, result.ok ? '' : result.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n'))
  const backends = result.config.ir.backends
  const a = backends.find(b => b.target === '10.0.0.5:8080' && b.endpoints[0]!.mesh !== undefined)!
  assert.deepEqual(a.endpoints, [{ host: '10.0.0.5', port: 8080, mesh: { identity: 'spiffe://cluster.local/ns/apps/sa/echo', hbonePort: 15008 } }])
  const plain = backends.find(b => b.target === '10.0.0.5:8080' && b.endpoints[0]!.mesh === undefined)!
  assert.notEqual(plain.key, a.key, 'the same host without the mesh is another backend')
  const b = backends.find(b => b.target.startsWith('10.0.0.6'))!
  assert.deepEqual(b.endpoints.map(e => e.mesh?.hbonePort), [15009, 15009])

  const bad = loadConfigText('gateways:\n  default: {port: 3000}\nroutes:\n  - backends: [{mcp: {targets: [{name: t, mcp: {host: "http://10.0.0.1/mcp"}}]}, mesh: {identity: "spiffe://x/ns/a/sa/b"}}]\n', { baseDir: '/' })
  assert.ok(!bad.ok)
  assert.match(bad.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n'), /mesh: applies to host and endpoints backends/)
  const notSpiffe = loadConfigText('gateways:\n  default: {port: 3000}\nroutes:\n  - backends: [{host: "10.0.0.1:80", mesh: {identity: "https://x"}}]\n', { baseDir: '/' })
  assert.ok(!notSpiffe.ok)
})

test('validateIR refuses a mesh endpoint whose identity is no SPIFFE ID or whose port is out of range (as the controller could send it)', () => {
  const text = 'gateways:\n  default: {port: 3000}\nroutes:\n  - backends: [{host: "10.0.0.5:8080", mesh: {identity: "spiffe://cluster.local/ns/a/sa/b"}}]\n'
  const result = loadConfigText(text, { baseDir: '/' })
  assert.ok(result.ok)
  const ir = structuredClone(result.config.ir)
  assert.deepEqual(validateIR(ir), [])
  const i = ir.backends.findIndex(b => b.endpoints[0]?.mesh !== undefined)
  ir.backends[i]!.endpoints[0]!.mesh = { identity: 'cluster.local/ns/a/sa/b', hbonePort: 0 }
  assert.deepEqual(validateIR(ir).map(d => formatIrDiagnostic(d)), [
    `backends[${i}].endpoints[0].mesh.identity: cluster.local/ns/a/sa/b is not a SPIFFE ID (spiffe://<trust domain>/<path>)`,
    `backends[${i}].endpoints[0].mesh.hbonePort: must be a port (1-65535)`
  ])
})

test('an https backend runs its TLS inside the tunnel (HTTP/1.1 client)', async () => {
  const serverCert = ca.issue('https-echo', 'spiffe://cluster.local/ns/apps/sa/https-echo')
  const { default: https } = await import('node:https')
  const server = https.createServer({ cert: serverCert.cert, key: serverCert.key }, (req, res) => res.end(`tls ${req.url}`))
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const pools = new UpstreamPools({ mesh: identity() })
  try {
    const b: BackendIR = { ...meshBackend('m9', peer.port, port), protocol: 'https', tls: { ca: ca.root, subjectAltNames: [{ type: 'URI', value: 'spiffe://cluster.local/ns/apps/sa/https-echo' }] } }
    const a = await collect(pools.get(b), { path: '/inner' })
    assert.deepEqual([a.status, a.body], [200, 'tls /inner'])
    assert.equal(peer.authorities.at(-1), `127.0.0.1:${port}`)
  } finally {
    await pools.destroy()
    server.close()
  }
})

test('an HBONE connection with no tunnel left closes after the idle timeout', async () => {
  const pools = new UpstreamPools({ mesh: identity(), keepAliveTimeout: 50, hboneIdleTimeout: 100 })
  try {
    assert.equal((await collect(pools.get(meshBackend('m10', peer.port)), { path: '/idle' })).status, 200)
    assert.equal(pools.hbone!.stats().connections, 1)
    // The HTTP/1.1 connection inside closes after 50 ms of keep-alive, its tunnel with it; the
    // HBONE connection 100 ms later. Without the idle timeout it would stay (the default is 5 minutes).
    await waitUntil(() => pools.hbone!.stats().connections === 0, 5_000, () => `the idle HBONE connection to close (${JSON.stringify(pools.hbone!.stats())})`)
    assert.deepEqual(pools.hbone!.stats(), { connections: 0, streams: 0, draining: 0 })
  } finally {
    await pools.destroy()
  }
})

test('a peer that takes the CONNECT and never answers it: a clear error within the connect timeout, its place in the pool freed', async () => {
  const pools = new UpstreamPools({ mesh: identity(), connectTimeout: 300 })
  peer.silent = true
  try {
    const started = Date.now()
    const err = await collect(pools.get(meshBackend('m11', peer.port)), { path: '/x' }).then(() => null, e => e as Error & { code: string })
    assert.equal(err?.code, 'PORTICO_HBONE_FAILED')
    assert.match(err!.message, /did not answer the HBONE CONNECT to 127\.0\.0\.1:\d+ in 300 ms/)
    assert.ok(Date.now() - started < 2000)
    // The cancelled stream closes on the next turns of the loop.
    await waitUntil(() => pools.hbone!.stats().streams === 0, 5_000, () => `the cancelled stream to close (${JSON.stringify(pools.hbone!.stats())})`)
    peer.silent = false
    assert.equal((await collect(pools.get(meshBackend('m11', peer.port)), { path: '/after' })).status, 200)
  } finally {
    peer.silent = false
    await pools.destroy()
  }
})

test('a peer\'s GOAWAY retires its connection: the idle HTTP/1.1 connection on it is not reused, the next request opens a new one', async () => {
  const pools = new UpstreamPools({ mesh: identity() })
  try {
    const d = pools.get(meshBackend('m12', peer.port))
    assert.equal((await collect(d, { path: '/one' })).status, 200)
    const sessions = peer.sessions
    peer.goaway()
    // The pool has read the GOAWAY: its connection takes no new stream.
    await waitUntil(() => pools.hbone!.stats().draining === 1, 5_000, () => `the GOAWAY to reach the pool (${JSON.stringify(pools.hbone!.stats())})`)
    assert.equal((await collect(d, { path: '/two' })).status, 200)
    assert.equal(peer.sessions - sessions, 1)
  } finally {
    await pools.destroy()
  }
})
