/**
 * An ExtensionRef filter never resolves (Portico defines no custom filter kinds). The spec:
 * "the filter MUST NOT be skipped. Instead, requests that would have been processed by that
 * filter MUST receive a HTTP error response." The translated IR, run by a real engine on
 * loopback with a real backend: the rule with the filter answers 500 even though its other
 * filter (a redirect) would answer first, the backendRef with the filter answers 500, the
 * rule without one reaches the backend; the route stays Accepted, ResolvedRefs
 * False/InvalidKind naming the filter.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { listenLoopback, serveIr, type ServedIr } from '@portico/testkit/serve-ir'
import { translate, type TranslationResult } from '../src/translate/translate.ts'
import { CLASS_AND_GATEWAY, CONTROLLER, clusterState } from './cluster-state.ts'

const EXTENSION = '{ type: ExtensionRef, extensionRef: { group: example.com, kind: Magic, name: m } }'

let backend: http.Server
let served: ServedIr | undefined
let base = ''
let result: TranslationResult

before(async () => {
  backend = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`backend ${req.url}`))
  const port = await listenLoopback(backend)
  result = translate(clusterState(`${CLASS_AND_GATEWAY}---
apiVersion: v1
kind: Service
metadata: { name: app, namespace: apps }
spec: { ports: [{ name: http, port: 80, targetPort: ${port} }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: app-1, namespace: apps, labels: { kubernetes.io/service-name: app } }
ports: [{ name: http, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: apps, generation: 2 }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /rule } }]
      filters: [{ type: RequestRedirect, requestRedirect: { hostname: elsewhere.example } }, ${EXTENSION}]
      backendRefs: [{ name: app, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /ref } }]
      backendRefs: [{ name: app, port: 80, filters: [${EXTENSION}] }]
    - matches: [{ path: { type: PathPrefix, value: /ok } }]
      backendRefs: [{ name: app, port: 80 }]
`), { controllerName: CONTROLLER })
  served = await serveIr(result.gateways[0]!.ir)
  base = served.base
})

after(async () => {
  backend?.closeAllConnections()
  await Promise.all([served?.close(), new Promise(r => backend?.close(r))])
})

async function get (path: string): Promise<{ status: number, body: string }> {
  return await new Promise((resolve, reject) => {
    http.get(`${base}${path}`, { agent: false }, res => {
      let body = ''
      res.setEncoding('utf8').on('data', (c: string) => { body += c }).on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    }).on('error', reject)
  })
}

test('the route stays Accepted; ResolvedRefs is False/InvalidKind and names the filter', () => {
  const conditions = result.routes[0]!.parents[0]!.conditions
  const accepted = conditions.find(c => c.type === 'Accepted')!
  assert.equal(accepted.status, 'True')
  const refs = conditions.find(c => c.type === 'ResolvedRefs')!
  assert.equal(refs.status, 'False')
  assert.equal(refs.reason, 'InvalidKind')
  assert.match(refs.message, /spec\.rules\[0\]\.filters\[1\]: ExtensionRef filter example\.com\/Magic m cannot be resolved/)
})

test('a rule with an ExtensionRef answers 500, not its redirect nor its backend', async () => {
  const r = await get('/rule/x')
  assert.equal(r.status, 500)
  assert.doesNotMatch(r.body, /^backend/)
})

test('a backendRef with an ExtensionRef answers 500 for its share (all of it here)', async () => {
  for (let i = 0; i < 3; i++) assert.equal((await get('/ref')).status, 500)
})

test('the rule without an ExtensionRef serves', async () => {
  const r = await get('/ok')
  assert.equal(r.status, 200)
  assert.equal(r.body, 'backend /ok')
})
