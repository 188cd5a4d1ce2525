/**
 * UDPRoute in cluster mode with real parts: kube-apiserver and etcd, the Gateway API CRDs,
 * the portico controller and the Gateway's proxy as local processes, and UDP echo servers on
 * a test host (a network namespace) that EndpointSlices point at. Checks what the Gateway API
 * v1.7.0 suite's UDPRoute tests check — listener supportedKinds and attachedRoutes, route
 * Accepted / ResolvedRefs, the oldest route taking the traffic, weights — and that datagrams
 * reach the backend and its replies the client.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import dgram from 'node:dgram'
import type { KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { startUdpEcho } from '../lib/test-host.ts'

const CONTROLLER_NAME = 'portico.dev/gateway-controller'

let suite: ClusterGateway | null = null

async function eventually (check: () => Promise<boolean>, ms = 20_000, why: () => string = () => ''): Promise<void> {
  await waitUntil(check, ms, () => `the condition ${why()}`, 100)
}

/** A Service with one UDP port 8080 and an EndpointSlice at the test host's `port`. */
function udpService (ns: string, name: string, port: number): string {
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${ns} }
spec: { ports: [{ name: udp, port: 8080, targetPort: ${port}, protocol: UDP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-manual, namespace: ${ns}, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: udp, port: ${port}, protocol: UDP }]
endpoints: [{ addresses: ["${suite!.host!.address}"], conditions: { ready: true } }]
`
}

/** One datagram from a socket of its own (a new flow); the JSON answer, or null after `ms`. */
async function probe (port: number, text: string, ms = 1_000): Promise<{ service: string, namespace: string, request: string } | null> {
  const socket = dgram.createSocket('udp4')
  try {
    return await new Promise(resolve => {
      const timer = setTimeout(() => resolve(null), ms)
      socket.once('message', msg => { clearTimeout(timer); resolve(JSON.parse(msg.toString())) })
      socket.send(text, port, '127.0.0.1')
    })
  } finally {
    socket.close()
  }
}

function parents (r: KubeObject): Array<{ parentRef: { name: string }, conditions: Array<{ type: string, status: string, reason: string }> }> {
  return ((r.status?.parents ?? []) as Array<{ controllerName: string, parentRef: { name: string }, conditions: Array<{ type: string, status: string, reason: string }> }>).filter(p => p.controllerName === CONTROLLER_NAME)
}

async function udpRoute (name: string): Promise<KubeObject> {
  return await suite!.cluster.api('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/apps/udproutes/${name}`)
}

before(async s => {
  suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-udp-', testHost: true, namespaces: ['portico-system', 'apps'] })
  if (suite === null) return
  const { cluster, host } = suite
  await startUdpEcho(host!, 'udp-a', 18091, 'apps')
  await startUdpEcho(host!, 'udp-b', 18092, 'apps')
  await startUdpEcho(host!, 'udp-c', 18093, 'apps')
  await cluster.apply(udpService('apps', 'udp-a', 18091) + '---\n' + udpService('apps', 'udp-b', 18092) + '---\n' + udpService('apps', 'udp-c', 18093))
})

after(async () => await suite?.stop())

test('UDPRoute: statuses as the suite checks them, datagrams to the oldest route\'s backends by weight', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const controller = await suite.startController()
  const port = await freePort()
  await cluster.apply(`${gatewayYaml('apps', 'dns', port, { protocol: 'UDP', listener: 'allowedRoutes: { kinds: [{ kind: UDPRoute }] }' })}---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: { name: older, namespace: apps }
spec:
  parentRefs: [{ name: dns, sectionName: udp }]
  rules: [{ backendRefs: [{ name: udp-a, port: 8080, weight: 1 }, { name: udp-b, port: 8080, weight: 1 }] }]
`)
  const proxy = await suite.startProxy('apps', 'dns')

  // The proxies' Service carries the listener's port as UDP.
  const svc = await cluster.api<KubeObject>('GET', '/api/v1/namespaces/apps/services/dns')
  assert.deepEqual((svc.spec.ports as Array<{ port: number, protocol: string }>).map(p => [p.port, p.protocol]), [[port, 'UDP']])

  await eventually(async () => (await probe(port, 'hello')) !== null, 30_000, () => proxy.output + controller.output())
  const seen = new Set<string>()
  for (let i = 0; i < 40 && seen.size < 2; i++) {
    const answer = await probe(port, `p${i}`)
    assert.ok(answer !== null, 'every flow answered')
    assert.equal(answer.request, `p${i}`)
    assert.equal(answer.namespace, 'apps')
    seen.add(answer.service)
  }
  assert.deepEqual([...seen].sort(), ['udp-a', 'udp-b'], 'both weighted backends get flows')

  await eventually(async () => {
    const gw = await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/apps/gateways/dns')
    const l = (gw.status?.listeners ?? [])[0] as { supportedKinds: Array<{ kind: string }>, attachedRoutes: number } | undefined
    return l?.attachedRoutes === 1 && l.supportedKinds.map(k => k.kind).join() === 'UDPRoute'
  }, 20_000, () => controller.output())
  const older = parents(await udpRoute('older'))[0]!
  assert.equal(older.conditions.find(c => c.type === 'Accepted')?.status, 'True')
  assert.equal(older.conditions.find(c => c.type === 'ResolvedRefs')?.status, 'True')

  // A newer route on the same listener: Accepted and counted, the older keeps the traffic;
  // one to a missing Service: ResolvedRefs=False BackendNotFound.
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: { name: newer, namespace: apps }
spec:
  parentRefs: [{ name: dns, sectionName: udp }]
  rules: [{ backendRefs: [{ name: udp-c, port: 8080 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: { name: missing, namespace: apps }
spec:
  parentRefs: [{ name: dns }]
  rules: [{ backendRefs: [{ name: nowhere, port: 8080 }] }]
`)
  await eventually(async () => {
    const gw = await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/apps/gateways/dns')
    return ((gw.status?.listeners ?? [])[0] as { attachedRoutes: number } | undefined)?.attachedRoutes === 3
  }, 20_000, () => controller.output())
  assert.equal(parents(await udpRoute('newer'))[0]?.conditions.find(c => c.type === 'Accepted')?.status, 'True')
  await eventually(async () => parents(await udpRoute('missing'))[0]?.conditions.find(c => c.type === 'ResolvedRefs')?.reason === 'BackendNotFound', 20_000, () => controller.output())
  for (let i = 0; i < 20; i++) {
    const service = (await probe(port, 'still'))?.service
    assert.ok(service === 'udp-a' || service === 'udp-b', `only the older route's backends answer, not ${String(service)}`)
  }

  // The older route goes away (and the broken one, as old as the newer: names break that tie):
  // the newer one takes new flows.
  await cluster.kubectl(['delete', 'udproute', 'older', 'missing', '-n', 'apps'])
  await eventually(async () => {
    for (let i = 0; i < 5; i++) if ((await probe(port, 'next'))?.service !== 'udp-c') return false
    return true
  }, 20_000, () => proxy.output)
})
