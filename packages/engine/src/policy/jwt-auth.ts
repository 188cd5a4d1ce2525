/**
 * `jwtAuth` (any route) and `mcpAuthentication` (MCP routes): validate a bearer token against
 * one or more providers and record the claims for authorization rules. They differ in how
 * they refuse: `jwtAuth` answers plain text; `mcpAuthentication` answers as the MCP
 * authorization spec asks (JSON body, `WWW-Authenticate: Bearer ... resource_metadata=`
 * pointing at the RFC 9728 document Portico serves for the route).
 */

import { httpClientAttributes, startChildSpan } from '../trace/otel.ts'
import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { JwtAuthIR, JwtProviderIR, McpAuthenticationIR, TokenLocationIR, AuthMode } from '../ir/policy.ts'
import type { PolicyServices } from './services.ts'
import { DEFAULT_JWT_ALGORITHMS, VerifiedTokenCache, type JwtProvider, type JwtResult } from '../auth/jwt.ts'
import { CONTINUE } from './header-modifier.ts'
import { dropUpstreamHeader } from '../http/headers.ts'
import { baseUrl, PROTECTED_RESOURCE_PATH } from './protected-resource.ts'

export function jwtProvider (ir: JwtProviderIR, services: PolicyServices): JwtProvider {
  return {
    issuer: ir.issuer,
    audiences: ir.audiences,
    jwks: services.jwks(ir.jwks),
    algorithms: ir.algorithms ?? DEFAULT_JWT_ALGORITHMS,
    leewaySeconds: ir.leewaySeconds ?? 30
  }
}

/** The token at `location`, or null. Also says how to remove it before forwarding. */
function readToken (ctx: RequestContext, location: TokenLocationIR): string | null {
  if ('header' in location) {
    const value = ctx.headers[location.header]
    const text = Array.isArray(value) ? value[0] : value
    if (text === undefined) return null
    if (location.prefix === '') return text.trim()
    return text.slice(0, location.prefix.length).toLowerCase() === location.prefix.toLowerCase() ? text.slice(location.prefix.length).trim() : null
  }
  if ('query' in location) return new URLSearchParams(ctx.query).get(location.query)
  const cookies = String(ctx.headers.cookie ?? '')
  for (const part of cookies.split(';')) {
    const eq = part.indexOf('=')
    if (eq !== -1 && part.slice(0, eq).trim() === location.cookie) return decodeURIComponent(part.slice(eq + 1).trim())
  }
  return null
}

function removeToken (ctx: RequestContext, location: TokenLocationIR): void {
  if ('header' in location) dropUpstreamHeader(ctx.headers, location.header)
}

interface Refusal {
  (ctx: RequestContext, reason: string, tokenPresent: boolean): PolicyOutcome
}

function authenticator (options: {
  kind: 'jwt'
  mode: AuthMode
  providers: JwtProvider[]
  location: TokenLocationIR
  keepToken: boolean
  claimsToHeaders: Array<{ claim: string, header: string }>
  refuse: Refusal
}): CompiledPolicy {
  const { mode, providers, location, refuse } = options
  const cache = new VerifiedTokenCache(Math.max(...providers.map(p => p.leewaySeconds), 0))
  /** What the verification result means for the request. */
  const decide = (ctx: RequestContext, result: JwtResult, token: string): PolicyOutcome => {
    if (!result.ok) {
      if (mode === 'permissive') {
        trace(ctx, 'skip', `invalid token ignored (permissive): ${result.reason}`)
        return CONTINUE
      }
      trace(ctx, 'deny', result.reason)
      return refuse(ctx, result.reason, true)
    }
    ctx.auth.jwt = result.claims
    ctx.auth.credential = { kind: 'jwt', token }
    for (const { claim, header } of options.claimsToHeaders) {
      const v = result.claims[claim]
      if (v !== undefined) ctx.headers[header] = typeof v === 'string' ? v : JSON.stringify(v)
    }
    if (!options.keepToken) removeToken(ctx, location)
    if (ctx.tracer !== null) trace(ctx, 'apply', `token from ${result.issuer} valid (sub ${String(result.claims.sub ?? '-')})`)
    return CONTINUE
  }
  return {
    kind: options.kind,
    onRequest (ctx: RequestContext): PolicyOutcome | Promise<PolicyOutcome> {
      const token = readToken(ctx, location)
      if (token === null || token === '') {
        if (mode === 'strict') {
          trace(ctx, 'deny', 'no bearer token')
          return refuse(ctx, 'no bearer token', false)
        }
        trace(ctx, 'skip', 'no token')
        return CONTINUE
      }
      // A token seen before is decided without waiting on anything.
      const known = cache.lookup(token)
      if (known !== undefined) return decide(ctx, known, token)
      if (ctx.span !== null && ctx.span.recording) return verifyTraced(ctx, token)
      return cache.verify(token, providers).then(result => decide(ctx, result, token))
    }
  }

  /** A verification that fetched a provider's keys shows the fetch as a span of the request. */
  async function verifyTraced (ctx: RequestContext, token: string): Promise<PolicyOutcome> {
    const before = providers.map(p => p.jwks.fetches)
    const result = await cache.verify(token, providers)
    providers.forEach((p, i) => {
      const f = p.jwks.lastFetch
      if (f === null || p.jwks.fetches === before[i]) return
      const u = new URL(f.url)
      const span = startChildSpan(ctx, 'GET', { ...httpClientAttributes('GET', { scheme: u.protocol.slice(0, -1), host: u.hostname, port: Number(u.port !== '' ? u.port : u.protocol === 'https:' ? 443 : 80), pathAndQuery: u.pathname + u.search }), 'http.response.status_code': f.status ?? undefined, 'portico.jwks.issuer': p.issuer }, f.start)
      if (f.error !== null) span?.setError('JwksFetchFailed', f.error)
      span?.end(f.end)
    })
    return decide(ctx, result, token)
  }
}

function trace (ctx: RequestContext, result: 'apply' | 'skip' | 'deny', details: string): void {
  ctx.tracer?.emit({ type: 'policy', kind: 'jwt', result: { type: result, details } }, { severity: result === 'deny' ? 'warn' : 'info' })
}

export function jwtAuth (ir: JwtAuthIR, services: PolicyServices): CompiledPolicy {
  return authenticator({
    kind: 'jwt',
    mode: ir.mode,
    providers: ir.providers.map(p => jwtProvider(p, services)),
    location: ir.location,
    keepToken: ir.keepToken,
    claimsToHeaders: ir.claimsToHeaders,
    refuse: (_ctx, reason, present) => ({
      action: 'respond',
      status: 401,
      body: `authentication failure: ${reason}`,
      headers: { 'www-authenticate': present ? `Bearer error="invalid_token", error_description="${reason}"` : 'Bearer' },
      reason: 'JwtAuth'
    })
  })
}

export function mcpAuthentication (ir: McpAuthenticationIR, services: PolicyServices): CompiledPolicy {
  return authenticator({
    kind: 'jwt',
    mode: ir.mode,
    providers: [jwtProvider(ir.provider, services)],
    // Tokens meant for the gateway are not passed on to MCP servers (no token passthrough).
    location: { header: 'authorization', prefix: 'Bearer ' },
    keepToken: false,
    claimsToHeaders: [],
    refuse: (ctx, reason, present) => {
      const metadata = `${baseUrl(ctx)}${PROTECTED_RESOURCE_PATH}${ctx.originalPath === '/' ? '' : ctx.originalPath}`
      const challenge = present
        ? `Bearer error="invalid_token", error_description="${reason}", resource_metadata="${metadata}"`
        : `Bearer resource_metadata="${metadata}"`
      return {
        action: 'respond',
        status: 401,
        body: JSON.stringify({ error: present ? 'invalid_token' : 'unauthorized', error_description: reason }),
        headers: { 'www-authenticate': challenge, 'content-type': 'application/json' },
        reason: 'JwtAuth'
      }
    }
  })
}
