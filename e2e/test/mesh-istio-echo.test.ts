/**
 * The mesh workload, for real: Istio's own echo server (`pkg/test/echo/cmd/server`, ISTIO_ECHO)
 * as the destination pod, serving HBONE on its pod IP's port 15008 (127.0.55.2 here, a loopback
 * address of its own) with the certificate the real istiod issued to its ServiceAccount `echo`,
 * and its HTTP port on the same address. A real `portico` process whose identity comes from
 * that istiod (the env a proxy pod gets: a TokenRequest token of audience istio-ca, the root
 * from the istio-ca-root-cert ConfigMap; e2e/lib/istio.ts `startMesh`, `meshGatewayEnv`) routes
 * to the echo's HTTP port with `mesh: {identity: spiffe://cluster.local/ns/<ns>/sa/echo}`.
 *
 * Asserted: the answer is the Istio echo server's (its `ServicePort=`, `URL=`, `Proto=`,
 * `ServiceVersion=`, `Cluster=` lines),
 * and it came through an HBONE tunnel (the echo's log has `Received CONNECT host=<ip>:<port>`;
 * the trace's backendCallResult says `mesh: hbone` with the echo's SPIFFE ID as the verified
 * peer identity; portico_upstream_hbone_* count the connection and the tunnel); a route that
 * expects another identity (`sa/other`) at the same workload is refused (503
 * PORTICO_MESH_PEER_IDENTITY) and the echo gets no CONNECT; a route to the same HTTP port
 * without `mesh` gets plain traffic, no tunnel; with Portico's certificates living 6 s, they
 * rotate while requests flow (new HBONE connections to the echo with each), none failing.
 *
 * What this cannot show: that Portico presented its own certificate. Istio's echo server does
 * not ask for a client certificate on HBONE ports (docs/mesh.md "Istio's echo server"), so
 * Portico's client identity from istiod is proven by e2e/test/mesh-identity.test.ts, whose
 * HBONE peer requires one and reports its SPIFFE ID.
 *
 * Without ISTIOD / ISTIO_ECHO (scripts/test-tools prints them) the tests are skipped with the
 * reason, and fail in CI; likewise without the kube tools.
 */

import { after, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { requireKubeTools } from '../cluster/harness.ts'
import { meshGatewayEnv, requireIstio, startIstioEcho, startMesh, type IstioEcho, type Mesh } from '../lib/istio.ts'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { openTrace, type TraceRecord } from '@portico/testkit/trace'

const NS = 'portico-echo'
const GATEWAY_SA = 'portico-gateway'
const ECHO_SA = 'echo'
const OTHER_SA = 'other'
const CLUSTER_ID = 'portico-test'
const ECHO_ID = `spiffe://cluster.local/ns/${NS}/sa/${ECHO_SA}`
const OTHER_ID = `spiffe://cluster.local/ns/${NS}/sa/${OTHER_SA}`
const GATEWAY_ID = `spiffe://cluster.local/ns/${NS}/sa/${GATEWAY_SA}`
/** The echo pod's IP (mesh-istiod.test.ts uses 127.0.55.1: both may run at once). */
const ECHO_IP = '127.0.55.2'

interface Setup {
  mesh: Mesh
  echo: IstioEcho
}

interface Gateway {
  portico: PorticoProcess
  admin: string
  stats: string
}

let started: Promise<Setup> | null = null
let setupDone: Setup | null = null
const gateways: PorticoProcess[] = []

async function setup (t: TestContext): Promise<Setup | null> {
  const istio = requireIstio(t)
  if (istio === null) return null
  if (istio.echo === null) {
    const why = 'Istio\'s echo server is missing (ISTIO_ECHO): run ./scripts/test-tools'
    if (process.env.CI === 'true') throw new Error(why)
    t.skip(why)
    return null
  }
  const echoPath = istio.echo
  const kube = requireKubeTools(t)
  if (kube === null) return null
  started ??= (async () => {
    const mesh = await startMesh(kube, istio, { namespace: NS, serviceAccounts: [GATEWAY_SA, ECHO_SA, OTHER_SA], clusterId: CLUSTER_ID })
    const cert = await mesh.issue(ECHO_SA)
    const echo = await startIstioEcho(echoPath, mesh.cluster.dir, { ip: ECHO_IP, certChainPem: cert.certChainPem, keyPem: cert.keyPem, rootCertPem: mesh.root, namespace: NS })
    setupDone = { mesh, echo }
    return setupDone
  })()
  return await started
}

after(async () => {
  for (const g of gateways) await g.stop()
  if (setupDone === null) return
  await setupDone.echo.stop()
  await setupDone.mesh.stop()
})

/** A gateway in the mesh (its identity from istiod), with Portico's certificates living `ttl`. */
async function startGateway (s: Setup, ttl: string): Promise<Gateway> {
  const [adminPort, statsPort] = await Promise.all([freePort(), freePort()])
  const { file } = await s.mesh.tokenFile(GATEWAY_SA, `token-${gateways.length}`)
  const backend = `${ECHO_IP}:${s.echo.httpPort}`
  const route = (name: string, b: Record<string, unknown>): Record<string, unknown> => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], backends: [b] })
  const portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, ...meshGatewayEnv(s.mesh, GATEWAY_SA, file) },
    config: port => ({
      config: { mesh: { ca: { certificateTtl: ttl } } },
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        // The echo pod in ambient mode: what the controller makes of it (pod IP and target port,
        // the identity of its ServiceAccount, the mesh's HBONE port).
        route('mesh', { host: backend, mesh: { identity: ECHO_ID, hbonePort: s.echo.hbonePort } }),
        // The same pod, expected to be another workload: the echo's certificate does not match.
        route('other', { host: backend, mesh: { identity: OTHER_ID, hbonePort: s.echo.hbonePort } }),
        // A destination not in the mesh: plain HTTP to the same port.
        route('plain', { host: backend })
      ]
    })
  })
  gateways.push(portico)
  const g = { portico, admin: `http://127.0.0.1:${adminPort}`, stats: `http://127.0.0.1:${statsPort}` }
  await waitUntil(async () => (await meshState(g)).state === 'ready', 20_000, 'mesh identity from istiod', 100)
  return g
}

let main: Promise<Gateway> | null = null
async function mainGateway (s: Setup): Promise<Gateway> {
  main ??= startGateway(s, '1h')
  return await main
}

async function meshState (g: Gateway): Promise<Record<string, any>> {
  return await (await request(`${g.admin}/debug/mesh`)).body.json() as Record<string, any>
}

async function get (g: Gateway, path: string): Promise<{ status: number, body: string }> {
  const r = await request(`${g.portico.url}${path}`)
  return { status: r.statusCode, body: await r.body.text() }
}

async function traced (g: Gateway, path: string): Promise<{ answer: { status: number, body: string }, result: Record<string, unknown> }> {
  const trace = await openTrace(g.admin, `path=${path}`)
  await trace.ready
  const answer = await get(g, path)
  const events: TraceRecord[] = await trace.done
  const result = events.find(e => e.message.type === 'backendCallResult')
  assert.ok(result !== undefined, 'a backendCallResult event')
  return { answer, result: result.message }
}

async function metric (g: Gateway, series: string): Promise<number> {
  const text = await (await request(`${g.stats}/metrics`)).body.text()
  const line = text.split('\n').find(l => l.startsWith(series + ' '))
  return line === undefined ? 0 : Number(line.split(' ')[1])
}

/** The tunnels the echo server accepted to its HTTP port (its log: one line per CONNECT). */
function connects (s: Setup): number {
  const line = new RegExp(`Received CONNECT\\s+host=${ECHO_IP.replace(/\./g, '\\.')}:${s.echo.httpPort}\\b`, 'g')
  return s.echo.output().match(line)?.length ?? 0
}

/** The echo body's `key=value` lines. */
function echoed (body: string): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const line of body.split('\n')) {
    const i = line.indexOf('=')
    if (i > 0 && !(line.slice(0, i) in fields)) fields[line.slice(0, i)] = line.slice(i + 1)
  }
  return fields
}

const hbone = (what: string, identity: string, result: string): string =>
  `portico_upstream_hbone_${what}_total{peer_identity="${identity}",result="${result}"}`

test('a request reaches Istio\'s echo server over HBONE with mTLS; the peer identity Portico verified is the workload\'s', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const g = await mainGateway(s)
  assert.equal((await meshState(g)).spiffeId, GATEWAY_ID, 'the gateway\'s identity is from istiod')
  const before = connects(s)
  const { answer, result } = await traced(g, '/mesh/hello')
  assert.equal(answer.status, 200, answer.body)
  // The Istio echo server answered: its fields, the port the tunnel was opened to.
  const body = echoed(answer.body)
  assert.equal(body.ServicePort, String(s.echo.httpPort), answer.body)
  assert.equal(body.URL, '/mesh/hello')
  assert.equal(body.Method, 'GET')
  assert.equal(body.Proto, 'HTTP/1.1')
  // startIstioEcho's --version and --cluster, echoed back: this process, not some other server.
  assert.equal(body.ServiceVersion, 'v1')
  assert.equal(body.Cluster, 'Kubernetes')
  // Through HBONE: the echo server accepted a CONNECT to its HTTP port.
  await waitUntil(() => connects(s) > before, 5000, 'the echo server\'s CONNECT log line', 50)
  // The TLS handshake verified the echo's certificate from istiod: its SPIFFE ID.
  assert.equal(result.status, 200)
  assert.equal(result.mesh, 'hbone')
  assert.equal(result.peerIdentity, ECHO_ID)
  assert.ok(await metric(g, hbone('connections', ECHO_ID, 'opened')) >= 1)
  assert.ok(await metric(g, hbone('tunnels', ECHO_ID, 'ok')) >= 1)
  // The HBONE connection is reused: more requests, no new connection.
  const opened = await metric(g, hbone('connections', ECHO_ID, 'opened'))
  for (let i = 0; i < 3; i++) assert.equal((await get(g, `/mesh/again-${i}`)).status, 200)
  assert.equal(await metric(g, hbone('connections', ECHO_ID, 'opened')), opened)
})

test('a route expecting another identity at the workload is refused, and the workload gets nothing', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const g = await mainGateway(s)
  const before = connects(s)
  const { answer, result } = await traced(g, '/other/secret')
  assert.equal(answer.status, 503)
  assert.match(answer.body, new RegExp(`mesh peer ${ECHO_IP.replace(/\./g, '\\.')}:${s.echo.hbonePort} presented ${ECHO_ID}, expected ${OTHER_ID}`))
  assert.match(String(result.error), /PORTICO_MESH_PEER_IDENTITY/)
  assert.equal(result.peerIdentity, undefined, 'no identity was verified')
  assert.ok(await metric(g, hbone('connections', OTHER_ID, 'failed')) >= 1)
  assert.equal(await metric(g, hbone('tunnels', OTHER_ID, 'ok')), 0)
  // Refused at the handshake: no CONNECT reached the echo server (a moment for a stray log line).
  await new Promise(resolve => setTimeout(resolve, 300))
  assert.equal(connects(s), before)
  assert.doesNotMatch(s.echo.output(), /URL=\/other\/secret|\/other\/secret/)
})

test('a backend not in the mesh gets plain traffic', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const g = await mainGateway(s)
  const before = connects(s)
  const tunnels = await metric(g, hbone('tunnels', ECHO_ID, 'ok'))
  const { answer, result } = await traced(g, '/plain/x')
  assert.equal(answer.status, 200, answer.body)
  const body = echoed(answer.body)
  assert.equal(body.ServicePort, String(s.echo.httpPort))
  assert.equal(body.URL, '/plain/x')
  assert.equal(result.status, 200)
  assert.equal(result.mesh, undefined)
  assert.equal(result.peerIdentity, undefined)
  await new Promise(resolve => setTimeout(resolve, 300))
  assert.equal(connects(s), before, 'no CONNECT')
  assert.equal(await metric(g, hbone('tunnels', ECHO_ID, 'ok')), tunnels)
})

test('Portico\'s certificates from istiod rotate while requests to the echo workload flow, none failing', async (t) => {
  const s = await setup(t)
  if (s === null) return
  // Certificates of 6 s, renewed at half their life: a new one every 3 s.
  const g = await startGateway(s, '6s')
  assert.ok(Date.parse((await meshState(g)).notAfter) - Date.now() < 7000)
  const issued = await metric(g, 'portico_mesh_ca_requests_total{result="ok"}')
  const before = connects(s)
  const until = Date.now() + 12_000
  const failures: string[] = []
  let done = 0
  await Promise.all([0, 1, 2, 3].map(async (n) => {
    while (Date.now() < until) {
      const r = await get(g, `/mesh/flow-${n}`).catch(err => ({ status: 0, body: String(err) }))
      if (r.status !== 200 || echoed(r.body).URL !== `/mesh/flow-${n}`) failures.push(`${r.status} ${r.body.slice(0, 200)}`)
      done++
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }))
  assert.deepEqual(failures, [], `${done} requests`)
  assert.ok(done > 100, `${done} requests`)
  const renewed = await metric(g, 'portico_mesh_ca_requests_total{result="ok"}') - issued
  assert.ok(renewed >= 3, `${renewed} certificates from istiod during the requests`)
  // Each new certificate is used for new HBONE connections (one would carry all four
  // callers' tunnels otherwise), and every tunnel Portico counted is one the echo accepted.
  const opened = await metric(g, hbone('connections', ECHO_ID, 'opened'))
  assert.ok(opened >= 3, `${opened} HBONE connections to the echo workload`)
  const tunnels = await metric(g, hbone('tunnels', ECHO_ID, 'ok'))
  await waitUntil(() => connects(s) - before === tunnels, 5000, `the echo server's CONNECTs (${connects(s) - before}) = Portico's tunnels (${tunnels})`, 50)
  assert.equal(await metric(g, hbone('connections', ECHO_ID, 'failed')), 0)
  assert.equal(await metric(g, hbone('tunnels', ECHO_ID, 'failed')), 0)
  assert.equal((await meshState(g)).state, 'ready')
})
