/**
 * HTTPRoute filters, retries and mirrors go through the engine's converters
 * (`@portico/engine/config`), the ones the YAML front end uses: the same policy written as a
 * Gateway API filter and as YAML gives the same IR, and what the YAML front end refuses (an
 * origin that is not one, `*` beside other origins, maxAge 0, a backoff over 1m) leaves the
 * route not Accepted, the field named, instead of being dropped or pushed to the proxies.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, type RouteIR } from '@portico/engine'
import { translate, type ClusterState } from '../src/translate/translate.ts'
import { CLASS_AND_GATEWAY, CONTROLLER, clusterState } from './cluster-state.ts'

function state (rules: string): ClusterState {
  const text = `${CLASS_AND_GATEWAY}---
apiVersion: v1
kind: Service
metadata: { name: app, namespace: apps }
spec: { ports: [{ port: 80 }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: apps, generation: 3 }
spec:
  parentRefs: [{ name: web }]
  rules:
${rules}`
  return clusterState(text)
}

function translated (rules: string): { accepted: { status: string, reason: string, message: string }, routes: RouteIR[] } {
  const result = translate(state(rules), { controllerName: CONTROLLER })
  const accepted = result.routes[0]!.parents[0]!.conditions.find(c => c.type === 'Accepted')!
  return { accepted, routes: result.gateways[0]!.ir.binds[0]?.listeners[0]?.routes ?? [] }
}

function yamlRoute (policies: string): RouteIR {
  const text = `gateways:\n  default: { port: 3000 }\nroutes:\n  - name: r\n    matches: [{ path: { pathPrefix: /api } }]\n    policies:\n${policies}\n    backends: [{ host: "127.0.0.1:8080" }]\n`
  const result = loadConfigText(text, { baseDir: '/cfg' })
  assert.ok(result.ok, JSON.stringify(result.ok ? null : result.diagnostics))
  return result.config.ir.binds[0]!.listeners[0]!.routes[0]!
}

test('a redirect, rewrite, CORS policy, header modifier and retry mean the same IR from a filter as from YAML', () => {
  const { accepted, routes } = translated(`    - matches: [{ path: { type: PathPrefix, value: /api } }]
      filters:
        - type: URLRewrite
          urlRewrite: { hostname: API.internal, path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } }
        - type: CORS
          cors: { allowOrigins: ["https://app.example.com"], allowMethods: [GET], allowHeaders: [X-Id], maxAge: 600 }
        - type: ResponseHeaderModifier
          responseHeaderModifier: { set: [{ name: x-served-by, value: portico }], remove: [server] }
      retry: { attempts: 2, codes: [503, 502, 503] }
      backendRefs: [{ name: app, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /old } }]
      filters:
        - type: RequestRedirect
          requestRedirect: { hostname: New.example.com, path: { type: ReplaceFullPath, replaceFullPath: /new } }
      backendRefs: [{ name: app, port: 80 }]
`)
  assert.equal(accepted.status, 'True', accepted.message)
  const yaml = yamlRoute(`      urlRewrite: { hostname: API.internal, path: { prefix: /v1 } }
      cors: { allowOrigins: ["https://app.example.com"], allowMethods: [GET], allowHeaders: [X-Id], maxAge: 600 }
      responseHeaderModifier: { set: { x-served-by: portico }, remove: [server] }
      retry: { attempts: 2, codes: [503, 502, 503] }`)
  assert.deepEqual(routes[0]!.policies, yaml.policies)
  assert.deepEqual(routes[0]!.retry, yaml.retry)
  const redirect = yamlRoute('      requestRedirect: { hostname: New.example.com, path: { full: /new } }')
  assert.deepEqual(routes[1]!.policies, redirect.policies, 'status 302 by default, hostname lower-cased: the engine\'s defaults')
})

test('what the YAML front end refuses leaves the route not Accepted, naming the field', () => {
  const cases: Array<[string, RegExp]> = [
    ['cors: { allowOrigins: ["app.example.com"] }', /^spec\.rules\[0\]\.filters\[0\]\.cors\.allowOrigins\[0\]: "app\.example\.com" is not an origin/],
    ['cors: { allowOrigins: ["*", "https://a.example"] }', /^spec\.rules\[0\]\.filters\[0\]\.cors\.allowOrigins: \* cannot be listed alongside other origins/],
    ['cors: { allowOrigins: ["https://a.example"], maxAge: 0 }', /^spec\.rules\[0\]\.filters\[0\]\.cors\.maxAge: must be at least 1s/]
  ]
  for (const [cors, message] of cases) {
    const { accepted, routes } = translated(`    - filters: [{ type: CORS, ${cors} }]\n      backendRefs: [{ name: app, port: 80 }]\n`)
    assert.equal(accepted.status, 'False', cors)
    assert.equal(accepted.reason, 'UnsupportedValue')
    assert.match(accepted.message, message)
    assert.deepEqual(routes, [], 'a refused route reaches no proxy')
  }
  const slow = translated('    - retry: { attempts: 1, backoff: 2m }\n      backendRefs: [{ name: app, port: 80 }]\n')
  assert.equal(slow.accepted.reason, 'UnsupportedValue')
  assert.equal(slow.accepted.message, 'spec.rules[0].retry.backoff: must be at most 1m')
  const bad = translated('    - retry: { backoff: soon }\n      backendRefs: [{ name: app, port: 80 }]\n')
  assert.equal(bad.accepted.reason, 'UnsupportedValue', 'a duration past the CRD\'s pattern refuses the route; translate() does not throw')
  assert.match(bad.accepted.message, /^spec\.rules\[0\]\.retry\.backoff: invalid duration "soon"/)
})

test('a mirror takes the engine\'s default percentage when the filter gives neither percent nor fraction', () => {
  const { routes } = translated(`    - filters:
        - type: RequestMirror
          requestMirror: { backendRef: { name: app, port: 80 } }
        - type: RequestMirror
          requestMirror: { backendRef: { name: app, port: 80 }, fraction: { numerator: 1, denominator: 4 } }
      backendRefs: [{ name: app, port: 80 }]
`)
  assert.deepEqual(routes[0]!.mirrors, [{ backend: 'service/apps/app:80', percentage: 100 }, { backend: 'service/apps/app:80', percentage: 25 }])
})

test('HTTPRoute timeouts: a 0s (the Gateway API\'s "no timeout") is kept as 0, so the gateway\'s default wait for headers does not replace it', () => {
  const { accepted, routes } = translated(`    - matches: [{ path: { type: PathPrefix, value: /slow } }]
      timeouts: { request: 0s, backendRequest: 0s }
      backendRefs: [{ name: app, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /fast } }]
      timeouts: { request: 10s, backendRequest: 2s }
      backendRefs: [{ name: app, port: 80 }]`)
  assert.equal(accepted.status, 'True', accepted.message)
  const byPath = new Map(routes.map(r => [r.matches[0]!.path.value, r.timeouts]))
  assert.deepEqual(byPath.get('/slow'), { requestMs: 0, backendRequestMs: 0 })
  assert.deepEqual(byPath.get('/fast'), { requestMs: 10_000, backendRequestMs: 2_000 })
  // The YAML front end says the same with the same words.
  assert.deepEqual(yamlRoute('      timeout: { requestTimeout: 0s, backendRequestTimeout: 0s }').timeouts, { requestMs: 0, backendRequestMs: 0 })
})
