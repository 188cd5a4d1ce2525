/**
 * The gateway's mesh identity from the real mesh CA: istiod (`pilot-discovery`, e2e/lib/istio.ts)
 * on the kube-apiserver harness, and a real `portico` process with MESH_ENABLED=true and the
 * env a proxy pod gets (POD_NAMESPACE, SERVICE_ACCOUNT, CA_ADDRESS, CLUSTER_ID, MESH_TOKEN_FILE
 * holding a TokenRequest token of audience istio-ca, MESH_ROOT_FILE holding the
 * istio-ca-root-cert ConfigMap's root).
 *
 * Asserted: the gateway gets its certificate (/debug/mesh says ready with its SPIFFE ID, the
 * expiry gauge and the CA call counter say so) and reaches an HBONE peer (testkit's
 * hbone-peer, which requires a client certificate; its own certificate issued by the same
 * istiod to another service account) that sees the gateway's SPIFFE ID; certificates of 6 s
 * rotate (renewed at half their life) while requests keep flowing, none failing; with the CA
 * unreachable the state is failed with "CA unreachable: ..." and a plain route still answers;
 * a token of another audience is refused ("token refused: ..."), and once the token file holds
 * a good token the gateway is in the mesh without a restart; the CA going away keeps the
 * certificate in force (ready, "renewal failing") until it expires, and its return brings a
 * new one; a changed root file (a root
 * rotation adding a root) brings a new certificate at once. Key and token are in no output.
 */

import { after, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { request } from 'undici'
import { requireKubeTools } from '../cluster/harness.ts'
import { meshGatewayEnv, requireIstio, startMesh, type Mesh } from '../lib/istio.ts'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { makeTestCa, startHbonePeer, type HbonePeer } from '@portico/testkit/hbone-peer'

const NS = 'portico-mesh'
const SA = 'portico-gateway'
const PEER_SA = 'mesh-echo'
const CLUSTER_ID = 'portico-test'
const GATEWAY_ID = `spiffe://cluster.local/ns/${NS}/sa/${SA}`
const PEER_ID = `spiffe://cluster.local/ns/${NS}/sa/${PEER_SA}`

interface Setup {
  mesh: Mesh
  cluster: Mesh['cluster']
  istiod: Mesh['istiod']
  root: string
  dir: string
  peer: HbonePeer
  echo: http.Server
  echoPort: number
}

let started: Promise<Setup> | null = null
let setupDone: Setup | null = null
const gateways: PorticoProcess[] = []

async function setup (t: TestContext): Promise<Setup | null> {
  const istio = requireIstio(t)
  if (istio === null) return null
  const kube = requireKubeTools(t)
  if (kube === null) return null
  started ??= (async () => {
    const mesh = await startMesh(kube, istio, { namespace: NS, serviceAccounts: [SA, PEER_SA], clusterId: CLUSTER_ID })
    // The peer's certificate: what Istio's agent gets for the workload's service account.
    const cert = await mesh.issue(PEER_SA)
    const peer = await startHbonePeer({ cert: cert.certChainPem, key: cert.keyPem, root: mesh.root })
    const echo = http.createServer((req, res) => res.end(`echo ${req.url}`))
    await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
    setupDone = { mesh, cluster: mesh.cluster, istiod: mesh.istiod, root: mesh.root, dir: mesh.dir, peer, echo, echoPort: (echo.address() as AddressInfo).port }
    return setupDone
  })()
  return await started
}

after(async () => {
  for (const g of gateways) await g.stop()
  if (setupDone === null) return
  await setupDone.peer.close()
  setupDone.echo.close()
  await setupDone.mesh.stop()
})

interface Gateway {
  portico: PorticoProcess
  admin: string
  stats: string
}

/** A gateway in the mesh by the env a proxy pod gets; `mesh.ca` in the file for what a test tunes. */
async function startGateway (s: Setup, tokenFile: string, options: { caAddress?: string, ttl?: string, rootFile?: string } = {}): Promise<Gateway> {
  const [adminPort, statsPort] = await Promise.all([freePort(), freePort()])
  const portico = await startPortico({
    env: {
      ADMIN_ADDR: `127.0.0.1:${adminPort}`,
      STATS_ADDR: `127.0.0.1:${statsPort}`,
      ...meshGatewayEnv(s.mesh, SA, tokenFile, options)
    },
    config: port => ({
      config: { mesh: { ca: { certificateTtl: options.ttl ?? '1h' } } },
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'mesh', matches: [{ path: { pathPrefix: '/mesh' } }], backends: [{ host: `127.0.0.1:${s.echoPort}`, mesh: { identity: PEER_ID, hbonePort: s.peer.port } }] },
        { name: 'plain', matches: [{ path: { pathPrefix: '/plain' } }], backends: [{ host: `127.0.0.1:${s.echoPort}` }] }
      ]
    })
  })
  gateways.push(portico)
  return { portico, admin: `http://127.0.0.1:${adminPort}`, stats: `http://127.0.0.1:${statsPort}` }
}

async function meshState (g: Gateway): Promise<Record<string, any>> {
  const r = await request(`${g.admin}/debug/mesh`)
  return await r.body.json() as Record<string, any>
}

async function get (g: Gateway, path: string): Promise<{ status: number, body: string }> {
  const r = await request(`${g.portico.url}${path}`)
  return { status: r.statusCode, body: await r.body.text() }
}

async function metrics (g: Gateway): Promise<string> {
  return await (await request(`${g.stats}/metrics`)).body.text()
}

function counter (text: string, series: string): number {
  const line = text.split('\n').find(l => l.startsWith(series + ' '))
  return line === undefined ? 0 : Number(line.split(' ')[1])
}

async function goodToken (s: Setup, name: string): Promise<{ file: string, token: string }> {
  return await s.mesh.tokenFile(SA, name)
}

test('the gateway gets its certificate from istiod and reaches a mesh peer that sees its SPIFFE ID; certificates rotate under traffic', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const { file, token } = await goodToken(s, 'token-1')
  const g = await startGateway(s, file, { ttl: '6s' })
  await waitUntil(async () => (await meshState(g)).state === 'ready', 20_000, 'mesh identity ready', 100)
  const state = await meshState(g)
  assert.equal(state.source, 'ca')
  assert.equal(state.spiffeId, GATEWAY_ID)
  assert.equal(state.ca.clusterId, CLUSTER_ID)
  assert.ok(Date.parse(state.notAfter) - Date.now() < 7000, `a 6 s certificate (${state.notAfter})`)
  const seen = s.peer.clients.length
  assert.deepEqual(await get(g, '/mesh/hello'), { status: 200, body: 'echo /mesh/hello' })
  assert.equal(s.peer.clients.length, seen + 1)
  assert.equal(s.peer.clients.at(-1), GATEWAY_ID, 'the peer verified the gateway\'s certificate from istiod')

  // 12 s of requests, four at a time: at least two renewals (every 3 s), no failure.
  const fingerprints = s.peer.fingerprints.length
  const until = Date.now() + 12_000
  const failures: string[] = []
  let done = 0
  await Promise.all([0, 1, 2, 3].map(async (n) => {
    while (Date.now() < until) {
      const r = await get(g, `/mesh/flow-${n}`).catch(err => ({ status: 0, body: String(err) }))
      if (r.status !== 200) failures.push(`${r.status} ${r.body}`)
      done++
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }))
  assert.deepEqual(failures, [], `${done} requests`)
  const used = new Set(s.peer.fingerprints.slice(fingerprints))
  assert.ok(used.size >= 3, `new connections used each new certificate: ${used.size} client certificates seen`)
  assert.ok(s.peer.clients.slice(seen).every(id => id === GATEWAY_ID))
  const m = await metrics(g)
  assert.ok(counter(m, 'portico_mesh_ca_requests_total{result="ok"}') >= 4, m.split('\n').filter(l => l.includes('mesh_ca')).join('\n'))
  const mesh = m.split('\n').filter(l => l.includes('portico_mesh_')).join('\n') + '\n'
  if (process.env.PROMTOOL !== undefined) {
    const check = spawnSync(process.env.PROMTOOL, ['check', 'metrics'], { input: mesh, encoding: 'utf8' })
    assert.equal(check.status, 0, `promtool: ${check.stdout}${check.stderr}`)
  }
  const expiry = counter(m, 'portico_mesh_certificate_expiry_timestamp_seconds')
  assert.ok(expiry > Date.now() / 1000 && expiry < Date.now() / 1000 + 7, `expiry gauge ${expiry}`)
  // The key and the token are nowhere: not in the dumps, not in the log.
  const dump = await (await request(`${g.admin}/config_dump`)).body.text()
  assert.equal(JSON.parse(dump).mesh.state, 'ready')
  for (const text of [dump, JSON.stringify(await meshState(g)), g.portico.output]) {
    assert.ok(!text.includes(token), 'no token')
    assert.ok(!text.includes('PRIVATE KEY'), 'no key')
  }
  await waitUntil(() => g.portico.logs().some(l => l.component === 'portico/mesh' && /mesh certificate spiffe:\/\/cluster\.local\/ns\/portico-mesh\/sa\/portico-gateway from the mesh CA/.test(String(l.msg))), 5000, 'the log line of the certificate', 50)
})

test('CA unreachable: the state says so, mesh backends fail clearly, plain traffic is unaffected', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const { file } = await goodToken(s, 'token-2')
  const g = await startGateway(s, file, { caAddress: `127.0.0.1:${await freePort()}` })
  await waitUntil(async () => (await meshState(g)).state === 'failed', 20_000, 'mesh identity failed', 100)
  const state = await meshState(g)
  assert.match(state.reason, /^CA unreachable: mesh CA 127\.0\.0\.1:\d+: /)
  assert.deepEqual(await get(g, '/plain/x'), { status: 200, body: 'echo /plain/x' })
  const mesh = await get(g, '/mesh/x')
  assert.equal(mesh.status, 503)
  assert.ok(counter(await metrics(g), 'portico_mesh_ca_requests_total{result="unreachable"}') >= 1)
})

test('a token of another audience is refused with a clear reason; a good token in the file is taken without a restart', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const file = join(s.dir, 'token-3')
  writeFileSync(file, await s.cluster.createToken(NS, SA, { audiences: ['portico'], expirationSeconds: 600 }))
  const g = await startGateway(s, file)
  await waitUntil(async () => (await meshState(g)).state === 'failed', 20_000, 'mesh identity failed', 100)
  const state = await meshState(g)
  assert.match(state.reason, /^token refused: mesh CA 127\.0\.0\.1:\d+: request authenticate failure \(istiod logs why: a token audience other than istio-ca/)
  assert.match(s.istiod.output(), /token audiences \["portico"\] is invalid for the target audiences \["istio-ca"\]/)
  assert.ok(counter(await metrics(g), 'portico_mesh_ca_requests_total{result="refused"}') >= 1)
  // The kubelet writes a new token into the projected volume: the next retry reads it.
  writeFileSync(file, await s.cluster.createToken(NS, SA, { audiences: ['istio-ca'], expirationSeconds: 600 }))
  await waitUntil(async () => (await meshState(g)).state === 'ready', 30_000, 'mesh identity ready after the new token', 100)
  assert.equal((await meshState(g)).spiffeId, GATEWAY_ID)
  assert.equal((await get(g, '/mesh/after')).status, 200)
})

test('a changed root file (a root rotation adds a root) brings a new certificate at once', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const { file } = await goodToken(s, 'token-4')
  const rootFile = join(s.dir, 'root-4.pem')
  writeFileSync(rootFile, s.root)
  const g = await startGateway(s, file, { rootFile })
  await waitUntil(async () => (await meshState(g)).state === 'ready', 20_000, 'mesh identity ready', 100)
  const first = (await meshState(g)).notAfter
  const ok = counter(await metrics(g), 'portico_mesh_ca_requests_total{result="ok"}')
  assert.equal(ok, 1)
  // The ConfigMap during a root rotation: the old root and the new one (checked every 10 s).
  const other = makeTestCa('next-mesh-root')
  writeFileSync(rootFile, s.root.trimEnd() + '\n' + other.root)
  await waitUntil(async () => counter(await metrics(g), 'portico_mesh_ca_requests_total{result="ok"}') === 2, 25_000, 'a certificate after the root changed', 200)
  const state = await meshState(g)
  assert.equal(state.state, 'ready')
  assert.ok(Date.parse(state.notAfter) >= Date.parse(first), 'the new certificate')
  await waitUntil(() => g.portico.logs().some(l => l.component === 'portico/mesh' && /mesh root changed/.test(String(l.msg))), 5000, 'the log line of the root change', 50)
  assert.equal((await get(g, '/mesh/after-root')).status, 200)
})

/** A TCP forwarder to istiod's CA port that a test can cut (the CA going away) and bring back. */
async function caForwarder (target: number): Promise<{ port: number, cut: () => Promise<void>, restore: () => Promise<void> }> {
  const sockets = new Set<net.Socket>()
  let server: net.Server | null = null
  let port = 0
  const listen = async (): Promise<void> => {
    server = net.createServer(client => {
      const upstream = net.connect(target, '127.0.0.1')
      for (const s of [client, upstream]) { sockets.add(s); s.on('close', () => sockets.delete(s)); s.on('error', () => {}) }
      client.pipe(upstream).pipe(client)
    })
    await new Promise<void>(resolve => server!.listen(port, '127.0.0.1', resolve))
    port = (server!.address() as AddressInfo).port
  }
  await listen()
  return {
    port,
    cut: async () => {
      if (server === null || !server.listening) return
      const closed = new Promise<void>(resolve => server!.close(() => resolve()))
      for (const s of sockets) s.destroy()
      await closed
    },
    restore: listen
  }
}

test('the CA going away: the certificate in force stays until it expires; the CA back, a new one', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const { file } = await goodToken(s, 'token-5')
  const fwd = await caForwarder(s.istiod.secureGrpcPort)
  // Closed however the test ends: a listening forwarder left behind keeps the file's process alive.
  t.after(fwd.cut)
  const g = await startGateway(s, file, { caAddress: `127.0.0.1:${fwd.port}`, ttl: '8s' })
  await waitUntil(async () => (await meshState(g)).state === 'ready', 20_000, 'mesh identity ready', 100)
  const notAfter = Date.parse((await meshState(g)).notAfter)
  await fwd.cut()
  // Renewal at half life fails: still ready, with the reason, and mesh traffic flows.
  await waitUntil(async () => /^renewal failing: CA unreachable: /.test((await meshState(g)).reason ?? ''), 10_000, 'renewal failing', 100)
  assert.equal((await meshState(g)).state, 'ready')
  assert.equal((await get(g, '/mesh/still')).status, 200)
  // Expired: failed, saying so.
  await waitUntil(async () => (await meshState(g)).state === 'failed', Math.max(1000, notAfter - Date.now()) + 10_000, 'failed at expiry', 100)
  assert.match((await meshState(g)).reason, /^certificate expired at .*; CA unreachable: /)
  await fwd.restore()
  await waitUntil(async () => (await meshState(g)).state === 'ready' && (await meshState(g)).reason === undefined, 30_000, 'ready once the CA is back', 200)
  assert.ok(Date.parse((await meshState(g)).notAfter) > notAfter)
  assert.equal((await get(g, '/mesh/back')).status, 200)
})
