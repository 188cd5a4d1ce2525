/**
 * The inference extension in a cluster (chart inferenceExtension.enabled): the real
 * kube-apiserver harness (e2e/cluster/harness.ts) with the InferencePool CRD from the module
 * (scripts/test-tools' INFERENCE_EXTENSION_CRDS), the reference endpoint picker lwepp (LWEPP)
 * watching the pool, Portico's controller with INFERENCE_EXTENSION_ENABLED=true and a Gateway's
 * proxy fed over xDS:
 *
 * HTTPRoute → InferencePool → lwepp → echo servers as the pool's pods (Pods marked Ready with
 * loopback IPs where the servers listen): requests steered to each pod with
 * `test-epp-endpoint-selection`, the pool's status.parents (Accepted / ResolvedRefs), a pod
 * relabelled out of the pool stops receiving traffic (the controller drops it from the pool's
 * endpoints; lwepp stops picking it); and with the switch off, the route's
 * ResolvedRefs=False/InvalidKind.
 *
 * The picker's Service has no selector and an EndpointSlice naming this machine's first
 * non-loopback IPv4 address (the API server refuses loopback endpoints; lwepp listens on every
 * address) and lwepp's port: the controller reaches an EPP through its Service's ready
 * endpoint, as every Service.
 *
 * Without LWEPP or the kube tools the test is skipped with that reason (and fails in CI).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { gatewayYaml, startController, startGatewayProxy } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import type { EchoedRequest } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { applyPoolPods, lweppPorts, pickerServiceYaml, poolParents, poolYaml, routeConditions, startLwepp, type Condition, poolRouteYaml, startPoolCluster } from '../lib/inference-cluster.ts'

const NS = 'apps'
const POOL = 'echo-pool'
const POD_NAMES = ['pod-a', 'pod-b']
/** The pods' IPs: loopback addresses of their own (Linux routes all of 127/8 to lo). */
const POD_IPS = ['127.0.0.2', '127.0.0.3']

test('HTTPRoute → InferencePool → lwepp → pods, through the controller and a Gateway\'s proxy; with the switch off, InvalidKind', { timeout: 300_000 }, async t => {
  // Two echo servers on the same port of 127.0.0.2 and 127.0.0.3 (the pool's one targetPort).
  const pool = await startPoolCluster(t, { dir: 'portico-cluster-inference-', namespaces: [NS], pods: { names: POD_NAMES, ips: POD_IPS } })
  if (pool === null) return
  const { cluster, tools, hostIP, pods, targetPort } = pool
  const { dir } = pool.suite
  const ports = await lweppPorts()
  const { grpcPort } = ports
  const gatewayPort = await freePort()

  await cluster.apply(`${poolYaml({ namespace: NS, name: POOL, targetPorts: [targetPort], picker: { service: 'lwepp', port: grpcPort } })}---
${pickerServiceYaml({ namespace: NS, name: 'lwepp', port: grpcPort, address: hostIP })}---
${gatewayYaml(NS, 'web', gatewayPort)}---
${poolRouteYaml({ namespace: NS, pool: POOL })}`)
  // Two pods Ready at the echo servers' addresses; a third of the pool never Ready.
  await applyPoolPods(cluster, { namespace: NS, pool: POOL, names: POD_NAMES, ips: POD_IPS, port: targetPort, unready: ['pod-unready'] })

  const lwepp = startLwepp(cluster, tools.lwepp, { pool: POOL, namespace: NS, ports })
  t.after(async () => await lwepp.stop())
  const lweppLog = (): string => lwepp.output().slice(-3000)

  await t.test('the switch on: requests steered to each pod through lwepp, the pool\'s status, a pod relabelled out stops receiving traffic', async st => {
    const controller = await startController(cluster, { env: { INFERENCE_EXTENSION_ENABLED: 'true', LEADER_ELECTION: 'false' } })
    st.after(async () => await controller.stop())
    const adminPort = await freePort()
    const proxy = await startGatewayProxy(cluster, dir, NS, 'web', { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
    // The pool's endpoints as the proxy has them (its admin /config_dump).
    const poolEndpoints = async (): Promise<string[]> => {
      const dump = await (await request(`http://127.0.0.1:${adminPort}/config_dump`)).body.json() as { backends: Array<{ key: string, endpoints: Array<{ host: string, port: number }> }> }
      return (dump.backends.find(b => b.key.startsWith(`inferencepool/${NS}/${POOL}#`))?.endpoints ?? []).map(e => `${e.host}:${e.port}`).sort()
    }
    st.after(async () => await proxy.stop())
    await waitUntil(async () => (await routeConditions(cluster, NS, 'llm')).find(c => c.type === 'ResolvedRefs')?.status === 'True', 30_000, 'route llm ResolvedRefs=True', 200)
    assert.match(controller.output(), /inference extension on: watching InferencePools and Pods/)

    // The pool's status: one parent, the Gateway, Accepted and ResolvedRefs.
    let parents: Awaited<ReturnType<typeof poolParents>> = []
    await waitUntil(async () => {
      parents = await poolParents(cluster, NS, POOL)
      return parents.length > 0
    }, 30_000, 'the pool\'s status.parents', 200)
    assert.deepEqual(parents.map(p => p.parentRef), [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: NS, name: 'web' }])
    assert.equal(parents[0]!.controllerName, 'portico.dev/gateway-controller')
    assert.deepEqual(parents[0]!.conditions.map(c => [c.type, c.status, c.reason]), [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'True', 'ResolvedRefs']])

    const url = `http://127.0.0.1:${gatewayPort}/v1/completions`
    const body = JSON.stringify({ model: 'smollm2', prompt: 'Hello' })
    const send = async (headers: Record<string, string> = {}) => await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
    // The proxy has its config and lwepp has read the pool once a steered request is served.
    let last = ''
    await waitUntil(async () => {
      const res = await send({ 'test-epp-endpoint-selection': POD_IPS[0]! }).catch((err: Error) => { last = err.message; return null })
      if (res === null) return false
      last = `${res.statusCode} ${await res.body.text()}`
      return res.statusCode === 200
    }, 60_000, 'a request served through the pool', 250).catch(err => {
      throw new Error(`${(err as Error).message}; last answer: ${last}\n${lweppLog()}\n${proxy.stdout.slice(-3000)}\n${proxy.stderr.slice(-3000)}`)
    })
    // The ready pods only (pod-unready is not an endpoint).
    assert.deepEqual(await poolEndpoints(), pods.map(p => p.host).sort())
    for (const [i, name] of POD_NAMES.entries()) {
      for (let n = 0; n < 2; n++) {
        const res = await send({ 'test-epp-endpoint-selection': POD_IPS[i]! })
        const text = await res.body.text()
        assert.equal(res.statusCode, 200, text)
        const echo = JSON.parse(text) as EchoedRequest
        assert.equal(echo.name, name)
        assert.equal(echo.headers['x-gateway-destination-endpoint'], pods[i]!.host)
        assert.equal(res.headers['x-conformance-test-served-endpoint'], pods[i]!.host, 'lwepp got the served endpoint from Portico')
      }
    }

    // pod-b relabelled out of the pool: the controller drops it from the pool's endpoints (so
    // the proxy would refuse it even if a picker named it), lwepp stops picking it; only pod-a
    // serves, and asking for pod-b fails.
    await cluster.api('PATCH', `/api/v1/namespaces/${NS}/pods/${POD_NAMES[1]!}`, { metadata: { labels: { app: 'elsewhere' } } }, { contentType: 'application/merge-patch+json' })
    await waitUntil(async () => {
      const names = await Promise.all([0, 1, 2, 3].map(async () => {
        const res = await send()
        const text = await res.body.text()
        return res.statusCode === 200 ? (JSON.parse(text) as EchoedRequest).name : `${res.statusCode}`
      }))
      return names.every(n => n === POD_NAMES[0])
    }, 30_000, `only ${POD_NAMES[0]!} serves\n${lweppLog()}`, 250)
    await waitUntil(async () => (await poolEndpoints()).join() === pods[0]!.host, 30_000, 'the proxy\'s pool without pod-b', 200)
    const steered = await send({ 'test-epp-endpoint-selection': POD_IPS[1]! })
    const text = await steered.body.text()
    assert.notEqual(steered.statusCode, 200, `pod-b is out of the pool: ${text}`)
  })
  // Last: the first controller's Deployment names its xDS port, which the proxy reads.
  await t.test('the switch off: the route\'s ResolvedRefs is False/InvalidKind', async st => {
    const controller = await startController(cluster, { env: { LEADER_ELECTION: 'false' } })
    st.after(async () => await controller.stop())
    let conds: Condition[] = []
    await waitUntil(async () => {
      conds = await routeConditions(cluster, NS, 'llm')
      return conds.some(c => c.type === 'ResolvedRefs' && c.status === 'False')
    }, 30_000, 'route llm status', 200)
    const resolved = conds.find(c => c.type === 'ResolvedRefs')!
    assert.equal(resolved.status, 'False')
    assert.equal(resolved.reason, 'InvalidKind')
    assert.match(resolved.message, /inference extension is off/)
    assert.doesNotMatch(controller.output(), /not available in this version/)
  })
})
