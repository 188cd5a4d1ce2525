/**
 * GRPCRoute → the HTTPRoute it routes like. A gRPC call is an HTTP/2 POST to
 * `/package.Service/Method`, so a GRPCMethodMatch is a path match (the engine's own
 * conversion, `grpcPathMatch`, shared with the standalone file's `matches[].grpc`), header
 * matches and filters (RequestHeaderModifier, ResponseHeaderModifier, RequestMirror) are
 * HTTPRoute's, and the backends are Services, reached over HTTP/2 (the engine sends gRPC
 * requests over h2c to plain backends). The HTTPRoute it becomes carries `kind: GRPCRoute`,
 * which listeners' allowed kinds, ReferenceGrants, route keys and statuses read.
 */

import { grpcPathMatch } from '@portico/engine/config'
import type { HTTPRoute, HTTPRouteMatch, HTTPRouteRule, GRPCRoute } from './gateway-api.ts'

/**
 * A match without a method. The spec ranks GRPCRoute matches by the characters of the
 * service, then of the method, then by header count; the engine ranks path matches exact >
 * longest prefix > regex, then a method match, then header count. A method match becomes an
 * exact path (service and method), a prefix (service) or a regex (method alone, or
 * RegularExpression), and is a POST — which every gRPC call is; a match without one is this
 * regex without a method, so it ranks below all of them, also below a method-only match that
 * has fewer headers, instead of above them as the prefix `/` would.
 */
const CATCH_ALL = { type: 'RegularExpression', value: '/.*' } as const

/** The GRPCRoute as an HTTPRoute, and what in it cannot be served (or null). */
export function grpcAsHttpRoute (route: GRPCRoute): { route: HTTPRoute, problem: string | null } {
  let problem: string | null = null
  const rules: HTTPRouteRule[] = (route.spec.rules ?? []).map((rule, i) => {
    // No matches: every gRPC request, as one match with no method.
    const matches: HTTPRouteMatch[] = (rule.matches === undefined || rule.matches.length === 0 ? [{}] : rule.matches).map((m, j) => {
      const out: HTTPRouteMatch = { path: CATCH_ALL }
      if (m.method !== undefined) {
        out.method = 'POST'
        const path = grpcPathMatch({ ...(m.method.service !== undefined ? { service: m.method.service } : {}), ...(m.method.method !== undefined ? { method: m.method.method } : {}), type: m.method.type ?? 'Exact' }, ['spec', 'rules', i, 'matches', j, 'method'], (p, message) => {
          problem ??= `${p.map(x => typeof x === 'number' ? `[${x}]` : `.${x}`).join('').slice(1)}: ${message}`
        })
        if (path !== null) out.path = { type: path.kind === 'exact' ? 'Exact' : path.kind === 'prefix' ? 'PathPrefix' : 'RegularExpression', value: path.value }
      }
      if (m.headers !== undefined) out.headers = m.headers
      return out
    })
    const out: HTTPRouteRule = {}
    if (rule.name !== undefined) out.name = rule.name
    out.matches = matches
    if (rule.filters !== undefined) out.filters = rule.filters
    if (rule.backendRefs !== undefined) out.backendRefs = rule.backendRefs
    // Kept so the route is refused for it like an HTTPRoute (routes.ts unsupportedRuleField), not served without it.
    if (rule.sessionPersistence !== undefined) out.sessionPersistence = rule.sessionPersistence
    return out
  })
  return { route: { kind: 'GRPCRoute', metadata: route.metadata, spec: { ...(route.spec.parentRefs !== undefined ? { parentRefs: route.spec.parentRefs } : {}), ...(route.spec.hostnames !== undefined ? { hostnames: route.spec.hostnames } : {}), rules } }, problem }
}
