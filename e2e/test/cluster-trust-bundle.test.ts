/**
 * The Gateway API's ClusterTrustBundle feature (v1.7.0), in a real cluster
 * (e2e/cluster/harness.ts): a BackendTLSPolicy whose caCertificateRefs names a
 * certificates.k8s.io ClusterTrustBundle, and an HTTPS backend (a real TLS server in a test
 * host's network namespace) verified with the bundle's CA. Kubernetes 1.36 serves
 * ClusterTrustBundles as certificates.k8s.io/v1beta1 only with the ClusterTrustBundle feature
 * gate and runtime-config, which this cluster turns on. A second policy names a bundle of
 * another CA: the same backend then fails verification, so the first call's 200 is the
 * bundle's doing, not an unverified connection. Changing the bundle's trustBundle moves the
 * verification with it. And the feature's other half: a Gateway's frontend (client
 * certificate) validation with a ClusterTrustBundle CA.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { request as httpsRequest } from 'node:https'
import { CLUSTER_TRUST_BUNDLE_APISERVER_ARGS, type KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml, httpGet } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { createTestCa } from '@portico/testkit/test-ca'

const HTTPS_SERVER = fileURLToPath(new URL('../lib/https-server.ts', import.meta.url))
const BACKEND_PORT = 18111
const GW_API = '/apis/gateway.networking.k8s.io/v1'

let suite: ClusterGateway | null = null

before(async s => {
  suite = await startClusterGateway(s as TestContext, {
    dir: 'portico-cluster-ctb-',
    testHost: true,
    cluster: { controllerManager: false, apiserverArgs: CLUSTER_TRUST_BUNDLE_APISERVER_ARGS },
    namespaces: ['portico-system', 'apps']
  })
  if (suite === null) return
  const { dir, host } = suite
  const ca = createTestCa(dir, 'ca', { subject: '/CN=portico-ctb-ca' })
  const other = createTestCa(dir, 'other', { subject: '/CN=portico-ctb-other' })
  ca.issue('server', { subject: '/CN=backend.test', sans: ['DNS:backend.test'] })
  // Client certificates for frontend validation: one from the bundle's CA, one from another.
  ca.issue('client')
  other.issue('stranger')
  await host!.spawnNode([HTTPS_SERVER, host!.address, String(BACKEND_PORT), 'tls-backend', join(dir, 'server.pem'), join(dir, 'server.key')], 'listening')
})

after(async () => await suite?.stop())

const indent = (pem: string) => pem.trim().split('\n').map(l => `    ${l}`).join('\n')
const bundle = (name: string, pem: string) => `apiVersion: certificates.k8s.io/v1beta1
kind: ClusterTrustBundle
metadata: { name: ${name} }
spec:
  trustBundle: |
${indent(pem)}
`

test('a BackendTLSPolicy with a ClusterTrustBundle CA: the HTTPS backend is verified with the bundle (a bundle of another CA fails it)', async t => {
  if (suite === null) return t.skip('no cluster or no test host')
  const { cluster, dir, host } = suite
  const ca = readFileSync(join(dir, 'ca.pem'), 'utf8')
  const other = readFileSync(join(dir, 'other.pem'), 'utf8')
  const gwPort = await freePort()
  // Two Services on the same TLS endpoint, each under its own policy.
  const service = (name: string) => `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: apps }
spec: { ports: [{ name: https, port: 443 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: apps, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: https, port: ${BACKEND_PORT}, protocol: TCP }]
endpoints: [{ addresses: ["${host!.address}"], conditions: { ready: true } }]
`
  const policy = (name: string, trustBundle: string) => `apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: { name: ${name}, namespace: apps }
spec:
  targetRefs: [{ group: "", kind: Service, name: ${name} }]
  validation:
    caCertificateRefs: [{ group: certificates.k8s.io, kind: ClusterTrustBundle, name: ${trustBundle} }]
    hostname: backend.test
`
  await cluster.apply(`${bundle('backend-ca', ca)}---
${bundle('other-ca', other)}---
${service('secure')}---
${service('wrong')}---
${policy('secure', 'backend-ca')}---
${policy('wrong', 'other-ca')}---
${gatewayYaml('apps', 'web', gwPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: app, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /secure } }]
      backendRefs: [{ name: secure, port: 443 }]
    - matches: [{ path: { type: PathPrefix, value: /wrong } }]
      backendRefs: [{ name: wrong, port: 443 }]
`)
  const controller = await suite.startController()
  const proxy = await suite.startProxy('apps', 'web')
  const why = () => `\n${controller.output().slice(-2000)}\n${proxy.output.slice(-2000)}`

  let last = { status: 0, body: '' }
  await waitUntil(async () => {
    last = await httpGet(`http://127.0.0.1:${gwPort}/secure/x`)
    return last.status === 200
  }, 30_000, `a call verified with the ClusterTrustBundle (last: ${JSON.stringify(last)})${why()}`, 200)
  assert.equal(last.body, 'tls-backend GET /secure/x')

  // The same backend under a bundle of another CA: verification fails, a 5xx.
  const wrong = await httpGet(`http://127.0.0.1:${gwPort}/wrong/x`)
  assert.ok(wrong.status >= 500, `a backend whose certificate the bundle does not verify: ${wrong.status} ${wrong.body}`)

  // Both policies resolved and accepted (the bundles exist and parse); the class claims the feature.
  for (const name of ['secure', 'wrong']) {
    const stored: KubeObject = await cluster.api<KubeObject>('GET', `${GW_API}/namespaces/apps/backendtlspolicies/${name}`)
    const conditions: Array<{ type: string, status: string }> = (stored.status?.ancestors as Array<{ conditions: Array<{ type: string, status: string }> }> | undefined)?.[0]?.conditions ?? []
    assert.equal(conditions.find(c => c.type === 'Accepted')?.status, 'True', `${name}: ${JSON.stringify(conditions)}`)
    assert.equal(conditions.find(c => c.type === 'ResolvedRefs')?.status, 'True', `${name}: ${JSON.stringify(conditions)}`)
  }
  const cls = await cluster.api<KubeObject>('GET', `${GW_API}/gatewayclasses/portico`)
  assert.ok((cls.status?.supportedFeatures as Array<{ name: string }>).some(f => f.name === 'ClusterTrustBundle'), 'the GatewayClass claims ClusterTrustBundle')

  // The bundle's content is watched: swap the two CAs, and the verdicts swap.
  await cluster.apply(`${bundle('backend-ca', other)}---\n${bundle('other-ca', ca)}`)
  await waitUntil(async () => (await httpGet(`http://127.0.0.1:${gwPort}/wrong/x`)).status === 200, 30_000, `the swapped bundle verifies /wrong${why()}`, 200)
  assert.ok((await httpGet(`http://127.0.0.1:${gwPort}/secure/x`)).status >= 500, '/secure now has the other CA')
})

/** GET over TLS to the Gateway, with a client certificate (or none): the status, or the TLS/connection error. */
function getWithClientCert (port: number, cert?: string): Promise<string> {
  return new Promise(resolve => {
    const req = httpsRequest({
      host: '127.0.0.1', port, path: '/secure/front', servername: 'front.test', rejectUnauthorized: false,
      ...(cert !== undefined ? { cert: readFileSync(join(suite!.dir, `${cert}.pem`)), key: readFileSync(join(suite!.dir, `${cert}.key`)) } : {})
    }, res => {
      res.resume()
      res.on('end', () => resolve(String(res.statusCode)))
    })
    req.on('error', err => resolve(`error ${(err as NodeJS.ErrnoException).code ?? err.message}`))
    req.setTimeout(5000, () => req.destroy(new Error('timeout')))
    req.end()
  })
}

test('frontend validation with a ClusterTrustBundle CA: a client certificate from the bundle\'s CA is served, one from another CA or none is refused', async t => {
  if (suite === null) return t.skip('no cluster or no test host')
  const { cluster, dir } = suite
  const port = await freePort()
  const b64 = (file: string) => readFileSync(join(dir, file)).toString('base64')
  await cluster.apply(`apiVersion: v1
kind: Secret
metadata: { name: front-cert, namespace: apps }
type: kubernetes.io/tls
data: { tls.crt: ${b64('server.pem')}, tls.key: ${b64('server.key')} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: front, namespace: apps }
spec:
  gatewayClassName: portico
  listeners: [{ name: https, port: ${port}, protocol: HTTPS, tls: { certificateRefs: [{ name: front-cert }] } }]
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{ group: certificates.k8s.io, kind: ClusterTrustBundle, name: client-ca }]
---
${bundle('client-ca', readFileSync(join(dir, 'ca.pem'), 'utf8'))}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: front, namespace: apps }
spec:
  parentRefs: [{ name: front }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /secure } }], backendRefs: [{ name: secure, port: 443 }] }]
`)
  // The controller of the first test still runs (same cluster); this Gateway gets its own proxy.
  const proxy = await suite.startProxy('apps', 'front')
  let last = ''
  await waitUntil(async () => {
    last = await getWithClientCert(port, 'client')
    return last !== '' && !last.startsWith('error')
  }, 30_000, `a call with a client certificate from the bundle's CA (last: ${last})\n${proxy.output.slice(-2000)}`, 200)
  // The backend may still be settling (the first test swapped the bundles): the TLS session
  // with the Gateway is what this test is about.
  assert.match(last, /^\d{3}$/)
  assert.match(await getWithClientCert(port, 'stranger'), /^error/, 'a certificate from another CA: no TLS session')
  assert.match(await getWithClientCert(port), /^error/, 'no certificate: no TLS session (AllowValidOnly)')
  const gw = await cluster.api<KubeObject>('GET', `${GW_API}/namespaces/apps/gateways/front`)
  const conditions = (gw.status?.listeners as Array<{ conditions: Array<{ type: string, status: string }> }> | undefined)?.[0]?.conditions ?? []
  assert.equal(conditions.find(c => c.type === 'ResolvedRefs')?.status, 'True', JSON.stringify(conditions))
})
