import { test } from 'node:test'
import assert from 'node:assert/strict'
import { StatusWriter } from '../src/status/writer.ts'
import type { KubeHttp } from '../src/kube/http.ts'
import { condition } from '../src/translate/conditions.ts'
import { listenerSetProgrammed, type ListenerSetResult } from '../src/translate/listener-sets.ts'

// The translation of ListenerSets is pinned by golden/listener-set/basic.yaml; these cover what
// the controller adds when writing: Programmed (following the Gateway's) and the writes.

function result (accepted: boolean, reason = 'Accepted'): ListenerSetResult {
  return { namespace: 'team', name: 'extra', generation: 3, gateway: 'infra/web', accepted, conditions: [condition('Accepted', accepted, reason, 'why', 3)], listeners: [] }
}

test('listenerSetProgrammed: follows the Gateway once accepted; not accepted keeps the Accepted reason', () => {
  const gwProgrammed = condition('Programmed', true, 'Programmed', 'acked', 1)
  const gwPending = condition('Programmed', false, 'Pending', 'waiting', 1)
  assert.deepEqual(listenerSetProgrammed(result(true), gwProgrammed), condition('Programmed', true, 'Programmed', 'ListenerSet is programmed', 3))
  assert.deepEqual(listenerSetProgrammed(result(true), gwPending), condition('Programmed', false, 'Pending', 'waiting', 3))
  const notAllowed = listenerSetProgrammed(result(false, 'NotAllowed'), gwProgrammed)
  assert.equal(notAllowed.status, 'False')
  assert.equal(notAllowed.reason, 'NotAllowed')
  assert.equal(notAllowed.observedGeneration, 3)
})

test('status writer: ListenerSet status and Gateway attachedListenerSets are written', async () => {
  const patches: Array<{ path: string, body: unknown }> = []
  const api = {
    async get () { return { metadata: { uid: 'u1', resourceVersion: '1' } } },
    async request (req: { path: string, body: unknown }) { patches.push({ path: req.path, body: req.body }) }
  } as unknown as KubeHttp
  const w = new StatusWriter(api, 'portico.dev/gateway-controller', { warn () {}, debug () {} })
  const listeners = [{ name: 'l1', supportedKinds: [], attachedRoutes: 2, conditions: [condition('Accepted', true, 'Accepted', 'ok', 3)] }]
  w.listenerSet('team', 'extra', { conditions: [condition('Accepted', true, 'Accepted', 'ok', 3)], listeners }, 'u1')
  w.gateway('infra', 'web', { conditions: [], listeners: [], addresses: [], attachedListenerSets: 1 }, 'u1')
  await w.idle()
  const ls = patches.find(p => p.path === '/apis/gateway.networking.k8s.io/v1/namespaces/team/listenersets/extra/status')
  const status = (ls?.body as { status: { conditions: Array<{ type: string }>, listeners: Array<{ name: string, attachedRoutes: number }> } }).status
  assert.deepEqual(status.conditions.map(c => c.type), ['Accepted'])
  assert.deepEqual(status.listeners.map(l => [l.name, l.attachedRoutes]), [['l1', 2]])
  const gw = patches.find(p => p.path === '/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways/web/status')
  assert.equal((gw?.body as { status: { attachedListenerSets: number } }).status.attachedListenerSets, 1)
})
