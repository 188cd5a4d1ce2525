/**
 * The mesh CA, for real: istiod (`pilot-discovery`, built from istio.io/istio by
 * scripts/test-tools — a pseudo-version of Istio's main branch, not a release) runs outside a
 * cluster against the kube-apiserver harness with Istio's CRDs, its CA self-signed. Portico's
 * engine code (mesh/csr.ts, mesh/ca-client.ts) then does what a gateway pod in the mesh will
 * do: a TokenRequest for its ServiceAccount with audience `istio-ca`, a CSR for its SPIFFE
 * identity, and `IstioCertificateService/CreateCertificate` over TLS to istiod's port, trusting
 * only the root from the `istio-ca-root-cert` ConfigMap istiod writes to namespaces.
 *
 * Asserted: the chain is leaf + root, the leaf carries `spiffe://cluster.local/ns/<ns>/sa/<sa>`
 * and the CSR's public key, is signed by that root, for the lifetime asked; the identity is
 * the token's, whatever the CSR asks for; a token of another audience, another cluster ID and
 * no token are refused (UNAUTHENTICATED); a client trusting another root does not connect.
 * Last, the mesh workload of the next tests: Istio's echo server (ISTIO_ECHO) with a certificate
 * istiod issued to its ServiceAccount serves HBONE on its pod IP's port 15008 — TLS with that
 * SPIFFE identity, then HTTP/2 CONNECT to the `:authority` it names (docs/mesh.md "Test tools").
 *
 * Without ISTIOD (scripts/test-tools prints it) the tests are skipped with that reason, and
 * fail in CI; likewise without the kube tools. The gateway's own use of them: mesh-identity,
 * mesh-istio-echo and cluster-mesh tests (docs/mesh.md).
 */

import { after, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { generateKeyPairSync, X509Certificate, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { connect as http2Connect, type ClientHttp2Session } from 'node:http2'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { requireKubeTools, type Cluster } from '../cluster/harness.ts'
import { requireIstio, startIstioEcho, startMesh, type Istiod, type Mesh } from '../lib/istio.ts'
import { createCsrPem } from '@portico/engine/mesh-csr'
import { meshCaClient, MeshCaError, type MeshCaClient } from '@portico/engine/mesh-ca-client'

const NS = 'portico-mesh'
const SA = 'portico-gateway'
const CLUSTER_ID = 'portico-test'
const SPIFFE = `spiffe://cluster.local/ns/${NS}/sa/${SA}`
const UNAUTHENTICATED = 16
const UNAVAILABLE = 14

const ECHO_SA = 'mesh-echo'
/** The echo workload's pod IP: a loopback address of its own (Linux routes all of 127/8 to lo). */
const ECHO_IP = '127.0.55.1'

interface Setup {
  echo: string | null
  mesh: Mesh
  cluster: Cluster
  istiod: Istiod
  root: string
  ca: MeshCaClient
}

let started: Promise<Setup> | null = null
let setupDone: Setup | null = null

async function setup (t: TestContext): Promise<Setup | null> {
  const istio = requireIstio(t)
  if (istio === null) return null
  const kube = requireKubeTools(t)
  if (kube === null) return null
  started ??= (async () => {
    // The harness without kubelet or controllers (startMesh says why), the ServiceAccounts made.
    const mesh = await startMesh(kube, istio, { namespace: NS, serviceAccounts: [SA, ECHO_SA], clusterId: CLUSTER_ID })
    setupDone = { echo: istio.echo, mesh, cluster: mesh.cluster, istiod: mesh.istiod, root: mesh.root, ca: mesh.ca }
    return setupDone
  })()
  return await started
}

after(async () => {
  if (setupDone === null) return
  await setupDone.mesh.stop()
})

function ecKey (): KeyObject {
  return generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey
}

test('istiod signs a workload certificate for the token\'s SPIFFE identity, chained to the root it publishes', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const root = new X509Certificate(s.root)
  assert.ok(root.ca, 'the published root is a CA certificate')
  // istiod created its self-signed CA in its namespace.
  const secret = await s.cluster.api<{ type: string, data: Record<string, string> }>('GET', `/api/v1/namespaces/${s.istiod.namespace}/secrets/istio-ca-secret`)
  assert.ok('ca-cert.pem' in secret.data && 'ca-key.pem' in secret.data, Object.keys(secret.data).join(','))

  const key = ecKey()
  const token = await s.cluster.createToken(NS, SA, { audiences: ['istio-ca'], expirationSeconds: 600 })
  const before = Date.now()
  const chain = await s.ca.createCertificate({ csrPem: createCsrPem({ privateKey: key, uris: [SPIFFE] }), token, clusterId: CLUSTER_ID, validitySeconds: 3600, timeoutMs: 15_000 })
  assert.equal(chain.length, 2, 'leaf and root (a self-signed CA has no intermediate)')
  const leaf = new X509Certificate(chain[0]!)
  assert.equal(new X509Certificate(chain[1]!).fingerprint256, root.fingerprint256, 'the last element is the published root')
  assert.equal(leaf.subjectAltName, `URI:${SPIFFE}`)
  assert.ok(!leaf.ca)
  assert.ok(leaf.checkIssued(root), 'issued by the root')
  assert.ok(leaf.verify(root.publicKey), 'signed by the root\'s key')
  assert.ok(leaf.checkPrivateKey(key), 'for the CSR\'s key')
  const lifetime = (Date.parse(leaf.validTo) - before) / 1000
  assert.ok(lifetime > 3500 && lifetime < 3700, `valid for the hour asked (${lifetime} s left)`)
})

test('the identity is the token\'s: a CSR naming another service account still gets the caller\'s', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const key = ecKey()
  const token = await s.cluster.createToken(NS, SA, { audiences: ['istio-ca'], expirationSeconds: 600 })
  const csrPem = createCsrPem({ privateKey: key, uris: ['spiffe://cluster.local/ns/istio-system/sa/istiod'] })
  const chain = await s.ca.createCertificate({ csrPem, token, clusterId: CLUSTER_ID, validitySeconds: 3600, timeoutMs: 15_000 })
  assert.equal(new X509Certificate(chain[0]!).subjectAltName, `URI:${SPIFFE}`)
})

test('refused (UNAUTHENTICATED): a token of another audience, another cluster ID, no token', async (t) => {
  const s = await setup(t)
  if (s === null) return
  const csrPem = createCsrPem({ privateKey: ecKey(), uris: [SPIFFE] })
  const good = await s.cluster.createToken(NS, SA, { audiences: ['istio-ca'], expirationSeconds: 600 })
  const wrongAudience = await s.cluster.createToken(NS, SA, { audiences: ['portico'], expirationSeconds: 600 })
  // Each refusal's reason is in istiod's log (the answer says only "request authenticate failure").
  const cases: Array<[string, string, string, RegExp]> = [
    ['audience portico', wrongAudience, CLUSTER_ID, /token audiences \["portico"\] is invalid for the target audiences \["istio-ca"\]/],
    ['cluster ID of a cluster istiod does not know', good, 'elsewhere', /client claims to be in cluster "elsewhere", but we only know about local cluster "portico-test"/],
    ['no token', '', CLUSTER_ID, /token is required for TokenReview/]
  ]
  for (const [what, token, clusterId, reason] of cases) {
    await assert.rejects(s.ca.createCertificate({ csrPem, token, clusterId, validitySeconds: 3600, timeoutMs: 15_000 }),
      (err: unknown) => err instanceof MeshCaError && err.code === UNAUTHENTICATED && /request authenticate failure/.test(err.message), what)
    assert.match(s.istiod.output(), reason, what)
  }
})

test('a client trusting another root does not reach the CA', async (t) => {
  const s = await setup(t)
  if (s === null) return
  // The API server's CA: istiod's serving certificate does not chain to it.
  const other = meshCaClient({ target: `127.0.0.1:${s.istiod.secureGrpcPort}`, rootCertPem: readFileSync(s.cluster.caFile, 'utf8'), serverName: s.istiod.serverName })
  try {
    const token = await s.cluster.createToken(NS, SA, { audiences: ['istio-ca'], expirationSeconds: 600 })
    await assert.rejects(other.createCertificate({ csrPem: createCsrPem({ privateKey: ecKey(), uris: [SPIFFE] }), token, clusterId: CLUSTER_ID, validitySeconds: 3600, timeoutMs: 5000 }),
      (err: unknown) => err instanceof MeshCaError && err.code === UNAVAILABLE)
  } finally {
    other.close()
  }
})

test('Istio\'s echo server serves HBONE on 15008 with the certificate istiod issued to its service account', async (t) => {
  const s = await setup(t)
  if (s === null) return
  if (s.echo === null) {
    const why = 'Istio\'s echo server is missing (ISTIO_ECHO): run ./scripts/test-tools'
    if (process.env.CI === 'true') throw new Error(why)
    t.skip(why)
    return
  }
  // What Istio's agent does for the pod: a key, a CSR, a certificate for the pod's ServiceAccount.
  const cert = await s.mesh.issue(ECHO_SA)
  const echo = await startIstioEcho(s.echo, s.cluster.dir, {
    ip: ECHO_IP,
    certChainPem: cert.certChainPem,
    keyPem: cert.keyPem,
    rootCertPem: s.root,
    namespace: NS
  })
  let session: ClientHttp2Session | null = null
  try {
    // TLS to the pod's 15008, trusting only the mesh root; the name checked is the SPIFFE ID
    // (the certificate has no DNS name), as the mesh's own proxies check their peers.
    const socket = tlsConnect({ host: ECHO_IP, port: echo.hbonePort, ca: s.root, ALPNProtocols: ['h2'], checkServerIdentity: () => undefined })
    await new Promise<void>((resolve, reject) => { socket.once('secureConnect', resolve); socket.once('error', reject) })
    assert.ok(socket.authorized, String(socket.authorizationError))
    assert.equal(socket.alpnProtocol, 'h2')
    const peer = socket.getPeerX509Certificate()!
    assert.equal(peer.subjectAltName, `URI:spiffe://cluster.local/ns/${NS}/sa/${ECHO_SA}`)
    assert.ok(peer.checkIssued(new X509Certificate(s.root)))
    session = http2Connect(`https://${ECHO_IP}:${echo.hbonePort}`, { createConnection: () => socket as TLSSocket })
    const stream = session.request({ ':method': 'CONNECT', ':authority': `${ECHO_IP}:${echo.httpPort}` })
    const head = await new Promise<Record<string, unknown>>((resolve, reject) => { stream.once('response', resolve); stream.once('error', reject) })
    assert.equal(head[':status'], 200)
    stream.end(`GET /through-hbone HTTP/1.1\r\nHost: ${ECHO_SA}.${NS}.svc\r\nConnection: close\r\n\r\n`)
    let body = ''
    stream.on('data', (c: Buffer) => { body += c.toString() })
    await new Promise<void>((resolve, reject) => { stream.once('end', resolve); stream.once('error', reject) })
    assert.match(body, /^HTTP\/1\.1 200 OK\r\n/)
    assert.match(body, /\nURL=\/through-hbone\n/)
    assert.match(body, new RegExp(`\\nServicePort=${echo.httpPort}\\n`))
    assert.match(body, new RegExp(`\\nHost=${ECHO_SA}\\.${NS}\\.svc\\n`))
    // The tunnel, in the echo server's own log.
    assert.match(echo.output(), new RegExp(`Received CONNECT\\s+host=${ECHO_IP.replace(/\./g, '\\.')}:${echo.httpPort}`))
  } finally {
    session?.close()
    await echo.stop()
  }
})
