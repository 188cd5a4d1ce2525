/**
 * mcp/session/listen.ts: the subscriptions/listen filter (parsed, honoured against capabilities,
 * matched), the subscription id stamp, and the hub's one subscription per URI however many
 * streams want it.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { SubscriptionHub } from '../src/mcp/session/listen.ts'
import { honouredFilter, parseFilter, stamped, wants } from '../src/mcp/revisions/revision-2026-listen.ts'
import type { JsonRpcNotification } from '../src/mcp/protocol/jsonrpc.ts'

test('filters: parsed strictly, honoured only where a capability promises it, matched per method and URI', () => {
  assert.deepEqual(parseFilter(undefined), {})
  assert.deepEqual(parseFilter({ toolsListChanged: true, promptsListChanged: false, resourceSubscriptions: ['a', 'a', 'b'] }), { toolsListChanged: true, resourceSubscriptions: ['a', 'b'] })
  assert.match(String(parseFilter([])), /must be an object/)
  assert.match(String(parseFilter({ toolsListChanged: 'yes' })), /toolsListChanged must be a boolean/)
  assert.match(String(parseFilter({ resourceSubscriptions: [1] })), /array of strings/)

  const wanted = { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true, resourceSubscriptions: ['a'] }
  assert.deepEqual(honouredFilter(wanted, { tools: { listChanged: true }, prompts: {}, resources: { subscribe: true } }), { toolsListChanged: true, resourceSubscriptions: ['a'] })
  assert.deepEqual(honouredFilter(wanted, {}), {})

  const updated = (uri: string): JsonRpcNotification => ({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } })
  assert.equal(wants({ resourceSubscriptions: ['a'] }, updated('a')), true)
  assert.equal(wants({ resourceSubscriptions: ['a'] }, updated('b')), false)
  assert.equal(wants({ toolsListChanged: true }, { jsonrpc: '2.0', method: 'notifications/tools/list_changed' }), true)
  assert.equal(wants({ toolsListChanged: true }, { jsonrpc: '2.0', method: 'notifications/message', params: {} }), false)
  assert.deepEqual(stamped(updated('a'), 7), { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'a', _meta: { 'io.modelcontextprotocol/subscriptionId': 7 } } })
})

test('the hub: each stream gets what it asked for; a URI is subscribed once and let go after its last stream', () => {
  const hub = new SubscriptionHub()
  const calls: string[] = []
  const subscriber = { subscribe: (u: string) => calls.push(`+${u}`), unsubscribe: (u: string) => calls.push(`-${u}`) }
  const a: string[] = []
  const b: string[] = []
  const removeA = hub.add({ resourceSubscriptions: ['x'], toolsListChanged: true }, m => a.push(m.method), subscriber)
  const removeB = hub.add({ resourceSubscriptions: ['x', 'y'] }, m => b.push(m.method), subscriber)
  assert.deepEqual(calls, ['+x', '+y'])
  hub.publish({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' })
  hub.publish({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'y' } })
  assert.deepEqual(a, ['notifications/tools/list_changed'])
  assert.deepEqual(b, ['notifications/resources/updated'])
  removeA()
  removeA()
  assert.deepEqual(calls, ['+x', '+y'])
  removeB()
  assert.deepEqual(calls, ['+x', '+y', '-x', '-y'])
  assert.equal(hub.size, 0)
})
