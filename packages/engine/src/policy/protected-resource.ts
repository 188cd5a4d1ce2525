/**
 * What serving an MCP route's RFC 9728 protected-resource metadata needs, apart from the
 * `mcpAuthentication` policy itself (jwt-auth.ts): the pipeline answers the metadata path on
 * every listener with such a route, while the policy, its JWT verifier and key sets load only
 * with a config that has one (policy/compile.ts).
 */

import type { RequestContext } from '../request/context.ts'
import type { McpAuthenticationIR } from '../ir/policy.ts'

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource'

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

/** The RFC 9728 protected-resource metadata of an MCP route, for `resourcePath`. */
export function protectedResourceMetadata (ir: McpAuthenticationIR, ctx: RequestContext, resourcePath: string): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    resource: `${baseUrl(ctx)}${resourcePath}`,
    authorization_servers: [ir.provider.issuer],
    bearer_methods_supported: ['header']
  }
  if (ir.scopesSupported.length > 0) doc.scopes_supported = ir.scopesSupported
  return { ...doc, ...ir.resourceMetadata }
}
