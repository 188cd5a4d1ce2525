/**
 * RFC 9728 protected-resource metadata of MCP routes with `mcpAuthentication`: where it is
 * served and what it says. The pipeline reads these on every listener with such a route; the
 * JWT policy that refuses with a link to them (jwt-auth.ts) loads only with a config that has
 * one (policy/compile.ts), so they live apart from it (issue 54, start-up).
 */

import type { RequestContext } from '../request/context.ts'
import type { McpAuthenticationIR } from '../ir/policy.ts'
import { baseUrl } from './base-url.ts'

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource'

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
