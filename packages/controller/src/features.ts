/**
 * Which Gateway API features the GatewayClass claims (status.supportedFeatures). Portico
 * implements all of SUPPORTED_FEATURES, but a feature whose fields the installed CRDs do not
 * carry cannot work: the API server prunes unknown fields, so an HTTPRoute's `retry` on the
 * standard channel simply vanishes. A feature is therefore claimed only when the installed
 * HTTPRoute CRD's v1 schema has every field it needs (FEATURE_FIELDS); features that need no
 * field beyond the standard core are always claimed.
 */

/** Gateway API features Portico implements. */
export const SUPPORTED_FEATURES = [
  'Gateway',
  'GatewayPort8080',
  'HTTPRoute',
  'HTTPRouteMethodMatching',
  'HTTPRouteQueryParamMatching',
  'HTTPRouteResponseHeaderModification',
  'HTTPRouteBackendRequestHeaderModification',
  'HTTPRouteRequestTimeout',
  'HTTPRouteBackendTimeout',
  'HTTPRouteSchemeRedirect',
  'HTTPRoutePortRedirect',
  'HTTPRoutePathRedirect',
  'HTTPRoute303RedirectStatusCode',
  'HTTPRoute307RedirectStatusCode',
  'HTTPRoute308RedirectStatusCode',
  'HTTPRouteHostRewrite',
  'HTTPRoutePathRewrite',
  'HTTPRouteCORS',
  'HTTPRouteRequestMirror',
  'HTTPRouteRequestMultipleMirrors',
  'HTTPRouteRequestPercentageMirror',
  'HTTPRouteRetry',
  'HTTPRouteRetryBackendTimeout',
  'HTTPRouteRetryConnectionError',
  // v1.7.0's name for retries on status codes (HTTPRouteRetry / HTTPRouteRetryBackendTimeout
  // above are v1.6's: claimed too while the v1.6.3 suite runs beside v1.7.0's).
  'HTTPRouteRetryCodes',
  'HTTPRouteBackendURLRewrite',
  'HTTPRouteNamedRouteRule',
  'HTTPRouteBackendProtocolWebSocket',
  'HTTPRouteBackendProtocolH2C',
  'GatewayHTTPSListenerDetectMisdirectedRequests',
  'HTTPRouteParentRefPort',
  'HTTPRouteDestinationPortMatching',
  'GatewayHTTPListenerIsolation',
  'GatewayRouteHostnameIntersectionPrecedence',
  'GatewayFrontendClientCertificateValidation',
  'GatewayFrontendClientCertificateValidationInsecureFallback',
  'ListenerSet',
  'GatewayInfrastructure',
  'GatewayAddressEmpty',
  'GatewayStaticAddresses',
  'GatewayAddressRoutability',
  'GatewayAddressRoutabilityCluster',
  'GatewayListenerFilters',
  'ReferenceGrant',
  'BackendTLSPolicy',
  'BackendTLSPolicySANValidation',
  'ClusterTrustBundle',
  'GatewayBackendClientCertificate',
  'GRPCRoute',
  'GRPCRouteNamedRouteRule',
  'GRPCRouteRequestHeaderModifier',
  'TLSRoute',
  'TLSRouteModeTerminate',
  'TLSRouteModeMixed',
  'TCPRoute',
  'UDPRoute'
]

/**
 * Fields (paths in the HTTPRoute's v1 schema, array items stepped through) a feature needs,
 * for the features whose fields are, or once were, experimental-channel only. A feature is
 * claimed only when all of its paths exist.
 */
export const FEATURE_FIELDS: Record<string, string[][]> = {
  HTTPRouteRetry: [['spec', 'rules', 'retry', 'codes'], ['spec', 'rules', 'retry', 'attempts'], ['spec', 'rules', 'retry', 'backoff']],
  HTTPRouteRetryBackendTimeout: [['spec', 'rules', 'retry', 'attempts'], ['spec', 'rules', 'timeouts', 'backendRequest']],
  HTTPRouteRetryConnectionError: [['spec', 'rules', 'retry', 'attempts']],
  HTTPRouteRetryCodes: [['spec', 'rules', 'retry', 'codes'], ['spec', 'rules', 'retry', 'attempts']],
  HTTPRouteBackendURLRewrite: [['spec', 'rules', 'backendRefs', 'filters', 'urlRewrite']],
  HTTPRouteCORS: [['spec', 'rules', 'filters', 'cors']],
  HTTPRouteRequestTimeout: [['spec', 'rules', 'timeouts', 'request']],
  HTTPRouteBackendTimeout: [['spec', 'rules', 'timeouts', 'backendRequest']],
  HTTPRouteRequestPercentageMirror: [['spec', 'rules', 'filters', 'requestMirror', 'percent'], ['spec', 'rules', 'filters', 'requestMirror', 'fraction']],
  HTTPRouteResponseHeaderModification: [['spec', 'rules', 'filters', 'responseHeaderModifier']],
  HTTPRouteRequestMirror: [['spec', 'rules', 'filters', 'requestMirror']],
  HTTPRouteHostRewrite: [['spec', 'rules', 'filters', 'urlRewrite', 'hostname']],
  HTTPRoutePathRewrite: [['spec', 'rules', 'filters', 'urlRewrite', 'path']],
  HTTPRouteNamedRouteRule: [['spec', 'rules', 'name']],
  HTTPRouteParentRefPort: [['spec', 'parentRefs', 'port']]
}

/**
 * Fields in the Gateway CRD's v1 schema a feature needs (experimental channel, v1.7.0 on):
 * without them the API server prunes the field and the feature cannot work.
 */
export const GATEWAY_FEATURE_FIELDS: Record<string, string[][]> = {
  GatewayAddressRoutability: [['spec', 'addresses', 'routability']],
  GatewayAddressRoutabilityCluster: [['spec', 'addresses', 'routability']],
  GatewayListenerFilters: [['spec', 'listeners', 'filters', 'requests', 'externalAuth']]
}

/**
 * Kinds a feature needs that the core CRDs lack: the feature is claimed only when the API
 * server serves the kind (its CRD is installed).
 */
export const FEATURE_KINDS: Record<string, string> = {
  ListenerSet: 'ListenerSet',
  GRPCRoute: 'GRPCRoute',
  GRPCRouteNamedRouteRule: 'GRPCRoute',
  GRPCRouteRequestHeaderModifier: 'GRPCRoute',
  TLSRoute: 'TLSRoute',
  TLSRouteModeTerminate: 'TLSRoute',
  TLSRouteModeMixed: 'TLSRoute',
  TCPRoute: 'TCPRoute',
  UDPRoute: 'UDPRoute',
  // A built-in kind, but served only with its feature gate (certificates.k8s.io/v1beta1 in Kubernetes 1.36).
  ClusterTrustBundle: 'ClusterTrustBundle'
}

interface Schema {
  properties?: Record<string, Schema>
  items?: Schema
}

/** The subset of a CustomResourceDefinition read here. */
export interface CustomResourceDefinition {
  spec?: { versions?: Array<{ name: string, served?: boolean, schema?: { openAPIV3Schema?: Schema } }> }
}

function hasField (schema: Schema | undefined, path: string[]): boolean {
  let node = schema
  for (const name of path) {
    while (node?.items !== undefined) node = node.items
    node = node?.properties?.[name]
    if (node === undefined) return false
  }
  return true
}

/**
 * The features to claim given the installed HTTPRoute CRD. Without a CRD (it could not be
 * read), only the features that need no field of FEATURE_FIELDS are claimed. With `kinds`
 * (the served kinds of FEATURE_KINDS), a feature needing a kind not in it is not claimed.
 * `gatewayCrd`, the installed Gateway CRD, likewise for GATEWAY_FEATURE_FIELDS.
 */
export function supportedFeatures (crd: CustomResourceDefinition | undefined, implemented: string[] = SUPPORTED_FEATURES, kinds?: ReadonlySet<string>, gatewayCrd?: CustomResourceDefinition): string[] {
  const schema = v1Schema(crd)
  const gatewaySchema = v1Schema(gatewayCrd)
  return implemented.filter(f => {
    const fields = FEATURE_FIELDS[f]
    const gatewayFields = GATEWAY_FEATURE_FIELDS[f]
    const kind = FEATURE_KINDS[f]
    if (kind !== undefined && kinds !== undefined && !kinds.has(kind)) return false
    if (gatewayFields !== undefined && !gatewayFields.every(path => hasField(gatewaySchema, path))) return false
    return fields === undefined || fields.every(path => hasField(schema, path))
  })
}

function v1Schema (crd: CustomResourceDefinition | undefined): Schema | undefined {
  return (crd?.spec?.versions ?? []).find(v => v.name === 'v1' && v.served !== false)?.schema?.openAPIV3Schema
}
