/**
 * Gateway API → engine IR and statuses. A pure function: cluster objects in, per-Gateway
 * ProxyIR (the same IR a standalone YAML file produces) and the status of every Gateway,
 * listener and HTTPRoute parent out. Golden tests pin it.
 *
 * Semantics follow the Gateway API spec (v1): listeners by port and hostname, allowedRoutes
 * (namespaces From Same/All/Selector, kinds), parentRefs with sectionName and port, hostname
 * intersection, HTTPRoute matches and filters mapped to engine policies, backendRefs to
 * Services resolved through EndpointSlices, cross-namespace references gated by
 * ReferenceGrant, invalid backends kept as `invalid` (their share of traffic gets 500) while
 * the rest of the route works.
 */

import { intersectHostnames, linearRegexProblem, parseDuration } from '@portico/engine'
import { contentVersion, type BackendIR, type BackendRefIR, type BindIR, type ListenerIR, type PolicySetIR, type ProxyIR, type RouteIR, type RouteMatchIR } from '@portico/engine/ir'
import {
  GATEWAY_GROUP, matchesSelector, nsName,
  type BackendRef, type Condition, type EndpointSlice, type Gateway, type GatewayClass, type HTTPHeaderFilter, type HTTPRoute, type HTTPRouteFilter,
  type HTTPCORSFilter, type HTTPPathModifier, type HTTPRequestMirrorFilter, type HTTPRequestRedirectFilter, type HTTPURLRewriteFilter,
  type HTTPRouteRule, type LabelSelector, type Listener, type Namespace, type ParentReference, type PorticoParameters, type ProxyParameters, type ReferenceGrant, type Secret, type Service
} from './gateway-api.ts'
import { ParametersIndex, type ParametersResolution } from './parameters.ts'
import { ReferenceGrants } from './reference-grants.ts'
import { condition } from './conditions.ts'

export interface ClusterState {
  gatewayClasses: GatewayClass[]
  gateways: Gateway[]
  httpRoutes: HTTPRoute[]
  referenceGrants: ReferenceGrant[]
  services: Service[]
  endpointSlices: EndpointSlice[]
  secrets: Secret[]
  namespaces: Namespace[]
  /** PorticoParameters objects (absent when the CRD is not installed). */
  parameters?: PorticoParameters[]
}

export interface TranslateOptions {
  /** GatewayClasses with this spec.controllerName are ours. */
  controllerName: string
  /** Namespaces considered (OR of selectors); empty = all. */
  discoveryNamespaceSelectors?: LabelSelector[]
}

export interface ListenerStatus {
  name: string
  supportedKinds: Array<{ group: string, kind: string }>
  attachedRoutes: number
  conditions: Condition[]
}

export interface GatewayResult {
  namespace: string
  name: string
  generation: number | undefined
  /** Accepted, and (without Programmed, which needs a proxy's ACK) the listeners' state. */
  conditions: Condition[]
  listeners: ListenerStatus[]
  /** Whether the Gateway is accepted at all (a proxy is provisioned only then). */
  accepted: boolean
  ir: ProxyIR
  /** Ports of valid listeners, for the proxy Service. */
  ports: Array<{ name: string, port: number, protocol: string }>
  /** Proxy settings from PorticoParameters (the Gateway's own, else its class's). */
  parameters?: ProxyParameters
}

export interface RouteParentStatus {
  parentRef: ParentReference
  controllerName: string
  conditions: Condition[]
}

export interface RouteResult {
  namespace: string
  name: string
  generation: number | undefined
  parents: RouteParentStatus[]
}

export interface ClassResult {
  name: string
  generation: number | undefined
  conditions: Condition[]
}

export interface TranslationResult {
  classes: ClassResult[]
  gateways: GatewayResult[]
  routes: RouteResult[]
}

interface ListenerState {
  listener: Listener
  ir: ListenerIR | null
  valid: boolean
  kinds: Array<{ group: string, kind: string }>
  conditions: Condition[]
  attached: Set<string>
  tls?: { cert: string, key: string }
}

interface GatewayState {
  gw: Gateway
  listeners: ListenerState[]
  accepted: boolean
  backends: Map<string, BackendIR>
  parameters: ParametersResolution
}

const ROUTE_KIND = { group: GATEWAY_GROUP, kind: 'HTTPRoute' }

export function translate (state: ClusterState, options: TranslateOptions): TranslationResult {
  const namespaces = new Map(state.namespaces.map(n => [n.metadata.name, n]))
  const selectors = options.discoveryNamespaceSelectors ?? []
  const discovered = (ns: string | undefined) => selectors.length === 0 || selectors.some(s => matchesSelector(namespaces.get(ns ?? '')?.metadata.labels, s))
  const grants = new ReferenceGrants(state.referenceGrants.filter(g => discovered(g.metadata.namespace)))
  const services = new Map(state.services.filter(s => discovered(s.metadata.namespace)).map(s => [nsName(s.metadata), s]))
  const slicesByService = new Map<string, EndpointSlice[]>()
  for (const slice of state.endpointSlices) {
    const svc = slice.metadata.labels?.['kubernetes.io/service-name']
    if (svc === undefined) continue
    const key = `${slice.metadata.namespace ?? ''}/${svc}`
    let list = slicesByService.get(key)
    if (list === undefined) slicesByService.set(key, list = [])
    list.push(slice)
  }
  const secrets = new Map(state.secrets.map(s => [nsName(s.metadata), s]))

  const classes = state.gatewayClasses
    .filter(c => c.spec.controllerName === options.controllerName)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
  const ourClasses = new Set(classes.map(c => c.metadata.name))
  const parameters = new ParametersIndex(state.parameters ?? [])
  const classParameters = new Map(classes.map(c => [c.metadata.name, parameters.forClass(c)]))
  const classResults: ClassResult[] = classes.map(c => {
    const params = classParameters.get(c.metadata.name)!
    return {
      name: c.metadata.name,
      generation: c.metadata.generation,
      conditions: ['error' in params
        ? condition('Accepted', false, 'InvalidParameters', params.error, c.metadata.generation)
        : condition('Accepted', true, 'Accepted', 'GatewayClass accepted by the portico controller', c.metadata.generation)]
    }
  })

  // Gateways and their listeners.
  const gateways = new Map<string, GatewayState>()
  for (const gw of [...state.gateways].sort(byName)) {
    if (!ourClasses.has(gw.spec.gatewayClassName) || !discovered(gw.metadata.namespace)) continue
    const gwState = gatewayState(gw, grants, secrets, parameters.forGateway(gw, classParameters.get(gw.spec.gatewayClassName)!))
    gateways.set(nsName(gw.metadata), gwState)
  }

  // Routes: attach to listeners, build IR.
  const routeResults: RouteResult[] = []
  const routes = state.httpRoutes.filter(r => discovered(r.metadata.namespace)).sort(byAge)
  routes.forEach((route, rank) => {
    const parents: RouteParentStatus[] = []
    const resolved = resolveBackends(route, grants, services, slicesByService)
    const unsupported = unsupportedFilter(route) ?? invalidRegex(route)
    for (const parentRef of route.spec.parentRefs ?? []) {
      if ((parentRef.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || (parentRef.kind ?? 'Gateway') !== 'Gateway') continue
      const gwKey = `${parentRef.namespace ?? route.metadata.namespace ?? ''}/${parentRef.name}`
      const gwState = gateways.get(gwKey)
      if (gwState === undefined) continue
      const gen = route.metadata.generation
      const status = (accepted: Condition): RouteParentStatus => ({
        parentRef,
        controllerName: options.controllerName,
        conditions: [accepted, resolved.condition(gen)]
      })
      const candidates = gwState.listeners.filter(l =>
        (parentRef.sectionName === undefined || l.listener.name === parentRef.sectionName) &&
        (parentRef.port === undefined || l.listener.port === parentRef.port))
      if (candidates.length === 0) {
        parents.push(status(condition('Accepted', false, 'NoMatchingParent', parentRef.sectionName !== undefined ? `no listener named ${parentRef.sectionName}${parentRef.port !== undefined ? ` on port ${parentRef.port}` : ''}` : `no listener on port ${parentRef.port ?? '-'}`, gen)))
        continue
      }
      const allowed = candidates.filter(l => l.valid && routeAllowed(l, route, gwState.gw, namespaces))
      if (allowed.length === 0) {
        parents.push(status(condition('Accepted', false, 'NotAllowedByListeners', 'no listener allows this route (namespace or kind)', gen)))
        continue
      }
      const matching = allowed.filter(l => intersectHostnames(l.listener.hostname?.toLowerCase(), (route.spec.hostnames ?? []).map(h => h.toLowerCase())) !== null)
      if (matching.length === 0) {
        parents.push(status(condition('Accepted', false, 'NoMatchingListenerHostname', 'no listener hostname matches the route\'s hostnames', gen)))
        continue
      }
      if (unsupported !== null) {
        parents.push(status(condition('Accepted', false, 'UnsupportedValue', unsupported, gen)))
        continue
      }
      parents.push(status(condition('Accepted', true, 'Accepted', 'Route is accepted', gen)))
      for (const l of matching) {
        l.attached.add(nsName(route.metadata))
        const hostnames = intersectHostnames(l.listener.hostname?.toLowerCase(), (route.spec.hostnames ?? []).map(h => h.toLowerCase()))!
        for (const ir of routeIRs(route, rank, hostnames, resolved)) l.ir!.routes.push(ir)
        for (const b of resolved.backends.values()) gwState.backends.set(b.key, b)
      }
    }
    if (parents.length > 0) {
      routeResults.push({ namespace: route.metadata.namespace ?? '', name: route.metadata.name, generation: route.metadata.generation, parents })
    }
  })

  const gatewayResults: GatewayResult[] = [...gateways.values()].map(g => gatewayResult(g))
  return { classes: classResults, gateways: gatewayResults, routes: routeResults.sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`)) }
}

function byName (a: { metadata: { namespace?: string, name: string } }, b: { metadata: { namespace?: string, name: string } }): number {
  return nsName(a.metadata).localeCompare(nsName(b.metadata))
}

/** Older first, then namespace/name: the Gateway API's tie-break between routes. */
function byAge (a: HTTPRoute, b: HTTPRoute): number {
  const ta = a.metadata.creationTimestamp ?? ''
  const tb = b.metadata.creationTimestamp ?? ''
  return ta < tb ? -1 : ta > tb ? 1 : byName(a, b)
}

function gatewayState (gw: Gateway, grants: ReferenceGrants, secrets: Map<string, Secret>, parameters: ParametersResolution): GatewayState {
  const gen = gw.metadata.generation
  const ns = gw.metadata.namespace ?? ''
  const listeners: ListenerState[] = gw.spec.listeners.map(listener => {
    const conditions: Condition[] = []
    let valid = true
    let kinds: Array<{ group: string, kind: string }> = [ROUTE_KIND]
    let tls: { cert: string, key: string } | undefined
    let resolvedRefs = condition('ResolvedRefs', true, 'ResolvedRefs', 'All references resolved', gen)
    let accepted = condition('Accepted', true, 'Accepted', 'Listener is accepted', gen)
    if (listener.protocol !== 'HTTP' && listener.protocol !== 'HTTPS') {
      valid = false
      kinds = []
      accepted = condition('Accepted', false, 'UnsupportedProtocol', `protocol ${listener.protocol} is not supported (HTTP, HTTPS)`, gen)
    }
    if (listener.allowedRoutes?.kinds !== undefined) {
      const ok = listener.allowedRoutes.kinds.filter(k => (k.group ?? GATEWAY_GROUP) === GATEWAY_GROUP && k.kind === 'HTTPRoute')
      if (ok.length !== listener.allowedRoutes.kinds.length) {
        resolvedRefs = condition('ResolvedRefs', false, 'InvalidRouteKinds', 'only HTTPRoute is supported', gen)
      }
      kinds = valid ? ok.map(() => ROUTE_KIND) : []
    }
    if (valid && listener.protocol === 'HTTPS') {
      const result = listenerTls(gw, listener, grants, secrets)
      if (typeof result === 'string') {
        resolvedRefs = condition('ResolvedRefs', false, result.startsWith('RefNotPermitted') ? 'RefNotPermitted' : 'InvalidCertificateRef', result.replace(/^\w+: /, ''), gen)
        valid = false
      } else {
        tls = result
      }
    }
    conditions.push(accepted, resolvedRefs)
    return { listener, ir: null, valid, kinds, conditions, attached: new Set(), ...(tls !== undefined ? { tls } : {}) }
  })

  // Conflicts: one protocol per port; one listener per (port, hostname).
  const byPort = new Map<number, ListenerState[]>()
  for (const l of listeners) {
    let list = byPort.get(l.listener.port)
    if (list === undefined) byPort.set(l.listener.port, list = [])
    list.push(l)
  }
  for (const group of byPort.values()) {
    const protocols = new Set(group.map(l => l.listener.protocol))
    for (const l of group) {
      let conflicted = condition('Conflicted', false, 'NoConflicts', 'No conflicts', gen)
      if (protocols.size > 1) conflicted = condition('Conflicted', true, 'ProtocolConflict', `port ${l.listener.port} has listeners of several protocols`, gen)
      else if (group.filter(o => (o.listener.hostname ?? '') === (l.listener.hostname ?? '')).length > 1) conflicted = condition('Conflicted', true, 'HostnameConflict', `another listener on port ${l.listener.port} has the same hostname`, gen)
      if (conflicted.status === 'True') l.valid = false
      l.conditions.push(conflicted)
    }
  }
  for (const l of listeners) {
    l.conditions.push(condition('Programmed', l.valid, l.valid ? 'Programmed' : 'Invalid', l.valid ? 'Listener is programmed' : 'Listener is invalid', gen))
    if (l.valid) {
      const ir: ListenerIR = { key: `${ns}/${gw.metadata.name}.${l.listener.name}`, gateway: gw.metadata.name, name: l.listener.name, protocol: l.listener.protocol as 'HTTP' | 'HTTPS', policies: {}, routes: [] }
      if (l.listener.hostname !== undefined) ir.hostname = l.listener.hostname.toLowerCase()
      if (l.tls !== undefined) ir.tls = l.tls
      l.ir = ir
    }
  }
  const accepted = (gw.spec.addresses === undefined || gw.spec.addresses.length === 0) && !('error' in parameters)
  return { gw, listeners, accepted: accepted && listeners.some(l => l.valid), backends: new Map(), parameters }
}

/** The listener's certificate (PEM), or `Reason: message` when it cannot be used. */
function listenerTls (gw: Gateway, listener: Listener, grants: ReferenceGrants, secrets: Map<string, Secret>): { cert: string, key: string } | string {
  if (listener.tls?.mode === 'Passthrough') return 'InvalidCertificateRef: TLS passthrough is not supported'
  const ref = listener.tls?.certificateRefs?.[0]
  if (ref === undefined) return 'InvalidCertificateRef: an HTTPS listener needs a certificateRef'
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Secret') !== 'Secret') return `InvalidCertificateRef: ${ref.kind ?? 'Secret'} is not a supported certificate kind`
  const ns = ref.namespace ?? gw.metadata.namespace ?? ''
  if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: 'Gateway', fromNamespace: gw.metadata.namespace ?? '', toGroup: '', toKind: 'Secret', toNamespace: ns, toName: ref.name })) {
    return `RefNotPermitted: Secret ${ns}/${ref.name} is in another namespace without a ReferenceGrant`
  }
  const secret = secrets.get(`${ns}/${ref.name}`)
  const cert = secret?.data?.['tls.crt']
  const key = secret?.data?.['tls.key']
  if (secret === undefined || cert === undefined || key === undefined) return `InvalidCertificateRef: Secret ${ns}/${ref.name} is missing or has no tls.crt/tls.key`
  const pem = (b64: string) => Buffer.from(b64, 'base64').toString('utf8')
  if (!pem(cert).includes('-----BEGIN') || !pem(key).includes('-----BEGIN')) return `InvalidCertificateRef: Secret ${ns}/${ref.name} does not hold PEM data`
  return { cert: pem(cert), key: pem(key) }
}

function routeAllowed (l: ListenerState, route: HTTPRoute, gw: Gateway, namespaces: Map<string, Namespace>): boolean {
  if (l.kinds.length === 0) return false
  const from = l.listener.allowedRoutes?.namespaces?.from ?? 'Same'
  const routeNs = route.metadata.namespace ?? ''
  if (from === 'Same') return routeNs === (gw.metadata.namespace ?? '')
  if (from === 'All') return true
  return matchesSelector(namespaces.get(routeNs)?.metadata.labels, l.listener.allowedRoutes?.namespaces?.selector ?? {})
}

const SUPPORTED_FILTERS = new Set(['RequestHeaderModifier', 'ResponseHeaderModifier', 'RequestRedirect', 'URLRewrite', 'CORS', 'RequestMirror'])

/** A message when the route uses a filter Portico cannot apply yet, else null. */
function unsupportedFilter (route: HTTPRoute): string | null {
  for (const rule of route.spec.rules ?? []) {
    for (const filters of [rule.filters ?? [], ...(rule.backendRefs ?? []).map(b => b.filters ?? [])]) {
      for (const f of filters) {
        if (!SUPPORTED_FILTERS.has(f.type)) return `filter ${f.type} is not supported yet`
        if (f.type === 'RequestMirror' && filters !== rule.filters) return 'RequestMirror is supported on rules, not on backendRefs'
        const problem = unsupportedFilterValue(f, rule)
        if (problem !== null) return problem
      }
      if (filters.some(f => f.type === 'RequestRedirect') && filters.some(f => f.type === 'URLRewrite')) return 'RequestRedirect and URLRewrite cannot be used together'
    }
  }
  return null
}

/**
 * A RegularExpression path, header or query match the engine cannot run (it runs them on a
 * linear-time RE2 engine: no lookaround, no backreferences), as `field: why`. The route is
 * then not Accepted (UnsupportedValue) rather than pushed to proxies that would refuse it.
 */
function invalidRegex (route: HTTPRoute): string | null {
  for (const [i, rule] of (route.spec.rules ?? []).entries()) {
    for (const [j, m] of (rule.matches ?? []).entries()) {
      const at = `spec.rules[${i}].matches[${j}]`
      const checks: Array<[string, string | undefined]> = [
        [`${at}.path.value`, m.path?.type === 'RegularExpression' ? m.path.value ?? '/' : undefined],
        ...(m.headers ?? []).map((h, k): [string, string | undefined] => [`${at}.headers[${k}].value`, h.type === 'RegularExpression' ? h.value : undefined]),
        ...(m.queryParams ?? []).map((q, k): [string, string | undefined] => [`${at}.queryParams[${k}].value`, q.type === 'RegularExpression' ? q.value : undefined])
      ]
      for (const [field, pattern] of checks) {
        const problem = pattern === undefined ? null : linearRegexProblem(pattern)
        if (problem !== null) return `${field}: ${problem}`
      }
    }
  }
  return null
}

/** Values of RequestRedirect, URLRewrite and CORS the engine does not take (the CRDs' enums allow more in future versions). */
function unsupportedFilterValue (f: HTTPRouteFilter, rule: HTTPRouteRule): string | null {
  const paths: Array<HTTPPathModifier | undefined> = []
  if (f.type === 'RequestRedirect') {
    const r = f.requestRedirect ?? {}
    if (r.scheme !== undefined && r.scheme !== 'http' && r.scheme !== 'https') return `RequestRedirect scheme ${r.scheme} is not supported (http, https)`
    if (r.statusCode !== undefined && !REDIRECT_STATUSES.includes(r.statusCode)) return `RequestRedirect statusCode ${r.statusCode} is not supported (${REDIRECT_STATUSES.join(', ')})`
    paths.push(r.path)
  }
  if (f.type === 'URLRewrite') paths.push(f.urlRewrite?.path)
  for (const p of paths) {
    if (p === undefined) continue
    if (p.type !== 'ReplaceFullPath' && p.type !== 'ReplacePrefixMatch') return `${f.type} path type ${p.type} is not supported (ReplaceFullPath, ReplacePrefixMatch)`
    if (p.type === 'ReplacePrefixMatch' && (rule.matches ?? [{}]).some(m => (m.path?.type ?? 'PathPrefix') !== 'PathPrefix')) {
      return `${f.type} ReplacePrefixMatch needs every match of the rule to be a PathPrefix match`
    }
  }
  return null
}

const REDIRECT_STATUSES = [301, 302, 303, 307, 308]

interface ResolvedBackends {
  /** Per rule, per backendRef: the backend key (valid or invalid). */
  refs: string[][]
  /** Per rule, per RequestMirror filter: the mirror backend's key (valid or invalid). */
  mirrors: string[][]
  backends: Map<string, BackendIR>
  condition(generation: number | undefined): Condition
}

function resolveBackends (route: HTTPRoute, grants: ReferenceGrants, services: Map<string, Service>, slices: Map<string, EndpointSlice[]>): ResolvedBackends {
  const routeNs = route.metadata.namespace ?? ''
  const backends = new Map<string, BackendIR>()
  let failure: { reason: string, message: string } | null = null
  const fail = (reason: string, message: string) => { failure ??= { reason, message } }
  const refs = (route.spec.rules ?? []).map(rule => (rule.backendRefs ?? []).map(ref => {
    const b = resolveBackend(ref, routeNs, grants, services, slices)
    if (b.kind === 'invalid') {
      const [reason, message] = b.invalidReason!.split(': ', 2) as [string, string]
      fail(reason, message)
    }
    backends.set(b.key, b)
    return b.key
  }))
  // RequestMirror backendRefs resolve like any backendRef (ReferenceGrant, Service, port).
  const mirrors = (route.spec.rules ?? []).map(rule => (rule.filters ?? []).filter(f => f.type === 'RequestMirror' && f.requestMirror !== undefined).map(f => {
    const b = resolveBackend(f.requestMirror!.backendRef, routeNs, grants, services, slices)
    if (b.kind === 'invalid') {
      const [reason, message] = b.invalidReason!.split(': ', 2) as [string, string]
      fail(reason, message)
    }
    backends.set(b.key, b)
    return b.key
  }))
  return {
    refs,
    mirrors,
    backends,
    condition: gen => failure === null
      ? condition('ResolvedRefs', true, 'ResolvedRefs', 'All references resolved', gen)
      : condition('ResolvedRefs', false, failure.reason, failure.message, gen)
  }
}

function resolveBackend (ref: BackendRef, routeNs: string, grants: ReferenceGrants, services: Map<string, Service>, slices: Map<string, EndpointSlice[]>): BackendIR {
  const ns = ref.namespace ?? routeNs
  const group = ref.group ?? ''
  const kind = ref.kind ?? 'Service'
  const invalid = (reason: string, message: string): BackendIR => ({
    key: `invalid/${ns}/${ref.name}:${ref.port ?? ''}/${kind}`, kind: 'invalid', name: ref.name, namespace: ns, protocol: 'http', endpoints: [], target: `${ref.name}.${ns}:${ref.port ?? ''}`, invalidReason: `${reason}: ${message}`
  })
  if (group !== '' || kind !== 'Service') return invalid('InvalidKind', `backend kind ${group === '' ? '' : `${group}/`}${kind} is not supported (Service)`)
  if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: 'HTTPRoute', fromNamespace: routeNs, toGroup: '', toKind: 'Service', toNamespace: ns, toName: ref.name })) {
    return invalid('RefNotPermitted', `Service ${ns}/${ref.name} is in another namespace without a ReferenceGrant`)
  }
  const svc = services.get(`${ns}/${ref.name}`)
  if (svc === undefined) return invalid('BackendNotFound', `Service ${ns}/${ref.name} not found`)
  if (ref.port === undefined) return invalid('BackendNotFound', `backendRef to Service ${ns}/${ref.name} needs a port`)
  const port = (svc.spec.ports ?? []).find(p => p.port === ref.port)
  if (port === undefined && svc.spec.type !== 'ExternalName') return invalid('BackendNotFound', `Service ${ns}/${ref.name} has no port ${ref.port}`)
  const endpoints = svc.spec.type === 'ExternalName' && svc.spec.externalName !== undefined
    ? [{ host: svc.spec.externalName, port: ref.port }]
    : endpointsOf(slices.get(`${ns}/${ref.name}`) ?? [], port!)
  return {
    key: `service/${ns}/${ref.name}:${ref.port}`,
    kind: 'service',
    name: ref.name,
    namespace: ns,
    protocol: port?.appProtocol === 'https' ? 'https' : 'http',
    endpoints,
    target: `${ref.name}.${ns}.svc.cluster.local:${ref.port}`
  }
}

/** Ready endpoint addresses of a Service port, through its EndpointSlices. */
function endpointsOf (slices: EndpointSlice[], port: { name?: string, port: number, targetPort?: number | string }): Array<{ host: string, port: number }> {
  const out: Array<{ host: string, port: number }> = []
  const seen = new Set<string>()
  for (const slice of slices.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
    const slicePort = (slice.ports ?? []).find(p => (p.name ?? '') === (port.name ?? '')) ?? (slice.ports?.length === 1 ? slice.ports[0] : undefined)
    const number = slicePort?.port ?? (typeof port.targetPort === 'number' ? port.targetPort : port.port)
    for (const ep of slice.endpoints ?? []) {
      if (ep.conditions?.ready === false) continue
      for (const address of ep.addresses) {
        const key = `${address}:${number}`
        if (seen.has(key)) continue
        seen.add(key)
        out.push({ host: address, port: number })
      }
    }
  }
  return out.sort((a, b) => a.host.localeCompare(b.host) || a.port - b.port)
}

function headerFilter (f: HTTPHeaderFilter): { set?: Record<string, string>, add?: Record<string, string>, remove?: string[] } {
  const out: { set?: Record<string, string>, add?: Record<string, string>, remove?: string[] } = {}
  if (f.set !== undefined && f.set.length > 0) out.set = Object.fromEntries(f.set.map(h => [h.name, h.value]))
  if (f.add !== undefined && f.add.length > 0) out.add = Object.fromEntries(f.add.map(h => [h.name, h.value]))
  if (f.remove !== undefined && f.remove.length > 0) out.remove = f.remove
  return out
}

function pathModifier (p: HTTPPathModifier): { full: string } | { prefix: string } {
  return p.type === 'ReplaceFullPath' ? { full: p.replaceFullPath ?? '/' } : { prefix: p.replacePrefixMatch ?? '' }
}

/** HTTPRequestRedirectFilter → the engine's requestRedirect, field for field (statusCode → status, default 302). */
function redirectPolicy (f: HTTPRequestRedirectFilter): NonNullable<PolicySetIR['requestRedirect']> {
  const ir: NonNullable<PolicySetIR['requestRedirect']> = { status: f.statusCode ?? 302 }
  if (f.scheme === 'http' || f.scheme === 'https') ir.scheme = f.scheme
  if (f.hostname !== undefined) ir.hostname = f.hostname.toLowerCase()
  if (f.port !== undefined) ir.port = f.port
  if (f.path !== undefined) ir.path = pathModifier(f.path)
  return ir
}

/** HTTPURLRewriteFilter → urlRewrite. */
function rewritePolicy (f: HTTPURLRewriteFilter): NonNullable<PolicySetIR['urlRewrite']> {
  const ir: NonNullable<PolicySetIR['urlRewrite']> = {}
  if (f.hostname !== undefined) ir.hostname = f.hostname.toLowerCase()
  if (f.path !== undefined) ir.path = pathModifier(f.path)
  return ir
}

/** HTTPCORSFilter → cors (header names lower-cased; maxAge in seconds as given). */
function corsPolicy (f: HTTPCORSFilter): NonNullable<PolicySetIR['cors']> {
  const ir: NonNullable<PolicySetIR['cors']> = {
    allowOrigins: f.allowOrigins ?? [],
    allowMethods: f.allowMethods ?? [],
    allowHeaders: (f.allowHeaders ?? []).map(h => h.toLowerCase()),
    exposeHeaders: (f.exposeHeaders ?? []).map(h => h.toLowerCase()),
    allowCredentials: f.allowCredentials ?? false
  }
  if (f.maxAge !== undefined) ir.maxAge = f.maxAge
  return ir
}

function filterPolicies (filters: HTTPRouteFilter[] | undefined): PolicySetIR {
  const policies: Record<string, unknown> = {}
  for (const f of filters ?? []) {
    if (f.type === 'RequestHeaderModifier' && f.requestHeaderModifier !== undefined) policies.requestHeaderModifier = headerFilter(f.requestHeaderModifier)
    if (f.type === 'ResponseHeaderModifier' && f.responseHeaderModifier !== undefined) policies.responseHeaderModifier = headerFilter(f.responseHeaderModifier)
    if (f.type === 'RequestRedirect') policies.requestRedirect = redirectPolicy(f.requestRedirect ?? {})
    if (f.type === 'URLRewrite') policies.urlRewrite = rewritePolicy(f.urlRewrite ?? {})
    if (f.type === 'CORS' && f.cors !== undefined) policies.cors = corsPolicy(f.cors)
  }
  return policies as PolicySetIR
}

function routeIRs (route: HTTPRoute, rank: number, hostnames: string[], resolved: ResolvedBackends): RouteIR[] {
  const ns = route.metadata.namespace ?? ''
  return (route.spec.rules ?? [{}] as HTTPRouteRule[]).map((rule, i) => {
    const matches: RouteMatchIR[] = (rule.matches ?? [{}]).map(m => {
      const type = m.path?.type ?? 'PathPrefix'
      const value = m.path?.value ?? '/'
      const match: RouteMatchIR = {
        path: { kind: type === 'Exact' ? 'exact' : type === 'RegularExpression' ? 'regex' : 'prefix', value },
        headers: (m.headers ?? []).map(h => ({ name: h.name.toLowerCase(), kind: h.type === 'RegularExpression' ? 'regex' : 'exact', value: h.value })),
        query: (m.queryParams ?? []).map(q => ({ name: q.name, kind: q.type === 'RegularExpression' ? 'regex' : 'exact', value: q.value }))
      }
      if (m.method !== undefined) match.method = m.method
      return match
    })
    const backends: BackendRefIR[] = (rule.backendRefs ?? []).map((ref, j) => ({
      backend: resolved.refs[i]![j]!,
      weight: ref.weight ?? 1,
      policies: filterPolicies(ref.filters)
    }))
    const ir: RouteIR = {
      key: `${ns}/${route.metadata.name}.${rule.name ?? i}`,
      name: route.metadata.name,
      namespace: ns,
      ruleName: rule.name ?? String(i),
      hostnames,
      matches,
      policies: filterPolicies(rule.filters),
      backends,
      order: rank * 1000 + i
    }
    const timeouts: { requestMs?: number, backendRequestMs?: number } = {}
    if (rule.timeouts?.request !== undefined && parseDuration(rule.timeouts.request) > 0) timeouts.requestMs = parseDuration(rule.timeouts.request)
    if (rule.timeouts?.backendRequest !== undefined && parseDuration(rule.timeouts.backendRequest) > 0) timeouts.backendRequestMs = parseDuration(rule.timeouts.backendRequest)
    if (Object.keys(timeouts).length > 0) ir.timeouts = timeouts
    const mirrors = (rule.filters ?? []).filter(f => f.type === 'RequestMirror' && f.requestMirror !== undefined)
    if (mirrors.length > 0) ir.mirrors = mirrors.map((f, j) => ({ backend: resolved.mirrors[i]![j]!, percentage: mirrorPercentage(f.requestMirror!) }))
    if (rule.retry !== undefined) {
      // Gateway API HTTPRouteRetry one to one (attempts = retries); the engine's defaults where unset.
      ir.retry = {
        attempts: rule.retry.attempts ?? 1,
        codes: [...new Set(rule.retry.codes ?? [500, 502, 503, 504])].sort((a, b) => a - b),
        backoffMs: rule.retry.backoff !== undefined ? parseDuration(rule.retry.backoff) : 25
      }
    }
    return ir
  })
}

/** RequestMirror percent, or fraction as a percentage (denominator default 100); neither = 100. */
function mirrorPercentage (m: HTTPRequestMirrorFilter): number {
  if (m.percent !== undefined) return Math.min(100, Math.max(0, m.percent))
  if (m.fraction !== undefined) {
    const d = m.fraction.denominator ?? 100
    return d > 0 ? Math.min(100, Math.max(0, (m.fraction.numerator / d) * 100)) : 0
  }
  return 100
}

function gatewayResult (g: GatewayState): GatewayResult {
  const { gw } = g
  const gen = gw.metadata.generation
  const binds = new Map<number, BindIR>()
  for (const l of g.listeners) {
    if (l.ir === null) continue
    let bind = binds.get(l.listener.port)
    if (bind === undefined) {
      bind = { key: `0.0.0.0:${l.listener.port}`, address: '0.0.0.0', port: l.listener.port, protocol: l.ir.protocol, listeners: [] }
      if (l.tls !== undefined) bind.tls = l.tls
      binds.set(l.listener.port, bind)
    }
    bind.listeners.push(l.ir)
  }
  const ir: ProxyIR = { version: '', binds: [...binds.values()].sort((a, b) => a.port - b.port), backends: [...g.backends.values()].sort((a, b) => a.key.localeCompare(b.key)) }
  ir.version = contentVersion(ir)
  const invalid = g.listeners.filter(l => !l.valid).length
  const conditions: Condition[] = []
  if ('error' in g.parameters) {
    conditions.push(condition('Accepted', false, 'InvalidParameters', g.parameters.error, gen))
  } else if (gw.spec.addresses !== undefined && gw.spec.addresses.length > 0) {
    conditions.push(condition('Accepted', false, 'UnsupportedAddress', 'spec.addresses is not supported: the address comes from the proxy Service', gen))
  } else if (invalid === 0) {
    conditions.push(condition('Accepted', true, 'Accepted', 'Gateway is accepted', gen))
  } else {
    conditions.push(condition('Accepted', g.accepted, 'ListenersNotValid', `${invalid} of ${g.listeners.length} listeners are not valid`, gen))
  }
  return {
    namespace: gw.metadata.namespace ?? '',
    name: gw.metadata.name,
    generation: gen,
    conditions,
    listeners: g.listeners.map(l => ({ name: l.listener.name, supportedKinds: l.kinds, attachedRoutes: l.attached.size, conditions: l.conditions })),
    accepted: g.accepted,
    ir,
    ports: [...new Set(g.listeners.filter(l => l.valid).map(l => l.listener.port))].sort((a, b) => a - b).map(port => ({ name: `port-${port}`, port, protocol: 'TCP' })),
    ...('parameters' in g.parameters && g.parameters.parameters !== undefined ? { parameters: g.parameters.parameters } : {})
  }
}
