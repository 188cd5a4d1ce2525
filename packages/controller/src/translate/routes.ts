/**
 * HTTPRoutes: each parentRef attaches the route to the Gateway's listeners that match it
 * (sectionName, port, allowedRoutes, hostname intersection), or says in the parent's status
 * why not; each rule becomes a RouteIR (matches, filters' policies, weighted backends,
 * timeouts, retry, mirrors) on every listener it attaches to.
 */

import { intersectHostnames, intersectHostnamesWithOrigins, linearRegexProblem, parseDuration } from '@portico/engine/config'
import { formatIrDiagnostic, validateRoute, type BackendRefIR, type RouteIR, type RouteMatchIR, type StreamRouteIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, nsName, type Condition, type HTTPRoute, type HTTPRouteRule, type Namespace } from './gateway-api.ts'
import { routeAllowed, type GatewayState, type ListenerState } from './gateways.ts'
import type { ListenerSetState } from './listener-sets.ts'
import type { ResolvedBackends } from './backends.ts'
import { ruleMirrors, type RoutePolicies } from './filters.ts'
import type { RouteParentStatus } from './status.ts'
import { condition } from './conditions.ts'

/** One route, ready to attach: its backends resolved, its policies converted, and why it cannot be accepted (or null). */
export interface PreparedRoute {
  route: HTTPRoute
  /** Position among routes (older first): orders its rules against other routes'. */
  rank: number
  resolved: ResolvedBackends
  /** A TLSRoute's backends without BackendTLSPolicy: those of its Passthrough listeners. */
  plain?: ResolvedBackends
  policies: RoutePolicies
  unsupported: string | null
}

/**
 * Attaches the route through each of its parentRefs that names one of `gateways` (or of
 * `listenerSets`, kind ListenerSet), adding its RouteIRs to the matching listeners and its
 * backends to the Gateway. Returns the status of each such parent.
 */
export function attachRoute (prepared: PreparedRoute, gateways: Map<string, GatewayState>, namespaces: Map<string, Namespace>, controllerName: string, listenerSets?: Map<string, ListenerSetState>): RouteParentStatus[] {
  const { route, resolved, unsupported } = prepared
  const parents: RouteParentStatus[] = []
  for (const parentRef of route.spec.parentRefs ?? []) {
    if ((parentRef.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP) continue
    const parentKey = `${parentRef.namespace ?? route.metadata.namespace ?? ''}/${parentRef.name}`
    // The listeners this parentRef can reach: a Gateway's own, or a ListenerSet's (whose
    // allowedRoutes `Same` means the ListenerSet's namespace); the Gateway serves either.
    let gwState: GatewayState | undefined
    let listeners: ListenerState[]
    let owner: { metadata: { namespace?: string } }
    let notAccepted: string | undefined
    const kind = parentRef.kind ?? 'Gateway'
    if (kind === 'Gateway') {
      gwState = gateways.get(parentKey)
      if (gwState === undefined) continue
      listeners = gwState.listeners
      owner = gwState.gw
    } else if (kind === 'ListenerSet') {
      const set = listenerSets?.get(parentKey)
      if (set === undefined) continue
      gwState = set.gatewayState
      listeners = set.listeners
      owner = set.ls
      if (set.problem !== null && set.problem.reason !== 'ListenersNotValid') notAccepted = `ListenerSet ${parentKey} is not accepted: ${set.problem.message}`
    } else {
      continue
    }
    const gen = route.metadata.generation
    const status = (accepted: Condition): RouteParentStatus => ({
      parentRef,
      controllerName,
      conditions: [accepted, resolved.condition(gen)]
    })
    if (notAccepted !== undefined) {
      parents.push(status(condition('Accepted', false, 'NoMatchingParent', notAccepted, gen)))
      continue
    }
    const candidates = listeners.filter(l =>
      (parentRef.sectionName === undefined || l.listener.name === parentRef.sectionName) &&
      (parentRef.port === undefined || l.listener.port === parentRef.port))
    if (candidates.length === 0) {
      parents.push(status(condition('Accepted', false, 'NoMatchingParent', parentRef.sectionName !== undefined ? `no listener named ${parentRef.sectionName}${parentRef.port !== undefined ? ` on port ${parentRef.port}` : ''}` : `no listener on port ${parentRef.port ?? '-'}`, gen)))
      continue
    }
    const allowed = candidates.filter(l => l.attachable && routeAllowed(l, route, owner, namespaces))
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
    const served = (l: ListenerState) => intersectHostnames(l.listener.hostname?.toLowerCase(), (route.spec.hostnames ?? []).map(h => h.toLowerCase()))!
    // Cross-serving: an HTTPRoute and a GRPCRoute may not share a hostname on a listener;
    // routes come oldest first, so the one already there keeps it.
    const conflicts = matching.map(l => ({ l, with: crossServed(l, route, served(l)) }))
    const serving = conflicts.filter(c => c.with === undefined).map(c => c.l)
    if (serving.length === 0) {
      const c = conflicts[0]!
      parents.push(status(condition('Accepted', false, 'HostnameConflict', `listener ${c.l.listener.name} already serves these hostnames for the older ${c.with!}`, gen)))
      continue
    }
    // A TCP or UDP listener cannot tell connections apart: only its oldest route of the kind
    // serves (GEP-2644; the v1.7.0 suite's TCPRoute/UDPRouteMultipleRoutesAttachment). The
    // others stay Accepted and counted in attachedRoutes, as the suite requires, but are left
    // out of the IR, and the Accepted message says which route serves instead.
    const self = `${route.kind ?? 'HTTPRoute'}/${nsName(route.metadata)}`
    const shadowed = new Map(serving.map(l => [l, shadowingRoute(l, route, self)] as const).filter((e): e is readonly [ListenerState, string] => e[1] !== undefined))
    const acceptedMessage = shadowed.size === 0
      ? 'Route is accepted'
      : `Route is accepted, but ${[...shadowed].map(([l, older]) => `listener ${l.listener.name} serves the older ${older.replace('/', ' ')}`).join(', ')}: only the oldest ${route.kind} on a ${route.kind === 'UDPRoute' ? 'UDP' : 'TCP'} listener gets ${route.kind === 'UDPRoute' ? 'datagrams' : 'connections'}${shadowed.size < serving.length ? ' (it serves on the other listeners)' : ''}`
    parents.push(status(condition('Accepted', true, 'Accepted', acceptedMessage, gen)))
    for (const l of serving) {
      l.attached.add(self)
      if (shadowed.has(l)) continue
      const hostnames = served(l)
      // The route's own hostnames behind them: what it ranks by among routes on this listener.
      const origins = intersectHostnamesWithOrigins(l.listener.hostname?.toLowerCase(), (route.spec.hostnames ?? []).map(h => h.toLowerCase()))?.hostnameOrigins
      if (route.kind === undefined || route.kind === 'HTTPRoute' || route.kind === 'GRPCRoute') (l.served ??= []).push({ kind: route.kind ?? 'HTTPRoute', route: nsName(route.metadata), hostnames })
      if (l.ir === null) continue // attached and counted, but the listener is not programmed
      const backends = l.ir.tlsMode === 'Passthrough' ? prepared.plain ?? resolved : resolved
      if (route.kind === 'TLSRoute' || route.kind === 'TCPRoute' || route.kind === 'UDPRoute') l.ir.streamRoutes?.push(streamRouteIR(prepared, backends, hostnames, origins))
      else for (const ir of routeIRs(prepared, hostnames, origins)) l.ir!.routes.push(ir)
      for (const b of backends.backends.values()) gwState.backends.set(b.key, b)
    }
  }
  return parents
}

/**
 * The route of the other kind (HTTPRoute for a GRPCRoute and the reverse) already attached to
 * the listener whose hostnames intersect `hostnames` (the route's there; `[]` = any), as
 * `Kind namespace/name`; undefined when none does or the route is of neither kind.
 */
function crossServed (l: ListenerState, route: HTTPRoute, hostnames: string[]): string | undefined {
  const kind = route.kind ?? 'HTTPRoute'
  if (kind !== 'HTTPRoute' && kind !== 'GRPCRoute') return undefined
  const other = (l.served ?? []).find(s => s.kind !== kind && (s.hostnames.length === 0 || hostnames.length === 0 || hostnames.some(h => intersectHostnames(h, s.hostnames) !== null)))
  return other === undefined ? undefined : `${other.kind} ${other.route}`
}

/**
 * For a TCPRoute or UDPRoute, the older route of its kind already attached to the listener
 * (`Kind/namespace/name`; routes attach oldest first, so the first one found is the oldest),
 * which alone serves it; undefined for other kinds or when there is none.
 */
function shadowingRoute (l: ListenerState, route: HTTPRoute, self: string): string | undefined {
  if (route.kind !== 'TCPRoute' && route.kind !== 'UDPRoute') return undefined
  for (const key of l.attached) if (key !== self && key.startsWith(`${route.kind}/`)) return key
  return undefined
}

/** Older first, then namespace/name: the Gateway API's tie-break between routes. */
export function byAge (a: HTTPRoute, b: HTTPRoute): number {
  const ta = a.metadata.creationTimestamp ?? ''
  const tb = b.metadata.creationTimestamp ?? ''
  return ta < tb ? -1 : ta > tb ? 1 : nsName(a.metadata).localeCompare(nsName(b.metadata))
}

/**
 * A rule field Portico does not implement, as `field: why`, or null. Rule `sessionPersistence`
 * (Extended, experimental, deprecated for the Backend resource, GEP-4894) is one: Portico
 * does not claim HTTPRouteSessionPersistence, and serving the rule without the affinity it
 * asks for would hide that. The spec has no sentence for this field, so Portico does what it
 * says for the like cases: a retry `backoff` an implementation cannot honour ("MUST set the
 * Accepted Condition for the Route to `status: False` with a Reason of `UnsupportedValue`
 * when this field is set"), a filter type it does not know (the same), and GEP-1619's "the
 * route MUST be rejected" for a persistence it cannot give. The route is then not Accepted.
 */
export function unsupportedRuleField (route: HTTPRoute): string | null {
  for (const [i, rule] of (route.spec.rules ?? []).entries()) {
    if (rule.sessionPersistence !== undefined && rule.sessionPersistence !== null) {
      return `spec.rules[${i}].sessionPersistence is not supported (Portico has no session persistence; remove the field to serve the rule without it)`
    }
  }
  return null
}

/**
 * A RegularExpression path, header or query match the engine cannot run (it runs them on a
 * linear-time RE2 engine: no lookaround, no backreferences), as `field: why`. The route is
 * then not Accepted (UnsupportedValue) rather than pushed to proxies that would refuse it.
 */
export function invalidRegex (route: HTTPRoute): string | null {
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

/**
 * Anything else in the route's IR the proxies would refuse (ir/validate.ts, the checks
 * Engine.apply runs: header values a filter sets, durations, …), as `spec.rules[i]: field:
 * why`. Checked here so one bad HTTPRoute is not Accepted instead of making every proxy
 * refuse the whole Gateway's config.
 */
export function invalidRouteIR (prepared: Omit<PreparedRoute, 'unsupported'>): string | null {
  for (const [i, ir] of routeIRs({ ...prepared, unsupported: null }, []).entries()) {
    const [problem] = validateRoute(ir)
    if (problem !== undefined) return `spec.rules[${i}]: ${formatIrDiagnostic(problem)}`
  }
  return null
}

function routeIRs ({ route, rank, resolved, policies }: PreparedRoute, hostnames: string[], hostnameOrigins?: string[]): RouteIR[] {
  const ns = route.metadata.namespace ?? ''
  return (route.spec.rules ?? [{}] as HTTPRouteRule[]).map((rule, i) => {
    const rulePolicies = policies.rules[i]
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
    // A models rule (backends.ts isModelsRule) has no backend: its model table is added later (portico-models.ts).
    const backends: BackendRefIR[] = resolved.refs[i]!.length === 0 ? [] : (rule.backendRefs ?? []).map((ref, j) => {
      const key = resolved.refs[i]![j]!
      const out: BackendRefIR = { backend: key, weight: ref.weight ?? 1, policies: rulePolicies?.backends[j] ?? {} }
      // A PorticoBackend's own policies, under what the backendRef's filters set.
      const own = resolved.ownPolicies.get(key)
      if (own !== undefined) {
        const fields = Object.keys(own).filter(f => !(f in out.policies))
        out.policies = { ...own, ...out.policies }
        const b = resolved.backends.get(key)!
        if (fields.length > 0) out.policySources = Object.fromEntries(fields.map(f => [f, `PorticoBackend ${b.namespace ?? ''}/${b.name}`]))
      }
      // A PorticoBackend's failover groups: each provider with its own policies, under what
      // the backendRef's filters set (as above).
      const failover = resolved.failover.get(key)
      if (failover !== undefined) {
        const filters = out.policies
        out.failover = failover.map(g => g.map(p => ({ backend: p.backend, policies: { ...p.policies, ...filters } })))
        out.policies = out.failover[0]![0]!.policies
      }
      return out
    })
    const ir: RouteIR = {
      // A GRPCRoute may share its name with an HTTPRoute: its rules' keys say which it is.
      key: `${route.kind === 'GRPCRoute' ? 'GRPCRoute/' : ''}${ns}/${route.metadata.name}.${rule.name ?? i}`,
      name: route.metadata.name,
      namespace: ns,
      ruleName: rule.name ?? String(i),
      hostnames,
      ...(hostnameOrigins !== undefined ? { hostnameOrigins } : {}),
      matches,
      policies: rulePolicies?.policies ?? {},
      backends,
      order: rank * 1000 + i
    }
    // A rule filter that cannot be applied (an ExtensionRef, backends.ts): every request of
    // the rule gets the invalid backend's 500, and none of the rule's other filters
    // (a redirect would answer first), mirrors or retries apply.
    const errorBackend = resolved.errorRules[i]
    if (errorBackend !== undefined) return { ...ir, policies: {}, backends: [{ backend: errorBackend, weight: 1, policies: {} }] }
    const timeouts = ruleTimeouts(rule)
    if (timeouts !== undefined) ir.timeouts = timeouts
    const mirrors = ruleMirrors(rule, resolved.mirrors[i] ?? [], resolved.backends, ['spec', 'rules', i, 'filters'])
    if (mirrors.length > 0) ir.mirrors = mirrors
    if (rulePolicies?.retry !== undefined) ir.retry = rulePolicies.retry
    return ir
  })
}

/**
 * A TLSRoute, TCPRoute or UDPRoute on one listener: every rule's backendRefs (`resolved`: the ones for
 * this listener's mode), by weight per connection (TLSRoute and TCPRoute rules have no
 * matches; the hostnames are the SNI names).
 */
function streamRouteIR ({ route, rank }: PreparedRoute, resolved: ResolvedBackends, hostnames: string[], hostnameOrigins?: string[]): StreamRouteIR {
  const ns = route.metadata.namespace ?? ''
  const kind = route.kind === 'TLSRoute' ? 'tls' : route.kind === 'UDPRoute' ? 'udp' : 'tcp'
  const backends: BackendRefIR[] = (route.spec.rules ?? []).flatMap((rule, i) => (rule.backendRefs ?? []).map((ref, j) => ({ backend: resolved.refs[i]![j]!, weight: ref.weight ?? 1, policies: {} })))
  const tls = route.kind === 'TLSRoute'
  return { key: `${route.kind}/${ns}/${route.metadata.name}`, name: route.metadata.name, namespace: ns, kind, hostnames: tls ? hostnames : [], ...(tls && hostnameOrigins !== undefined ? { hostnameOrigins } : {}), backends, order: rank }
}

/**
 * HTTPRouteTimeouts → timeouts. A zero duration means "no timeout" in the Gateway API, and
 * is kept as 0, which the IR reads the same way: left out, the gateway's default wait for
 * response headers (http/call-timers.ts) would apply instead.
 */
function ruleTimeouts (rule: HTTPRouteRule): RouteIR['timeouts'] {
  const timeouts: { requestMs?: number, backendRequestMs?: number } = {}
  if (rule.timeouts?.request !== undefined) timeouts.requestMs = parseDuration(rule.timeouts.request)
  if (rule.timeouts?.backendRequest !== undefined) timeouts.backendRequestMs = parseDuration(rule.timeouts.backendRequest)
  return Object.keys(timeouts).length > 0 ? timeouts : undefined
}
