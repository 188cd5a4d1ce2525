/**
 * HTTPExternalAuthFilter → ExtAuthzIR (translate/external-auth.ts) beyond the golden case:
 * what is refused and why, the spec's defaults, the path sanitised.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { externalAuthIR, type HTTPExternalAuthFilter } from '../src/translate/external-auth.ts'
import { ReferenceGrants } from '../src/translate/reference-grants.ts'
import type { Service } from '../src/translate/gateway-api.ts'

const services = new Map<string, Service>([
  ['apps/auth', { metadata: { name: 'auth', namespace: 'apps' }, spec: { ports: [{ port: 9000 }, { port: 53, protocol: 'UDP' }] } }],
  ['apps/ext', { metadata: { name: 'ext', namespace: 'apps' }, spec: { type: 'ExternalName', externalName: 'auth.example.com' } }]
])
const owner = { kind: 'Gateway', namespace: 'apps' }
const none = new ReferenceGrants([])
const ir = (f: HTTPExternalAuthFilter) => externalAuthIR(f, owner, none, services)
const reason = (f: HTTPExternalAuthFilter) => {
  const r = ir(f)
  return 'reason' in r ? r.reason : 'ok'
}

test('refusals: kinds, missing Services and ports, UDP ports, protocols, paths, body caps', () => {
  assert.equal(reason({ protocol: 'GRPC', backendRef: { name: 'auth', port: 9000, group: 'example.com', kind: 'Auth' } }), 'InvalidKind')
  assert.equal(reason({ protocol: 'GRPC', backendRef: { name: 'auth', namespace: 'other', port: 9000 } }), 'RefNotPermitted')
  assert.equal(reason({ protocol: 'GRPC', backendRef: { name: 'nope', port: 9000 } }), 'BackendNotFound')
  assert.equal(reason({ protocol: 'GRPC', backendRef: { name: 'auth' } }), 'BackendNotFound')
  assert.equal(reason({ protocol: 'GRPC', backendRef: { name: 'auth', port: 53 } }), 'BackendNotFound')
  assert.equal(reason({ protocol: 'SOAP', backendRef: { name: 'auth', port: 9000 } }), 'UnsupportedValue')
  assert.equal(reason({ protocol: 'HTTP', backendRef: { name: 'auth', port: 9000 }, http: { path: '/a/../b' } }), 'UnsupportedValue')
  assert.equal(reason({ protocol: 'HTTP', backendRef: { name: 'auth', port: 9000 }, http: { path: '/a b' } }), 'UnsupportedValue')
  assert.equal(reason({ protocol: 'GRPC', backendRef: { name: 'auth', port: 9000 }, forwardBody: { maxSize: 1 << 30 } }), 'UnsupportedValue')
})

test('defaults and mapping: GRPC sends every header, HTTP Authorization and X-Forwarded-Host plus the allowed ones; the path gets one leading slash', () => {
  assert.deepEqual(ir({ protocol: 'GRPC', backendRef: { name: 'auth', port: 9000 } }), {
    host: 'http://auth.apps.svc.cluster.local:9000', protocol: { grpc: {} }, failureMode: 'deny', timeoutMs: 1000, includeRequestHeaders: null, includeRequestBody: null, contextExtensions: {}
  })
  const http = ir({ protocol: 'HTTP', backendRef: { name: 'auth', port: 9000 }, http: { path: 'check/', allowedHeaders: ['X-Tenant', 'Authorization'] }, forwardBody: { maxSize: 10 } })
  assert.ok(!('reason' in http))
  assert.deepEqual(http.protocol, { http: { pathPrefix: '/check', allowedResponseHeaders: null } })
  assert.deepEqual(http.includeRequestHeaders, ['authorization', 'x-forwarded-host', 'x-tenant'])
  assert.deepEqual(http.includeRequestBody, { maxBytes: 10, packAsBytes: false })
  const ext = ir({ protocol: 'GRPC', backendRef: { name: 'ext', port: 9191 } })
  assert.ok(!('reason' in ext))
  assert.equal(ext.host, 'http://auth.example.com:9191', 'an ExternalName Service: its name')
})
