/**
 * Config policies → policy IR. Most pass through; identity policies are normalized (single
 * provider forms expanded, JWKS files read, defaults made explicit) and CEL rules are
 * compiled here so a bad expression is a config error naming the rule.
 */

import type { ApiKeyConfig, AuthorizationConfig, BasicAuthConfig, ExtAuthzConfig, JwksConfig, JwtAuthConfig, McpAuthenticationConfig, OidcConfig } from './schema.ts'
import { parseHostTarget } from './to-ir.ts'
import { parseHtpasswd } from '../auth/htpasswd.ts'
import { sha256Hex } from '../policy/api-key.ts'
import type { AuthorizationRuleIR, ExtAuthzIR, JwksIR, JwtProviderIR, OidcIR, PolicySetIR, TokenLocationIR } from '../ir/policy.ts'
import { checkTimerMs, parseDuration } from '../util/duration.ts'
import { compileCel } from '../cel/expression.ts'
import { extProcToIR, remoteRateLimitToIR, type ExtProcConfig, type RemoteRateLimitConfig } from './traffic-to-ir.ts'
import { checkHttpPolicySet, corsToIR, csrfToIR, localRateLimitToIR, requestRedirectToIR, transformationToIR, urlRewriteToIR } from './http-policy-to-ir.ts'
import type { CorsConfig, CsrfConfig, LocalRateLimitConfig, RequestRedirectConfig, TransformationConfig, UrlRewriteConfig } from './http-policy-schema.ts'
import { hostPort } from '../util/host-port.ts'
import { readFileField } from './referenced-file.ts'
import { PorticoError } from '../util/errors.ts'

type Path = Array<string | number>
type Report = (path: Path, message: string) => void

export interface PolicyContext {
  baseDir: string
  readFile: (path: string) => string
  report: Report
}

/**
 * The policies that are not passed through as written: the IR key each one fills (jwtAuth
 * becomes `jwt`) and its converter, which reports problems and returns undefined when the
 * policy cannot be built.
 */
const CONVERTERS: Record<string, { key: string, toIR: (value: unknown, path: Path, pc: PolicyContext) => unknown }> = {
  jwtAuth: { key: 'jwt', toIR: (v, p, pc) => jwtAuthToIR(v as JwtAuthConfig, p, pc) },
  mcpAuthentication: { key: 'mcpAuthentication', toIR: (v, p, pc) => mcpAuthenticationToIR(v as McpAuthenticationConfig, p, pc) },
  authorization: { key: 'authorization', toIR: (v, p, pc) => authorizationToIR(v as AuthorizationConfig, p, pc.report) },
  basicAuth: { key: 'basicAuth', toIR: (v, p, pc) => basicAuthToIR(v as BasicAuthConfig, p, pc) },
  apiKey: { key: 'apiKey', toIR: (v, p, pc) => apiKeyToIR(v as ApiKeyConfig, p, pc) },
  extAuthz: { key: 'extAuthz', toIR: (v, p, pc) => extAuthzToIR(v as ExtAuthzConfig, p, pc.report) },
  oidc: { key: 'oidc', toIR: (v, p, pc) => oidcToIR(v as OidcConfig, p, pc.report) },
  remoteRateLimit: { key: 'remoteRateLimit', toIR: (v, p, pc) => remoteRateLimitToIR(v as RemoteRateLimitConfig, p, pc.report) },
  extProc: { key: 'extProc', toIR: (v, p, pc) => extProcToIR(v as ExtProcConfig, p, pc.report) },
  localRateLimit: { key: 'localRateLimit', toIR: (v, p, pc) => localRateLimitToIR(v as LocalRateLimitConfig, p, pc.report) },
  transformation: { key: 'transformation', toIR: (v, p, pc) => transformationToIR(v as TransformationConfig, p, pc.report) },
  csrf: { key: 'csrf', toIR: (v, p, pc) => csrfToIR(v as CsrfConfig, p, pc.report) },
  requestRedirect: { key: 'requestRedirect', toIR: (v, p, pc) => requestRedirectToIR(v as RequestRedirectConfig, p, pc.report) },
  urlRewrite: { key: 'urlRewrite', toIR: (v, p, pc) => urlRewriteToIR(v as UrlRewriteConfig, p, pc.report) },
  cors: { key: 'cors', toIR: (v, p, pc) => corsToIR(v as CorsConfig, p, pc.report) }
}

function mcpAuthenticationToIR (c: McpAuthenticationConfig, path: Path, pc: PolicyContext): PolicySetIR['mcpAuthentication'] | undefined {
  const provider = providerToIR(c, path, pc)
  if (provider === undefined) return undefined
  return { mode: c.mode ?? 'strict', provider, scopesSupported: c.scopesSupported ?? [], resourceMetadata: c.resourceMetadata ?? {} }
}

/** Translates one `policies:` object (any attachment level). */
export function policiesToIR (policies: Record<string, unknown>, path: Path, pc: PolicyContext): PolicySetIR {
  const out: Record<string, unknown> = {}
  for (const [kind, value] of Object.entries(policies)) {
    if (value === undefined) continue
    const converter = CONVERTERS[kind]
    if (converter === undefined) {
      out[kind] = value
      continue
    }
    const ir = converter.toIR(value, [...path, kind], pc)
    if (ir !== undefined) out[converter.key] = ir
  }
  checkHttpPolicySet(out as PolicySetIR, path, pc.report)
  if (out.jwt !== undefined && out.mcpAuthentication !== undefined) {
    pc.report([...path, 'mcpAuthentication'], 'use either jwtAuth or mcpAuthentication on one route, not both')
  }
  return out as PolicySetIR
}

function jwksToIR (c: JwksConfig, path: Path, pc: PolicyContext): JwksIR | undefined {
  const given = (['url', 'file', 'keys'] as const).filter(k => c[k] !== undefined)
  if (given.length !== 1) {
    pc.report(path, `needs exactly one of url, file or keys${given.length > 1 ? ` (got ${given.join(', ')})` : ''}`)
    return undefined
  }
  if (c.url !== undefined) return { url: c.url }
  if (c.keys !== undefined) return { keys: { keys: c.keys } }
  const at = [...path, 'file']
  const read = readFileField(c.file!, at, pc)
  if (read === undefined) return undefined
  try {
    const parsed = JSON.parse(read.text) as { keys?: unknown }
    if (!Array.isArray(parsed?.keys)) throw new PorticoError('PORTICO_BAD_JWKS', 'no "keys" list')
    return { keys: { keys: parsed.keys as Array<Record<string, unknown>> } }
  } catch (err) {
    // JSON.parse's message quotes the text near the error: the file's own words, which may
    // be a secret (a private JWK, a file named by mistake), so it is not passed on.
    const why = err instanceof SyntaxError ? 'not JSON' : (err as Error).message
    pc.report(at, `cannot use ${read.full} as a JWKS: ${why}`)
    return undefined
  }
}

function providerToIR (c: { issuer?: string, audiences?: string[], jwks?: JwksConfig, algorithms?: string[], leeway?: string }, path: Path, pc: PolicyContext): JwtProviderIR | undefined {
  if (c.issuer === undefined || c.audiences === undefined || c.jwks === undefined) {
    const missing = (['issuer', 'audiences', 'jwks'] as const).filter(k => c[k] === undefined)
    pc.report(path, `missing ${missing.join(', ')}`)
    return undefined
  }
  const jwks = jwksToIR(c.jwks, [...path, 'jwks'], pc)
  if (jwks === undefined) return undefined
  const ir: JwtProviderIR = { issuer: c.issuer, audiences: c.audiences, jwks }
  if (c.algorithms !== undefined) ir.algorithms = c.algorithms
  if (c.leeway !== undefined) ir.leewaySeconds = parseDuration(c.leeway) / 1000
  return ir
}

function jwtAuthToIR (c: JwtAuthConfig, path: Path, pc: PolicyContext) {
  const inline = c.issuer !== undefined || c.audiences !== undefined || c.jwks !== undefined
  if (inline && c.providers !== undefined) {
    pc.report(path, 'give either providers, or issuer/audiences/jwks for a single provider, not both')
    return undefined
  }
  if (!inline && c.providers === undefined) {
    pc.report(path, 'needs providers (or issuer, audiences and jwks)')
    return undefined
  }
  const providers = inline
    ? [providerToIR(c, path, pc)]
    : c.providers!.map((p, i) => providerToIR(p, [...path, 'providers', i], pc))
  if (providers.some(p => p === undefined)) return undefined
  let location: TokenLocationIR = { header: 'authorization', prefix: 'Bearer ' }
  if (c.location !== undefined) {
    const l = c.location
    const kinds = (['header', 'query', 'cookie'] as const).filter(k => l[k] !== undefined)
    if (kinds.length !== 1) pc.report([...path, 'location'], 'needs exactly one of header, query or cookie')
    else if (l.header !== undefined) location = { header: l.header.toLowerCase(), prefix: l.prefix ?? (l.header.toLowerCase() === 'authorization' ? 'Bearer ' : '') }
    else if (l.query !== undefined) location = { query: l.query }
    else location = { cookie: l.cookie! }
  }
  return {
    mode: c.mode ?? 'optional',
    providers: providers as JwtProviderIR[],
    location,
    keepToken: c.keepToken ?? false,
    claimsToHeaders: (c.claimsToHeaders ?? []).map(x => ({ claim: x.claim, header: x.header.toLowerCase() }))
  }
}

function authorizationToIR (c: AuthorizationConfig, path: Path, report: Report) {
  const rules: AuthorizationRuleIR[] = c.rules.map((r, i) => {
    const rule: AuthorizationRuleIR = typeof r === 'string' ? { allow: r } : r
    const expression = 'allow' in rule ? rule.allow : 'deny' in rule ? rule.deny : rule.require
    try {
      compileCel(expression, undefined, { expectBool: true })
    } catch (err) {
      report([...path, 'rules', i], (err as Error).message)
    }
    return rule
  })
  return { rules }
}

function basicAuthToIR (c: BasicAuthConfig, path: Path, pc: PolicyContext) {
  const mode = c.mode ?? 'strict'
  const realm = c.realm ?? 'portico'
  if (typeof c.htpasswd === 'string') {
    const { entries, errors } = parseHtpasswd(c.htpasswd)
    for (const e of errors) pc.report([...path, 'htpasswd'], `line ${e.line}: ${e.problem}`)
    if (entries.length === 0 && errors.length === 0) pc.report([...path, 'htpasswd'], 'no users')
    return { mode, realm, htpasswd: c.htpasswd }
  }
  const at = [...path, 'htpasswd', 'file']
  const read = readFileField(c.htpasswd.file, at, pc)
  if (read === undefined) return undefined
  const { entries, errors } = parseHtpasswd(read.text)
  if (errors.length > 0) {
    // One error for the file, by line numbers only: a file that is not htpasswd (a shadow
    // file, a key named by mistake) would otherwise fill the output with errors, and its
    // lines are never shown — they may be secrets.
    const first = errors.slice(0, 5).map(e => e.line).join(', ')
    const more = errors.length > 5 ? ` and ${errors.length - 5} more` : ''
    pc.report(at, `${read.full} is not an htpasswd file: line${errors.length === 1 ? '' : 's'} ${first}${more} ${errors.length === 1 ? 'is' : 'are'} not user:hash with a bcrypt, apr1 or SHA hash (${entries.length} valid entr${entries.length === 1 ? 'y' : 'ies'}; the lines are not shown)`)
    return undefined
  }
  if (entries.length === 0) pc.report(at, `${read.full} has no users`)
  return { mode, realm, htpasswd: read.text }
}

function apiKeyToIR (c: ApiKeyConfig, path: Path, pc: PolicyContext) {
  const keys = c.keys.map((k, i) => {
    if ((k.key === undefined) === (k.keyHash === undefined)) pc.report([...path, 'keys', i], 'needs exactly one of key or keyHash')
    return { name: k.name ?? `key${i}`, keyHash: k.keyHash ?? `sha256:${sha256Hex(k.key ?? '')}`, metadata: k.metadata ?? {} }
  })
  let location: { header: string, prefix: string } | { query: string } = { header: 'authorization', prefix: 'Bearer ' }
  const l = c.location
  if (l !== undefined) {
    if ((l.header === undefined) === (l.query === undefined)) pc.report([...path, 'location'], 'needs exactly one of header or query')
    else if (l.query !== undefined) location = { query: l.query }
    else location = { header: l.header!.toLowerCase(), prefix: l.prefix ?? (l.header!.toLowerCase() === 'authorization' ? 'Bearer ' : '') }
  }
  return { mode: c.mode ?? 'strict', location, keys }
}

export const DEFAULT_EXT_AUTHZ_TIMEOUT_MS = 1000

export function extAuthzToIR (c: ExtAuthzConfig, path: Path, report: Report): ExtAuthzIR | undefined {
  const target = parseHostTarget(c.host)
  if (typeof target === 'string') {
    report([...path, 'host'], target)
    return undefined
  }
  let protocol: ExtAuthzIR['protocol'] = { grpc: {} }
  if (c.protocol !== undefined) {
    const given = (['grpc', 'http'] as const).filter(k => c.protocol![k] !== undefined)
    if (given.length !== 1) report([...path, 'protocol'], 'needs exactly one of grpc or http')
    else if (c.protocol.http !== undefined) {
      protocol = {
        http: {
          pathPrefix: (c.protocol.http.path ?? '').replace(/\/+$/, ''),
          allowedResponseHeaders: (c.protocol.http.allowedResponseHeaders ?? []).map(h => h.toLowerCase())
        }
      }
    }
  }
  if (c.timeout !== undefined) checkTimerMs(parseDuration(c.timeout), [...path, 'timeout'], report)
  const ir: ExtAuthzIR = {
    host: `${target.protocol}://${hostPort(target.host, target.port)}`,
    protocol,
    failureMode: c.failureMode ?? 'deny',
    timeoutMs: c.timeout !== undefined ? parseDuration(c.timeout) : DEFAULT_EXT_AUTHZ_TIMEOUT_MS,
    includeRequestHeaders: c.includeRequestHeaders !== undefined ? c.includeRequestHeaders.map(h => h.toLowerCase()) : null,
    includeRequestBody: c.includeRequestBody !== undefined ? { maxBytes: c.includeRequestBody.maxBytes, packAsBytes: c.includeRequestBody.packAsBytes ?? false } : null,
    contextExtensions: c.contextExtensions ?? {}
  }
  if (ir.timeoutMs <= 0) report([...path, 'timeout'], 'must be more than 0')
  return ir
}

function oidcToIR (c: OidcConfig, path: Path, report: Report): OidcIR {
  const scopes = c.scopes ?? ['openid']
  const ir: OidcIR = {
    issuer: c.issuer,
    clientId: c.clientId,
    redirectUri: c.redirectUri,
    scopes: scopes.includes('openid') ? scopes : ['openid', ...scopes],
    cookieName: c.cookieName ?? 'portico_session',
    logoutPath: c.logoutPath ?? '/logout'
  }
  if (c.clientSecret !== undefined) ir.clientSecret = c.clientSecret
  if (c.sessionKey !== undefined) ir.sessionKey = c.sessionKey
  if (c.postLogoutRedirectUri !== undefined) ir.postLogoutRedirectUri = c.postLogoutRedirectUri
  if (c.sessionTtl !== undefined) ir.sessionTtlSeconds = parseDuration(c.sessionTtl) / 1000
  for (const field of ['issuer', 'redirectUri', 'postLogoutRedirectUri'] as const) {
    const value = c[field]
    if (value === undefined) continue
    if (value.startsWith('/')) {
      if (field === 'redirectUri' && /[?#]/.test(value)) report([...path, field], 'must not have a query or fragment')
      continue
    }
    try {
      const url = new URL(value)
      if (field === 'redirectUri' && (url.search !== '' || url.hash !== '')) report([...path, field], 'must not have a query or fragment')
    } catch {
      report([...path, field], `invalid URL "${value}"`)
    }
  }
  const callback = c.redirectUri.startsWith('/') ? c.redirectUri : URL.canParse(c.redirectUri) ? new URL(c.redirectUri).pathname : ''
  if (callback === ir.logoutPath) report([...path, 'logoutPath'], 'must differ from the redirect URI\'s path')
  if (ir.sessionTtlSeconds !== undefined && ir.sessionTtlSeconds < 1) report([...path, 'sessionTtl'], 'must be at least 1s')
  return ir
}
