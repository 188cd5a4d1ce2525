/**
 * RFC 9728 OAuth protected-resource metadata for MCP routes with `mcpAuthentication`, served
 * by the gateway itself so clients can discover the authorization server:
 * `GET /.well-known/oauth-protected-resource/<route path>` (the path-inserted form the MCP
 * authorization spec uses) and, when the listener protects exactly one MCP route, the bare
 * `/.well-known/oauth-protected-resource`. No route needs to match these paths.
 */

import type { RequestContext } from '../request/context.ts'
import type { PipelineRuntime } from './run.ts'
import type { CompiledRoute } from '../request/compiled.ts'
import type { McpAuthenticationIR } from '../ir/policy.ts'
import { PROTECTED_RESOURCE_PATH, protectedResourceMetadata } from '../policy/protected-resource.ts'
import { respondLocal } from './respond.ts'

/** Answers the metadata request if `ctx` is one; returns false to let routing go on. */
export function serveProtectedResourceMetadata (rt: PipelineRuntime, ctx: RequestContext): boolean {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return false
  const resourcePath = ctx.path.slice(PROTECTED_RESOURCE_PATH.length)
  if (resourcePath !== '' && !resourcePath.startsWith('/')) return false
  let route: CompiledRoute | null = null
  if (resourcePath === '' || resourcePath === '/') {
    const protectedRoutes = protectedRoutesOf(ctx)
    if (protectedRoutes.length === 1) route = protectedRoutes[0]!
  } else {
    const found = ctx.listener.table.select(ctx.hostname, { method: 'POST', path: resourcePath, query: '', headers: ctx.req.headers }, false).route
    if (found?.ir.policies.mcpAuthentication !== undefined) route = found
  }
  if (route === null) return false
  const ir = route.ir.policies.mcpAuthentication as McpAuthenticationIR
  const path = resourcePath === '' || resourcePath === '/' ? mainPath(route) : resourcePath
  const body = JSON.stringify(protectedResourceMetadata(ir, ctx, path))
  ctx.route = route
  respondLocal(rt, ctx, 200, body, 'DirectResponse', null, {
    'content-type': 'application/json',
    'access-control-allow-origin': '*',
    'cache-control': 'max-age=300'
  })
  return true
}

function protectedRoutesOf (ctx: RequestContext): CompiledRoute[] {
  return ctx.listener.routes.filter(r => r.ir.policies.mcpAuthentication !== undefined)
}

/** The path a route serves MCP on: its first exact or prefix path match. */
function mainPath (route: CompiledRoute): string {
  const m = route.ir.matches.find(x => x.path.kind !== 'regex')
  return m === undefined || m.path.value === '/' ? '' : m.path.value
}
