/**
 * Cluster mode with real parts: a kube-apiserver with etcd and kube-controller-manager (built
 * from source, see docs/cluster-testing.md), the Gateway API CRDs, the portico controller as
 * a local process, and its proxy as a local process started with the environment the
 * deployer put in the Deployment (and a service-account token minted for the Gateway's
 * ServiceAccount). Backends are echo servers on a test host (a network namespace) that
 * EndpointSlices point at.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { backendService as serviceAt, gatewayYaml, httpGet as get } from '../cluster/portico-processes.ts'
import { freePort, startClusterPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { startEcho } from '../lib/test-host.ts'

const CONTROLLER_NAME = 'portico.dev/gateway-controller'

let suite: ClusterGateway | null = null

async function eventually (check: () => Promise<boolean>, ms = 15_000, why: () => string = () => ''): Promise<void> {
  await waitUntil(check, ms, () => `the condition ${why()}`, 100)
}

function condition (obj: KubeObject | undefined, type: string): { status: string, reason: string } | undefined {
  return (obj?.status?.conditions as Array<{ type: string, status: string, reason: string }> | undefined)?.find(c => c.type === type)
}

async function gateway (ns: string, name: string): Promise<KubeObject> {
  return await suite!.cluster.api('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/gateways/${name}`)
}

async function route (ns: string, name: string): Promise<KubeObject> {
  return await suite!.cluster.api('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/httproutes/${name}`)
}

function parentCondition (r: KubeObject, type: string): { status: string, reason: string } | undefined {
  const parent = (r.status?.parents as Array<{ controllerName: string, conditions: Array<{ type: string, status: string, reason: string }> }> | undefined)?.find(p => p.controllerName === CONTROLLER_NAME)
  return parent?.conditions.find(c => c.type === type)
}

function backendService (ns: string, name: string, port: number): string {
  return serviceAt(suite!.host!.address, ns, name, port)
}

before(async s => {
  suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-', testHost: true, namespaces: ['portico-system', 'apps', 'other'] })
  if (suite === null) return
  const { cluster, host } = suite
  await startEcho(host!, 'echo-a', 18081)
  await startEcho(host!, 'echo-b', 18082)
  await startEcho(host!, 'echo-other', 18083)
  await cluster.apply(backendService('apps', 'echo-a', 18081) + '---\n' + backendService('apps', 'echo-b', 18082) + '---\n' + backendService('other', 'echo-other', 18083))
})

after(async () => await suite?.stop())

test('Gateway and HTTPRoute: statuses as the spec says, and traffic reaches the right backend', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const controller = await suite.startController()
  await eventually(async () => {
    const cls = await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/gatewayclasses/portico').catch(() => undefined)
    return condition(cls, 'Accepted')?.status === 'True'
  }, 15_000, () => controller.output())
  const cls = await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/gatewayclasses/portico')
  assert.equal(cls.spec.controllerName, CONTROLLER_NAME)
  assert.ok((cls.status.supportedFeatures as Array<{ name: string }>).some(f => f.name === 'HTTPRoute'))

  const gwPort = await freePort()
  await cluster.apply(`${gatewayYaml('apps', 'web', gwPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r1, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /a } }]
      backendRefs: [{ name: echo-a, port: 80 }]
`)
  // Deployer: ServiceAccount, Service and Deployment owned by the Gateway, pods labelled.
  const proxy = await suite.startProxy('apps', 'web')
  const svc = await cluster.api<KubeObject>('GET', '/api/v1/namespaces/apps/services/web')
  assert.deepEqual((svc.spec.ports as Array<{ port: number }>).map(p => p.port), [gwPort])
  assert.equal((svc.metadata?.ownerReferences as Array<{ kind: string }>)[0]!.kind, 'Gateway')
  const dep = await cluster.api<KubeObject>('GET', '/apis/apps/v1/namespaces/apps/deployments/web')
  assert.equal(dep.spec.template.metadata.labels['gateway.networking.k8s.io/gateway-name'], 'web')
  assert.equal(dep.spec.template.spec.serviceAccountName, 'web')

  await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/a/x`)).status === 200, 15_000, () => proxy.output)
  assert.equal(JSON.parse((await get(`http://127.0.0.1:${gwPort}/a/x`)).body).name, 'echo-a')

  await eventually(async () => condition(await gateway('apps', 'web'), 'Programmed')?.status === 'True', 15_000, () => controller.output())
  const gw = await gateway('apps', 'web')
  assert.equal(condition(gw, 'Accepted')?.status, 'True')
  assert.equal(gw.status.listeners[0].attachedRoutes, 1)
  // Addresses: never the Service's cluster IP while its load-balancer ingress is pending; the
  // ingress once there is one (this cluster has no load balancer: the test plays its part).
  const clusterIP = (await cluster.api<KubeObject>('GET', '/api/v1/namespaces/apps/services/web')).spec.clusterIP as string
  assert.ok(!((gw.status.addresses ?? []) as Array<{ value: string }>).some(a => a.value === clusterIP), `no cluster IP while the LB is pending: ${JSON.stringify(gw.status.addresses)}`)
  await cluster.api('PATCH', '/api/v1/namespaces/apps/services/web/status', { status: { loadBalancer: { ingress: [{ ip: '192.0.2.10' }] } } }, { contentType: 'application/merge-patch+json' })
  await eventually(async () => JSON.stringify((await gateway('apps', 'web')).status.addresses) === JSON.stringify([{ type: 'IPAddress', value: '192.0.2.10' }]), 15_000, () => controller.output())
  const r1 = await route('apps', 'r1')
  assert.equal(parentCondition(r1, 'Accepted')?.status, 'True')
  assert.equal(parentCondition(r1, 'ResolvedRefs')?.status, 'True')
  assert.equal(condition(gw, 'Programmed') !== undefined && (gw.status.conditions as Array<{ observedGeneration: number }>)[0]!.observedGeneration, gw.metadata?.generation ?? 1)

  // Edits propagate; deletes too.
  const started = Date.now()
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r1, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /b } }]
      backendRefs: [{ name: echo-b, port: 80 }]
`)
  await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/b/x`)).status === 200)
  t.diagnostic(`route edit to first 200: ${Date.now() - started} ms`)
  assert.equal(JSON.parse((await get(`http://127.0.0.1:${gwPort}/b/x`)).body).name, 'echo-b')
  assert.equal((await get(`http://127.0.0.1:${gwPort}/a/x`)).status, 404)
  await cluster.kubectl(['delete', 'httproute', 'r1', '-n', 'apps'])
  await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/b/x`)).status === 404)

  // A cross-namespace backend without a ReferenceGrant, then with one.
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: cross, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /other } }]
      backendRefs: [{ name: echo-other, namespace: other, port: 80 }]
`)
  await eventually(async () => parentCondition(await route('apps', 'cross'), 'ResolvedRefs')?.reason === 'RefNotPermitted')
  assert.equal((await get(`http://127.0.0.1:${gwPort}/other/x`)).status, 500, 'the refused backend is dropped: no valid backends')
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: { name: apps-to-other, namespace: other }
spec:
  from: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps }]
  to: [{ group: "", kind: Service }]
`)
  await eventually(async () => parentCondition(await route('apps', 'cross'), 'ResolvedRefs')?.status === 'True')
  await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/other/x`)).status === 200)

  // An invalid route: a parentRef to a listener that does not exist.
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: invalid, namespace: apps }
spec:
  parentRefs: [{ name: web, sectionName: nope }]
  rules: [{ backendRefs: [{ name: echo-a, port: 80 }] }]
`)
  await eventually(async () => parentCondition(await route('apps', 'invalid'), 'Accepted')?.reason === 'NoMatchingParent')

  // A regex the engine cannot run (RE2 syntax, linear time: no lookahead): the route is not
  // Accepted (UnsupportedValue, naming the field) and never reaches the proxy, which keeps
  // its config. (A config a proxy NACKs is covered by xds-push.test.ts.)
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: badregex, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: RegularExpression, value: "/x(?=y)" } }]
      backendRefs: [{ name: echo-a, port: 80 }]
`)
  await eventually(async () => {
    const accepted = parentCondition(await route('apps', 'badregex'), 'Accepted') as { reason: string, message?: string } | undefined
    return accepted?.reason === 'UnsupportedValue' && /^spec\.rules\[0\]\.matches\[0\]\.path\.value: lookahead/.test(accepted.message ?? '')
  }, 15_000, () => controller.output())
  assert.equal((await get(`http://127.0.0.1:${gwPort}/other/x`)).status, 200, 'the last good config keeps serving')
  await cluster.kubectl(['delete', 'httproute', 'badregex', '-n', 'apps'])
  await eventually(async () => condition(await gateway('apps', 'web'), 'Programmed')?.status === 'True', 15_000)

  // Controller restart: the proxy keeps serving meanwhile, and reconnects.
  await controller.stop()
  assert.equal((await get(`http://127.0.0.1:${gwPort}/other/x`)).status, 200)
  const again = await suite.startController({ xds: controller.xds })
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: after-restart, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: Exact, value: /restarted } }]
      backendRefs: [{ name: echo-a, port: 80 }]
`)
  await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/restarted`)).status === 200, 30_000, () => proxy.output + again.output())

  // Proxy restart: a new proxy gets the whole config.
  await proxy.stop()
  const proxy2 = await suite.startProxy('apps', 'web')
  await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/restarted`)).status === 200, 15_000, () => proxy2.output)
  await proxy2.stop()
  await again.stop()
})

test('xDS auth: a proxy with another ServiceAccount\'s token is refused', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const controller = await suite.startController()
  const gwPort = await freePort()
  await cluster.apply(gatewayYaml('apps', 'guarded', gwPort))
  await eventually(async () => (await cluster.api('GET', '/api/v1/namespaces/apps/serviceaccounts/guarded').catch(() => undefined)) !== undefined)
  await cluster.apply('apiVersion: v1\nkind: ServiceAccount\nmetadata: { name: intruder, namespace: apps }\n')
  const token = await cluster.createToken('apps', 'intruder', { audiences: ['portico'] })
  const tokenFile = join(suite.dir, 'intruder.token')
  writeFileSync(tokenFile, token)
  const proxy = await startClusterPortico({ XDS_ADDRESS: `http://127.0.0.1:${controller.xds}`, POD_NAME: 'intruder', NAMESPACE: 'apps', GATEWAY: 'guarded', XDS_TOKEN_FILE: tokenFile })
  suite.defer(async () => { await proxy.stop() })
  await proxy.waitForOutput('authenticated as system:serviceaccount:apps:intruder')
  await controller.stop()
})

for (const mode of ['tls', 'either'] as const) {
  test(`xDS mode ${mode}: the controller makes its CA; the proxy trusts it through the deployer's ConfigMap`, async t => {
    if (suite === null) return t.skip('no cluster')
    const { cluster } = suite
    const xds = await freePort()
    const controller = await suite.startController({ env: { XDS_MODE: mode, XDS_ADDRESS: `https://127.0.0.1:${xds}` }, xds })
    const gwPort = await freePort()
    const name = `web-${mode}`
    await cluster.apply(`${gatewayYaml('apps', name, gwPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: apps }
spec:
  parentRefs: [{ name: ${name} }]
  rules: [{ backendRefs: [{ name: echo-a, port: 80 }] }]
`)
    const secret = await cluster.api<KubeObject>('GET', '/api/v1/namespaces/portico-system/secrets/portico-xds-ca')
    assert.ok((secret.data as Record<string, string>)['ca.crt'] !== undefined)
    const proxy = await suite.startProxy('apps', name)
    await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/`)).status === 200, 15_000, () => proxy.output + controller.output())
    if (mode === 'either') {
      // The same port also speaks plaintext.
      await proxy.stop()
      const plain = await suite.startProxy('apps', name, { XDS_ADDRESS: `http://127.0.0.1:${xds}` })
      await eventually(async () => (await get(`http://127.0.0.1:${gwPort}/`)).status === 200, 15_000, () => plain.output)
      await plain.stop()
    } else {
      await proxy.stop()
    }
    await controller.stop()
  })
}
