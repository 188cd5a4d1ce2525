/**
 * The InferencePool CRD installed after the controller started, and deleted while it runs
 * (chart inferenceExtension.enabled; the controller watches that CRD by name,
 * packages/controller/src/kube/informers.ts LATE_CRDS): on the real kube-apiserver harness,
 * the controller starts without the CRD (a route naming a pool: ResolvedRefs=False,
 * BackendNotFound), then the CRD — the chart's vendored copy of the module's v1.6.2 file,
 * which e2e/test/chart-values.test.ts checks against the module — and a pool are applied:
 * without a restart the route resolves, the pool's status.parents is written, and a request
 * through the Gateway's proxy is served by the pod lwepp picks. The CRD deleted: the route is
 * BackendNotFound again and the controller stops watching pools (no retry loop on the gone
 * API); installed again: watched again.
 *
 * Without LWEPP or the kube tools the test is skipped with that reason (and fails in CI).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { request } from 'undici'
import type { Cluster, KubeObject } from '../cluster/harness.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { CHART_DIR } from '../lib/chart.ts'
import { freePort } from '@portico/testkit/portico'
import type { EchoedRequest } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { applyPoolPods, installPoolCrd, lweppPorts, startLwepp, poolRouteYaml, startPoolCluster } from '../lib/inference-cluster.ts'

const NS = 'apps'
const POOL = 'late-pool'
const POD_NAMES = ['pod-a', 'pod-b']
const POD_IPS = ['127.0.0.4', '127.0.0.5']
const CRD_NAME = 'inferencepools.inference.networking.k8s.io'
/** The chart's copy of the module's CRD (crds.inferencePool). */
const CHART_CRD = join(CHART_DIR, 'files/inference.networking.k8s.io_inferencepools.yaml')

type Condition = { type: string, status: string, reason: string, message: string }

async function resolvedRefs (cluster: Cluster, name: string): Promise<Condition | undefined> {
  const route = await cluster.api<KubeObject>('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/${NS}/httproutes/${name}`)
  return ((route.status?.parents?.[0]?.conditions ?? []) as Condition[]).find(c => c.type === 'ResolvedRefs')
}

test('the InferencePool CRD installed after the controller started: pools watched without a restart; deleted: not watched; installed again: watched', { timeout: 300_000 }, async t => {
  // The CRD comes later: installed once the controller runs.
  const setup = await startPoolCluster(t, { dir: 'portico-cluster-inference-crd-', namespaces: [NS], pods: { names: POD_NAMES, ips: POD_IPS }, crd: false })
  if (setup === null) return
  const { suite, cluster, tools, hostIP, pods, targetPort } = setup
  const ports = await lweppPorts()
  const gatewayPort = await freePort()
  const pool = `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: ${POOL}, namespace: ${NS} }
spec:
  selector: { matchLabels: { app: ${POOL} } }
  targetPorts: [{ number: ${targetPort} }]
  endpointPickerRef: { name: lwepp, port: { number: ${ports.grpcPort} } }
`
  // Everything but the CRD and the pool.
  await cluster.apply(`apiVersion: v1
kind: Service
metadata: { name: lwepp, namespace: ${NS} }
spec: { ports: [{ name: grpc, port: ${ports.grpcPort}, targetPort: ${ports.grpcPort} }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: lwepp-1, namespace: ${NS}, labels: { kubernetes.io/service-name: lwepp } }
addressType: IPv4
ports: [{ name: grpc, port: ${ports.grpcPort} }]
endpoints: [{ addresses: [${hostIP}], conditions: { ready: true } }]
---
${gatewayYaml(NS, 'web', gatewayPort)}---
${poolRouteYaml({ namespace: NS, pool: POOL })}`)
  await applyPoolPods(cluster, { namespace: NS, pool: POOL, names: POD_NAMES, ips: POD_IPS, port: targetPort })

  const controller = await suite.startController({ env: { INFERENCE_EXTENSION_ENABLED: 'true', LEADER_ELECTION: 'false' } })
  const proxy = await suite.startProxy(NS, 'web')
  const log = (): string => controller.output().slice(-4000)

  // No CRD: the pool is not found.
  await waitUntil(async () => (await resolvedRefs(cluster, 'llm'))?.reason === 'BackendNotFound', 30_000, `route llm BackendNotFound without the CRD\n${log()}`, 200)

  const url = `http://127.0.0.1:${gatewayPort}/v1/completions`
  const body = JSON.stringify({ model: 'smollm2', prompt: 'Hello' })
  const send = async (headers: Record<string, string> = {}) => await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })

  // The CRD (the chart's vendored file) and the pool: the running controller picks them up.
  await installPoolCrd(cluster, CHART_CRD)
  await cluster.apply(pool)
  const lwepp = startLwepp(cluster, tools.lwepp, { pool: POOL, namespace: NS, ports })
  t.after(async () => await lwepp.stop())
  await waitUntil(async () => (await resolvedRefs(cluster, 'llm'))?.status === 'True', 30_000, `route llm ResolvedRefs=True after the CRD\n${log()}`, 200)
  assert.match(controller.output(), /not watched until its CRD is installed/)
  assert.match(controller.output(), /none read until the CRD is installed/)
  assert.match(controller.output(), /CRD installed: watching it now/)
  let parents: Array<{ parentRef: Record<string, unknown>, conditions: Condition[] }> = []
  await waitUntil(async () => {
    parents = (await cluster.api<KubeObject>('GET', `/apis/inference.networking.k8s.io/v1/namespaces/${NS}/inferencepools/${POOL}`)).status?.parents ?? []
    return parents.length > 0
  }, 30_000, 'the pool\'s status.parents', 200)
  assert.deepEqual(parents.map(p => p.parentRef), [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: NS, name: 'web' }])
  assert.deepEqual(parents[0]!.conditions.map(c => [c.type, c.status, c.reason]), [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'True', 'ResolvedRefs']])
  // Served through lwepp, by the pod it was steered to.
  let last = ''
  await waitUntil(async () => {
    const res = await send({ 'test-epp-endpoint-selection': POD_IPS[1]! }).catch((err: Error) => { last = err.message; return null })
    if (res === null) return false
    last = `${res.statusCode} ${await res.body.text()}`
    return res.statusCode === 200 && (JSON.parse(last.slice(4)) as EchoedRequest).name === POD_NAMES[1]
  }, 60_000, 'a request served by pod-b through the pool', 250).catch(err => {
    throw new Error(`${(err as Error).message}; last answer: ${last}\n${lwepp.output().slice(-3000)}\n${proxy.stderr.slice(-3000)}`)
  })

  // The CRD deleted (and with it the pool): the controller stops watching pools — the route's
  // backend is not found again, the pool's share of traffic is refused — and does not retry
  // the gone API.
  await lwepp.stop()
  await cluster.kubectl(['delete', 'crd', CRD_NAME, '--wait=true', '--timeout=60s'])
  await waitUntil(async () => (await resolvedRefs(cluster, 'llm'))?.reason === 'BackendNotFound', 30_000, `route llm BackendNotFound after the CRD was deleted\n${log()}`, 200)
  // The CRD's own watch event may come after the pools' deletions (another watch stream).
  await waitUntil(async () => /CRD deleted or no longer served: not watched, read as none/.test(controller.output()), 30_000, `the controller stops watching pools\n${log()}`, 200)
  await waitUntil(async () => (await send()).statusCode === 500, 30_000, 'the pool\'s route refused once its backend is gone', 200)
  const retries = (): number => controller.output().split('\n').filter(l => l.includes('watch failed; restarting') && l.includes('inferencePools')).length
  const before = retries()
  await new Promise(resolve => setTimeout(resolve, 5000))
  assert.equal(retries(), before, `no retries of the InferencePool watch once its CRD is gone\n${log()}`)

  // Installed again: watched again.
  await installPoolCrd(cluster, CHART_CRD)
  await cluster.apply(pool)
  await waitUntil(async () => (await resolvedRefs(cluster, 'llm'))?.status === 'True', 30_000, `route llm ResolvedRefs=True after the CRD came back\n${log()}`, 200)
  assert.equal(controller.output().split('CRD installed: watching it now').length - 1, 2, 'watched twice, one controller')
})
