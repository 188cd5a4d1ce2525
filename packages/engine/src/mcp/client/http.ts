/**
 * The client side of an MCP route: the streamable HTTP transport (revisions 2025-03-26,
 * 2025-06-18 and 2025-11-25) and the legacy HTTP+SSE transport, on the route's paths.
 * 2026-07-28 clients (no initialize, no session; version in each request's `_meta`) are
 * recognised per POST and served by mcp/client/stateless-2026.ts on the same endpoint.
 *
 * This file is the route's door (pipeline/run.ts calls handleMcpHttp): the Origin/Host
 * checks every transport shares, then the listener by method and path — streamable.ts
 * (POST, GET, DELETE), sse.ts (GET …/sse + POST …/message?sessionId=, the legacy transport).
 *
 * Errors follow the spec: missing session id 400, unknown session 404, bad
 * MCP-Protocol-Version 400 (UnsupportedProtocolVersionError, -32022), Mcp-Method/Mcp-Name
 * that disagree with the body 400 (HeaderMismatch, -32020), wrong Accept 406, wrong Content-Type 415, body too large 413,
 * Origin/Host refused 403; JSON-RPC errors -32700 (parse) and -32600 (invalid request).
 */

import type { RequestContext } from '../../request/context.ts'
import type { McpBackendSpecIR } from '../../ir/types.ts'
import type { McpGateway } from '../session/gateway.ts'
import { errorResponse, INVALID_REQUEST } from '../protocol/jsonrpc.ts'
import { hostnameMatches } from '../../routing/hostname.ts'
import { corsAllowsOrigin } from '../../request/cors-origins.ts'
import { reply, type McpRuntime } from './answer.ts'
import { streamableDelete, streamableGet, streamablePost } from './streamable.ts'
import { legacyOpen, legacyPost } from './sse.ts'

export type { McpRuntime } from './answer.ts'

export async function handleMcpHttp (gw: McpGateway, rt: McpRuntime, ctx: RequestContext): Promise<void> {
  const backend = ctx.backend!
  const spec = backend.mcp!
  const last = ctx.path.slice(ctx.path.lastIndexOf('/') + 1)
  const refused = checkOrigin(ctx, spec)
  if (refused !== null) return reply(rt, ctx, 403, errorResponse(null, INVALID_REQUEST, refused))

  if (last === 'sse' && ctx.method === 'GET') return legacyOpen(gw, rt, ctx)
  if ((last === 'message' || last === 'messages') && ctx.method === 'POST' && new URLSearchParams(ctx.query).has('sessionId')) {
    return await legacyPost(gw, rt, ctx, backend)
  }
  switch (ctx.method) {
    case 'POST': return await streamablePost(gw, rt, ctx, backend)
    case 'GET': return await streamableGet(gw, rt, ctx, backend)
    case 'DELETE': return await streamableDelete(gw, rt, ctx, backend)
    default:
      return reply(rt, ctx, 405, errorResponse(null, INVALID_REQUEST, `Method not allowed: ${ctx.method}`), { allow: 'GET, POST, DELETE' })
  }
}

/**
 * The MCP spec's Origin rule (servers MUST validate Origin; DNS rebinding), on by default
 * (`dnsRebindingProtection`):
 * - an `Origin`, when sent, must be a localhost origin, one whose host the listener serves
 *   (its hostname), one the route's `cors` policy allows, or one in `allowedOrigins`;
 * - on a connection that arrived over loopback (where a rebinding page reaches a local
 *   gateway), `Host` must be a localhost name or the listener's hostname.
 * Requests without `Origin` (every non-browser client) pass the first rule. Off, only
 * `allowedOrigins` applies when it is set.
 */
function checkOrigin (ctx: RequestContext, spec: McpBackendSpecIR): string | null {
  const origin = ctx.req.headers.origin
  if (spec.dnsRebindingProtection) {
    const listenerHost = ctx.listener.ir.hostname
    if (isLoopback(ctx.localAddress) && !isLocalHost(ctx.hostname) && !(listenerHost !== undefined && hostnameMatches(listenerHost, ctx.hostname))) {
      return `Forbidden: Host ${ctx.host} is not allowed (DNS rebinding protection)`
    }
    if (origin !== undefined && !isLocalOrigin(origin) && !spec.allowedOrigins.includes(origin) &&
      !(listenerHost !== undefined && hostnameMatches(listenerHost, originHost(origin))) && corsAllowsOrigin(ctx, origin) !== true) {
      return `Forbidden: Origin ${origin} is not allowed (not localhost, the listener's hostname, the route's cors or allowedOrigins)`
    }
    return null
  }
  if (origin !== undefined && spec.allowedOrigins.length > 0 && !spec.allowedOrigins.includes(origin)) return `Forbidden: Origin ${origin} is not allowed`
  return null
}

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1'])
function isLocalHost (host: string): boolean {
  return LOCAL_HOSTS.has(host)
}
function isLoopback (address: string | undefined): boolean {
  return address !== undefined && (address.startsWith('127.') || address === '::1' || address.startsWith('::ffff:127.'))
}
function originHost (origin: string): string {
  try {
    return new URL(origin).hostname.toLowerCase()
  } catch {
    return ''
  }
}
function isLocalOrigin (origin: string): boolean {
  return LOCAL_HOSTS.has(originHost(origin))
}
