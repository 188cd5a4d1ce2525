/**
 * HTTPRoute RegularExpression matches are checked with the engine's linear-time regex
 * compiler: a pattern it cannot run (lookaround, backreferences, bad syntax) leaves the route
 * not Accepted (UnsupportedValue, the field named in the message) and out of the proxy's
 * config, instead of reaching a proxy that would refuse the whole config; the other routes
 * are translated as usual.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { validateIR } from '@portico/engine/ir'
import { translate, type ClusterState } from '../src/translate/translate.ts'
import { CLASS_AND_GATEWAY, CONTROLLER, clusterState } from './cluster-state.ts'

function state (routes: string): ClusterState {
  const text = `${CLASS_AND_GATEWAY}${routes}`
  return clusterState(text)
}

function route (name: string, match: string): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: apps, generation: 4 }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [${match}]
      filters: [{ type: RequestHeaderModifier, requestHeaderModifier: { set: [{ name: x-r, value: ${name} }] } }]
`
}

function accepted (result: ReturnType<typeof translate>, name: string): { status: string, reason: string, message: string } {
  const r = result.routes.find(x => x.name === name)
  assert.ok(r !== undefined, `no status for ${name}`)
  const c = r.parents[0]!.conditions.find(x => x.type === 'Accepted')!
  return { status: c.status, reason: c.reason, message: c.message }
}

function programmed (result: ReturnType<typeof translate>): string[] {
  return result.gateways[0]!.ir.binds.flatMap(b => b.listeners.flatMap(l => l.routes.map(r => r.name)))
}

test('an HTTPRoute regex the engine cannot run is reported on the route, and the route is not programmed', () => {
  const result = translate(state([
    route('lookahead', '{ path: { type: RegularExpression, value: "/(?=admin).*" } }'),
    route('backref', '{ headers: [{ type: RegularExpression, name: x-a, value: "(a)\\\\1" }] }'),
    route('badquery', '{ queryParams: [{ type: RegularExpression, name: q, value: "([" }] }'),
    route('good', '{ path: { type: RegularExpression, value: "/(a+)+$" }, headers: [{ type: RegularExpression, name: x-v, value: "v[0-9]+" }] }')
  ].join('')), { controllerName: CONTROLLER })

  const lookahead = accepted(result, 'lookahead')
  assert.equal(lookahead.status, 'False')
  assert.equal(lookahead.reason, 'UnsupportedValue')
  assert.match(lookahead.message, /^spec\.rules\[0\]\.matches\[0\]\.path\.value: lookahead .* not supported/)

  const backref = accepted(result, 'backref')
  assert.equal(backref.reason, 'UnsupportedValue')
  assert.match(backref.message, /^spec\.rules\[0\]\.matches\[0\]\.headers\[0\]\.value: a backreference/)

  const badquery = accepted(result, 'badquery')
  assert.equal(badquery.reason, 'UnsupportedValue')
  assert.match(badquery.message, /^spec\.rules\[0\]\.matches\[0\]\.queryParams\[0\]\.value: invalid regular expression/)

  // A pattern that is catastrophic only for a backtracking engine is fine.
  assert.equal(accepted(result, 'good').status, 'True')
  assert.deepEqual(programmed(result), ['good'])
})

test('anything else the proxies would refuse in a route (a header value with edge whitespace) leaves only that route not Accepted', () => {
  const badValue = `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: badvalue, namespace: apps, generation: 1 }
spec:
  parentRefs: [{ name: web }]
  rules:
    - filters: [{ type: RequestHeaderModifier, requestHeaderModifier: { set: [{ name: x-r, value: "v " }] } }]
`
  const result = translate(state(badValue + route('good', '{ path: { type: PathPrefix, value: /ok } }')), { controllerName: CONTROLLER })
  const bad = accepted(result, 'badvalue')
  assert.equal(bad.status, 'False')
  assert.equal(bad.reason, 'UnsupportedValue')
  assert.match(bad.message, /^spec\.rules\[0\]: policies\.requestHeaderModifier\.set/)
  assert.deepEqual(programmed(result), ['good'])
  // What is pushed is what every proxy installs.
  assert.deepEqual(validateIR(result.gateways[0]!.ir), [])
})
