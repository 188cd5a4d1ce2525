/**
 * Portico's status merged into an object's current status (status/merge.ts): condition types
 * Portico does not own, and route parents / policy ancestors of other controllers, stay as
 * they are — the Gateway API's GatewayPreserveForeignConditions. The write with the
 * resourceVersion and its retry on a 409 are tested against a real kube-apiserver in
 * e2e/test/cluster-status.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mergeConditions, mergeEntries, mergeListeners, ownedConditionType } from '../src/status/merge.ts'
import { OWNED_CONDITION_TYPES } from '../src/translate/conditions.ts'
import type { Condition } from '../src/translate/gateway-api.ts'

const T0 = '2026-01-01T00:00:00Z'
const NOW = '2026-06-01T00:00:00Z'
const ours = (type: string, status: 'True' | 'False', generation = 2): Condition => ({ type, status, reason: type, message: '', observedGeneration: generation })
/** Another controller's condition, as it was stored (its generation and time are its own). */
const foreign: Condition = { type: 'example.com/Stale', status: 'True', reason: 'Seeded', message: 'set by someone else', observedGeneration: 1, lastTransitionTime: '2025-12-31T23:59:59Z' }

test('mergeConditions: another controller\'s condition stays exactly as it was; ours replace ours', () => {
  const current = [{ ...ours('Accepted', 'True', 1), lastTransitionTime: T0 }, foreign, { ...ours('Programmed', 'False', 1), lastTransitionTime: T0 }]
  const merged = mergeConditions([ours('Accepted', 'True'), ours('Programmed', 'True')], current, NOW)
  assert.deepEqual(merged, [
    { ...ours('Accepted', 'True'), lastTransitionTime: T0 }, // status held: the time stays
    { ...ours('Programmed', 'True'), lastTransitionTime: NOW }, // status changed
    foreign
  ])
})

test('mergeConditions: an owned type Portico no longer reports is removed; a foreign one never is', () => {
  const current = [ours('Accepted', 'True'), ours('InsecureFrontendValidationMode', 'True'), foreign]
  const merged = mergeConditions([ours('Accepted', 'True')], current, NOW)
  assert.deepEqual(merged.map(c => c.type), ['Accepted', 'example.com/Stale'])
  assert.deepEqual(mergeConditions([], [foreign], NOW), [foreign])
  assert.deepEqual(mergeConditions([ours('Accepted', 'True')], undefined, NOW).map(c => c.type), ['Accepted'])
})

test('the types Portico owns are the ones condition() can make', () => {
  for (const t of OWNED_CONDITION_TYPES) assert.ok(ownedConditionType(t))
  for (const t of ['example.com/Stale', 'gateway.networking.k8s.io/StaleCondition', 'Ready', 'accepted']) assert.ok(!ownedConditionType(t), t)
})

test('mergeListeners: each listener keeps the foreign conditions of its entry by name; a listener gone from ours is gone', () => {
  const current = [
    { name: 'http', conditions: [ours('Accepted', 'True', 1), foreign] },
    { name: 'removed', conditions: [ours('Accepted', 'True', 1), foreign] }
  ]
  const merged = mergeListeners([{ name: 'http', attachedRoutes: 1, conditions: [ours('Accepted', 'True')] }, { name: 'new', attachedRoutes: 0, conditions: [ours('Accepted', 'False')] }], current, NOW)
  assert.deepEqual(merged.map(l => [l.name, l.attachedRoutes, l.conditions.map(c => c.type)]), [
    ['http', 1, ['Accepted', 'example.com/Stale']],
    ['new', 0, ['Accepted']]
  ])
  assert.deepEqual(merged[0]!.conditions[1], foreign)
})

test('mergeEntries: other controllers\' route parents stay whole; ours are replaced, keeping foreign condition types in them', () => {
  const me = 'portico.dev/gateway-controller'
  const theirs = { parentRef: { name: 'web' }, controllerName: 'example.com/other', conditions: [ours('Accepted', 'False', 1), foreign] }
  const current = [
    theirs,
    { parentRef: { name: 'web' }, controllerName: me, conditions: [{ ...ours('Accepted', 'True', 1), lastTransitionTime: T0 }, foreign] },
    { parentRef: { name: 'old' }, controllerName: me, conditions: [ours('Accepted', 'True', 1)] }
  ]
  const merged = mergeEntries([{ parentRef: { name: 'web' }, controllerName: me, conditions: [ours('Accepted', 'True'), ours('ResolvedRefs', 'True')] }], current, me, 'parentRef', NOW)
  assert.deepEqual(merged, [
    theirs,
    { parentRef: { name: 'web' }, controllerName: me, conditions: [{ ...ours('Accepted', 'True'), lastTransitionTime: T0 }, { ...ours('ResolvedRefs', 'True'), lastTransitionTime: NOW }, foreign] }
  ])
  // No parent of ours any more: theirs stays.
  assert.deepEqual(mergeEntries([], current, me, 'parentRef', NOW), [theirs])
})
