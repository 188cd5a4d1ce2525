/**
 * The public base URL of a request, which policies write into the links they hand out (the
 * MCP authorization challenge's metadata URL, OIDC's redirect URI). A module of its own so
 * that what reads it — the protected-resource metadata on every MCP-authenticated listener,
 * OIDC — does not load the JWT policy's code with it (issue 54, start-up).
 */

import type { RequestContext } from '../request/context.ts'

/**
 * The public base URL of a request: scheme and Host as the client used them. The scheme is
 * the X-Forwarded-Proto the backend gets, which is the client's only when the listener
 * trusts the proxies in front of it (clientIPDetection), the connection's otherwise.
 */
export function baseUrl (ctx: RequestContext): string {
  const proto = ctx.headers['x-forwarded-proto']
  const scheme = typeof proto === 'string' && (proto === 'http' || proto === 'https') ? proto : ctx.scheme
  return `${scheme}://${ctx.host}`
}
