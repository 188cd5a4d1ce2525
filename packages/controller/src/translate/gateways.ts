/**
 * Gateways and their listeners: which listeners are valid (protocol, TLS certificate,
 * conflicts on a port), which routes each admits (allowedRoutes), and the IR of each valid
 * one. Routes attach to listeners afterwards (routes.ts); gatewayIR() then groups the
 * listeners into binds by port.
 */

import { contentVersion, MAX_LISTENER_FILTERS, type BackendIR, type BindIR, type ClientValidationIR, type FrontendIR, type ListenerFilterIR, type ListenerIR, type ProxyIR, type TlsServerIR } from '@portico/engine/ir'
import { serverTlsOptionsToIR } from '@portico/engine/config'
import { GATEWAY_GROUP, matchesSelector, type Condition, type Gateway, type HTTPRoute, type Listener, type Namespace, type Secret, type Service } from './gateway-api.ts'
import { externalAuthIR } from './external-auth.ts'
import type { ParametersResolution } from './parameters.ts'
import { requestedAddresses, type RequestedAddresses } from './addresses.ts'
import type { ReferenceGrants } from './reference-grants.ts'
import { condition } from './conditions.ts'
import { frontendValidation } from './frontend-tls.ts'
import type { ClusterTrustBundle } from './ca-certificates.ts'

export interface ListenerState {
  listener: Listener
  /** The listener's IR; null when it is not programmed (not valid). */
  ir: ListenerIR | null
  /** Accepted, refs resolved and no conflict: programmed on the proxy. */
  valid: boolean
  /**
   * Routes can attach (and count in attachedRoutes): a supported protocol and no conflict.
   * Unresolved refs (a missing certificate) do not prevent attachment — the spec counts
   * attached routes from allowedRoutes and parentRefs alone — but such a listener is not
   * valid, so it stays out of the IR: no HTTPS is served without its certificate.
   */
  attachable: boolean
  kinds: Array<{ group: string, kind: string }>
  conditions: Condition[]
  attached: Set<string>
  /**
   * The hostnames each attached HTTPRoute and GRPCRoute serves here (routes.ts): the two kinds
   * may not share a hostname on a listener, the older route keeps it.
   */
  served?: Array<{ kind: 'HTTPRoute' | 'GRPCRoute', route: string, hostnames: string[] }>
  tls?: TlsServerIR
  /** Client certificate validation of the listener's port (Gateway spec.tls.frontend; frontend-tls.ts). */
  clientValidation?: ClientValidationIR
  /** Listener filters (filters.requests) as the engine runs them; absent: none. */
  filters?: ListenerFilterIR[]
}

export interface GatewayState {
  gw: Gateway
  listeners: ListenerState[]
  /** Listeners of the ListenerSets attached to the Gateway (listener-sets.ts): served on its proxies too. */
  listenerSetListeners?: ListenerState[]
  accepted: boolean
  backends: Map<string, BackendIR>
  parameters: ParametersResolution
  /** spec.addresses: the static IPs asked for, or why they cannot be (addresses.ts). */
  addresses: RequestedAddresses
  /** Client-connection settings from PorticoPolicies' `frontend` (portico-policies.ts). */
  frontend?: GatewayFrontend
}

/**
 * What a PorticoPolicy's `frontend` gives a Gateway: its HTTP listeners' FrontendIR and the
 * settings of each port (read before a Host header could pick a listener).
 */
export interface GatewayFrontend {
  listener?: FrontendIR
  requestHeadersTimeoutMs?: number
  http2?: boolean
}

/** Route kinds HTTP and HTTPS listeners take. */
const HTTP_ROUTE_KINDS = [{ group: GATEWAY_GROUP, kind: 'HTTPRoute' }, { group: GATEWAY_GROUP, kind: 'GRPCRoute' }]

/** Route kinds by listener protocol. */
function routeKindsOf (protocol: string): Array<{ group: string, kind: string }> {
  if (protocol === 'HTTP' || protocol === 'HTTPS') return HTTP_ROUTE_KINDS.map(k => ({ ...k }))
  if (protocol === 'TLS') return [{ group: GATEWAY_GROUP, kind: 'TLSRoute' }]
  if (protocol === 'TCP') return [{ group: GATEWAY_GROUP, kind: 'TCPRoute' }]
  if (protocol === 'UDP') return [{ group: GATEWAY_GROUP, kind: 'UDPRoute' }]
  return []
}

/**
 * The ports of the proxies' Service (and containers) for these listeners: TCP for every
 * protocol but UDP, whose ports are UDP (named apart, as a port may carry both).
 */
export function servicePorts (listeners: ListenerState[]): Array<{ name: string, port: number, protocol: string }> {
  const tcp = new Set<number>()
  const udp = new Set<number>()
  for (const l of listeners) (l.listener.protocol === 'UDP' ? udp : tcp).add(l.listener.port)
  return [
    ...[...tcp].map(port => ({ name: `port-${port}`, port, protocol: 'TCP' })),
    ...[...udp].map(port => ({ name: `udp-${port}`, port, protocol: 'UDP' }))
  ].sort((a, b) => a.port - b.port || a.protocol.localeCompare(b.protocol))
}

/** Listener `tls.options` Portico reads (the Gateway API leaves their names to implementations). */
export const TLS_OPTIONS = { minVersion: 'portico.dev/min-tls-version', maxVersion: 'portico.dev/max-tls-version', cipherSuites: 'portico.dev/cipher-suites' } as const

/**
 * The listener's TLS versions and cipher suites from its `tls.options`, as the standalone
 * `minTLSVersion`, `maxTLSVersion` and `cipherSuites` (comma-separated) mean them, checked by
 * the same converter; why they cannot be used, or null. Unknown `portico.dev/` options are
 * refused; other prefixes belong to other implementations and are left alone.
 */
function applyTlsOptions (listener: Listener, tls: TlsServerIR): string | null {
  const options = listener.tls?.options ?? {}
  const known = new Set<string>(Object.values(TLS_OPTIONS))
  for (const key of Object.keys(options)) if (key.startsWith('portico.dev/') && !known.has(key)) return `tls.options: unknown option ${key} (known: ${[...known].join(', ')})`
  const version = (key: string): '1.2' | '1.3' | undefined | null => {
    const v = options[key]
    return v === undefined ? undefined : v === '1.2' || v === '1.3' ? v : null
  }
  const min = version(TLS_OPTIONS.minVersion)
  const max = version(TLS_OPTIONS.maxVersion)
  if (min === null || max === null) return `tls.options: ${min === null ? TLS_OPTIONS.minVersion : TLS_OPTIONS.maxVersion} must be "1.2" or "1.3"`
  const suites = options[TLS_OPTIONS.cipherSuites]?.split(',').map(s => s.trim()).filter(s => s !== '')
  const problems: string[] = []
  const ok = serverTlsOptionsToIR({ ...(min !== undefined ? { minTLSVersion: min } : {}), ...(max !== undefined ? { maxTLSVersion: max } : {}), ...(suites !== undefined ? { cipherSuites: suites } : {}) }, tls, [], (_path, message) => { problems.push(message) })
  return ok ? null : `tls.options: ${problems.join('; ')}`
}

/** A TLS listener's mode: Terminate unless it says Passthrough (the Gateway API's default). */
export function tlsModeOf (listener: Listener): 'Terminate' | 'Passthrough' {
  return listener.tls?.mode === 'Passthrough' ? 'Passthrough' : 'Terminate'
}

export function gatewayState (gw: Gateway, grants: ReferenceGrants, secrets: Map<string, Secret>, parameters: ParametersResolution, configMaps: ReadonlyMap<string, { data?: Record<string, string> }> = new Map(), trustBundles?: ReadonlyMap<string, ClusterTrustBundle>, services: ReadonlyMap<string, Service> = new Map()): GatewayState {
  const gen = gw.metadata.generation
  const ns = gw.metadata.namespace ?? ''
  const listeners: ListenerState[] = gw.spec.listeners.map(listener => listenerState({ kind: 'Gateway', namespace: ns, generation: gen }, listener, grants, secrets, services))

  applyFrontendValidation(gw, listeners, grants, configMaps, trustBundles)

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
      if (conflicted.status === 'True') {
        l.valid = false
        l.attachable = false
      }
      l.conditions.push(conflicted)
    }
  }
  for (const l of listeners) {
    l.conditions.push(condition('Programmed', l.valid, l.valid ? 'Programmed' : 'Invalid', l.valid ? 'Listener is programmed' : 'Listener is invalid', gen))
    if (l.valid) {
      const ir: ListenerIR = { key: `${ns}/${gw.metadata.name}.${l.listener.name}`, gateway: gw.metadata.name, name: l.listener.name, protocol: l.listener.protocol as ListenerIR['protocol'], policies: {}, routes: [] }
      if (l.listener.hostname !== undefined && l.listener.protocol !== 'TCP' && l.listener.protocol !== 'UDP') ir.hostname = l.listener.hostname.toLowerCase()
      if (l.tls !== undefined) ir.tls = l.tls
      if (l.filters !== undefined) ir.filters = { requests: l.filters }
      if (l.listener.protocol === 'TLS') ir.tlsMode = tlsModeOf(l.listener)
      if (l.listener.protocol === 'TLS' || l.listener.protocol === 'TCP' || l.listener.protocol === 'UDP') ir.streamRoutes = []
      l.ir = ir
    }
  }
  const addresses = requestedAddresses(gw)
  const accepted = !('error' in addresses) && !('error' in parameters)
  return { gw, listeners, accepted: accepted && listeners.some(l => l.valid), backends: new Map(), parameters, addresses }
}

/**
 * One listener's own state — protocol, allowedRoutes kinds, TLS certificate — before
 * conflicts are looked at. `owner` is the object declaring it (a Gateway, or a ListenerSet:
 * the certificate's ReferenceGrant must name that kind and namespace).
 */
export function listenerState (owner: { kind: 'Gateway' | 'ListenerSet', namespace: string, generation: number | undefined }, listener: Listener, grants: ReferenceGrants, secrets: Map<string, Secret>, services: ReadonlyMap<string, Service> = new Map()): ListenerState {
  const gen = owner.generation
  const conditions: Condition[] = []
  let valid = true
  let kinds: Array<{ group: string, kind: string }> = routeKindsOf(listener.protocol)
  let tls: TlsServerIR | undefined
  let resolvedRefs = condition('ResolvedRefs', true, 'ResolvedRefs', 'All references resolved', gen)
  let accepted = condition('Accepted', true, 'Accepted', 'Listener is accepted', gen)
  const offered = kinds
  if (offered.length === 0) {
    valid = false
    accepted = condition('Accepted', false, 'UnsupportedProtocol', `protocol ${listener.protocol} is not supported (HTTP, HTTPS, TLS, TCP, UDP)`, gen)
  }
  // Listener filters (Gateway API v1.7.0, GatewayListenerFilters): ExternalAuth entries run
  // in order before route matching (engine pipeline/listener-filters.ts). A listener whose
  // filters cannot all be served is not served: without them it would skip the
  // authentication they ask for (fail closed).
  let filters: ListenerFilterIR[] | undefined
  const requests = listener.filters?.requests ?? []
  if (valid && requests.length > 0) {
    const result = listenerFilters(owner, listener, grants, services)
    if ('filters' in result) filters = result.filters
    else {
      valid = false
      if (result.resolvedRefs) resolvedRefs = condition('ResolvedRefs', false, result.reason, result.message, gen)
      else accepted = condition('Accepted', false, result.reason, result.message, gen)
    }
  }
  if (listener.allowedRoutes?.kinds !== undefined) {
    const ok = listener.allowedRoutes.kinds.filter(k => valid && (k.group ?? GATEWAY_GROUP) === GATEWAY_GROUP && offered.some(h => h.kind === k.kind))
    if (ok.length !== listener.allowedRoutes.kinds.length) {
      resolvedRefs = condition('ResolvedRefs', false, 'InvalidRouteKinds', `${listener.protocol} listeners take ${offered.map(k => k.kind).join(' and ')}`, gen)
    }
    kinds = valid ? ok.map(k => ({ group: GATEWAY_GROUP, kind: k.kind })) : []
  }
  // A TLS listener that terminates needs its certificate, as an HTTPS one does.
  if (valid && (listener.protocol === 'HTTPS' || (listener.protocol === 'TLS' && tlsModeOf(listener) === 'Terminate'))) {
    const result = listenerTls(owner, listener, grants, secrets)
    if (typeof result === 'string') {
      resolvedRefs = condition('ResolvedRefs', false, result.startsWith('RefNotPermitted') ? 'RefNotPermitted' : 'InvalidCertificateRef', result.replace(/^\w+: /, ''), gen)
      valid = false
    } else {
      tls = result
      const problem = applyTlsOptions(listener, tls)
      if (problem !== null) {
        accepted = condition('Accepted', false, 'UnsupportedValue', problem, gen)
        valid = false
      }
    }
  }
  conditions.push(accepted, resolvedRefs)
  return { listener, ir: null, valid, attachable: kinds.length > 0, kinds, conditions, attached: new Set(), ...(tls !== undefined ? { tls } : {}), ...(filters !== undefined ? { filters } : {}) }
}

/**
 * A listener's filters.requests as the engine's listener filters, or why not: an
 * ExtensionRef (Portico has no pre-routing extension kind), a protocol without a visible
 * HTTP request, or an ExternalAuth backendRef that does not resolve (ResolvedRefs).
 */
function listenerFilters (owner: { kind: 'Gateway' | 'ListenerSet', namespace: string }, listener: Listener, grants: ReferenceGrants, services: ReadonlyMap<string, Service>): { filters: ListenerFilterIR[] } | { reason: string, message: string, resolvedRefs: boolean } {
  const requests = listener.filters?.requests ?? []
  if (listener.protocol !== 'HTTP' && listener.protocol !== 'HTTPS') return { reason: 'UnsupportedValue', message: `listener filters apply to HTTP and HTTPS listeners, not ${listener.protocol}`, resolvedRefs: false }
  if (requests.length > MAX_LISTENER_FILTERS) return { reason: 'UnsupportedValue', message: `at most ${MAX_LISTENER_FILTERS} listener filters`, resolvedRefs: false }
  const filters: ListenerFilterIR[] = []
  for (const [i, f] of requests.entries()) {
    if (f.type === 'ExtensionRef') {
      return { reason: 'UnsupportedValue', message: `filters.requests[${i}]: ExtensionRef listener filters are not supported (Portico has no pre-routing extension kind; use ExternalAuth)`, resolvedRefs: false }
    }
    if (f.type !== 'ExternalAuth' || f.externalAuth === undefined) return { reason: 'UnsupportedValue', message: `filters.requests[${i}]: type ${JSON.stringify(f.type)} is not supported (ExternalAuth)`, resolvedRefs: false }
    const ir = externalAuthIR(f.externalAuth, owner, grants, services)
    if ('reason' in ir) return { reason: ir.reason, message: `filters.requests[${i}]: ${ir.message}`, resolvedRefs: ir.reason !== 'UnsupportedValue' }
    filters.push({ extAuthz: ir })
  }
  return { filters }
}

/**
 * Client certificate validation (spec.tls.frontend) on the Gateway's HTTPS listeners: a CA ref
 * that does not resolve sets ResolvedRefs False on every HTTPS listener of the port; when none
 * resolves the listeners are not accepted (NoValidCACertificate) and stay out of the IR, so
 * the port never serves without the validation asked for.
 */
function applyFrontendValidation (gw: Gateway, listeners: ListenerState[], grants: ReferenceGrants, configMaps: ReadonlyMap<string, { data?: Record<string, string> }>, trustBundles: ReadonlyMap<string, ClusterTrustBundle> | undefined): void {
  const gen = gw.metadata.generation
  for (const l of listeners) {
    if (l.listener.protocol !== 'HTTPS') continue
    const v = frontendValidation(gw, l.listener.port, grants, configMaps, trustBundles)
    if (v === undefined) continue
    if (v.ir !== undefined) l.clientValidation = v.ir
    if (v.problem === undefined) continue
    const replace = (c: Condition) => { l.conditions = l.conditions.map(o => o.type === c.type ? c : o) }
    // A certificate problem found first keeps its own reason.
    if (l.conditions.find(c => c.type === 'ResolvedRefs')?.status !== 'False') replace(condition('ResolvedRefs', false, v.problem.reason, v.problem.message, gen))
    if (v.ir === undefined) {
      replace(condition('Accepted', false, 'NoValidCACertificate', 'none of the client CA certificate refs of the port is usable', gen))
      l.valid = false
    }
  }
}

/** The listener's certificate (PEM), or `Reason: message` when it cannot be used. */
function listenerTls (owner: { kind: string, namespace: string }, listener: Listener, grants: ReferenceGrants, secrets: Map<string, Secret>): { cert: string, key: string } | string {
  if (listener.tls?.mode === 'Passthrough') return 'InvalidCertificateRef: TLS passthrough is not supported'
  const ref = listener.tls?.certificateRefs?.[0]
  if (ref === undefined) return `InvalidCertificateRef: ${listener.protocol === 'TLS' ? 'a TLS listener that terminates (tls.mode Terminate)' : 'an HTTPS listener'} needs a certificateRef`
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Secret') !== 'Secret') return `InvalidCertificateRef: ${ref.kind ?? 'Secret'} is not a supported certificate kind`
  const ns = ref.namespace ?? owner.namespace
  if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: owner.kind, fromNamespace: owner.namespace, toGroup: '', toKind: 'Secret', toNamespace: ns, toName: ref.name })) {
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

/** Does the listener admit the route (a kind it takes; allowedRoutes.namespaces From Same — `gw`'s namespace, the Gateway or ListenerSet declaring the listener — All or Selector)? */
export function routeAllowed (l: ListenerState, route: HTTPRoute, gw: { metadata: { namespace?: string } }, namespaces: Map<string, Namespace>): boolean {
  const kind = route.kind ?? 'HTTPRoute'
  if (!l.kinds.some(k => k.kind === kind)) return false
  const from = l.listener.allowedRoutes?.namespaces?.from ?? 'Same'
  const routeNs = route.metadata.namespace ?? ''
  if (from === 'Same') return routeNs === (gw.metadata.namespace ?? '')
  if (from === 'All') return true
  return matchesSelector(namespaces.get(routeNs)?.metadata.labels, l.listener.allowedRoutes?.namespaces?.selector ?? {})
}

/** The Gateway's ProxyIR: valid listeners grouped into one bind per port, the backends its routes use. */
export function gatewayIR (g: GatewayState): ProxyIR {
  const binds = new Map<number, BindIR>()
  for (const l of [...g.listeners, ...(g.listenerSetListeners ?? [])]) {
    if (l.ir === null) continue
    let bind = binds.get(l.listener.port)
    if (bind === undefined) {
      bind = { key: `0.0.0.0:${l.listener.port}`, address: '0.0.0.0', port: l.listener.port, protocol: l.ir.protocol, listeners: [] }
      if (l.tls !== undefined) bind.tls = l.clientValidation !== undefined ? { ...l.tls, clientValidation: l.clientValidation } : l.tls
      if (l.ir.streamRoutes === undefined && g.frontend?.requestHeadersTimeoutMs !== undefined) bind.requestHeadersTimeoutMs = g.frontend.requestHeadersTimeoutMs
      if (l.ir.streamRoutes === undefined && g.frontend?.http2 === false) bind.http2 = false
      binds.set(l.listener.port, bind)
    }
    bind.listeners.push(l.ir)
  }
  const ir: ProxyIR = { version: '', binds: [...binds.values()].sort((a, b) => a.port - b.port), backends: [...g.backends.values()].sort((a, b) => a.key.localeCompare(b.key)) }
  ir.version = contentVersion(ir)
  return ir
}
