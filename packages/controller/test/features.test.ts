import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FEATURE_FIELDS, GATEWAY_FEATURE_FIELDS, SUPPORTED_FEATURES, supportedFeatures, type CustomResourceDefinition } from '../src/features.ts'

/** An HTTPRoute CRD whose v1 schema has the standard channel's rule fields, plus `extraRule` ones. */
function httpRouteCrd (extraRule: Record<string, unknown> = {}, version = 'v1'): CustomResourceDefinition {
  const filters = {
    type: 'array',
    items: {
      type: 'object',
      properties: {
        type: { type: 'string' },
        requestHeaderModifier: { type: 'object' },
        responseHeaderModifier: { type: 'object' },
        requestRedirect: { type: 'object' },
        urlRewrite: { type: 'object', properties: { hostname: { type: 'string' }, path: { type: 'object' } } },
        requestMirror: { type: 'object', properties: { backendRef: { type: 'object' }, percent: { type: 'integer' }, fraction: { type: 'object' } } },
        cors: { type: 'object' }
      }
    }
  }
  const rule = {
    type: 'object',
    properties: {
      name: { type: 'string' },
      matches: { type: 'array' },
      filters,
      backendRefs: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, filters: structuredClone(filters) } } },
      timeouts: { type: 'object', properties: { request: { type: 'string' }, backendRequest: { type: 'string' } } },
      ...extraRule
    }
  }
  return {
    spec: {
      versions: [{
        name: version,
        served: true,
        schema: { openAPIV3Schema: { properties: { spec: { properties: { parentRefs: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, sectionName: { type: 'string' }, port: { type: 'integer' } } } }, hostnames: { type: 'array' }, rules: { type: 'array', items: rule } } } } } as never }
      }]
    }
  }
}

const retry = { retry: { type: 'object', properties: { codes: { type: 'array' }, attempts: { type: 'integer' }, backoff: { type: 'string' } } } }

test('supportedFeatures: a standard-channel HTTPRoute CRD (no rules[].retry) claims none of the retry features', () => {
  const features = supportedFeatures(httpRouteCrd(), undefined, undefined, gatewayCrd(true))
  assert.ok(!features.includes('HTTPRouteRetry'))
  assert.deepEqual(features, SUPPORTED_FEATURES.filter(f => !f.startsWith('HTTPRouteRetry')))
})

test('supportedFeatures: an experimental-channel HTTPRoute CRD (with rules[].retry) claims every implemented feature', () => {
  assert.deepEqual(supportedFeatures(httpRouteCrd(retry), undefined, undefined, gatewayCrd(true)), SUPPORTED_FEATURES)
})

test('supportedFeatures: each field-gated feature goes when its field is missing; the others stay', () => {
  const crd = httpRouteCrd(retry)
  const rule = (crd.spec!.versions![0]!.schema!.openAPIV3Schema as { properties: { spec: { properties: { rules: { items: { properties: Record<string, { properties?: Record<string, unknown>, items?: { properties: Record<string, unknown> } }> } } } } } }).properties.spec.properties.rules.items.properties
  delete rule.filters!.items!.properties.cors
  delete rule.timeouts!.properties!.backendRequest
  delete (rule.backendRefs!.items!.properties.filters as { items: { properties: Record<string, unknown> } }).items.properties.urlRewrite
  const features = supportedFeatures(crd)
  assert.ok(!features.includes('HTTPRouteBackendURLRewrite'), 'URLRewrite on backendRefs needs backendRefs[].filters[].urlRewrite')
  assert.ok(features.includes('HTTPRoutePathRewrite'), 'the rule filters\' urlRewrite is still there')
  assert.ok(features.includes('HTTPRouteRetryCodes'))
  assert.ok(!features.includes('HTTPRouteCORS'))
  assert.ok(!features.includes('HTTPRouteBackendTimeout'))
  assert.ok(features.includes('HTTPRouteRequestTimeout'))
  assert.ok(features.includes('HTTPRouteRetry'))
})

test('supportedFeatures: without a readable CRD, or without a v1 version, only features needing no gated field are claimed', () => {
  const ungated = SUPPORTED_FEATURES.filter(f => FEATURE_FIELDS[f] === undefined && GATEWAY_FEATURE_FIELDS[f] === undefined)
  assert.deepEqual(supportedFeatures(undefined), ungated)
  assert.deepEqual(supportedFeatures(httpRouteCrd(retry, 'v1beta1')), ungated)
  assert.ok(ungated.includes('HTTPRoute') && ungated.includes('Gateway') && !ungated.includes('HTTPRouteRetry'))
})

/** A Gateway CRD whose v1 schema has spec.addresses[].routability (v1.7.0 experimental channel) or not. */
/** A Gateway CRD's v1 schema; `routability` and `listenerFilters` add the v1.7.0 experimental fields. */
function gatewayCrd (routability: boolean, listenerFilters = routability): CustomResourceDefinition {
  const address = { type: 'object', properties: { type: { type: 'string' }, value: { type: 'string' }, ...(routability ? { routability: { type: 'string' } } : {}) } }
  const filter = { type: 'object', properties: { type: { type: 'string' }, externalAuth: { type: 'object' }, extensionRef: { type: 'object' } } }
  const listener = { type: 'object', properties: { name: { type: 'string' }, port: { type: 'integer' }, ...(listenerFilters ? { filters: { type: 'object', properties: { requests: { type: 'array', items: filter } } } } : {}) } }
  return { spec: { versions: [{ name: 'v1', served: true, schema: { openAPIV3Schema: { properties: { spec: { properties: { addresses: { type: 'array', items: address }, listeners: { type: 'array', items: listener } } } } } as never } }] } }
}

test('supportedFeatures: GatewayListenerFilters only when the Gateway CRD has spec.listeners[].filters.requests[].externalAuth', () => {
  assert.ok(supportedFeatures(httpRouteCrd(), undefined, undefined, gatewayCrd(false, true)).includes('GatewayListenerFilters'))
  assert.ok(!supportedFeatures(httpRouteCrd(), undefined, undefined, gatewayCrd(true, false)).includes('GatewayListenerFilters'), 'the standard channel prunes the field')
  assert.ok(!supportedFeatures(httpRouteCrd()).includes('GatewayListenerFilters'), 'no Gateway CRD read')
})

test('supportedFeatures: GatewayAddressRoutability(Cluster) only when the Gateway CRD has spec.addresses[].routability', () => {
  const routability = ['GatewayAddressRoutability', 'GatewayAddressRoutabilityCluster']
  for (const f of routability) {
    assert.ok(supportedFeatures(httpRouteCrd(), undefined, undefined, gatewayCrd(true)).includes(f), f)
    assert.ok(!supportedFeatures(httpRouteCrd(), undefined, undefined, gatewayCrd(false)).includes(f), `${f}: the standard channel prunes the field`)
    assert.ok(!supportedFeatures(httpRouteCrd()).includes(f), `${f}: no Gateway CRD read`)
  }
})

test('supportedFeatures: ListenerSet is claimed only when the ListenerSet kind is served (its CRD installed)', () => {
  assert.ok(!supportedFeatures(httpRouteCrd(retry), undefined, new Set()).includes('ListenerSet'))
  const withKind = supportedFeatures(httpRouteCrd(retry), undefined, new Set(['ListenerSet', 'GRPCRoute', 'TLSRoute', 'TCPRoute', 'UDPRoute', 'ClusterTrustBundle']), gatewayCrd(true))
  assert.ok(withKind.includes('ListenerSet'))
  assert.deepEqual(withKind, SUPPORTED_FEATURES)
  assert.ok(!supportedFeatures(httpRouteCrd(retry), undefined, new Set(['ListenerSet'])).includes('GRPCRoute'), 'GRPCRoute needs its CRD served')
  // ClusterTrustBundle is built in but served only with its feature gate (certificates.k8s.io/v1beta1 in Kubernetes 1.36).
  assert.ok(!supportedFeatures(httpRouteCrd(retry), undefined, new Set(['ListenerSet'])).includes('ClusterTrustBundle'), 'ClusterTrustBundle needs the kind served')
  // Without the kinds argument, kinds are not checked (the fields alone decide).
  assert.ok(supportedFeatures(httpRouteCrd(retry)).includes('ListenerSet'))
})
