/**
 * The variables CEL expressions see for one request, built from the request context. The
 * request and source parts are made once per request and reused by every expression.
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import { plainAddress } from '../util/host-port.ts'

/**
 * What the variables are built from: a request's state (request/context.ts RequestContext has
 * it). Declared here, by the side that reads it, so cel/ does not import the rooms above it.
 * `celBase` is where the request and source parts are kept once made.
 */
export interface CelContext {
  readonly req: { readonly headers: IncomingHttpHeaders }
  readonly sourceAddress: string
  readonly sourcePort: number
  readonly method: string
  readonly originalPath: string
  readonly pathAndQuery: string
  readonly hostname: string
  readonly scheme: 'http' | 'https'
  readonly auth: {
    jwt: Record<string, unknown> | null
    apiKey: { name: string, metadata: Record<string, unknown> } | null
    basicAuth: { username: string } | null
  }
  readonly status: number
  readonly responseHeaders: HeaderMap
  celBase: { request: Record<string, unknown>, source: Record<string, unknown> } | null
}

/** The MCP item an expression is asked about (request/context.ts McpItem has this shape). */
export interface CelMcpItem {
  method: string
  kind?: 'tool' | 'prompt' | 'resource'
  name?: string
  target?: string
}

export function celVars (ctx: CelContext, mcp: CelMcpItem | null = null): Record<string, unknown> {
  let base = ctx.celBase
  if (base === null) {
    const headers: Record<string, string> = {}
    for (const [k, v] of Object.entries(ctx.req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v
    base = {
      request: { method: ctx.method, path: ctx.originalPath, pathAndQuery: ctx.pathAndQuery, host: ctx.hostname, scheme: ctx.scheme, headers },
      source: { address: plainAddress(ctx.sourceAddress), port: ctx.sourcePort }
    }
    ctx.celBase = base
  }
  return {
    request: base.request,
    source: base.source,
    jwt: ctx.auth.jwt ?? {},
    apiKey: ctx.auth.apiKey,
    basicAuth: ctx.auth.basicAuth,
    mcp: mcp === null ? null : mcpVar(mcp)
  }
}

/** `mcp.method`, and `mcp.tool` / `mcp.prompt` / `mcp.resource` as `{name, target}`. */
function mcpVar (item: CelMcpItem): Record<string, unknown> {
  const out: Record<string, unknown> = { method: item.method }
  if (item.kind !== undefined) out[item.kind] = { name: item.name ?? '', target: item.target ?? '' }
  return out
}

/**
 * The variables of response-side expressions (transformation.response): the request ones
 * plus `response` -- `code` (the status, an int) and `headers` (lower-case names, repeated
 * values joined with ", ") as they stand when the expression runs.
 */
export function celResponseVars (ctx: CelContext): Record<string, unknown> {
  const vars = celVars(ctx)
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.responseHeaders)) if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v
  vars.response = { code: BigInt(ctx.status), headers }
  return vars
}
