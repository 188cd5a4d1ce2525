import { test } from 'node:test'
import assert from 'node:assert/strict'
import { StatusWriter } from '../src/status/writer.ts'
import type { KubeHttp } from '../src/kube/http.ts'
import type { Condition } from '../src/translate/gateway-api.ts'

/** A fake API server holding one object per path; records the status writes. */
function fakeApi () {
  const objects = new Map<string, { metadata: { uid: string, resourceVersion: string }, status?: unknown }>()
  const writes: Array<{ path: string, uid: string }> = []
  const api = {
    async get (path: string) {
      const o = objects.get(path)
      if (o === undefined) throw Object.assign(new Error('not found'), { code: 404 })
      return structuredClone(o)
    },
    async request (req: { path: string }) {
      const o = objects.get(req.path.replace(/\/status$/, ''))!
      writes.push({ path: req.path, uid: o.metadata.uid })
    }
  }
  return { api: api as unknown as KubeHttp, objects, writes }
}

const log = { warn () {}, debug () {} }
const accepted: Condition = { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'Route is accepted', observedGeneration: 1 }
const parents = [{ parentRef: { name: 'web' }, controllerName: 'portico.dev/gateway-controller', conditions: [accepted] }]
const routePath = '/apis/gateway.networking.k8s.io/v1/namespaces/apps/httproutes/r1'
const gatewayPath = '/apis/gateway.networking.k8s.io/v1/namespaces/apps/gateways/web'

test('status writer: an unchanged status is written once per object', async () => {
  const { api, objects, writes } = fakeApi()
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  objects.set(routePath, { metadata: { uid: 'u1', resourceVersion: '1' } })
  w.httpRoute('apps', 'r1', parents, 'u1')
  await w.idle()
  w.httpRoute('apps', 'r1', parents, 'u1')
  await w.idle()
  assert.deepEqual(writes, [{ path: `${routePath}/status`, uid: 'u1' }])
})

test('status writer: a deleted and re-created HTTPRoute (new uid) gets its status even when it equals the last one written', async () => {
  const { api, objects, writes } = fakeApi()
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  objects.set(routePath, { metadata: { uid: 'u1', resourceVersion: '1' } })
  w.httpRoute('apps', 'r1', parents, 'u1')
  await w.idle()
  objects.set(routePath, { metadata: { uid: 'u2', resourceVersion: '5' } }) // deleted, re-created: no status
  w.httpRoute('apps', 'r1', parents, 'u2')
  await w.idle()
  assert.deepEqual(writes.map(x => x.uid), ['u1', 'u2'])
})

test('status writer: a re-created Gateway and GatewayClass are written again too', async () => {
  const { api, objects, writes } = fakeApi()
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  const status = { conditions: [accepted], listeners: [], addresses: [] }
  const classPath = '/apis/gateway.networking.k8s.io/v1/gatewayclasses/portico'
  objects.set(gatewayPath, { metadata: { uid: 'g1', resourceVersion: '1' } })
  objects.set(classPath, { metadata: { uid: 'c1', resourceVersion: '1' } })
  w.gateway('apps', 'web', status, 'g1')
  w.gatewayClass('portico', [accepted], ['Gateway'], 'c1')
  await w.idle()
  objects.set(gatewayPath, { metadata: { uid: 'g2', resourceVersion: '7' } })
  objects.set(classPath, { metadata: { uid: 'c2', resourceVersion: '7' } })
  w.gateway('apps', 'web', status, 'g2')
  w.gatewayClass('portico', [accepted], ['Gateway'], 'c2')
  await w.idle()
  assert.deepEqual(writes.map(x => x.uid).sort(), ['c1', 'c2', 'g1', 'g2'])
})

test('status writer: a write meant for a deleted object does not land on its successor', async () => {
  const { api, objects, writes } = fakeApi()
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  objects.set(routePath, { metadata: { uid: 'u2', resourceVersion: '5' } })
  w.httpRoute('apps', 'r1', parents, 'u1') // computed for the old object
  await w.idle()
  assert.equal(writes.length, 0)
  w.httpRoute('apps', 'r1', parents, 'u2')
  await w.idle()
  assert.deepEqual(writes.map(x => x.uid), ['u2'])
})

test('status writer: without a uid, objects are told apart by name', async () => {
  const { api, objects, writes } = fakeApi()
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  objects.set(routePath, { metadata: { uid: 'u1', resourceVersion: '1' } })
  w.httpRoute('apps', 'r1', parents)
  await w.idle()
  w.httpRoute('apps', 'r1', parents)
  await w.idle()
  assert.equal(writes.length, 1)
})

test('status writer: a status that returns to the last one written while another write of the object is under way lands last', async () => {
  // The conformance run's stuck Gateway: Programmed True written; a Pending write (computed
  // just before the proxy's ACK) under way; the ACK's True equals the last written, and was
  // skipped, so Pending stayed for good.
  const patches: string[] = []
  let release: () => void = () => {}
  let gate: Promise<void> | null = null
  const api = {
    async get () {
      if (gate !== null) await gate
      return { metadata: { uid: 'g1', resourceVersion: '1' } }
    },
    async request (req: { body: { status: { conditions: Condition[] } } }) {
      patches.push(req.body.status.conditions.map(c => `${c.type}=${c.status}`).join(','))
    }
  } as unknown as KubeHttp
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  const programmed = (status: 'True' | 'False'): Condition => ({ type: 'Programmed', status, reason: status === 'True' ? 'Programmed' : 'Pending', message: '', observedGeneration: 1 })
  const gateway = (status: 'True' | 'False') => { w.gateway('apps', 'web', { conditions: [programmed(status)], listeners: [], addresses: [] }, 'g1') }
  gateway('True')
  await w.idle()
  gate = new Promise(resolve => { release = resolve })
  gateway('False') // under way, held at its read
  await new Promise(resolve => setImmediate(resolve))
  gateway('True') // equal to the last written, but the write under way will replace that
  await new Promise(resolve => setImmediate(resolve))
  assert.deepEqual(patches, ['Programmed=True'], 'one write of an object at a time')
  gate = null
  release()
  await w.idle()
  assert.deepEqual(patches, ['Programmed=True', 'Programmed=False', 'Programmed=True'])
})

test('status writer: a Gateway\'s and a GatewayClass\'s statuses are PUT under the resourceVersion read, with other controllers\' conditions kept', async () => {
  // The API-server side (the 409 on a stale resourceVersion, the retry) is in
  // e2e/test/cluster-status.test.ts against a real kube-apiserver.
  const foreign: Condition = { type: 'example.com/Stale', status: 'True', reason: 'Seeded', message: '', observedGeneration: 1, lastTransitionTime: '2026-01-01T00:00:00Z' }
  const classPath = '/apis/gateway.networking.k8s.io/v1/gatewayclasses/portico'
  const objects = new Map<string, unknown>([
    [gatewayPath, { metadata: { uid: 'g1', resourceVersion: '41' }, status: { conditions: [foreign], listeners: [{ name: 'http', conditions: [foreign] }] } }],
    [classPath, { metadata: { uid: 'c1', resourceVersion: '42' }, status: { conditions: [foreign] } }]
  ])
  const puts: Array<{ method: string, path: string, body: { metadata: { resourceVersion: string }, status: { conditions: Condition[], listeners?: Array<{ conditions: Condition[] }> } } }> = []
  const api = {
    async get (path: string) { return structuredClone(objects.get(path)) },
    async request (req: typeof puts[number]) { puts.push(req) }
  } as unknown as KubeHttp
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', log)
  w.gateway('apps', 'web', { conditions: [accepted], listeners: [{ name: 'http', supportedKinds: [], attachedRoutes: 0, conditions: [accepted] }], addresses: [] }, 'g1')
  w.gatewayClass('portico', [accepted], ['Gateway'], 'c1')
  await w.idle()
  const gw = puts.find(p => p.path === `${gatewayPath}/status`)!
  assert.equal(gw.method, 'PUT')
  assert.equal(gw.body.metadata.resourceVersion, '41')
  assert.deepEqual(gw.body.status.conditions.map(c => c.type), ['Accepted', 'example.com/Stale'])
  assert.deepEqual(gw.body.status.conditions[1], foreign)
  assert.deepEqual(gw.body.status.listeners![0]!.conditions[1], foreign)
  const cls = puts.find(p => p.path === `${classPath}/status`)!
  assert.equal(cls.body.metadata.resourceVersion, '42')
  assert.deepEqual(cls.body.status.conditions[1], foreign)
})
