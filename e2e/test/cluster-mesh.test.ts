/**
 * The Istio ambient mesh in cluster mode (docs/mesh.md "In a cluster"), on the real
 * kube-apiserver harness with the controller's real informers: the chart's mesh.autoEnabled
 * and mesh.network as the controller's env; Gateway `web` is in the mesh, `optout` opts out by
 * PorticoParameters spec.mesh.enabled=false. Checked: the deployer's Deployments (mesh env,
 * the istio-ca token and root volumes only for `web`); the Gateways' portico.dev/Mesh
 * conditions (web: CAUnreachable, from its proxy with the CA down; optout: NotInMesh); a
 * route to a Service whose pod is on another network says ResolvedRefs=False
 * MeshNetworkUnreachable; and through `web`'s proxy a plain pod is served
 * while an ambient pod is never sent in the clear (HBONE, and no identity yet: an error).
 *
 * With a real istiod (e2e/lib/istio.ts): a Gateway whose proxy gets its certificate is
 * Mesh=True InMesh, one whose token istiod refuses (another audience) Mesh=False TokenRefused.
 *
 * Without the kube tools (or istiod, for the second test) a test is skipped with that reason.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { networkInterfaces } from 'node:os'
import { requireKubeTools, type Cluster, type KubeObject } from '../cluster/harness.ts'
import { startClusterGateway } from '../cluster/cluster-gateway.ts'
import { backendService, gatewayYaml, httpGet, installPorticoParametersCrd } from '../cluster/portico-processes.ts'
import { installIstioCrds, requireIstio, startIstiod } from '../lib/istio.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { createCa } from '@portico/controller'

type Condition = { type: string, status: string, reason: string, message: string }

async function gatewayCondition (cluster: Cluster, name: string, type: string): Promise<Condition | undefined> {
  const gw = await cluster.api<KubeObject>('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/apps/gateways/${name}`)
  return ((gw.status?.conditions ?? []) as Condition[]).find(c => c.type === type)
}

/** The destination Service (backendService, its endpoint's targetRef the pod) and the pod's ServiceAccount. */
function service (ns: string, name: string, pod: string, address: string, port: number): string {
  return `${backendService(address, ns, name, port, pod)}---
apiVersion: v1
kind: ServiceAccount
metadata: { name: ${name}, namespace: ${ns} }
`
}

function pod (ns: string, name: string, sa: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: ns, labels }, spec: { serviceAccountName: sa, containers: [{ name: 'app', image: 'app:test' }] } } as KubeObject
}

test('mesh in cluster mode: opt-in and opt-out, the deployer\'s mesh env and volumes, the Mesh condition, ambient and other-network destinations', { timeout: 300_000 }, async t => {
  // The tools first: no server is started for a test that skips.
  if (requireKubeTools(t) === null) return
  const hostIP = Object.values(networkInterfaces()).flat().find(i => i !== undefined && i.family === 'IPv4' && !i.internal)?.address
  if (hostIP === undefined) {
    t.skip('no non-loopback IPv4 address on this machine (EndpointSlices refuse loopback)')
    return
  }
  // One plain HTTP server stands for every pod: only the plain destination may reach it.
  const hits: string[] = []
  const server = createServer((req, res) => { hits.push(req.url ?? ''); res.end('plain pod') })
  await new Promise<void>(resolve => server.listen(0, '0.0.0.0', resolve))
  t.after(() => { server.close() })
  const podPort = (server.address() as { port: number }).port

  const suite = await startClusterGateway(t, { dir: 'portico-cluster-mesh-', cluster: { controllerManager: false, fakeKubelet: false }, namespaces: ['apps'] })
  if (suite === null) return
  t.after(async () => await suite.stop())
  const { cluster, dir } = suite
  await installPorticoParametersCrd(cluster)
  await cluster.createNamespace('meshed', { 'istio.io/dataplane-mode': 'ambient' })
  await cluster.createNamespace('east', { 'istio.io/dataplane-mode': 'ambient', 'topology.istio.io/network': 'net-b' })
  const gatewayPort = await freePort()
  await cluster.apply(service('apps', 'plain', 'plain-0', hostIP, podPort) + '---\n' + service('meshed', 'ambient', 'ambient-0', hostIP, podPort) + '---\n' + service('east', 'far', 'far-0', hostIP, podPort))
  await cluster.apply([pod('apps', 'plain-0', 'plain'), pod('meshed', 'ambient-0', 'ambient'), pod('east', 'far-0', 'far')])
  await cluster.apply(`apiVersion: portico.dev/v1alpha1
kind: PorticoParameters
metadata: { name: no-mesh, namespace: apps }
spec: { mesh: { enabled: false } }
---
${gatewayYaml('apps', 'web', gatewayPort, { listener: 'allowedRoutes: { namespaces: { from: All } }' })}---
${gatewayYaml('apps', 'optout', await freePort(), { spec: { infrastructure: '{ parametersRef: { group: portico.dev, kind: PorticoParameters, name: no-mesh } }' } })}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: plain, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /plain } }], backendRefs: [{ name: plain, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ambient, namespace: meshed }
spec:
  parentRefs: [{ name: web, namespace: apps }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /ambient } }], backendRefs: [{ name: ambient, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: far, namespace: east }
spec:
  parentRefs: [{ name: web, namespace: apps }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /far } }], backendRefs: [{ name: far, port: 80 }] }]
`)
  const controller = await suite.startController({ env: { MESH_AUTO_ENABLED: 'true', MESH_NETWORK: 'net-a', MESH_NAMESPACE: 'istio-system', LEADER_ELECTION: 'false' } })
  t.after(() => { if (process.env.DEBUG_MESH === '1') process.stderr.write(controller.output()) })

  // The deployer: web's proxy gets the mesh settings and volumes, optout's none.
  let web: KubeObject | undefined
  await waitUntil(async () => (web = await cluster.api<KubeObject>('GET', '/apis/apps/v1/namespaces/apps/deployments/web').catch(() => undefined)) !== undefined, 30_000, 'web Deployment', 100)
  let optout: KubeObject | undefined
  await waitUntil(async () => (optout = await cluster.api<KubeObject>('GET', '/apis/apps/v1/namespaces/apps/deployments/optout').catch(() => undefined)) !== undefined, 30_000, 'optout Deployment', 100)
  const env = (d: KubeObject) => new Map((d.spec.template.spec.containers[0].env as Array<{ name: string, value?: string }>).map(e => [e.name, e.value]))
  const webEnv = env(web!)
  assert.equal(webEnv.get('MESH_ENABLED'), 'true')
  assert.equal(webEnv.get('CA_ADDRESS'), 'istiod.istio-system.svc:15012')
  assert.equal(webEnv.get('TRUST_DOMAIN'), 'cluster.local')
  assert.equal(webEnv.get('CLUSTER_ID'), 'Kubernetes')
  assert.equal(webEnv.get('NETWORK'), 'net-a')
  assert.ok(webEnv.has('SERVICE_ACCOUNT') && webEnv.has('POD_NAMESPACE'))
  const volumes = (d: KubeObject) => (d.spec.template.spec.volumes as Array<{ name: string }>).map(v => v.name)
  assert.deepEqual(volumes(web!).filter(v => v.startsWith('istio')), ['istio-token', 'istio-ca-root-cert'])
  assert.equal(env(optout!).has('MESH_ENABLED'), false)
  assert.deepEqual(volumes(optout!).filter(v => v.startsWith('istio')), [])

  // The route to another network's pod: refused, said in its status.
  await waitUntil(async () => {
    const route = await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/east/httproutes/far')
    return ((route.status?.parents?.[0]?.conditions ?? []) as Condition[]).some(c => c.type === 'ResolvedRefs' && c.status === 'False' && c.reason === 'MeshNetworkUnreachable')
  }, 30_000, 'far: ResolvedRefs=False MeshNetworkUnreachable', 100)

  // web's proxy (no CA identity source in it: it reports nothing) — the plain pod is served,
  // the ambient one is an HBONE endpoint: with no identity, 503, never plaintext.
  // What the kubelet would mount (a token of audience istio-ca, a root), with the CA down.
  const tokenFile = join(dir, 'istio-token')
  writeFileSync(tokenFile, await cluster.createToken('apps', 'web', { audiences: ['istio-ca'] }))
  const rootFile = join(dir, 'root-cert.pem')
  writeFileSync(rootFile, (await createCa('mesh test root')).cert)
  const meshEnv = { MESH_TOKEN_FILE: tokenFile, MESH_ROOT_FILE: rootFile, CA_ADDRESS: `127.0.0.1:${await freePort()}`, POD_NAMESPACE: 'apps', SERVICE_ACCOUNT: 'web' }
  await suite.startProxy('apps', 'web', meshEnv)
  await waitUntil(async () => (await httpGet(`http://127.0.0.1:${gatewayPort}/plain`)).status === 200, 30_000, 'the plain pod through web', 100)
  const ambient = await httpGet(`http://127.0.0.1:${gatewayPort}/ambient`)
  assert.ok(ambient.status >= 500, `${ambient.status} ${ambient.body}`)
  assert.deepEqual(hits.filter(h => h.startsWith('/ambient')), [], 'the ambient pod got no plaintext request')
  assert.notEqual((await httpGet(`http://127.0.0.1:${gatewayPort}/far`)).status, 200)
  assert.deepEqual(hits.filter(h => h.startsWith('/far')), [], 'the other network\'s pod got no request')

  await waitUntil(async () => (await gatewayCondition(cluster, 'optout', 'portico.dev/Mesh'))?.reason === 'NotInMesh', 30_000, 'optout: Mesh=False NotInMesh', 100)
  await waitUntil(async () => (await gatewayCondition(cluster, 'web', 'portico.dev/Mesh'))?.reason === 'CAUnreachable', 30_000, 'web: Mesh=False CAUnreachable', 100)
  assert.equal((await gatewayCondition(cluster, 'web', 'portico.dev/Mesh'))?.status, 'False')
})

test('mesh in cluster mode with a real istiod: the Gateway whose proxy holds a certificate is Mesh=True InMesh; a token istiod refuses is Mesh=False TokenRefused', { timeout: 300_000 }, async t => {
  const istio = requireIstio(t)
  if (istio === null) return
  const suite = await startClusterGateway(t, { dir: 'portico-cluster-mesh-istiod-', cluster: { controllerManager: false, fakeKubelet: false } })
  if (suite === null) return
  t.after(async () => await suite.stop())
  const { cluster, dir } = suite
  await installIstioCrds(cluster, istio.crds)
  await cluster.createNamespace('apps')
  const clusterId = 'portico-test'
  const istiod = await startIstiod(cluster, istio.istiod, { clusterId })
  t.after(async () => await istiod.stop())
  await cluster.apply(gatewayYaml('apps', 'web', await freePort()) + '---\n' + gatewayYaml('apps', 'bad', await freePort()))
  await suite.startController({ env: { MESH_AUTO_ENABLED: 'true', MESH_CLUSTER_ID: clusterId, LEADER_ELECTION: 'false' } })
  const rootFile = join(dir, 'root-cert.pem')
  writeFileSync(rootFile, await istiod.rootCert('apps'))
  // What the kubelet would mount: the projected token (audience istio-ca) and the root
  // ConfigMap; the CA on loopback, its serving name given.
  const proxyEnv = async (gateway: string, audience: string) => {
    const tokenFile = join(dir, `${gateway}-istio-token`)
    writeFileSync(tokenFile, await cluster.createToken('apps', gateway, { audiences: [audience] }))
    return { MESH_TOKEN_FILE: tokenFile, MESH_ROOT_FILE: rootFile, CA_ADDRESS: `127.0.0.1:${istiod.secureGrpcPort}`, CA_SERVER_NAME: istiod.serverName, POD_NAMESPACE: 'apps', SERVICE_ACCOUNT: gateway }
  }
  // The deployer creates each Gateway's ServiceAccount; startGatewayProxy waits for its Deployment.
  for (const sa of ['web', 'bad']) await waitUntil(async () => (await cluster.api('GET', `/api/v1/namespaces/apps/serviceaccounts/${sa}`).catch(() => undefined)) !== undefined, 30_000, `the deployer's ServiceAccount ${sa}`, 100)
  await suite.startProxy('apps', 'web', await proxyEnv('web', 'istio-ca'))
  await suite.startProxy('apps', 'bad', await proxyEnv('bad', 'portico'))
  await waitUntil(async () => (await gatewayCondition(cluster, 'web', 'portico.dev/Mesh'))?.reason === 'InMesh', 60_000, 'web: Mesh=True InMesh', 200)
  const inMesh = await gatewayCondition(cluster, 'web', 'portico.dev/Mesh')
  assert.equal(inMesh?.status, 'True')
  await waitUntil(async () => (await gatewayCondition(cluster, 'bad', 'portico.dev/Mesh'))?.reason === 'TokenRefused', 60_000, 'bad: Mesh=False TokenRefused', 200)
  assert.match((await gatewayCondition(cluster, 'bad', 'portico.dev/Mesh'))!.message, /^proxy bad-local: token refused/)
})
