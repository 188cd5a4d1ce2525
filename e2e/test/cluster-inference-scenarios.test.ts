/**
 * The inference extension's scenarios in a cluster, mirroring the extension's conformance
 * tests, on one harness cluster (e2e/lib/inference-cluster.ts: the real kube-apiserver, the
 * InferencePool CRD, Portico's controller with the switch on, the Gateway `web`'s proxy fed over
 * xDS, one reference picker lwepp per pool, servers on loopback addresses of their own as the
 * pools' pods):
 *
 * - a pool with two target ports: each pod × each port reached by steering `ip:port`;
 * - a weighted split between two pools (3:1), each with its own lwepp;
 * - a pool in another namespace: RefNotPermitted and no traffic without a ReferenceGrant,
 *   served with it;
 * - the picker down (its Service without a ready endpoint, or lwepp killed): FailClose 503
 *   `endpoint picker unavailable`, FailOpen served by a pod of the pool;
 * - an h2c pool (`appProtocol: kubernetes.io/h2c`): pods speaking HTTP/2 with prior knowledge;
 * - invalid references: a missing pool (the route's BackendNotFound), a missing picker Service
 *   (the pool's InvalidExtensionRef), a pool without endpointPickerRef (EndpointPickerRefMissing).
 *
 * Everything is applied at once (one cluster, one controller, one proxy); each subtest waits
 * for its own part. Without LWEPP or the kube tools the test is skipped with that reason (and
 * fails in CI).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { EchoedRequest } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import {
  applyPoolPods, h2cEchoServer, lweppPorts, pickerServiceYaml, poolParents, poolYaml, postThrough, routeConditions, startInferenceGateway, startPoolServers,
  type Condition, type H2cEchoedRequest, type PoolServer
} from '../lib/inference-cluster.ts'

const NS = 'apps'
/** The namespace of the pool a route of NS names across namespaces. */
const OTHER_NS = 'models'

/** An HTTPRoute of the Gateway `web` sending `path` to `backendRefs` (YAML flow sequence). */
function routeYaml (name: string, path: string, backendRefs: string): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: ${NS} }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: ${path} } }]
      backendRefs: ${backendRefs}
`
}

const poolRef = (name: string, extra = ''): string => `{ group: inference.networking.k8s.io, kind: InferencePool, name: ${name}${extra} }`

const triple = (c: Condition | undefined): string[] => c === undefined ? [] : [c.type, c.status, c.reason]

test('inference scenarios in a cluster: target ports, weighted pools, another namespace, picker down, h2c, invalid references', { timeout: 300_000 }, async t => {
  const gw = await startInferenceGateway(t, [NS, OTHER_NS])
  if (gw === null) return
  const { cluster } = gw
  const url = (path: string): string => `http://127.0.0.1:${gw.gatewayPort}${path}`
  const servers: PoolServer[] = []
  t.after(async () => { await Promise.all(servers.map(s => s.close())) })
  const start = async (...args: Parameters<typeof startPoolServers>): Promise<PoolServer[]> => {
    const started = await startPoolServers(...args)
    servers.push(...started)
    return started
  }

  // The pools' servers: two ports on each of two pods; one pod per weighted pool; the other
  // namespace's pod; the picker-down pool's two pods; the h2c pool's two pods.
  const multiIPs = ['127.0.0.4', '127.0.0.5']
  const multiFirst = await start(['multi-a/1', 'multi-b/1'], multiIPs)
  const multiSecond = await start(['multi-a/2', 'multi-b/2'], multiIPs)
  const [heavy] = await start(['heavy'], ['127.0.0.6'])
  const [light] = await start(['light'], ['127.0.0.7'])
  const [remote] = await start(['remote'], ['127.0.0.8'])
  const fragileIPs = ['127.0.0.9', '127.0.0.10']
  const fragile = await start(['fragile-a', 'fragile-b'], fragileIPs)
  const h2cIPs = ['127.0.0.11', '127.0.0.12']
  const h2c = await start(['h2c-a', 'h2c-b'], h2cIPs, h2cEchoServer)

  // A picker per pool (the ports first: the pool names lwepp's gRPC port).
  const pickerPorts = { multi: await lweppPorts(), heavy: await lweppPorts(), light: await lweppPorts(), remote: await lweppPorts(), fragile: await lweppPorts(), h2c: await lweppPorts() }
  const epp = (pool: keyof typeof pickerPorts, failureMode?: 'FailOpen' | 'FailClose') => ({ service: `epp-${pool}`, port: pickerPorts[pool].grpcPort, ...(failureMode !== undefined ? { failureMode } : {}) })
  await cluster.apply([
    poolYaml({ namespace: NS, name: 'multi', targetPorts: [multiFirst[0]!.port, multiSecond[0]!.port], picker: epp('multi') }),
    routeYaml('multi', '/multi', `[${poolRef('multi')}]`),
    poolYaml({ namespace: NS, name: 'heavy', targetPorts: [heavy!.port], picker: epp('heavy') }),
    poolYaml({ namespace: NS, name: 'light', targetPorts: [light!.port], picker: epp('light') }),
    routeYaml('split', '/split', `[${poolRef('heavy', ', weight: 3')}, ${poolRef('light', ', weight: 1')}]`),
    poolYaml({ namespace: OTHER_NS, name: 'remote', targetPorts: [remote!.port], picker: epp('remote') }),
    routeYaml('remote', '/remote', `[${poolRef('remote', `, namespace: ${OTHER_NS}`)}]`),
    poolYaml({ namespace: NS, name: 'fragile', targetPorts: [fragile[0]!.port], picker: epp('fragile', 'FailClose') }),
    routeYaml('fragile', '/fragile', `[${poolRef('fragile')}]`),
    poolYaml({ namespace: NS, name: 'h2c', targetPorts: [h2c[0]!.port], picker: epp('h2c'), appProtocol: 'kubernetes.io/h2c' }),
    routeYaml('h2c', '/h2c', `[${poolRef('h2c')}]`),
    // Invalid references: no such pool; a picker Service that does not exist; no picker at all.
    routeYaml('missing', '/missing', `[${poolRef('nowhere')}]`),
    poolYaml({ namespace: NS, name: 'no-service', targetPorts: [8000], picker: { service: 'absent', port: 9002 } }),
    routeYaml('no-service', '/no-service', `[${poolRef('no-service')}]`),
    poolYaml({ namespace: NS, name: 'no-picker', targetPorts: [8000], picker: null }),
    routeYaml('no-picker', '/no-picker', `[${poolRef('no-picker')}]`)
  ].join('---\n'))
  const pods = async (namespace: string, pool: string, names: string[], ips: string[], port: number) => await applyPoolPods(cluster, { namespace, pool, names, ips, port })
  await pods(NS, 'multi', ['multi-a', 'multi-b'], multiIPs, multiFirst[0]!.port)
  await pods(NS, 'heavy', ['heavy-a'], ['127.0.0.6'], heavy!.port)
  await pods(NS, 'light', ['light-a'], ['127.0.0.7'], light!.port)
  await pods(OTHER_NS, 'remote', ['remote-a'], ['127.0.0.8'], remote!.port)
  await pods(NS, 'fragile', ['fragile-a', 'fragile-b'], fragileIPs, fragile[0]!.port)
  await pods(NS, 'h2c', ['h2c-a', 'h2c-b'], h2cIPs, h2c[0]!.port)
  const lwepps = {
    multi: await gw.startPicker(NS, 'multi', 'epp-multi', pickerPorts.multi),
    heavy: await gw.startPicker(NS, 'heavy', 'epp-heavy', pickerPorts.heavy),
    light: await gw.startPicker(NS, 'light', 'epp-light', pickerPorts.light),
    remote: await gw.startPicker(OTHER_NS, 'remote', 'epp-remote', pickerPorts.remote),
    fragile: await gw.startPicker(NS, 'fragile', 'epp-fragile', pickerPorts.fragile),
    h2c: await gw.startPicker(NS, 'h2c', 'epp-h2c', pickerPorts.h2c)
  }
  const logs = (name: keyof typeof lwepps): string => `\n${lwepps[name].output().slice(-2000)}\n${gw.proxyOutput()}`

  /** Waits until a request (steered with `steer` when given) is answered with `status`; its answer. */
  const waitAnswer = async (path: string, status: number, what: string, steer?: string, pool?: keyof typeof lwepps) => {
    let last = { status: 0, text: '', headers: {} as Record<string, string | string[] | undefined> }
    await waitUntil(async () => {
      last = await postThrough(url(path), steer !== undefined ? { 'test-epp-endpoint-selection': steer } : {})
      return last.status === status
    }, 60_000, what, 250).catch(err => { throw new Error(`${(err as Error).message}; last answer: ${last.status} ${last.text}${pool !== undefined ? logs(pool) : ''}`) })
    return last
  }
  const echoOf = (text: string): EchoedRequest => JSON.parse(text) as EchoedRequest

  await t.test('a pool with two target ports: each pod × each port reached by steering ip:port', async () => {
    const endpoints = [...multiFirst, ...multiSecond]
    await waitAnswer('/multi', 200, 'the multi pool serves', endpoints[0]!.host, 'multi')
    await waitUntil(async () => (await gw.proxyPoolEndpoints(NS, 'multi')).length === 4, 30_000, 'the proxy has the pool\'s four endpoints', 200)
    assert.deepEqual(await gw.proxyPoolEndpoints(NS, 'multi'), endpoints.map(e => e.host).sort())
    for (const e of endpoints) {
      const res = await postThrough(url('/multi'), { 'test-epp-endpoint-selection': e.host })
      assert.equal(res.status, 200, res.text)
      const echo = echoOf(res.text)
      assert.equal(echo.name, (e === multiFirst[0] ? 'multi-a/1' : e === multiFirst[1] ? 'multi-b/1' : e === multiSecond[0] ? 'multi-a/2' : 'multi-b/2'))
      assert.equal(echo.headers['x-gateway-destination-endpoint'], e.host)
      assert.equal(res.headers['x-conformance-test-served-endpoint'], e.host, 'lwepp got the served endpoint')
    }
    // Each endpoint served its steered requests only (the first one the wait's too).
    for (const e of endpoints.slice(1)) assert.equal(e.received(), 1, `${e.host} served exactly its steered request`)
  })

  await t.test('a weighted split between two pools (3:1), each with its own lwepp', async () => {
    // Both pools serve (each picker has read its pool) before counting.
    await waitUntil(async () => {
      const names = new Set<string>()
      for (let i = 0; i < 12; i++) {
        const res = await postThrough(url('/split'))
        if (res.status !== 200) return false
        names.add(echoOf(res.text).name)
      }
      return names.has('heavy') && names.has('light')
    }, 60_000, `both pools of the split serve${logs('heavy')}${logs('light')}`, 250)
    const N = 200
    const counts = new Map<string, number>()
    for (let i = 0; i < N; i++) {
      const res = await postThrough(url('/split'))
      assert.equal(res.status, 200, res.text)
      const name = echoOf(res.text).name
      counts.set(name, (counts.get(name) ?? 0) + 1)
    }
    const h = counts.get('heavy') ?? 0
    const l = counts.get('light') ?? 0
    assert.equal(h + l, N, `only the two pools serve: ${JSON.stringify([...counts])}`)
    // Weighted at random: heavy's count is Binomial(200, 0.75), mean 150, σ ≈ 6.1; 120..180 is ±4.9σ.
    assert.ok(h >= 120 && h <= 180, `heavy served ${h} of ${N} (3:1 expects about 150)`)
    assert.ok(l > 0, 'light served some')
  })

  await t.test('a pool in another namespace: RefNotPermitted and no traffic without a ReferenceGrant, served with it', async () => {
    let conds: Condition[] = []
    await waitUntil(async () => {
      conds = await routeConditions(cluster, NS, 'remote')
      return conds.some(c => c.type === 'ResolvedRefs')
    }, 30_000, 'route remote status', 200)
    const resolved = conds.find(c => c.type === 'ResolvedRefs')
    assert.deepEqual(triple(resolved), ['ResolvedRefs', 'False', 'RefNotPermitted'], resolved?.message)
    const refused = await postThrough(url('/remote'))
    assert.equal(refused.status, 500, refused.text)
    assert.equal(remote!.received(), 0, 'nothing reached the other namespace\'s pod')
    assert.deepEqual(await poolParents(cluster, OTHER_NS, 'remote'), [], 'a route that may not name the pool does not make the Gateway its parent')

    await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: { name: apps-routes, namespace: ${OTHER_NS} }
spec:
  from: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: ${NS} }]
  to: [{ group: inference.networking.k8s.io, kind: InferencePool }]
`)
    await waitUntil(async () => triple((await routeConditions(cluster, NS, 'remote')).find(c => c.type === 'ResolvedRefs')).join() === 'ResolvedRefs,True,ResolvedRefs', 30_000, 'route remote ResolvedRefs=True with the grant', 200)
    const served = await waitAnswer('/remote', 200, 'the other namespace\'s pool serves with the grant', undefined, 'remote')
    assert.equal(echoOf(served.text).name, 'remote')
    assert.equal(echoOf(served.text).headers['x-gateway-destination-endpoint'], remote!.host)
    let parents: Awaited<ReturnType<typeof poolParents>> = []
    await waitUntil(async () => (parents = await poolParents(cluster, OTHER_NS, 'remote')).length > 0, 30_000, 'the remote pool\'s status.parents', 200)
    assert.deepEqual(parents.map(p => p.parentRef), [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: NS, name: 'web' }])
    assert.deepEqual(parents[0]!.conditions.map(triple), [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'True', 'ResolvedRefs']])
  })

  await t.test('the picker down: FailClose 503 endpoint picker unavailable, FailOpen served by a pod of the pool', async () => {
    const poolNames = ['fragile-a', 'fragile-b']
    const path = `/apis/inference.networking.k8s.io/v1/namespaces/${NS}/inferencepools/fragile`
    const failureMode = async (mode: 'FailOpen' | 'FailClose') => await cluster.api('PATCH', path, { spec: { endpointPickerRef: { failureMode: mode } } }, { contentType: 'application/merge-patch+json' })
    const served = await waitAnswer('/fragile', 200, 'the fragile pool serves through lwepp', fragileIPs[1], 'fragile')
    assert.equal(echoOf(served.text).name, 'fragile-b')

    // lwepp killed (its Service's endpoint ready, nothing listening), FailClose.
    await lwepps.fragile.stop()
    const closed = await postThrough(url('/fragile'))
    assert.equal(closed.status, 503, closed.text)
    assert.match(closed.text, /endpoint picker unavailable/)
    const before = fragile.map(s => s.received())

    // FailOpen: the pool's pods, round robin.
    await failureMode('FailOpen')
    await waitAnswer('/fragile', 200, 'FailOpen serves with lwepp killed')
    const seen = new Set<string>()
    for (let i = 0; i < 6; i++) {
      const res = await postThrough(url('/fragile'))
      assert.equal(res.status, 200, res.text)
      seen.add(echoOf(res.text).name)
    }
    assert.deepEqual([...seen].sort(), poolNames, 'FailOpen spreads over the pool\'s pods')
    assert.ok(fragile.every((s, i) => s.received() > before[i]!))

    // The picker's Service without a ready endpoint (the proxy then has its cluster DNS name, which
    // does not resolve here): FailOpen still serves, FailClose answers 503.
    await cluster.apply(pickerServiceYaml({ namespace: NS, name: 'epp-fragile', port: pickerPorts.fragile.grpcPort, address: gw.hostIP, ready: false }))
    await waitUntil(async () => (await gw.proxyPoolPicker(NS, 'fragile'))?.target === `epp-fragile.${NS}.svc.cluster.local:${pickerPorts.fragile.grpcPort}`, 30_000, 'the proxy\'s picker target is the Service\'s DNS name', 200)
    const open = await postThrough(url('/fragile'))
    assert.equal(open.status, 200, open.text)
    assert.ok(poolNames.includes(echoOf(open.text).name))
    await failureMode('FailClose')
    const unavailable = await waitAnswer('/fragile', 503, 'FailClose without a ready picker endpoint answers 503')
    assert.match(unavailable.text, /endpoint picker unavailable/)
  })

  await t.test('an h2c pool: the pods spoken to in HTTP/2 with prior knowledge', async () => {
    await waitAnswer('/h2c', 200, 'the h2c pool serves', h2cIPs[0], 'h2c')
    for (const [i, server] of h2c.entries()) {
      const res = await postThrough(url('/h2c'), { 'test-epp-endpoint-selection': h2cIPs[i]! })
      assert.equal(res.status, 200, res.text)
      const echo = JSON.parse(res.text) as H2cEchoedRequest
      assert.equal(echo.name, `h2c-${'ab'[i]!}`)
      assert.equal(echo.httpVersion, '2.0')
      assert.equal(echo.headers['x-gateway-destination-endpoint'], server.host)
    }
  })

  await t.test('invalid references: a missing pool, a missing picker Service, a pool without endpointPickerRef', async () => {
    const resolvedOf = async (route: string): Promise<Condition | undefined> => {
      let c: Condition | undefined
      await waitUntil(async () => (c = (await routeConditions(cluster, NS, route)).find(x => x.type === 'ResolvedRefs')) !== undefined, 30_000, `route ${route} status`, 200)
      return c
    }
    const missing = await resolvedOf('missing')
    assert.deepEqual(triple(missing), ['ResolvedRefs', 'False', 'BackendNotFound'], missing?.message)
    const res = await postThrough(url('/missing'))
    assert.equal(res.status, 500, res.text)

    const noService = await resolvedOf('no-service')
    assert.deepEqual(triple(noService), ['ResolvedRefs', 'False', 'BackendNotFound'], noService?.message)
    assert.match(noService!.message, /endpoint picker Service apps\/absent not found/)
    let parents: Awaited<ReturnType<typeof poolParents>> = []
    await waitUntil(async () => (parents = await poolParents(cluster, NS, 'no-service')).length > 0, 30_000, 'pool no-service status', 200)
    assert.deepEqual(parents[0]!.conditions.map(triple), [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'False', 'InvalidExtensionRef']])

    const noPicker = await resolvedOf('no-picker')
    assert.deepEqual(triple(noPicker), ['ResolvedRefs', 'False', 'BackendNotFound'], noPicker?.message)
    await waitUntil(async () => (parents = await poolParents(cluster, NS, 'no-picker')).length > 0, 30_000, 'pool no-picker status', 200)
    assert.deepEqual(parents[0]!.conditions.map(triple)[0], ['Accepted', 'False', 'EndpointPickerRefMissing'])
  })
})
