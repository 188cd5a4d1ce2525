/**
 * HTTPRoute backendRefs (and RequestMirror backendRefs) → engine backends: Services resolved
 * through their EndpointSlices, cross-namespace references gated by ReferenceGrant, and
 * invalid references kept as `invalid` backends (their share of traffic gets 500) while the
 * rest of the route works. GRPCRoutes, TLSRoutes and TCPRoutes resolve the same way (their
 * kind is what a ReferenceGrant must name); the stream routes take Services only.
 */

import { createHash } from 'node:crypto'
import type { BackendIR, FailoverProviderIR, PolicySetIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, nsName, type BackendRef, type Condition, type EndpointSlice, type HTTPRoute, type HTTPRouteFilter, type HTTPRouteRule, type Secret, type Service } from './gateway-api.ts'
import type { ReferenceGrants } from './reference-grants.ts'
import { condition } from './conditions.ts'
import type { BackendTlsPolicies } from './backend-tls.ts'
import { PORTICO_GROUP, porticoBackendIR, type PorticoBackend } from './portico-backends.ts'
import { INFERENCE_GROUP, INFERENCE_POOL_KIND, inferencePoolBackend, type InferencePoolIndex } from './inference-pools.ts'

/** The Services a translation sees, and their EndpointSlices by `namespace/service`. */
export interface ServiceIndex {
  services: Map<string, Service>
  slices: Map<string, EndpointSlice[]>
  /** PorticoBackends by `namespace/name` (empty when the CRD is not installed). */
  porticoBackends: Map<string, PorticoBackend>
  /** Secrets by `namespace/name`: a PorticoBackend's own policies take credentials from them. */
  secrets: Map<string, Secret>
  /** InferencePools and Pods; absent when the inference extension is off (pool backendRefs are then InvalidKind). */
  inferencePools?: InferencePoolIndex
}

export function serviceIndex (services: Service[], endpointSlices: EndpointSlice[], porticoBackends: PorticoBackend[] = [], secrets: Map<string, Secret> = new Map()): ServiceIndex {
  const slices = new Map<string, EndpointSlice[]>()
  for (const slice of endpointSlices) {
    const svc = slice.metadata.labels?.['kubernetes.io/service-name']
    if (svc === undefined) continue
    const key = `${slice.metadata.namespace ?? ''}/${svc}`
    let list = slices.get(key)
    if (list === undefined) slices.set(key, list = [])
    list.push(slice)
  }
  return { services: new Map(services.map(s => [nsName(s.metadata), s])), slices, porticoBackends: new Map(porticoBackends.map(b => [nsName(b.metadata), b])), secrets }
}

/** The backendRef kind that stands for "the models attached to this rule" (docs/models.md). */
export const MODEL_KIND = 'PorticoModel'

/**
 * Whether an HTTPRoute rule serves models: its only backendRef is `{group: portico.dev, kind:
 * PorticoModel, name: "*"}`. Its requests then go to the PorticoModels whose parentRefs name
 * the route (and this rule, by sectionName), picked by the model the body asks for
 * (portico-models.ts); the rule has no backend of its own.
 */
export function isModelsRule (rule: HTTPRouteRule, kind: HTTPRoute['kind'] = 'HTTPRoute'): boolean {
  const refs = rule.backendRefs ?? []
  return (kind === undefined || kind === 'HTTPRoute') && refs.length === 1 && refs[0]!.group === PORTICO_GROUP && refs[0]!.kind === MODEL_KIND && refs[0]!.name === '*' && refs[0]!.namespace === undefined
}

export interface ResolvedBackends {
  /** Per rule, per backendRef: the backend key (valid or invalid). */
  refs: string[][]
  /**
   * Per rule: the key of the invalid backend that answers every request of the rule, when a
   * filter of the rule itself cannot be applied (an ExtensionRef); the rule's backends,
   * filters and mirrors are then not used.
   */
  errorRules: Array<string | undefined>
  /** Per rule, per RequestMirror filter: the mirror backend's key (valid or invalid). */
  mirrors: string[][]
  backends: Map<string, BackendIR>
  /** A PorticoBackend's own policies, by backend key: every reference to it starts from them. */
  ownPolicies: Map<string, PolicySetIR>
  /** A PorticoBackend's failover groups (`ai.groups`), by the key of the backend that stands for them (its first provider's). */
  failover: Map<string, FailoverProviderIR[][]>
  condition(generation: number | undefined): Condition
}

export function resolveBackends (route: HTTPRoute, grants: ReferenceGrants, index: ServiceIndex, tlsPolicies?: BackendTlsPolicies): ResolvedBackends {
  const routeNs = route.metadata.namespace ?? ''
  const backends = new Map<string, BackendIR>()
  const ownPolicies = new Map<string, PolicySetIR>()
  const failovers = new Map<string, { backends: BackendIR[], groups: FailoverProviderIR[][] }>()
  let failure: { reason: string, message: string } | null = null
  const fail = (reason: string, message: string) => { failure ??= { reason, message } }
  const errorRules: Array<string | undefined> = []
  const refs = (route.spec.rules ?? []).map((rule, i) => {
    const ruleError = unresolvedExtensionRef(rule.filters, `spec.rules[${i}].filters`)
    if (ruleError !== null) {
      const b = filterErrorBackend(route, `rules[${i}]`, ruleError)
      fail('InvalidKind', ruleError)
      backends.set(b.key, b)
      errorRules[i] = b.key
      // The rule's backends and mirrors are never called: not resolved, not programmed.
      return []
    }
    return isModelsRule(rule, route.kind) ? [] : (rule.backendRefs ?? []).map((ref, j) => {
      const refError = unresolvedExtensionRef(ref.filters, `spec.rules[${i}].backendRefs[${j}].filters`)
      if (refError !== null) {
        // Only this backendRef's share of the rule's requests went through the filter.
        const b = filterErrorBackend(route, `rules[${i}].backendRefs[${j}]`, refError)
        fail('InvalidKind', refError)
        backends.set(b.key, b)
        return b.key
      }
      let b = resolveBackend(ref, routeNs, grants, index, route.kind ?? 'HTTPRoute', ownPolicies, failovers)
      if (b.kind === 'invalid') {
        const [reason, message] = splitReason(b.invalidReason!)
        fail(reason, message)
      }
      // After the check: a BackendTLSPolicy's problems are the policy's status, not the route's.
      if (tlsPolicies !== undefined) b = withBackendTls(b, ref.port, index, tlsPolicies)
      backends.set(b.key, b)
      // Failover groups: every provider is a backend of the config.
      for (const p of failovers.get(b.key)?.backends ?? []) backends.set(p.key, p)
      return b.key
    })
  })
  // RequestMirror backendRefs resolve like any backendRef (ReferenceGrant, Service, port).
  const mirrors = (route.spec.rules ?? []).map((rule, i) => errorRules[i] !== undefined ? [] : (rule.filters ?? []).filter(f => f.type === 'RequestMirror' && f.requestMirror !== undefined).map(f => {
    let b = resolveBackend(f.requestMirror!.backendRef, routeNs, grants, index, route.kind ?? 'HTTPRoute', ownPolicies, new Map())
    if (b.kind === 'invalid') {
      const [reason, message] = splitReason(b.invalidReason!)
      fail(reason, message)
    }
    if (tlsPolicies !== undefined) b = withBackendTls(b, f.requestMirror!.backendRef.port, index, tlsPolicies)
    backends.set(b.key, b)
    return b.key
  }))
  return {
    refs,
    errorRules,
    mirrors,
    backends,
    ownPolicies,
    failover: new Map([...failovers].map(([key, f]) => [key, f.groups])),
    condition: gen => failure === null
      ? condition('ResolvedRefs', true, 'ResolvedRefs', 'All references resolved', gen)
      : condition('ResolvedRefs', false, failure.reason, failure.message, gen)
  }
}

/**
 * The first ExtensionRef among `filters` (at `at`), as a message naming it, or null.
 * Portico defines no custom filter kinds, so no ExtensionRef resolves; the spec then says
 * "the filter MUST NOT be skipped. Instead, requests that would have been processed by that
 * filter MUST receive a HTTP error response" — a 500 from an invalid backend, the answer
 * invalid backendRefs already get — and the route's ResolvedRefs is False/InvalidKind.
 */
export function unresolvedExtensionRef (filters: HTTPRouteFilter[] | undefined, at: string): string | null {
  const i = (filters ?? []).findIndex(f => f.type === 'ExtensionRef')
  if (i === -1) return null
  const ref = filters![i]!.extensionRef ?? {}
  const kind = `${ref.group !== undefined && ref.group !== '' ? `${ref.group}/` : ''}${ref.kind ?? ''}`
  return `${at}[${i}]: ExtensionRef filter ${kind} ${ref.name ?? ''} cannot be resolved (Portico defines no custom filter kinds); its requests get a 500`
}

/** The invalid backend that answers, with a 500, the requests an unresolvable filter of the route's `where` would have processed. */
function filterErrorBackend (route: HTTPRoute, where: string, message: string): BackendIR {
  const ns = route.metadata.namespace ?? ''
  const kind = route.kind ?? 'HTTPRoute'
  return { key: `invalid/${kind}/${ns}/${route.metadata.name}.${where}/ExtensionRef`, kind: 'invalid', name: route.metadata.name, namespace: ns, protocol: 'http', endpoints: [], target: `${kind} ${ns}/${route.metadata.name} ${where}`, invalidReason: `InvalidKind: ${message}` }
}

function resolveBackend (ref: BackendRef, routeNs: string, grants: ReferenceGrants, index: ServiceIndex, fromKind: string, ownPolicies: Map<string, PolicySetIR>, failovers: Map<string, { backends: BackendIR[], groups: FailoverProviderIR[][] }>): BackendIR {
  const ns = ref.namespace ?? routeNs
  const group = ref.group ?? ''
  const kind = ref.kind ?? 'Service'
  const invalid = (reason: string, message: string): BackendIR => ({
    key: `invalid/${ns}/${ref.name}:${ref.port ?? ''}/${kind}`, kind: 'invalid', name: ref.name, namespace: ns, protocol: 'http', endpoints: [], target: `${ref.name}.${ns}:${ref.port ?? ''}`, invalidReason: `${reason}: ${message}`
  })
  if (group === PORTICO_GROUP && kind === MODEL_KIND) {
    // Only as the whole rule (isModelsRule): `{group: portico.dev, kind: PorticoModel, name: "*"}` alone.
    return invalid('InvalidKind', `a backendRef of kind PorticoModel must be the rule's only backendRef, named "*", in an HTTPRoute (the PorticoModels attached to the rule serve it)`)
  }
  if (group === PORTICO_GROUP && kind === 'PorticoBackend') {
    // MCP and AI backends serve HTTP requests; TLSRoutes and TCPRoutes forward connections.
    if (fromKind === 'TLSRoute' || fromKind === 'TCPRoute' || fromKind === 'UDPRoute') return invalid('InvalidKind', `a ${fromKind} forwards ${fromKind === 'UDPRoute' ? 'datagrams' : 'connections'} to Services, not to a PorticoBackend`)
    if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind, fromNamespace: routeNs, toGroup: PORTICO_GROUP, toKind: 'PorticoBackend', toNamespace: ns, toName: ref.name })) {
      return invalid('RefNotPermitted', `PorticoBackend ${ns}/${ref.name} is in another namespace without a ReferenceGrant`)
    }
    const pb = index.porticoBackends.get(`${ns}/${ref.name}`)
    if (pb === undefined) return invalid('BackendNotFound', `PorticoBackend ${ns}/${ref.name} not found`)
    const b = porticoBackendIR(pb, index)
    if (typeof b !== 'string') {
      if (Object.keys(b.policies).length > 0) ownPolicies.set(b.backend.key, b.policies)
      if (b.failover !== undefined) failovers.set(b.backend.key, b.failover)
      return b.backend
    }
    const [reason, message] = splitReason(b)
    return invalid(reason, message)
  }
  if (group === INFERENCE_GROUP && kind === INFERENCE_POOL_KIND) {
    if (index.inferencePools === undefined) return invalid('InvalidKind', `backend kind ${INFERENCE_GROUP}/${INFERENCE_POOL_KIND} is not supported: the inference extension is off (chart inferenceExtension.enabled)`)
    // Only HTTP requests are sent to a picker.
    if (fromKind !== 'HTTPRoute') return invalid('InvalidKind', `a ${fromKind} cannot name an InferencePool (HTTPRoutes only)`)
    if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind, fromNamespace: routeNs, toGroup: INFERENCE_GROUP, toKind: INFERENCE_POOL_KIND, toNamespace: ns, toName: ref.name })) {
      return invalid('RefNotPermitted', `InferencePool ${ns}/${ref.name} is in another namespace without a ReferenceGrant`)
    }
    const pool = index.inferencePools.pools.get(`${ns}/${ref.name}`)
    if (pool === undefined) return invalid('BackendNotFound', `InferencePool ${ns}/${ref.name} not found`)
    const b = inferencePoolBackend(pool, index.inferencePools, index)
    if (typeof b !== 'string') return b
    const [reason, message] = splitReason(b)
    return invalid(reason, message)
  }
  if (group !== '' || kind !== 'Service') return invalid('InvalidKind', `backend kind ${group === '' ? '' : `${group}/`}${kind} is not supported (Service, portico.dev/PorticoBackend${index.inferencePools !== undefined ? `, ${INFERENCE_GROUP}/${INFERENCE_POOL_KIND}` : ''})`)
  if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind, fromNamespace: routeNs, toGroup: '', toKind: 'Service', toNamespace: ns, toName: ref.name })) {
    return invalid('RefNotPermitted', `Service ${ns}/${ref.name} is in another namespace without a ReferenceGrant`)
  }
  const svc = index.services.get(`${ns}/${ref.name}`)
  if (svc === undefined) return invalid('BackendNotFound', `Service ${ns}/${ref.name} not found`)
  if (ref.port === undefined) return invalid('BackendNotFound', `backendRef to Service ${ns}/${ref.name} needs a port`)
  // A Service may have the same port number twice, for TCP and for UDP (DNS): a UDPRoute
  // takes the UDP one and only that; other routes the TCP one when there are both.
  const udp = fromKind === 'UDPRoute'
  const numbered = (svc.spec.ports ?? []).filter(p => p.port === ref.port)
  const port = udp
    ? numbered.find(p => p.protocol === 'UDP')
    : numbered.find(p => (p.protocol ?? 'TCP') === 'TCP') ?? numbered[0]
  if (port === undefined && svc.spec.type !== 'ExternalName') {
    return udp && numbered.length > 0
      ? invalid('UnsupportedProtocol', `Service ${ns}/${ref.name} port ${ref.port} is not protocol UDP`)
      : invalid('BackendNotFound', `Service ${ns}/${ref.name} has no port ${ref.port}`)
  }
  const endpoints = svc.spec.type === 'ExternalName' && svc.spec.externalName !== undefined
    ? [{ host: svc.spec.externalName, port: ref.port }]
    : endpointsOf(index.slices.get(`${ns}/${ref.name}`) ?? [], port!)
  return {
    // The UDP port of a Service is another backend than its TCP port of the same number.
    key: `service/${ns}/${ref.name}:${ref.port}${udp ? '/udp' : ''}`,
    kind: 'service',
    name: ref.name,
    namespace: ns,
    protocol: port?.appProtocol === 'https' ? 'https' : 'http',
    ...(port?.appProtocol === 'kubernetes.io/h2c' ? { h2c: true } : {}),
    endpoints,
    target: `${ref.name}.${ns}.svc.cluster.local:${ref.port}`
  }
}

/**
 * The backend as the BackendTLSPolicy covering its Service port makes it: HTTPS with the
 * policy's roots, SNI and names (the key then carries a digest of them, so proxies open new
 * connections when they change), or `invalid` when the policy has no usable CA.
 */
function withBackendTls (b: BackendIR, port: number | undefined, index: ServiceIndex, policies: BackendTlsPolicies): BackendIR {
  if (b.kind !== 'service') return b
  const ns = b.namespace ?? ''
  const portName = index.services.get(`${ns}/${b.name}`)?.spec.ports?.find(p => p.port === port)?.name
  const policy = policies.forPort(ns, b.name, portName)
  if (policy === undefined) return b
  const { tls } = policy
  if ('invalid' in tls) {
    const key = `invalid/${b.key}#tls`
    policy.use(key)
    return { key, kind: 'invalid', name: b.name, namespace: ns, protocol: 'https', endpoints: [], target: b.target, invalidReason: tls.invalid }
  }
  const key = `${b.key}#tls-${createHash('sha256').update(JSON.stringify(tls)).digest('hex').slice(0, 8)}`
  policy.use(key)
  return { ...b, key, protocol: 'https', tls }
}

/** Ready endpoint addresses of a Service port, through its EndpointSlices. */
/** `Reason: message` → [reason, message] (the message may hold ': ' itself). */
function splitReason (text: string): [string, string] {
  const at = text.indexOf(': ')
  return at === -1 ? [text, ''] : [text.slice(0, at), text.slice(at + 2)]
}

export function endpointsOf (slices: EndpointSlice[], port: { name?: string, port: number, targetPort?: number | string }): Array<{ host: string, port: number }> {
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
