/**
 * Config → IR of localRateLimit, transformation, csrf, requestRedirect, urlRewrite and
 * cors: defaults made explicit, names lower-cased, durations in milliseconds or seconds, CEL
 * compiled (a bad expression is a config error naming its field), and the rules the schema
 * cannot say (exactly one of full/prefix, `*` alone, ReplacePrefixMatch only where a route
 * prefix match exists) checked.
 */

import type { CorsConfig, CsrfConfig, LocalRateLimitConfig, PathModifierConfig, RequestRedirectConfig, TransformationConfig, UrlRewriteConfig } from './http-policy-schema.ts'
import type { CorsIR, CsrfIR, LocalRateLimitIR, PathModifierIR, PolicySetIR, RequestRedirectIR, TransformIR, TransformationIR, UrlRewriteIR } from '../ir/policy.ts'
import type { RouteMatchIR } from '../ir/types.ts'
import { parseDuration } from '../util/duration.ts'
import { compileCel, CEL_VARIABLES, RESPONSE_CEL_VARIABLES } from '../cel/expression.ts'
import { checkOriginPattern, normalizeOrigin } from '../ir/origin.ts'
import { lazyRequire } from '../util/lazy-require.ts'

// The LLM cost module loads with the first config that has a cost bucket (path: util/'s).
const cost = lazyRequire<typeof import('../llm/cost.ts')>('../llm/cost.ts')

type Path = Array<string | number>
type Report = (path: Path, message: string) => void

/** Is this policies object a gateway's (it runs before routing: no route match to refer to)? */
function atGateway (path: Path): boolean {
  return path[0] === 'gateways'
}

/** Buckets kept per key when `maxKeys` is not given (64 bytes each). */
export const DEFAULT_MAX_KEYS = 10_000

export function localRateLimitToIR (c: LocalRateLimitConfig, path: Path, report: Report): LocalRateLimitIR {
  return c.map((b, i) => {
    const at = [...path, i]
    const fillIntervalMs = parseDuration(b.fillInterval)
    if (fillIntervalMs <= 0) report([...at, 'fillInterval'], 'must be more than 0')
    const type = b.type ?? 'requests'
    const out: LocalRateLimitIR[number] = { maxTokens: b.maxTokens ?? 0, tokensPerFill: b.tokensPerFill ?? 0, fillIntervalMs, type }
    if (type === 'cost') {
      for (const field of ['maxTokens', 'tokensPerFill'] as const) {
        if (b[field] !== undefined) report([...at, field], 'a cost bucket holds currency: use maxCost and costPerFill')
      }
      const amount = (value: string | number | undefined, field: string): number => {
        if (value === undefined) return 0
        const micros = cost().parseRate(value)
        if (typeof micros === 'string') report([...at, field], micros.replace('a price per million tokens', 'an amount of the currency'))
        else if (micros <= 0) report([...at, field], 'must be more than 0')
        return typeof micros === 'number' ? micros : 0
      }
      if (b.maxCost === undefined) report(at, 'a cost bucket needs maxCost (the budget per fillInterval, in the pricing currency)')
      const maxMicros = amount(b.maxCost, 'maxCost')
      const perFillMicros = b.costPerFill === undefined ? maxMicros : amount(b.costPerFill, 'costPerFill')
      out.cost = { maxMicros, perFillMicros, currency: b.currency ?? 'USD' }
    } else {
      for (const field of ['maxCost', 'costPerFill', 'currency'] as const) {
        if (b[field] !== undefined) report([...at, field], `only for type cost (this bucket counts ${type})`)
      }
      if (b.maxTokens === undefined) report(at, `a ${type} bucket needs maxTokens`)
      if (b.tokensPerFill === undefined) report(at, `a ${type} bucket needs tokensPerFill`)
    }
    if (b.key !== undefined) {
      // Buckets of type tokens and cost are decided once an ai backend has read the request: `llm` is known then.
      try {
        compileCel(b.key, type === 'requests' ? CEL_VARIABLES : LIMIT_KEY_VARIABLES)
      } catch (err) {
        const message = (err as Error).message
        report([...at, 'key'], type === 'requests' && /unknown variable "llm"/.test(message) ? `${message}; llm is known to buckets of type tokens and cost only (a requests bucket is decided before the body is read)` : message)
      }
      out.key = b.key
      out.maxKeys = b.maxKeys ?? DEFAULT_MAX_KEYS
    } else if (b.maxKeys !== undefined) report([...at, 'maxKeys'], 'only with key')
    return out
  })
}

/** What a limit key of a tokens or cost bucket sees: the request's variables and the LLM call's. */
export const LIMIT_KEY_VARIABLES = [...CEL_VARIABLES, 'llm'] as const

/**
 * LLM tokens are only counted on answers of `ai` backends: a token-based limit on a route
 * that has none, or on a backend that is not one, could never take a token — a config
 * mistake, so it is reported. (A gateway's limit covers every route, so it is not checked.)
 */
export function checkTokenLimits (policies: PolicySetIR, hasAiBackend: boolean, what: string, path: Path, report: Report): void {
  if (hasAiBackend) return
  const problem = `type tokens counts the LLM tokens of ai backends, and ${what}`
  policies.localRateLimit?.forEach((b, i) => {
    if (b.type === 'tokens') report([...path, 'localRateLimit', i, 'type'], problem)
    if (b.type === 'cost') report([...path, 'localRateLimit', i, 'type'], `type cost counts the cost of ai backends' answers, and ${what}`)
  })
  policies.remoteRateLimit?.descriptors.forEach((d, i) => {
    if (d.type === 'tokens') report([...path, 'remoteRateLimit', 'descriptors', i, 'type'], problem)
  })
}

/** Framing headers the proxy computes itself. */
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding'])

function transformToIR (c: NonNullable<TransformationConfig['request']>, side: 'request' | 'response', path: Path, report: Report): TransformIR {
  const variables = side === 'request' ? CEL_VARIABLES : RESPONSE_CEL_VARIABLES
  const out: TransformIR = {}
  const compile = (expression: string, at: Path) => {
    try {
      compileCel(expression, variables)
    } catch (err) {
      report(at, (err as Error).message)
    }
  }
  for (const op of ['set', 'add'] as const) {
    const entries = c[op]
    if (entries === undefined) continue
    const map: Record<string, string> = {}
    for (const [name, expression] of Object.entries(entries)) {
      const lower = name.toLowerCase()
      if (FRAMING_HEADERS.has(lower)) report([...path, op, name], `${lower} is set by the proxy (to the body's length); use body to change the body`)
      if (lower in map) report([...path, op, name], `header ${lower} is given twice (names are case-insensitive)`)
      compile(expression, [...path, op, name])
      map[lower] = expression
    }
    out[op] = map
  }
  if (c.remove !== undefined) out.remove = c.remove.map(h => h.toLowerCase())
  if (c.body !== undefined) {
    compile(c.body, [...path, 'body'])
    out.body = c.body
  }
  return out
}

export function transformationToIR (c: TransformationConfig, path: Path, report: Report): TransformationIR {
  const out: TransformationIR = {}
  if (c.request !== undefined) out.request = transformToIR(c.request, 'request', [...path, 'request'], report)
  if (c.response !== undefined) out.response = transformToIR(c.response, 'response', [...path, 'response'], report)
  if (c.request === undefined && c.response === undefined) report(path, 'needs request or response')
  return out
}

export function csrfToIR (c: CsrfConfig, path: Path, report: Report): CsrfIR {
  const additionalOrigins: string[] = []
  ;(c.additionalOrigins ?? []).forEach((o, i) => {
    const n = normalizeOrigin(o)
    if (n === null) report([...path, 'additionalOrigins', i], `"${o}" is not an origin (scheme://host[:port])`)
    else additionalOrigins.push(n)
  })
  return { additionalOrigins }
}

function pathModifierToIR (c: PathModifierConfig, path: Path, report: Report): PathModifierIR | undefined {
  if ((c.full === undefined) === (c.prefix === undefined)) {
    report(path, 'needs exactly one of full or prefix')
    return undefined
  }
  if (c.prefix !== undefined) {
    if (atGateway(path)) {
      report([...path, 'prefix'], 'ReplacePrefixMatch replaces the prefix a route matched; gateway policies run before routing (use full, or put the policy on the route)')
      return undefined
    }
    return { prefix: c.prefix }
  }
  return { full: c.full! }
}

export function requestRedirectToIR (c: RequestRedirectConfig, path: Path, report: Report): RequestRedirectIR {
  const ir: RequestRedirectIR = { status: c.status ?? 302 }
  if (c.scheme !== undefined) ir.scheme = c.scheme
  if (c.hostname !== undefined) ir.hostname = c.hostname.toLowerCase()
  if (c.port !== undefined) ir.port = c.port
  if (c.path !== undefined) {
    const p = pathModifierToIR(c.path, [...path, 'path'], report)
    if (p !== undefined) ir.path = p
  }
  return ir
}

export function urlRewriteToIR (c: UrlRewriteConfig, path: Path, report: Report): UrlRewriteIR {
  const ir: UrlRewriteIR = {}
  if (c.hostname !== undefined) ir.hostname = c.hostname.toLowerCase()
  if (c.path !== undefined) {
    const p = pathModifierToIR(c.path, [...path, 'path'], report)
    if (p !== undefined) ir.path = p
  }
  return ir
}

export function corsToIR (c: CorsConfig, path: Path, report: Report): CorsIR {
  const allowOrigins = c.allowOrigins ?? []
  allowOrigins.forEach((o, i) => {
    const problem = checkOriginPattern(o)
    if (problem !== null) report([...path, 'allowOrigins', i], problem)
  })
  for (const field of ['allowOrigins', 'allowMethods'] as const) {
    const list = c[field] ?? []
    if (list.includes('*') && list.length > 1) report([...path, field], `* cannot be listed alongside other ${field === 'allowOrigins' ? 'origins' : 'methods'}`)
  }
  const ir: CorsIR = {
    allowOrigins,
    allowMethods: c.allowMethods ?? [],
    allowHeaders: (c.allowHeaders ?? []).map(h => h.toLowerCase()),
    exposeHeaders: (c.exposeHeaders ?? []).map(h => h.toLowerCase()),
    allowCredentials: c.allowCredentials ?? false
  }
  if (c.maxAge !== undefined) {
    const seconds = typeof c.maxAge === 'number' ? c.maxAge : Math.floor(parseDuration(c.maxAge) / 1000)
    if (seconds < 1) report([...path, 'maxAge'], 'must be at least 1s')
    ir.maxAge = seconds
  }
  return ir
}

/** Checks that need several policies of one attachment: a redirect and a rewrite exclude each other. */
export function checkHttpPolicySet (out: PolicySetIR, path: Path, report: Report): void {
  if (out.requestRedirect !== undefined && out.urlRewrite !== undefined) {
    report([...path, 'urlRewrite'], 'requestRedirect and urlRewrite cannot be used together (the redirect answers; nothing is forwarded)')
  }
  if (out.requestRedirect !== undefined && out.directResponse !== undefined) {
    report([...path, 'directResponse'], 'requestRedirect and directResponse both answer the request: use one')
  }
}

/**
 * ReplacePrefixMatch (requestRedirect or urlRewrite `path.prefix`) needs the route to have
 * been selected by a path prefix: every match of the route must be a pathPrefix (as the
 * Gateway API requires of an HTTPRoute rule).
 */
export function checkPrefixModifiers (policies: PolicySetIR, matches: readonly RouteMatchIR[], path: Path, report: Report): void {
  for (const kind of ['requestRedirect', 'urlRewrite'] as const) {
    const mod = policies[kind]?.path
    if (mod === undefined || !('prefix' in mod)) continue
    const other = matches.find(m => m.path.kind !== 'prefix')
    if (other !== undefined) {
      report([...path, kind, 'path', 'prefix'], `ReplacePrefixMatch needs every path match of the route to be a pathPrefix (found ${other.path.kind} ${JSON.stringify(other.path.value)})`)
    }
  }
}
