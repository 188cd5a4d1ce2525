/**
 * `csrf`: refuses cross-origin state-changing requests from browsers, with
 * `403 CSRF validation failed`. GET, HEAD and OPTIONS always pass. For other methods:
 *
 * 1. With an `Origin` header (other than `null`): it passes when the origin's host (and
 *    port) is the request's Host, or when the origin is one of `additionalOrigins`;
 *    otherwise it is refused.
 * 2. Without one (or with `Origin: null`): it is refused when `Sec-Fetch-Site` says
 *    `cross-site` or `same-site` (the browser says it comes from another origin), and
 *    passes otherwise — `same-origin`, `none` (typed by the user), or no header at all
 *    (not a browser: curl, servers).
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { CsrfIR } from '../ir/policy.ts'
import { CONTINUE } from './header-modifier.ts'
import { normalizeOrigin } from '../ir/origin.ts'

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

const DEFAULT_PORT: Record<string, string> = { 'http:': '80', 'https:': '443' }

/** The origin's `host[:port]` as a Host header would carry it (default port left out). */
function originAuthority (origin: string): string | null {
  try {
    const url = new URL(origin)
    return url.host
  } catch {
    return null
  }
}

function withoutDefaultPort (host: string, scheme: string): string {
  const port = DEFAULT_PORT[scheme]
  return port !== undefined && host.endsWith(`:${port}`) ? host.slice(0, -port.length - 1) : host
}

export function csrf (ir: CsrfIR): CompiledPolicy {
  // Compared with the request's normalised Origin, so normalised here too (an IR from another
  // source than the YAML front end may spell `https://Example.com:443`).
  const additional = new Set(ir.additionalOrigins.map(o => normalizeOrigin(o) ?? o))
  const denied: PolicyOutcome = { action: 'respond', status: 403, body: 'CSRF validation failed', reason: 'Csrf' }
  const deny = (ctx: RequestContext, why: string): PolicyOutcome => {
    ctx.tracer?.emit({ type: 'policy', kind: 'csrf', result: { type: 'deny', details: why } }, { severity: 'warn' })
    return denied
  }
  const pass = (ctx: RequestContext, why: string): PolicyOutcome => {
    ctx.tracer?.emit({ type: 'policy', kind: 'csrf', result: { type: 'apply', details: why } })
    return CONTINUE
  }
  return {
    kind: 'csrf',
    onRequest (ctx: RequestContext): PolicyOutcome {
      if (SAFE_METHODS.has(ctx.method)) return CONTINUE
      const origin = ctx.req.headers.origin
      if (origin !== undefined && origin !== 'null') {
        const normalized = normalizeOrigin(origin)
        if (normalized === null) return deny(ctx, `malformed Origin ${JSON.stringify(origin)}`)
        const authority = originAuthority(normalized)
        const scheme = normalized.slice(0, normalized.indexOf('//'))
        if (authority !== null && ctx.host !== '' && withoutDefaultPort(ctx.host.toLowerCase(), scheme) === authority) return pass(ctx, `Origin ${origin} is the request's own host`)
        if (additional.has(normalized)) return pass(ctx, `Origin ${origin} is in additionalOrigins`)
        return deny(ctx, `Origin ${origin} is neither host ${ctx.host} nor in additionalOrigins`)
      }
      const site = ctx.req.headers['sec-fetch-site']
      if (site === 'cross-site' || site === 'same-site') return deny(ctx, `no usable Origin and Sec-Fetch-Site: ${site}`)
      return pass(ctx, site === undefined ? 'no Origin or Sec-Fetch-Site: not a browser request' : `no Origin; Sec-Fetch-Site: ${site}`)
    }
  }
}
