/**
 * The HBONE data path through the real gateway process: a route's backend marked `mesh`
 * is reached through an HBONE peer (a real node:http2 mTLS server accepting CONNECT, as
 * ztunnel on a pod's port 15008; @portico/testkit/hbone-peer) with the gateway's certificate
 * from `config.mesh.certificate`; a plain route beside it is unchanged; a peer of another
 * identity and a CONNECT answered 503 are clear errors in the answer, the trace and the
 * access log; replacing the certificate files rotates the identity without a dropped request;
 * the metrics count HBONE connections and tunnels.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { openTrace, type TraceRecord } from '@portico/testkit/trace'
import { makeTestCa, startHbonePeer, type HbonePeer, type TestCa } from '@portico/testkit/hbone-peer'

const ECHO_ID = 'spiffe://cluster.local/ns/apps/sa/echo'
const GATEWAY_ID = 'spiffe://cluster.local/ns/gw/sa/portico'

let ca: TestCa
let echo: http.Server
let echoPort: number
let peer: HbonePeer
let impostor: HbonePeer
let refusing: HbonePeer
let portico: PorticoProcess
let admin: string
let stats: string
let gw2: ReturnType<TestCa['issue']>
let tcpPort: number
let tcpEcho: net.Server
let tcpEchoPort: number
const plainSeen: string[] = []

before(async () => {
  ca = makeTestCa()
  const echoCert = ca.issue('echo', ECHO_ID)
  const otherCert = ca.issue('other', 'spiffe://cluster.local/ns/apps/sa/other')
  const gw1 = ca.issue('gw1', GATEWAY_ID)
  gw2 = ca.issue('gw2', GATEWAY_ID)
  // The files the gateway reads (and watches): a rotation copies gw2's over them.
  copyFileSync(gw1.certFile, join(ca.dir, 'gateway.pem'))
  copyFileSync(gw1.keyFile, join(ca.dir, 'gateway.key'))
  echo = http.createServer((req, res) => {
    plainSeen.push(req.url ?? '')
    const delay = Number(new URL(req.url!, 'http://x').searchParams.get('delay') ?? 0)
    setTimeout(() => res.end(`echo ${req.url}`), delay)
  })
  await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
  echoPort = (echo.address() as AddressInfo).port
  peer = await startHbonePeer({ cert: echoCert.cert, key: echoCert.key, root: ca.root })
  impostor = await startHbonePeer({ cert: otherCert.cert, key: otherCert.key, root: ca.root })
  refusing = await startHbonePeer({ cert: echoCert.cert, key: echoCert.key, root: ca.root })
  refusing.refuse = 503
  // A raw TCP echo for the connection route (upper-cases what it gets).
  tcpEcho = net.createServer(socket => socket.on('data', (d: Buffer) => socket.write(d.toString().toUpperCase())))
  await new Promise<void>(resolve => tcpEcho.listen(0, '127.0.0.1', resolve))
  tcpEchoPort = (tcpEcho.address() as AddressInfo).port
  tcpPort = await freePort()
  const adminPort = await freePort()
  const statsPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  stats = `http://127.0.0.1:${statsPort}`
  const route = (name: string, backend: Record<string, unknown>) => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], backends: [backend] })
  const mesh = (hbonePort: number) => ({ identity: ECHO_ID, hbonePort })
  portico = await startPortico({
    dir: ca.dir,
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}` },
    config: port => ({
      config: { mesh: { certificate: { cert: join(ca.dir, 'gateway.pem'), key: join(ca.dir, 'gateway.key'), root: join(ca.dir, 'ca.pem') } } },
      gateways: { default: { port, address: '127.0.0.1' }, tcp: { port: tcpPort, address: '127.0.0.1', protocol: 'TCP' } },
      tcpRoutes: [{ name: 'raw', gateways: 'tcp', backends: [{ host: `127.0.0.1:${tcpEchoPort}`, mesh: mesh(peer.port) }] }],
      routes: [
        route('mesh', { host: `127.0.0.1:${echoPort}`, mesh: mesh(peer.port) }),
        route('plain', { host: `127.0.0.1:${echoPort}` }),
        route('impostor', { host: `127.0.0.1:${echoPort}`, mesh: mesh(impostor.port) }),
        route('refused', { host: `127.0.0.1:${echoPort}`, mesh: mesh(refusing.port) })
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await peer?.close()
  await impostor?.close()
  await refusing?.close()
  echo?.close()
  tcpEcho?.close()
  if (ca !== undefined) rmSync(ca.dir, { recursive: true, force: true })
})

async function get (path: string): Promise<{ status: number, body: string }> {
  const r = await request(`${portico.url}${path}`)
  return { status: r.statusCode, body: await r.body.text() }
}

async function traced (path: string): Promise<{ answer: { status: number, body: string }, events: TraceRecord[] }> {
  const trace = await openTrace(admin, `path=${path}`)
  await trace.ready
  const answer = await get(path)
  return { answer, events: await trace.done }
}

function event (events: TraceRecord[], type: string): Record<string, unknown> {
  const e = events.find(e => e.message.type === type)
  assert.ok(e !== undefined, `no ${type} event`)
  return e.message
}

test('a mesh backend is reached through HBONE with the gateway\'s identity; the trace says so', async () => {
  const connects = peer.clients.length
  const { answer, events } = await traced('/mesh/hello')
  assert.deepEqual(answer, { status: 200, body: 'echo /mesh/hello' })
  assert.equal(peer.clients.length, connects + 1)
  assert.equal(peer.clients.at(-1), GATEWAY_ID, 'the peer verified the gateway\'s SPIFFE ID')
  assert.equal(peer.authorities.at(-1), `127.0.0.1:${echoPort}`)
  assert.deepEqual(pick(event(events, 'backendCallStart'), 'mesh', 'peerIdentity'), { mesh: 'hbone', peerIdentity: ECHO_ID })
  assert.deepEqual(pick(event(events, 'backendCallResult'), 'status', 'mesh', 'peerIdentity'), { status: 200, mesh: 'hbone', peerIdentity: ECHO_ID })
})

test('a plain backend beside it gets plain traffic', async () => {
  const connects = peer.clients.length
  const { answer, events } = await traced('/plain/x')
  assert.deepEqual(answer, { status: 200, body: 'echo /plain/x' })
  assert.equal(peer.clients.length, connects, 'no CONNECT')
  assert.equal(event(events, 'backendCallStart').mesh, undefined)
})

test('requests share one HBONE connection', async () => {
  const sessions = peer.sessions
  const answers = await Promise.all([1, 2, 3, 4].map(i => get(`/mesh/c${i}?delay=30`)))
  assert.ok(answers.every(a => a.status === 200))
  for (let i = 0; i < 3; i++) assert.equal((await get(`/mesh/s${i}`)).status, 200)
  assert.ok(peer.sessions - sessions <= 1, `${peer.sessions - sessions} new HBONE connections`)
})

test('a peer presenting another identity is refused: 503 with the reason, the request never sent', async () => {
  const seen = plainSeen.length
  const { answer, events } = await traced('/impostor/secret')
  assert.equal(answer.status, 503)
  assert.match(answer.body, /upstream mesh tunnel failed: mesh peer 127\.0\.0\.1:\d+ presented spiffe:\/\/cluster\.local\/ns\/apps\/sa\/other, expected spiffe:\/\/cluster\.local\/ns\/apps\/sa\/echo/)
  assert.equal(impostor.authorities.length, 0)
  assert.equal(plainSeen.length, seen)
  const result = event(events, 'backendCallResult')
  assert.equal(result.status, null)
  assert.match(String(result.error), /PORTICO_MESH_PEER_IDENTITY/)
  assert.equal(result.peerIdentity, undefined, 'no identity was verified')
  await portico.waitForOutput(/"path":"\/impostor\/secret"/)
  const line = portico.logs().find(l => l.msg === 'request' && l.path === '/impostor/secret')!
  assert.equal(line.status, 503)
  assert.match(String(line.error), /PORTICO_MESH_PEER_IDENTITY: mesh peer/)
})

test('a CONNECT answered 503 is a 502 that says so', async () => {
  const { answer } = await traced('/refused/x')
  assert.equal(answer.status, 502)
  assert.match(answer.body, /answered the HBONE CONNECT to 127\.0\.0\.1:\d+ with 503/)
})

test('replacing the certificate files rotates the identity with no dropped request', async () => {
  assert.equal((await get('/mesh/before')).status, 200)
  const oldPrint = peer.fingerprints.at(-1)
  // In flight across the rotation: the files are polled every 5 s, the answer comes after 7.
  const slow = get('/mesh/slow?delay=7000')
  let slowDone = false
  void slow.then(() => { slowDone = true })
  // In flight: the echo server behind the tunnel has it.
  await waitUntil(() => plainSeen.includes('/mesh/slow?delay=7000'), 5_000, () => `the slow request at the echo server (it saw ${JSON.stringify(plainSeen)})`)
  copyFileSync(gw2.keyFile, join(ca.dir, 'gateway.key'))
  copyFileSync(gw2.certFile, join(ca.dir, 'gateway.pem'))
  await portico.waitForOutput(/mesh certificate rotated/, { timeoutMs: 15_000 })
  assert.equal(slowDone, false, 'the slow request is still in flight after the rotation')
  const fresh = await get('/mesh/after')
  assert.equal(fresh.status, 200)
  assert.notEqual(peer.fingerprints.at(-1), oldPrint, 'the new tunnel was made with the new certificate')
  assert.equal(peer.clients.at(-1), GATEWAY_ID)
  assert.deepEqual(await slow, { status: 200, body: 'echo /mesh/slow?delay=7000' }, 'the request in flight across the rotation completed')
})

test('a TCP route to a mesh workload goes through the tunnel too', async () => {
  const connects = peer.clients.length
  const socket = net.connect(tcpPort, '127.0.0.1')
  socket.write('hello mesh')
  const answer = await new Promise<string>((resolve, reject) => {
    socket.once('data', (d: Buffer) => resolve(d.toString()))
    socket.once('error', reject)
  })
  socket.end()
  assert.equal(answer, 'HELLO MESH')
  assert.equal(peer.clients.length, connects + 1)
  assert.equal(peer.authorities.at(-1), `127.0.0.1:${tcpEchoPort}`)
  await portico.waitForOutput(/"route":"tcp:raw".*"reason":"Done"/)
})

test('the metrics count HBONE connections and tunnels by peer identity', async () => {
  let text = ''
  await waitUntil(async () => {
    text = await (await fetch(`${stats}/metrics`)).text()
    return text.includes('portico_upstream_hbone_tunnels_total{peer_identity="spiffe://cluster.local/ns/apps/sa/echo",result="refused"}')
  }, 5_000, 'the HBONE metrics')
  assert.match(text, /portico_upstream_hbone_connections_total\{peer_identity="spiffe:\/\/cluster\.local\/ns\/apps\/sa\/echo",result="opened"\} [1-9]/)
  assert.match(text, /portico_upstream_hbone_connections_total\{peer_identity="spiffe:\/\/cluster\.local\/ns\/apps\/sa\/echo",result="failed"\} [1-9]/)
  assert.match(text, /portico_upstream_hbone_tunnels_total\{peer_identity="spiffe:\/\/cluster\.local\/ns\/apps\/sa\/echo",result="ok"\} [1-9]/)
})

function pick (o: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map(k => [k, o[k]]))
}
