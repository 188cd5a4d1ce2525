/**
 * HTTPRoute filters and rule policies → engine policy IR. Gateway API shapes are mapped onto
 * the YAML config's shapes (`statusCode` → `status`, `ReplaceFullPath` → `full`, header lists
 * → maps) and converted by the engine's own converters (`@portico/engine/config`), so a
 * redirect, rewrite, CORS policy, retry or mirror means the same thing, with the same
 * defaults and the same checks, whichever front end wrote it. What the converters report
 * (an origin that is not `scheme://host[:port]`, `*` next to other origins, a backoff over
 * 1m) leaves the route not Accepted rather than reaching proxies that would refuse it.
 */

import type { BackendIR, PolicySetIR, RequestMirrorIR, RetryIR } from '@portico/engine/ir'
import { isPorticoError } from '@portico/engine/errors'
import { formatPath, mirrorsToIR, policiesToIR, retryToIR, type CorsConfig, type PathModifierConfig, type PolicyContext, type RequestRedirectConfig, type UrlRewriteConfig } from '@portico/engine/config'
import type { HTTPCORSFilter, HTTPHeaderFilter, HTTPPathModifier, HTTPRequestMirrorFilter, HTTPRequestRedirectFilter, HTTPRoute, HTTPRouteFilter, HTTPRouteRule, HTTPURLRewriteFilter } from './gateway-api.ts'

type Path = Array<string | number>

// ExtensionRef is not applied but not refused either: backends.ts turns what it filters into a 500 (the spec's rule for a custom filter that cannot be resolved).
const SUPPORTED_FILTERS = new Set(['RequestHeaderModifier', 'ResponseHeaderModifier', 'RequestRedirect', 'URLRewrite', 'CORS', 'RequestMirror', 'ExtensionRef'])

const REDIRECT_STATUSES = [301, 302, 303, 307, 308]

/** A message when the route uses a filter Portico cannot apply yet, else null. */
export function unsupportedFilter (route: HTTPRoute): string | null {
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

/** The policies of one rule: its own filters', each backendRef's, and its retry. */
export interface RulePolicies {
  policies: PolicySetIR
  backends: PolicySetIR[]
  retry?: RetryIR
}

/** Every rule's policies, and the first problem the engine's converters reported (`field: why`), or null. */
export interface RoutePolicies {
  rules: RulePolicies[]
  problem: string | null
}

/**
 * Converts the route's filters and retries. Call after unsupportedFilter(): values it refuses
 * (an unknown path type, a scheme other than http/https) are not looked at again here.
 */
export function routePolicies (route: HTTPRoute): RoutePolicies {
  let problem: string | null = null
  const pc: PolicyContext = {
    baseDir: '/',
    // No Gateway API filter names a file; a converter asking for one is a bug, not a config error.
    readFile: file => { throw new Error(`a Gateway API filter cannot read ${file}`) },
    report: (path, message) => { problem ??= `${formatPath(path)}: ${message}` }
  }
  const rules = (route.spec.rules ?? []).map((rule, i): RulePolicies => {
    const at: Path = ['spec', 'rules', i]
    const out: RulePolicies = {
      policies: filterPolicies(rule.filters, [...at, 'filters'], pc),
      backends: (rule.backendRefs ?? []).map((ref, j) => filterPolicies(ref.filters, [...at, 'backendRefs', j, 'filters'], pc))
    }
    // HTTPRouteRetry has the YAML retry's fields (attempts = retries after the first try).
    if (rule.retry !== undefined) {
      try {
        out.retry = retryToIR(rule.retry, [...at, 'retry'], pc.report)
      } catch (err) {
        // The CRD's pattern keeps bad durations out; one that gets past it refuses the route, not the translation.
        if (!isPorticoError(err, 'PORTICO_BAD_DURATION')) throw err
        pc.report([...at, 'retry', 'backoff'], err.message)
      }
    }
    return out
  })
  return { rules, problem }
}

/** The filters of a rule or backendRef, one engine policy each (a later filter of a kind replaces an earlier one). */
function filterPolicies (filters: HTTPRouteFilter[] | undefined, path: Path, pc: PolicyContext): PolicySetIR {
  const policies: PolicySetIR = {}
  ;(filters ?? []).forEach((f, i) => {
    const config = filterConfig(f)
    if (config !== undefined) Object.assign(policies, policiesToIR(config, [...path, i], pc))
  })
  return policies
}

/** A filter as the YAML config's `policies:` object says it (the key is the filter's own field name). */
function filterConfig (f: HTTPRouteFilter): Record<string, unknown> | undefined {
  if (f.type === 'RequestHeaderModifier' && f.requestHeaderModifier !== undefined) return { requestHeaderModifier: headerModifier(f.requestHeaderModifier) }
  if (f.type === 'ResponseHeaderModifier' && f.responseHeaderModifier !== undefined) return { responseHeaderModifier: headerModifier(f.responseHeaderModifier) }
  if (f.type === 'RequestRedirect') return { requestRedirect: requestRedirect(f.requestRedirect ?? {}) }
  if (f.type === 'URLRewrite') return { urlRewrite: urlRewrite(f.urlRewrite ?? {}) }
  if (f.type === 'CORS' && f.cors !== undefined) return { cors: cors(f.cors) }
  return undefined
}

/** HTTPHeaderFilter's name/value lists → the config's maps (empty lists left out). */
function headerModifier (f: HTTPHeaderFilter): { set?: Record<string, string>, add?: Record<string, string>, remove?: string[] } {
  const out: { set?: Record<string, string>, add?: Record<string, string>, remove?: string[] } = {}
  if (f.set !== undefined && f.set.length > 0) out.set = Object.fromEntries(f.set.map(h => [h.name, h.value]))
  if (f.add !== undefined && f.add.length > 0) out.add = Object.fromEntries(f.add.map(h => [h.name, h.value]))
  if (f.remove !== undefined && f.remove.length > 0) out.remove = f.remove
  return out
}

/** ReplaceFullPath → full, ReplacePrefixMatch → prefix (the Gateway API's defaults for an unset value: `/` and empty). */
function pathModifier (p: HTTPPathModifier): PathModifierConfig {
  return p.type === 'ReplaceFullPath' ? { full: p.replaceFullPath ?? '/' } : { prefix: p.replacePrefixMatch ?? '' }
}

/** HTTPRequestRedirectFilter → requestRedirect (statusCode → status; unsupportedFilter() has checked scheme and status). */
function requestRedirect (f: HTTPRequestRedirectFilter): RequestRedirectConfig {
  const c: RequestRedirectConfig = {}
  if (f.statusCode !== undefined) c.status = f.statusCode as NonNullable<RequestRedirectConfig['status']>
  if (f.scheme === 'http' || f.scheme === 'https') c.scheme = f.scheme
  if (f.hostname !== undefined) c.hostname = f.hostname
  if (f.port !== undefined) c.port = f.port
  if (f.path !== undefined) c.path = pathModifier(f.path)
  return c
}

function urlRewrite (f: HTTPURLRewriteFilter): UrlRewriteConfig {
  const c: UrlRewriteConfig = {}
  if (f.hostname !== undefined) c.hostname = f.hostname
  if (f.path !== undefined) c.path = pathModifier(f.path)
  return c
}

/** HTTPCORSFilter → cors: the same fields; maxAge is a number of seconds in both. */
function cors (f: HTTPCORSFilter): CorsConfig {
  const c: CorsConfig = {}
  if (f.allowOrigins !== undefined) c.allowOrigins = f.allowOrigins
  if (f.allowMethods !== undefined) c.allowMethods = f.allowMethods
  if (f.allowHeaders !== undefined) c.allowHeaders = f.allowHeaders
  if (f.exposeHeaders !== undefined) c.exposeHeaders = f.exposeHeaders
  if (f.allowCredentials !== undefined) c.allowCredentials = f.allowCredentials
  if (f.maxAge !== undefined) c.maxAge = f.maxAge
  return c
}

/**
 * A rule's RequestMirror filters → mirrors. `keys` are the mirrors' backendRefs, already
 * resolved (backends.ts) in filter order, and `backends` holds them; the engine's converter
 * takes each as the backend it would otherwise have made from a `host:`.
 */
export function ruleMirrors (rule: HTTPRouteRule, keys: readonly string[], backends: ReadonlyMap<string, BackendIR>, path: Path): RequestMirrorIR[] {
  const config = (rule.filters ?? []).filter(f => f.type === 'RequestMirror' && f.requestMirror !== undefined).map((f, j) => {
    const percentage = mirrorPercentage(f.requestMirror!)
    return { backend: { host: keys[j]! }, ...(percentage !== undefined ? { percentage } : {}) }
  })
  return config.length === 0 ? [] : mirrorsToIR(config, path, key => backends.get(key))
}

/** RequestMirror percent, or fraction as a percentage (denominator default 100); neither = the engine's default (all). */
function mirrorPercentage (m: HTTPRequestMirrorFilter): number | undefined {
  if (m.percent !== undefined) return Math.min(100, Math.max(0, m.percent))
  if (m.fraction !== undefined) {
    const d = m.fraction.denominator ?? 100
    return d > 0 ? Math.min(100, Math.max(0, (m.fraction.numerator / d) * 100)) : 0
  }
  return undefined
}
