/**
 * `cors`: Cross-Origin Resource Sharing as the Gateway API's HTTPCORSFilter specifies it.
 *
 * - Origins: `*` (any), an exact `scheme://host[:port]`, or a host with a `*` that matches
 *   any non-empty run of characters to its left (`https://*.example.com` matches
 *   `https://a.example.com` and `https://a.b.example.com`, not `https://example.com`). A
 *   missing port means the scheme's default (80, 443), on both sides of the comparison.
 * - A preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`) is answered by
 *   the proxy with 200: for an allowed origin with Access-Control-Allow-Origin, -Methods,
 *   -Headers, -Expose-Headers, -Max-Age and -Credentials; for any other origin with none of
 *   them (the browser then refuses the actual request).
 * - Other requests from an allowed origin go on; their response (the backend's or the
 *   proxy's own) gets Access-Control-Allow-Origin, -Credentials and -Expose-Headers.
 *   Responses to other origins get no CORS headers from the proxy.
 * - `*` with credentials: the proxy never answers a literal `*` then -- it echoes the
 *   request's Origin (and `Vary: Origin`), the requested method
 *   (Access-Control-Request-Method) and headers (Access-Control-Request-Headers, left out
 *   when absent), and for exposeHeaders the response's own header names. Without
 *   credentials, `*` is answered as `*`.
 *
 * When several levels (gateway, route, backend) carry `cors`, the innermost one the request
 * reached decides, alone. Decisions are remembered per distinct Origin value (up to 512), so
 * the pattern matching runs once per origin, not once per request.
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { CorsIR } from '../ir/policy.ts'
import { CONTINUE } from './header-modifier.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { compileOrigins, decidingIr } from '../request/cors-origins.ts'
import { canonicalOrigin } from '../ir/origin.ts'

// Which origins a cors policy allows, and which cors policy decides for a request, are in
// request/cors-origins.ts: the MCP Origin check (mcp/client/http.ts) reads them too.

function isPreflight (ctx: RequestContext): boolean {
  return ctx.method === 'OPTIONS' && ctx.req.headers['access-control-request-method'] !== undefined
}

/** Origins seen -> allowed?, so the regular expressions run once per distinct origin. */
const ORIGIN_CACHE_SIZE = 512

function joinList (v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v
}

function addVaryOrigin (headers: HeaderMap): void {
  const vary = joinList(headers.vary)
  if (vary === undefined || vary === '') headers.vary = 'Origin'
  else if (vary.trim() !== '*' && !vary.split(',').some(t => t.trim().toLowerCase() === 'origin')) headers.vary = `${vary}, Origin`
}

export function cors (ir: CorsIR): CompiledPolicy {
  const origins = compileOrigins(ir.allowOrigins)
  const credentials = ir.allowCredentials
  const literalStar = origins.any && !credentials
  const anyMethod = ir.allowMethods.includes('*')
  const anyHeader = ir.allowHeaders.includes('*')
  const anyExposed = ir.exposeHeaders.includes('*')
  const methods = ir.allowMethods.join(', ')
  const allowHeaders = ir.allowHeaders.join(', ')
  const exposeHeaders = ir.exposeHeaders.join(', ')
  const maxAge = ir.maxAge !== undefined ? String(ir.maxAge) : undefined
  const seen = new Map<string, boolean>()
  const allows = (origin: string): boolean => {
    let ok = seen.get(origin)
    if (ok === undefined) {
      const canonical = canonicalOrigin(origin)
      ok = origins.any || (canonical !== null && origins.test(canonical))
      if (seen.size >= ORIGIN_CACHE_SIZE) seen.clear()
      seen.set(origin, ok)
    }
    return ok
  }

  const trace = (ctx: RequestContext, type: 'apply' | 'skip' | 'deny', details: string) => {
    ctx.tracer?.emit({ type: 'policy', kind: 'cors', result: { type, details } })
  }

  /** Access-Control-Allow-Origin (+ Vary) and -Credentials. */
  const originHeaders = (headers: HeaderMap, origin: string): void => {
    if (literalStar) {
      headers['access-control-allow-origin'] = '*'
    } else {
      headers['access-control-allow-origin'] = origin
      addVaryOrigin(headers)
    }
    if (credentials) headers['access-control-allow-credentials'] = 'true'
  }

  const preflight = (ctx: RequestContext, origin: string): PolicyOutcome => {
    const headers: HeaderMap = {}
    originHeaders(headers, origin)
    if (ir.allowMethods.length > 0) {
      if (!anyMethod) headers['access-control-allow-methods'] = methods
      else if (!credentials) headers['access-control-allow-methods'] = '*'
      else headers['access-control-allow-methods'] = joinList(ctx.req.headers['access-control-request-method'])
    }
    if (ir.allowHeaders.length > 0) {
      if (!anyHeader) headers['access-control-allow-headers'] = allowHeaders
      else if (!credentials) headers['access-control-allow-headers'] = '*'
      else {
        const requested = joinList(ctx.req.headers['access-control-request-headers'])
        if (requested !== undefined && requested !== '') headers['access-control-allow-headers'] = requested
      }
    }
    if (ir.exposeHeaders.length > 0 && !(anyExposed && credentials)) headers['access-control-expose-headers'] = anyExposed ? '*' : exposeHeaders
    if (maxAge !== undefined) headers['access-control-max-age'] = maxAge
    trace(ctx, 'apply', `preflight from ${origin} answered`)
    return { action: 'respond', status: 200, body: '', headers: headers as Record<string, string | string[]>, reason: 'CorsPreflight' }
  }

  return {
    kind: 'cors',
    onRequest (ctx: RequestContext): PolicyOutcome {
      const origin = ctx.req.headers.origin
      if (origin === undefined) return CONTINUE
      const allowed = allows(origin)
      if (isPreflight(ctx)) {
        if (allowed) return preflight(ctx, origin)
        trace(ctx, 'deny', `preflight from ${origin}: origin not allowed, answered without CORS headers`)
        return { action: 'respond', status: 200, body: '', reason: 'CorsPreflight' }
      }
      if (!allowed && ctx.tracer !== null) trace(ctx, 'skip', `origin ${origin} not allowed: no CORS headers`)
      return CONTINUE
    },
    onResponse (ctx: RequestContext): void {
      const origin = ctx.req.headers.origin
      // Preflights got their headers with the answer; inner policies decide for outer ones.
      if (origin === undefined || isPreflight(ctx) || decidingIr(ctx) !== ir || !allows(origin)) return
      const headers = ctx.responseHeaders
      originHeaders(headers, origin)
      if (ir.exposeHeaders.length > 0) {
        if (!anyExposed) headers['access-control-expose-headers'] = exposeHeaders
        else if (!credentials) headers['access-control-expose-headers'] = '*'
        else {
          const names = Object.keys(headers).filter(n => !n.startsWith('access-control-') && headers[n] !== undefined)
          if (names.length > 0) headers['access-control-expose-headers'] = names.join(', ')
        }
      }
      if (ctx.tracer !== null) trace(ctx, 'apply', `CORS headers added for ${origin}`)
    }
  }
}
