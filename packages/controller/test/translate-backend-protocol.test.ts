/**
 * A Service port's appProtocol decides how the proxy talks to the backend: kubernetes.io/h2c
 * means HTTP/2 with prior knowledge (Gateway API HTTPRouteBackendProtocolH2C), others HTTP/1.1.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { translate } from '../src/translate/translate.ts'
import { CLASS_AND_GATEWAY, CONTROLLER, clusterState } from './cluster-state.ts'

test('appProtocol kubernetes.io/h2c makes an h2c backend; a port without it stays HTTP/1.1', () => {
  const text = `${CLASS_AND_GATEWAY}---
apiVersion: v1
kind: Service
metadata: { name: app, namespace: apps }
spec: { ports: [{ port: 80 }, { port: 81, appProtocol: kubernetes.io/h2c }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: apps, generation: 1 }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /h1 } }]
      backendRefs: [{ name: app, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /h2c } }]
      backendRefs: [{ name: app, port: 81 }]
`
  const result = translate(clusterState(text), { controllerName: CONTROLLER })
  const backends = result.gateways[0]!.ir.backends
  const h1 = backends.find(b => b.key === 'service/apps/app:80')!
  const h2c = backends.find(b => b.key === 'service/apps/app:81')!
  assert.equal(h1.protocol, 'http')
  assert.equal(h1.h2c, undefined)
  assert.equal(h2c.protocol, 'http')
  assert.equal(h2c.h2c, true)
})
