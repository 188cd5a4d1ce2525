/**
 * `requestRedirect`: answers with a redirect (Gateway API HTTPRequestRedirectFilter). The
 * Location is the request's URL with the configured parts replaced:
 *
 * - scheme: the configured one, else the request's (the listener's protocol);
 * - host: the configured hostname, else the request's Host header without its port;
 * - port: the configured one; else, when a scheme is configured, that scheme's well-known
 *   port (http 80, https 443); else the listener's port. It is left out of the Location when
 *   it is the default of the Location's scheme (http and 80, https and 443);
 * - path: ReplaceFullPath or ReplacePrefixMatch (see path-modifier.ts), else unchanged; the
 *   query string is kept;
 * - status: 301, 302 (default), 303, 307 or 308.
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { RequestRedirectIR } from '../ir/policy.ts'
import { modifyPath } from './path-modifier.ts'
import { CONTINUE } from './header-modifier.ts'
import { redactUrl } from '../ir/redact.ts'
import { plainAddress } from '../util/host-port.ts'
import { PorticoError } from '../util/errors.ts'

export const REDIRECT_STATUSES: readonly number[] = [301, 302, 303, 307, 308]

const DEFAULT_PORT: Record<string, number> = { http: 80, https: 443 }

export function requestRedirect (ir: RequestRedirectIR): CompiledPolicy {
  if (!REDIRECT_STATUSES.includes(ir.status)) throw new PorticoError('PORTICO_INVALID_IR', `requestRedirect: status ${ir.status} is not a redirect status (${REDIRECT_STATUSES.join(', ')})`)
  return {
    kind: 'requestRedirect',
    onRequest (ctx: RequestContext): PolicyOutcome {
      let path = ctx.path
      if (ir.path !== undefined) {
        const modified = modifyPath(ctx.path, ir.path, ctx.matchedPath)
        if (typeof modified !== 'string') {
          // Only reachable with an IR the config checks would have refused.
          ctx.tracer?.emit({ type: 'policy', kind: 'requestRedirect', result: { type: 'skip', details: modified.error } }, { severity: 'warn' })
          return CONTINUE
        }
        path = modified
      }
      const location = `${redirectOrigin(ctx, ir)}${path}${ctx.query === '' ? '' : `?${ctx.query}`}`
      ctx.tracer?.emit({ type: 'policy', kind: 'requestRedirect', result: { type: 'apply', details: `${ir.status} to ${redactUrl(location)}` } })
      return { action: 'respond', status: ir.status, body: '', headers: { location }, reason: 'Redirect' }
    }
  }
}

/** `scheme://host[:port]` of the Location. */
export function redirectOrigin (ctx: RequestContext, ir: Pick<RequestRedirectIR, 'scheme' | 'hostname' | 'port'>): string {
  const scheme = ir.scheme ?? ctx.scheme
  let host = ir.hostname ?? ctx.hostname
  if (host === '') host = bracketed(ctx.localAddress ?? 'localhost')
  const port = ir.port ?? (ir.scheme !== undefined ? DEFAULT_PORT[ir.scheme]! : (ctx.localPort ?? DEFAULT_PORT[ctx.scheme]!))
  return port === DEFAULT_PORT[scheme] ? `${scheme}://${host}` : `${scheme}://${host}:${port}`
}

function bracketed (address: string): string {
  const plain = plainAddress(address)
  return plain.includes(':') ? `[${plain}]` : plain
}
