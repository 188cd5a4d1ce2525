/**
 * An InferencePool whose endpoint picker's Service has several ready endpoints, on the real
 * kube-apiserver harness: the controller puts them all in the pool's picker (`target`, then
 * `fallbackTargets`, packages/controller/src/translate/inference-pools.ts), and the proxy's
 * picker channel connects to the first that accepts (packages/engine/src/ir/picker-targets.ts,
 * gRPC pick_first). The first endpoint is a port of this machine where nothing listens (a
 * picker replica that is down), the second is lwepp: requests are still picked and served,
 * where with the first endpoint alone they would get 503.
 *
 * Without LWEPP or the kube tools the test is skipped with that reason (and fails in CI).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import type { EchoedRequest } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { applyPoolPods, lweppPorts, startLwepp, poolRouteYaml, startPoolCluster } from '../lib/inference-cluster.ts'

const NS = 'apps'
const POOL = 'ha-pool'
const POD_NAMES = ['pod-a', 'pod-b']
const POD_IPS = ['127.0.0.6', '127.0.0.7']

test('the picker\'s Service with several ready endpoints: all are the pool\'s picker addresses; the first down, the next picks', { timeout: 300_000 }, async t => {
  const pool = await startPoolCluster(t, { dir: 'portico-cluster-inference-picker-', namespaces: [NS], pods: { names: POD_NAMES, ips: POD_IPS } })
  if (pool === null) return
  const { suite, cluster, tools, hostIP, pods, targetPort } = pool
  // Two free ports: the lower is the dead replica's (the controller sorts a Service's
  // endpoints by address, then port, so it comes first), the higher lwepp's.
  const [deadPort, grpcPort] = [await freePort(), await freePort()].sort((a, b) => a - b) as [number, number]
  const ports = { ...await lweppPorts(), grpcPort }
  const gatewayPort = await freePort()
  // The Service's port 9002 is the replicas' targetPort: one EndpointSlice per replica (their
  // ports differ, as two pods' would not on a real cluster; here they share this machine's IP).
  await cluster.apply(`apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: ${POOL}, namespace: ${NS} }
spec:
  selector: { matchLabels: { app: ${POOL} } }
  targetPorts: [{ number: ${targetPort} }]
  endpointPickerRef: { name: epp, port: { number: 9002 } }
---
apiVersion: v1
kind: Service
metadata: { name: epp, namespace: ${NS} }
spec: { ports: [{ name: grpc, port: 9002, targetPort: grpc }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: epp-down, namespace: ${NS}, labels: { kubernetes.io/service-name: epp } }
addressType: IPv4
ports: [{ name: grpc, port: ${deadPort} }]
endpoints: [{ addresses: [${hostIP}], conditions: { ready: true } }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: epp-up, namespace: ${NS}, labels: { kubernetes.io/service-name: epp } }
addressType: IPv4
ports: [{ name: grpc, port: ${grpcPort} }]
endpoints: [{ addresses: [${hostIP}], conditions: { ready: true } }]
---
${gatewayYaml(NS, 'web', gatewayPort)}---
${poolRouteYaml({ namespace: NS, pool: POOL })}`)
  await applyPoolPods(cluster, { namespace: NS, pool: POOL, names: POD_NAMES, ips: POD_IPS, port: targetPort })
  const lwepp = startLwepp(cluster, tools.lwepp, { pool: POOL, namespace: NS, ports })
  t.after(async () => await lwepp.stop())

  const controller = await suite.startController({ env: { INFERENCE_EXTENSION_ENABLED: 'true', LEADER_ELECTION: 'false' } })
  const adminPort = await freePort()
  const proxy = await suite.startProxy(NS, 'web', { ADMIN_ADDR: `127.0.0.1:${adminPort}` })

  // The proxy's pool: the picker at both addresses, the dead one first.
  type Picker = { target: string, fallbackTargets?: string[] }
  let picker: Picker | undefined
  await waitUntil(async () => {
    const dump = await (await request(`http://127.0.0.1:${adminPort}/config_dump`)).body.json() as { backends: Array<{ key: string, inferencePool?: { picker: Picker } }> }
    picker = dump.backends.find(b => b.key.startsWith(`inferencepool/${NS}/${POOL}#`))?.inferencePool?.picker
    return picker !== undefined
  }, 30_000, 'the pool in the proxy\'s config', 200)
  assert.deepEqual({ target: picker!.target, fallbackTargets: picker!.fallbackTargets }, { target: `${hostIP}:${deadPort}`, fallbackTargets: [`${hostIP}:${grpcPort}`] })

  const send = async (steer: string) => await request(`http://127.0.0.1:${gatewayPort}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'test-epp-endpoint-selection': steer }, body: JSON.stringify({ model: 'm', prompt: 'Hi' }) })
  let last = ''
  await waitUntil(async () => {
    const res = await send(POD_IPS[0]!).catch((err: Error) => { last = err.message; return null })
    if (res === null) return false
    last = `${res.statusCode} ${await res.body.text()}`
    return res.statusCode === 200
  }, 60_000, 'a request picked through the picker\'s second address', 250).catch(err => {
    throw new Error(`${(err as Error).message}; last answer: ${last}\n${lwepp.output().slice(-3000)}\n${proxy.stderr.slice(-3000)}`)
  })
  // Steered to each pod by lwepp, every time (the channel stays on the address that answers).
  for (const [i, name] of POD_NAMES.entries()) {
    for (let n = 0; n < 3; n++) {
      const res = await send(POD_IPS[i]!)
      const text = await res.body.text()
      assert.equal(res.statusCode, 200, text)
      assert.equal((JSON.parse(text) as EchoedRequest).name, name)
      assert.equal(res.headers['x-conformance-test-served-endpoint'], pods[i]!.host, 'lwepp got the served endpoint')
    }
  }
})
