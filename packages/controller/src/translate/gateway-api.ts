/**
 * The parts of Gateway API (v1) and core Kubernetes objects the translation reads, as plain
 * types. Objects arrive from informers as JSON; only these fields are used.
 */

import type { MeshParameters } from './mesh.ts'
import type { HTTPExternalAuthFilter } from './external-auth.ts'

export interface ObjectMeta {
  name: string
  namespace?: string
  uid?: string
  generation?: number
  resourceVersion?: string
  creationTimestamp?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

export interface Condition {
  type: string
  status: 'True' | 'False' | 'Unknown'
  reason: string
  message: string
  observedGeneration?: number
  lastTransitionTime?: string
}

export interface GatewayClass {
  metadata: ObjectMeta
  spec: { controllerName: string, parametersRef?: { group: string, kind: string, name: string, namespace?: string } }
  status?: { conditions?: Condition[] }
}

export interface RouteNamespaces {
  from?: 'All' | 'Same' | 'Selector'
  selector?: LabelSelector
}

export interface Listener {
  name: string
  hostname?: string
  port: number
  protocol: string
  tls?: { mode?: 'Terminate' | 'Passthrough', certificateRefs?: Array<{ group?: string, kind?: string, name: string, namespace?: string }>, options?: Record<string, string> }
  allowedRoutes?: { namespaces?: RouteNamespaces, kinds?: Array<{ group?: string, kind: string }> }
  /** Gateway API v1.7.0 pre-routing filters (experimental channel): ExternalAuth ones are served (gateways.ts listenerFilters). */
  filters?: { requests?: Array<{ type: string, externalAuth?: HTTPExternalAuthFilter, extensionRef?: { group: string, kind: string, name: string } }> }
}

export interface Gateway {
  metadata: ObjectMeta
  spec: { gatewayClassName: string, listeners: Listener[], addresses?: Array<{ type?: string, value?: string, routability?: string }>, infrastructure?: { labels?: Record<string, string>, annotations?: Record<string, string>, parametersRef?: { group: string, kind: string, name: string } }, allowedListeners?: AllowedListeners }
  status?: unknown
}

export interface ParentReference {
  group?: string
  kind?: string
  namespace?: string
  name: string
  sectionName?: string
  port?: number
}

export interface HTTPHeaderMatch { type?: 'Exact' | 'RegularExpression', name: string, value: string }
export interface HTTPQueryParamMatch { type?: 'Exact' | 'RegularExpression', name: string, value: string }

export interface HTTPRouteMatch {
  path?: { type?: 'Exact' | 'PathPrefix' | 'RegularExpression', value?: string }
  headers?: HTTPHeaderMatch[]
  queryParams?: HTTPQueryParamMatch[]
  method?: string
}

export interface HTTPHeaderFilter {
  set?: Array<{ name: string, value: string }>
  add?: Array<{ name: string, value: string }>
  remove?: string[]
}

export interface HTTPPathModifier {
  type: 'ReplaceFullPath' | 'ReplacePrefixMatch' | (string & {})
  replaceFullPath?: string
  replacePrefixMatch?: string
}

export interface HTTPRequestRedirectFilter {
  scheme?: string
  hostname?: string
  path?: HTTPPathModifier
  port?: number
  statusCode?: number
}

export interface HTTPURLRewriteFilter {
  hostname?: string
  path?: HTTPPathModifier
}

export interface HTTPCORSFilter {
  allowOrigins?: string[]
  allowMethods?: string[]
  allowHeaders?: string[]
  exposeHeaders?: string[]
  maxAge?: number
  allowCredentials?: boolean
}

export interface HTTPRouteFilter {
  type: string
  requestHeaderModifier?: HTTPHeaderFilter
  responseHeaderModifier?: HTTPHeaderFilter
  requestRedirect?: HTTPRequestRedirectFilter
  urlRewrite?: HTTPURLRewriteFilter
  requestMirror?: HTTPRequestMirrorFilter
  cors?: HTTPCORSFilter
  /** LocalObjectReference: a custom filter of the implementation's own kinds (Portico defines none). */
  extensionRef?: { group?: string, kind?: string, name?: string }
}

/** Gateway API HTTPRequestMirrorFilter: percent (0-100) or fraction (numerator/denominator, default 100); neither = all requests. */
export interface HTTPRequestMirrorFilter {
  backendRef: Omit<BackendRef, 'weight' | 'filters'>
  percent?: number
  fraction?: { numerator: number, denominator?: number }
}

export interface BackendRef {
  group?: string
  kind?: string
  name: string
  namespace?: string
  port?: number
  weight?: number
  filters?: HTTPRouteFilter[]
}

export interface HTTPRouteRule {
  name?: string
  matches?: HTTPRouteMatch[]
  filters?: HTTPRouteFilter[]
  backendRefs?: BackendRef[]
  timeouts?: { request?: string, backendRequest?: string }
  /** Gateway API HTTPRouteRetry (v1.2+): attempts = retries after the first try. */
  retry?: { codes?: number[], attempts?: number, backoff?: string }
  /** Experimental, deprecated (GEP-4894): not supported, so a rule setting it is refused (routes.ts unsupportedRuleField). */
  sessionPersistence?: unknown
}

export interface HTTPRoute {
  /**
   * Absent for an HTTPRoute; another kind for a route translated as one: a GRPCRoute
   * (grpc-routes.ts), or a TLSRoute / TCPRoute (stream-routes.ts: rules of backendRefs only).
   */
  kind?: 'HTTPRoute' | 'GRPCRoute' | 'TLSRoute' | 'TCPRoute' | 'UDPRoute'
  metadata: ObjectMeta
  spec: { parentRefs?: ParentReference[], hostnames?: string[], rules?: HTTPRouteRule[] }
  status?: unknown
}

/** A TLSRoute, TCPRoute or UDPRoute (gateway.networking.k8s.io/v1): backends for whole connections (UDP: per client flow). */
export interface StreamRoute {
  metadata: ObjectMeta
  spec: { parentRefs?: ParentReference[], hostnames?: string[], rules?: Array<{ name?: string, backendRefs?: BackendRef[] }> }
  status?: unknown
}

/** A GRPCRoute (gateway.networking.k8s.io/v1). */
export interface GRPCRoute {
  metadata: ObjectMeta
  spec: {
    parentRefs?: ParentReference[]
    hostnames?: string[]
    rules?: Array<{
      name?: string
      matches?: Array<{ method?: { type?: 'Exact' | 'RegularExpression', service?: string, method?: string }, headers?: HTTPHeaderMatch[] }>
      filters?: HTTPRouteFilter[]
      backendRefs?: BackendRef[]
      sessionPersistence?: unknown
    }>
  }
  status?: unknown
}

export interface ReferenceGrant {
  metadata: ObjectMeta
  spec: {
    from: Array<{ group: string, kind: string, namespace: string }>
    to: Array<{ group: string, kind: string, name?: string }>
  }
}

export interface LabelSelector {
  matchLabels?: Record<string, string>
  matchExpressions?: Array<{ key: string, operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist', values?: string[] }>
}

export interface Namespace {
  metadata: ObjectMeta
}

export interface ServicePort {
  name?: string
  port: number
  targetPort?: number | string
  protocol?: string
  appProtocol?: string
}

export interface Service {
  metadata: ObjectMeta
  spec: { type?: string, clusterIP?: string, clusterIPs?: string[], ports?: ServicePort[], externalName?: string }
  status?: { loadBalancer?: { ingress?: Array<{ ip?: string, hostname?: string }> } }
}

export interface EndpointSlice {
  metadata: ObjectMeta
  addressType?: string
  endpoints?: Array<{ addresses: string[], conditions?: { ready?: boolean, serving?: boolean, terminating?: boolean }, targetRef?: { kind?: string, name?: string, namespace?: string } }>
  ports?: Array<{ name?: string, port?: number, protocol?: string }>
}

export interface Secret {
  metadata: ObjectMeta
  type?: string
  data?: Record<string, string>
}

export interface ConfigMap {
  metadata: ObjectMeta
  data?: Record<string, string>
}

/** Gateway API BackendTLSPolicy (v1): how Gateways reach the targeted Services over TLS. */
export interface BackendTLSPolicy {
  metadata: ObjectMeta
  spec: {
    targetRefs: Array<{ group: string, kind: string, name: string, sectionName?: string }>
    validation: {
      caCertificateRefs?: Array<{ group: string, kind: string, name: string }>
      wellKnownCACertificates?: string
      hostname: string
      subjectAltNames?: Array<{ type: 'Hostname' | 'URI', hostname?: string, uri?: string }>
    }
    options?: Record<string, string>
  }
  status?: unknown
}

/** Proxy settings of a PorticoParameters object (the chart's CRD; unknown fields are kept). */
export interface ProxyParameters {
  replicas?: number
  image?: { registry?: string, repository?: string, tag?: string, pullPolicy?: string }
  service?: { type?: string }
  env?: Array<Record<string, unknown>>
  resources?: Record<string, unknown>
  logLevel?: string
  /** Serving event loops per proxy pod (the proxy's `WORKERS`: its main thread and workers − 1 worker threads); unset: from the container's CPU (deployer/workers.ts). */
  workers?: number
  /** The proxy's `config.tracing` (OpenTelemetry), as in a standalone config file. */
  tracing?: Record<string, unknown>
  /** The proxy's `config.accessLog` (fields added with CEL, removed, OTLP logs). */
  accessLog?: Record<string, unknown>
  /** Istio ambient mesh: opt in or out, and overrides of the chart's `mesh.*` (translate/mesh.ts). */
  mesh?: MeshParameters
}

export interface PorticoParameters {
  metadata: ObjectMeta
  spec?: ProxyParameters
}

/** Gateway spec.allowedListeners: which namespaces' ListenerSets may attach (absent: none). */
export interface AllowedListeners {
  namespaces?: { from?: 'All' | 'Same' | 'Selector' | 'None', selector?: LabelSelector }
}

/** A ListenerSet (GEP-1713, gateway.networking.k8s.io/v1): more listeners for a parent Gateway. */
export interface ListenerSet {
  metadata: ObjectMeta
  spec: { parentRef: { group?: string, kind?: string, name: string, namespace?: string }, listeners?: Listener[] }
  status?: unknown
}

export const GATEWAY_GROUP = 'gateway.networking.k8s.io'

export function nsName (m: ObjectMeta): string {
  return `${m.namespace ?? ''}/${m.name}`
}

/** Does a label set satisfy a selector (matchLabels AND matchExpressions)? */
export function matchesSelector (labels: Record<string, string> | undefined, selector: LabelSelector | undefined): boolean {
  if (selector === undefined) return true
  const l = labels ?? {}
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (l[k] !== v) return false
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(l, e.key)
    switch (e.operator) {
      case 'In': if (!has || !(e.values ?? []).includes(l[e.key]!)) return false; break
      case 'NotIn': if (has && (e.values ?? []).includes(l[e.key]!)) return false; break
      case 'Exists': if (!has) return false; break
      case 'DoesNotExist': if (has) return false; break
      default: return false
    }
  }
  return true
}
