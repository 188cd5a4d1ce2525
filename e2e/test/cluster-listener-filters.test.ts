/**
 * Gateway API GatewayListenerFilters (v1.7.0) in a real cluster (e2e/cluster/harness.ts, with
 * v1.7.0's experimental CRDs — the only channel whose Gateway has spec.listeners[].filters):
 * a listener with two ExternalAuth filters, GRPC then HTTP, each a Service of type
 * ExternalName naming 127.0.0.1 (the harness has no cluster DNS; the proxy runs as a local
 * process, so loopback reaches the test's own authorization servers). The first server sets
 * x-tier, the second (sent x-tier: allowedHeaders) answers with x-second naming what it saw, and the HTTPRoute's rules
 * (redirects, so no backend is needed) match on x-second: the route the request gets proves
 * both ran in order before route matching. A denial answers before routing; an ExtensionRef
 * filter keeps its listener Accepted False; the class claims the feature.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import type { KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { freePort } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { startAuthzServer, type AuthzServer } from '../lib/ext-authz.ts'

const GW_API = '/apis/gateway.networking.k8s.io/v1'

let suite: ClusterGateway | null = null
let grpcAuthz: AuthzServer
let httpAuthz: Backend
const order: string[] = []

before(async s => {
  suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-listener-filters-', v170Crds: true, cluster: { controllerManager: false }, namespaces: ['portico-system', 'apps'] })
  if (suite === null) return
  grpcAuthz = await startAuthzServer(request => {
    order.push('grpc')
    if (request.attributes.request?.http?.headers?.['x-deny'] === 'yes') return { status: { code: 7 }, denied_response: { status: { code: 401 }, body: 'denied in the listener' } }
    return { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-tier', value: 'gold' }, append: { value: false } }, { header: { key: 'host', value: 'evil.example' }, append: { value: false } }] } }
  })
  suite.defer(() => grpcAuthz.close())
  httpAuthz = await startBackend((req, res) => {
    order.push('http')
    res.writeHead(200, { 'x-second': `saw-${String(req.headers['x-tier'] ?? 'none')}` }).end()
  })
  suite.defer(() => httpAuthz.close())
})

after(async () => await suite?.stop())

test('two ExternalAuth listener filters run in order before route matching; a denial answers first; ExtensionRef is refused; the feature is claimed', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const gwPort = await freePort()
  const otherPort = await freePort()
  await cluster.apply(`apiVersion: v1
kind: Service
metadata: { name: grpc-auth, namespace: apps }
spec: { type: ExternalName, externalName: 127.0.0.1, ports: [{ name: grpc, port: ${grpcAuthz.port} }] }
---
apiVersion: v1
kind: Service
metadata: { name: http-auth, namespace: apps }
spec: { type: ExternalName, externalName: 127.0.0.1, ports: [{ name: http, port: ${httpAuthz.port} }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: web, namespace: apps }
spec:
  gatewayClassName: portico
  listeners:
    - name: http
      port: ${gwPort}
      protocol: HTTP
      filters:
        requests:
          - type: ExternalAuth
            externalAuth: { protocol: GRPC, backendRef: { name: grpc-auth, port: ${grpcAuthz.port} }, grpc: {} }
          - type: ExternalAuth
            externalAuth: { protocol: HTTP, backendRef: { name: http-auth, port: ${httpAuthz.port} }, http: { allowedHeaders: [x-tier], allowedResponseHeaders: [x-second] } }
    - name: extension
      port: ${otherPort}
      protocol: HTTP
      filters:
        requests:
          - type: ExtensionRef
            extensionRef: { group: example.com, kind: Projector, name: claims }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: tiers, namespace: apps }
spec:
  parentRefs: [{ name: web, sectionName: http }]
  rules:
    - matches: [{ headers: [{ name: x-second, value: saw-gold }] }]
      filters: [{ type: RequestRedirect, requestRedirect: { hostname: gold.example, statusCode: 302 } }]
    - filters: [{ type: RequestRedirect, requestRedirect: { hostname: plain.example, statusCode: 302 } }]
`)
  const stored = await cluster.api<KubeObject>('GET', `${GW_API}/namespaces/apps/gateways/web`)
  assert.equal((stored.spec.listeners as Array<{ filters?: { requests: unknown[] } }>)[0]?.filters?.requests.length, 2, 'the CRD keeps the field (v1.7.0 experimental channel)')

  const controller = await suite.startController()
  const proxy = await suite.startProxy('apps', 'web')
  const why = () => `\n${controller.output().slice(-3000)}\n${proxy.output.slice(-2000)}`

  const get = async (headers: Record<string, string> = {}) => {
    const res = await request(`http://127.0.0.1:${gwPort}/x`, { headers })
    return { status: res.statusCode, location: res.headers.location, body: await res.body.text() }
  }
  let last: { status: number, location?: unknown } = { status: 0 }
  await waitUntil(async () => {
    last = await get().catch(() => ({ status: 0 }))
    return last.status === 302
  }, 30_000, `a first answer through the proxy (last ${JSON.stringify(last)})${why()}`, 200)
  order.length = 0
  const r = await get({ 'x-tier': 'client' })
  assert.equal(r.status, 302)
  assert.equal(r.location, `http://gold.example:${gwPort}/x`, 'the rule matching x-second: saw-gold: the HTTP filter saw the x-tier the GRPC filter set')
  assert.deepEqual(order, ['grpc', 'http'])

  order.length = 0
  const denied = await get({ 'x-deny': 'yes' })
  assert.equal(denied.status, 401)
  assert.equal(denied.body, 'denied in the listener')
  assert.deepEqual(order, ['grpc'], 'the second filter is not called after a denial')

  const gw = await cluster.api<KubeObject>('GET', `${GW_API}/namespaces/apps/gateways/web`)
  const listeners = gw.status.listeners as Array<{ name: string, conditions: Array<{ type: string, status: string, reason: string }> }>
  const accepted = (name: string) => listeners.find(l => l.name === name)?.conditions.find(c => c.type === 'Accepted')
  assert.equal(accepted('http')?.status, 'True')
  assert.equal(accepted('extension')?.status, 'False')
  assert.equal(accepted('extension')?.reason, 'UnsupportedValue')

  const features = ((await cluster.api<KubeObject>('GET', `${GW_API}/gatewayclasses/portico`)).status.supportedFeatures as Array<{ name: string }>).map(f => f.name)
  assert.ok(features.includes('GatewayListenerFilters'), features.join(', '))
})
