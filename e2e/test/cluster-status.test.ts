/**
 * Status that other controllers wrote survives Portico's status writes, against a real
 * kube-apiserver (e2e/cluster/harness.ts): the Gateway API's GatewayPreserveForeignConditions,
 * extended to GatewayClasses, listeners and routes. Another writer adds conditions of a type
 * Portico does not own (and a route parent entry of another controller); Portico reconciles
 * after a spec change; what the other writer stored is still there, unchanged. And a writer
 * that changes the object between Portico's read and its write makes Portico's write a 409
 * (the resourceVersion precondition), redone from a fresh read — the race is made
 * deterministic by doing the other write from inside Portico's read.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { KubeHttp, type KubeRequest } from '@portico/controller/kube-http'
import { StatusWriter } from '@portico/controller/status-writer'
import type { Condition } from '@portico/controller'

const CONTROLLER_NAME = 'portico.dev/gateway-controller'
const GW_API = '/apis/gateway.networking.k8s.io/v1'
const OTHER = 'example.com/other-controller'

interface Cond { type: string, status: string, reason: string, message: string, observedGeneration?: number, lastTransitionTime?: string }

let suite: ClusterGateway | null = null

before(async s => {
  suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-status-', cluster: { controllerManager: false }, namespaces: ['portico-system', 'apps'] })
  await suite?.cluster.apply(`apiVersion: v1
kind: Service
metadata: { name: echo, namespace: apps }
spec: { ports: [{ name: http, port: 80 }] }
`)
})

after(async () => await suite?.stop())

/** A condition another controller sets: a type Portico does not own. */
function foreignCondition (type: string, generation: number): Cond {
  return { type, status: 'True', reason: 'Seeded', message: 'set by another controller', observedGeneration: generation, lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }
}

/** GET, change, PUT the status, as another controller does (client-go's RetryOnConflict): the stored object. */
async function updateStatus (path: string, change: (obj: KubeObject) => void): Promise<KubeObject> {
  for (let i = 0; ; i++) {
    const obj = await suite!.cluster.api<KubeObject>('GET', path)
    change(obj)
    try {
      return await suite!.cluster.api<KubeObject>('PUT', `${path}/status`, obj)
    } catch (err) {
      if ((err as { status?: number }).status !== 409 || i > 10) throw err
    }
  }
}

const byType = (conditions: Cond[] | undefined, type: string): Cond | undefined => conditions?.find(c => c.type === type)
const ours = (obj: KubeObject): { parentRef: unknown, controllerName: string, conditions: Cond[] } | undefined => (obj.status?.parents as Array<{ parentRef: unknown, controllerName: string, conditions: Cond[] }> | undefined)?.find(p => p.controllerName === CONTROLLER_NAME)
const listener = (gw: KubeObject, name: string): { conditions: Cond[] } | undefined => (gw.status?.listeners as Array<{ name: string, conditions: Cond[] }> | undefined)?.find(l => l.name === name)

test('a writer between Portico\'s read and its write: Portico\'s PUT under the stale resourceVersion is a 409, redone from a fresh read, and keeps what the other wrote', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  // No controller runs yet: this StatusWriter is the only Portico writer. The Gateway's class
  // is nobody's, so the controller started by the next test leaves it alone.
  await cluster.apply(`${gatewayYaml('apps', 'race', 80, { className: 'nobody' })}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: race, namespace: apps }
spec:
  parentRefs: [{ name: race }]
  rules: [{ backendRefs: [{ name: echo, port: 80 }] }]
`)
  const gwPath = `${GW_API}/namespaces/apps/gateways/race`
  const routePath = `${GW_API}/namespaces/apps/httproutes/race`
  const gw = await cluster.api<KubeObject>('GET', gwPath)
  const route = await cluster.api<KubeObject>('GET', routePath)
  const kinds = [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute' }]
  // What the other writer stores, from inside Portico's first read of each object.
  const stored = new Map<string, KubeObject>()
  const otherWrites: Record<string, (obj: KubeObject) => void> = {
    [gwPath]: obj => {
      obj.status = {
        ...obj.status,
        conditions: [...(obj.status?.conditions ?? []), foreignCondition('example.com/Raced', 1)],
        listeners: [{ name: 'http', supportedKinds: kinds, attachedRoutes: 0, conditions: [foreignCondition('example.com/Raced', 1)] }]
      }
    },
    [routePath]: obj => {
      obj.status = { parents: [{ parentRef: { name: 'race' }, controllerName: OTHER, conditions: [foreignCondition('Accepted', 1)] }] }
    }
  }
  const conflicts: string[] = []
  class RacingApi extends KubeHttp {
    override async request<T = unknown> (req: KubeRequest): Promise<T> {
      try {
        const answer = await super.request<T>(req)
        const other = otherWrites[req.path]
        if (req.method === 'GET' && other !== undefined && !stored.has(req.path)) stored.set(req.path, await updateStatus(req.path, other))
        return answer
      } catch (err) {
        if ((err as { code?: number }).code === 409) conflicts.push(req.path)
        throw err
      }
    }
  }
  const warnings: string[] = []
  const writer = new StatusWriter(new RacingApi(cluster.kubeConfig()), CONTROLLER_NAME, { warn: (_f, msg) => warnings.push(msg), debug: () => {} })
  const accepted = (generation: number): Condition => ({ type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ours', observedGeneration: generation })
  writer.gateway('apps', 'race', { conditions: [accepted(1)], listeners: [{ name: 'http', supportedKinds: kinds, attachedRoutes: 1, conditions: [accepted(1)] }], addresses: [] }, gw.metadata?.uid as string)
  writer.httpRoute('apps', 'race', [{ parentRef: { name: 'race' }, controllerName: CONTROLLER_NAME, conditions: [accepted(1)] }], route.metadata?.uid as string)
  await writer.idle()
  assert.deepEqual(warnings, [])
  assert.deepEqual(conflicts.sort(), [`${gwPath}/status`, `${routePath}/status`], 'each first write was refused: its resourceVersion was stale')

  const after = await cluster.api<KubeObject>('GET', gwPath)
  const seeded = stored.get(gwPath)!
  assert.equal(byType(after.status.conditions, 'Accepted')?.message, 'ours')
  assert.deepEqual(byType(after.status.conditions, 'example.com/Raced'), byType(seeded.status.conditions, 'example.com/Raced'))
  assert.equal(listener(after, 'http')?.conditions.length, 2)
  assert.deepEqual(byType(listener(after, 'http')?.conditions, 'example.com/Raced'), byType(listener(seeded, 'http')?.conditions, 'example.com/Raced'))
  assert.equal(after.status.listeners[0].attachedRoutes, 1, 'ours, written over the fresh read')

  const routeAfter = await cluster.api<KubeObject>('GET', routePath)
  assert.deepEqual((routeAfter.status.parents as Array<{ controllerName: string }>).map(p => p.controllerName), [OTHER, CONTROLLER_NAME])
  assert.deepEqual(routeAfter.status.parents[0], stored.get(routePath)!.status.parents[0])
})

test('a writer that wins the race more times than Portico retries at once: Portico\'s write is not given up, it lands later over the fresh status', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  await cluster.apply(gatewayYaml('apps', 'contended', 80, { className: 'nobody' }))
  const gwPath = `${GW_API}/namespaces/apps/gateways/contended`
  const gw = await cluster.api<KubeObject>('GET', gwPath)
  // After each of Portico's first 7 reads, the other writer bumps its own condition: every
  // PUT of those attempts carries a stale resourceVersion (409).
  let raced = 0
  const conflicts: number[] = []
  class RacingApi extends KubeHttp {
    override async request<T = unknown> (req: KubeRequest): Promise<T> {
      try {
        const answer = await super.request<T>(req)
        if (req.method === 'GET' && req.path === gwPath && raced < 7) {
          raced++
          await updateStatus(gwPath, obj => {
            obj.status = { ...obj.status, conditions: [...(obj.status?.conditions ?? []).filter((c: Cond) => c.type !== 'example.com/Busy'), { ...foreignCondition('example.com/Busy', 1), message: `write ${raced}` }] }
          })
        }
        return answer
      } catch (err) {
        if ((err as { code?: number }).code === 409) conflicts.push(Date.now())
        throw err
      }
    }
  }
  const warnings: string[] = []
  const writer = new StatusWriter(new RacingApi(cluster.kubeConfig()), CONTROLLER_NAME, { warn: (_f, msg) => warnings.push(msg), debug: () => {} })
  const kinds = [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute' }]
  const accepted: Condition = { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ours', observedGeneration: 1 }
  writer.gateway('apps', 'contended', { conditions: [accepted], listeners: [{ name: 'http', supportedKinds: kinds, attachedRoutes: 0, conditions: [accepted] }], addresses: [] }, gw.metadata?.uid as string)
  // No further change comes: the write has to land on its own.
  await waitUntil(async () => byType((await cluster.api<KubeObject>('GET', gwPath)).status?.conditions, 'Accepted')?.message === 'ours', 15_000, 'Portico\'s status, the write not given up after its conflicts', 100)
  assert.deepEqual(warnings, [], 'contention is not a failure')
  assert.ok(conflicts.length >= 7, `every raced attempt was a 409 (${conflicts.length})`)
  const after = await cluster.api<KubeObject>('GET', gwPath)
  assert.equal(byType(after.status.conditions, 'example.com/Busy')?.message, 'write 7', 'the other writer\'s last write kept')
})

test('another controller\'s conditions on the GatewayClass, a Gateway, its listener and an HTTPRoute survive the controller\'s reconciles', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const controller = await suite.startController()
  const classPath = `${GW_API}/gatewayclasses/portico`
  const gwPath = `${GW_API}/namespaces/apps/gateways/web`
  const routePath = `${GW_API}/namespaces/apps/httproutes/r1`
  const route = (prefix: string) => `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r1, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: ${prefix} } }]
      backendRefs: [{ name: echo, port: 80 }]
`
  await cluster.apply(`${gatewayYaml('apps', 'web', await freePort())}---\n${route('/a')}`)
  const get = (path: string) => cluster.api<KubeObject>('GET', path)
  const why = () => controller.output().slice(-3000)
  await waitUntil(async () => {
    const [cls, gw, r] = [await get(classPath), await get(gwPath), await get(routePath)]
    return byType(cls.status?.conditions, 'Accepted')?.status === 'True' && byType(gw.status?.conditions, 'Accepted') !== undefined &&
      listener(gw, 'http') !== undefined && byType(ours(r)?.conditions, 'Accepted') !== undefined
  }, 30_000, `Portico's first statuses\n${why()}`, 100)

  // The other controller's conditions: on the class, the Gateway, its listener, and in the
  // route a parent entry of its own plus a condition of its type in Portico's entry.
  const seededClass = await updateStatus(classPath, obj => { obj.status.conditions.push(foreignCondition('example.com/Audited', obj.metadata!.generation as number)) })
  const seededGw = await updateStatus(gwPath, obj => {
    obj.status.conditions.push(foreignCondition('gateway.networking.k8s.io/StaleCondition', obj.metadata!.generation as number))
    listener(obj, 'http')!.conditions.push(foreignCondition('gateway.networking.k8s.io/StaleCondition', obj.metadata!.generation as number))
  })
  const seededRoute = await updateStatus(routePath, obj => {
    ours(obj)!.conditions.push(foreignCondition('example.com/Scanned', obj.metadata!.generation as number))
    obj.status.parents.unshift({ parentRef: { name: 'web' }, controllerName: OTHER, conditions: [foreignCondition('Accepted', obj.metadata!.generation as number)] })
  })

  // New generations: the controller has to write each status again, over the seeded ones.
  await cluster.api('PATCH', classPath, { spec: { description: 'edited by the test' } }, { contentType: 'application/merge-patch+json' })
  await cluster.api('PATCH', gwPath, { spec: { listeners: [{ name: 'http', port: (seededGw.spec.listeners[0] as { port: number }).port, protocol: 'HTTP', hostname: 'second.example.com' }] } }, { contentType: 'application/merge-patch+json' })
  await cluster.apply(route('/b'))
  const caughtUp = (obj: KubeObject, conditions: Cond[] | undefined) => conditions !== undefined && conditions.filter(c => !c.type.includes('/')).every(c => c.observedGeneration === obj.metadata!.generation)
  await waitUntil(async () => {
    const [cls, gw, r] = [await get(classPath), await get(gwPath), await get(routePath)]
    return (cls.metadata!.generation as number) > 1 && caughtUp(cls, cls.status.conditions) &&
      (gw.metadata!.generation as number) > 1 && caughtUp(gw, gw.status.conditions) && (gw.status.listeners as Array<{ conditions: Cond[] }>).every(l => caughtUp(gw, l.conditions)) &&
      (r.metadata!.generation as number) > 1 && caughtUp(r, ours(r)?.conditions)
  }, 30_000, `Portico's statuses for the new generations\n${why()}`, 100)

  const [cls, gw, r] = [await get(classPath), await get(gwPath), await get(routePath)]
  assert.deepEqual(byType(cls.status.conditions, 'example.com/Audited'), byType(seededClass.status.conditions, 'example.com/Audited'), 'GatewayClass')
  const stale = 'gateway.networking.k8s.io/StaleCondition'
  assert.deepEqual(byType(gw.status.conditions, stale), byType(seededGw.status.conditions, stale), 'Gateway')
  assert.deepEqual(byType(listener(gw, 'http')?.conditions, stale), byType(listener(seededGw, 'http')?.conditions, stale), 'listener')
  assert.deepEqual(byType(ours(r)?.conditions, 'example.com/Scanned'), byType(ours(seededRoute)?.conditions, 'example.com/Scanned'), 'a foreign type in Portico\'s route parent')
  assert.deepEqual((r.status.parents as Array<{ controllerName: string }>).find(p => p.controllerName === OTHER), seededRoute.status.parents[0], 'another controller\'s route parent')
  // And Portico's own conditions are current (the writes did happen).
  assert.equal(byType(gw.status.conditions, 'Accepted')?.observedGeneration, gw.metadata!.generation)
  assert.equal(byType(ours(r)?.conditions, 'Accepted')?.observedGeneration, r.metadata!.generation)
})

/**
 * Fake second controllers (three) running beside Portico: each keeps rewriting its own condition
 * types on the GatewayClass, a Gateway, its listener and an HTTPRoute (and its own
 * status.parents[] entry there), each write carrying a counter in its message, as fast as the
 * API server takes them, while the test keeps changing the Gateway's and the route's spec so
 * Portico keeps rewriting their statuses. Each of its rounds reads the objects first and
 * checks that what it wrote last is still there, exactly: a Portico write that dropped or
 * overwrote a foreign condition or entry (a lost update) shows up as a missing or stale
 * counter on the very next read.
 */
test('other controllers writing the same statuses concurrently and repeatedly: none loses another\'s writes, Portico included', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const controller = await suite.startController()
  const classPath = `${GW_API}/gatewayclasses/portico`
  const gwPath = `${GW_API}/namespaces/apps/gateways/busy`
  const routePath = `${GW_API}/namespaces/apps/httproutes/busy`
  const route = (prefix: string) => `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: busy, namespace: apps }
spec:
  parentRefs: [{ name: busy }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: ${prefix} } }]
      backendRefs: [{ name: echo, port: 80 }]
`
  const port = await freePort()
  await cluster.apply(`${gatewayYaml('apps', 'busy', port)}---\n${route('/p0')}`)
  const get = (path: string) => cluster.api<KubeObject>('GET', path)
  const why = () => controller.output().slice(-3000)
  await waitUntil(async () => {
    const [gw, r] = [await get(gwPath), await get(routePath)]
    return listener(gw, 'http') !== undefined && byType(ours(r)?.conditions, 'Accepted') !== undefined
  }, 30_000, `Portico's first statuses\n${why()}`, 100)

  // The fake controllers, three at once (more contention than one). Each has its own
  // condition type and controllerName; `last` is what it last stored, per place; a round
  // first checks the object read still carries it, then writes the next counter (retrying
  // on conflict, as client-go's RetryOnConflict does).
  let stop = false
  const fake = (n: number) => {
    const TYPE = `other${n}.example.com/Checked`
    const NAME = `example.com/other-controller-${n}`
    const last = new Map<string, string>()
    const lost: string[] = []
    const stats = { writes: 0, conflicts: 0 }
    const mine = (conditions: Cond[] | undefined): string | undefined => byType(conditions, TYPE)?.message
    const theirEntry = (obj: KubeObject) => (obj.status?.parents as Array<{ controllerName: string, conditions: Cond[] }> | undefined)?.find(p => p.controllerName === NAME)
    const set = (conditions: Cond[], message: string, generation: number): Cond[] =>
      [...conditions.filter(c => c.type !== TYPE), { ...foreignCondition(TYPE, generation), message }]
    const check = (place: string, seen: string | undefined): void => {
      const want = last.get(place)
      if (want !== undefined && seen !== want) lost.push(`${NAME} ${place}: wrote ${want}, read ${seen ?? 'nothing'}`)
    }
    const places: Record<string, { path: string, read: (o: KubeObject) => string | undefined, write: (o: KubeObject, m: string) => void }> = {
      class: { path: classPath, read: o => mine(o.status?.conditions), write: (o, m) => { o.status.conditions = set(o.status.conditions ?? [], m, o.metadata!.generation as number) } },
      gateway: { path: gwPath, read: o => mine(o.status?.conditions), write: (o, m) => { o.status.conditions = set(o.status.conditions ?? [], m, o.metadata!.generation as number) } },
      listener: {
        path: gwPath,
        read: o => mine(listener(o, 'http')?.conditions),
        write: (o, m) => { const l = listener(o, 'http'); if (l !== undefined) l.conditions = set(l.conditions, m, o.metadata!.generation as number) }
      },
      routeParent: {
        path: routePath,
        read: o => mine(theirEntry(o)?.conditions),
        write: (o, m) => {
          const parents = (o.status.parents ?? []).filter((p: { controllerName: string }) => p.controllerName !== NAME)
          o.status.parents = [...parents, { parentRef: { name: 'busy' }, controllerName: NAME, conditions: set([], m, o.metadata!.generation as number) }]
        }
      },
      routeOursForeignType: { path: routePath, read: o => mine(ours(o)?.conditions), write: (o, m) => { const p = ours(o); if (p !== undefined) p.conditions = set(p.conditions, m, o.metadata!.generation as number) } }
    }
    const done = (async () => {
      for (let round = 1; !stop; round++) {
        for (const path of [classPath, gwPath, routePath]) {
          const here = Object.entries(places).filter(([, p]) => p.path === path)
          for (let attempt = 0; ; attempt++) {
            const obj = await get(path)
            for (const [name, p] of here) check(name, p.read(obj))
            const wrote = new Map<string, string>()
            for (const [name, p] of here) {
              const message = `round ${round} ${name}`
              p.write(obj, message)
              if (p.read(obj) === message) wrote.set(name, message)
            }
            try {
              await cluster.api<KubeObject>('PUT', `${path}/status`, obj)
              stats.writes++
              for (const [name, m] of wrote) last.set(name, m)
              break
            } catch (err) {
              if ((err as { status?: number }).status !== 409 || attempt > 100) throw err
              stats.conflicts++
            }
          }
        }
      }
    })()
    /** After it stopped: one more read, the last writes are all there. */
    const final = async () => { for (const [name, p] of Object.entries(places)) check(name, p.read(await get(p.path))) }
    return { NAME, lost, stats, done, final }
  }
  const fakes = [fake(1), fake(2), fake(3)]

  // Meanwhile: spec changes that make Portico rewrite the Gateway's and the route's statuses
  // (new generations, a listener hostname that changes the route's attachment).
  try {
    for (let i = 1; i <= 12; i++) {
      await cluster.apply(route(`/p${i}`))
      await cluster.api('PATCH', gwPath, { spec: { listeners: [{ name: 'http', port, protocol: 'HTTP', ...(i % 2 === 1 ? { hostname: `h${i}.example.com` } : {}) }] } }, { contentType: 'application/merge-patch+json' })
      await new Promise(resolve => setTimeout(resolve, 150))
    }
    const caughtUp = (obj: KubeObject, conditions: Cond[] | undefined) => conditions !== undefined && conditions.filter(c => !c.type.includes('/')).length > 0 &&
      conditions.filter(c => !c.type.includes('/')).every(c => c.observedGeneration === obj.metadata!.generation)
    await waitUntil(async () => {
      const [gw, r] = [await get(gwPath), await get(routePath)]
      return caughtUp(gw, gw.status.conditions) && caughtUp(gw, listener(gw, 'http')?.conditions) && caughtUp(r, ours(r)?.conditions)
    }, 30_000, `Portico's statuses for the last generations\n${why()}`, 100)
  } finally {
    stop = true
    await Promise.all(fakes.map(f => f.done))
  }
  for (const f of fakes) {
    await f.final()
    t.diagnostic(`${f.NAME}: ${f.stats.writes} writes, ${f.stats.conflicts} conflicts`)
    assert.deepEqual(f.lost, [], `${f.NAME}: foreign writes lost`)
    assert.ok(f.stats.writes >= 12, `${f.NAME} wrote (${f.stats.writes})`)
  }
  // Portico never gave a status write up (5 conflicts in a row): each was redone until it landed.
  assert.doesNotMatch(controller.output(), /status write failed/)
  // Portico's own part is current and whole.
  const [gw, r] = [await get(gwPath), await get(routePath)]
  assert.equal(byType(gw.status.conditions, 'Accepted')?.observedGeneration, gw.metadata!.generation)
  assert.equal(byType(ours(r)?.conditions, 'Accepted')?.observedGeneration, r.metadata!.generation)
  assert.deepEqual((r.status.parents as Array<{ controllerName: string }>).map(p => p.controllerName).sort(), [CONTROLLER_NAME, ...fakes.map(f => f.NAME)].sort())
})
