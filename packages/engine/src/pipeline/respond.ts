/**
 * Answers from the proxy itself (no route, policy decisions, failures before the backend
 * answered). Response policies of the phases entered so far still apply, and the trace gets
 * the same closing snapshots as a proxied response.
 */

import type { RequestContext, RequestReason } from '../request/context.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { responseSnapshot } from '../trace/snapshot.ts'
import { severityOf } from '../trace/recorder.ts'

export function respondLocal (
  rt: { env: Record<string, string>, traceBodyLimit: number },
  ctx: RequestContext,
  status: number,
  body: string,
  reason: RequestReason,
  error: string | null = null,
  headers?: HeaderMap
): void {
  const { res } = ctx
  ctx.status = status
  ctx.reason = reason
  if (error !== null) ctx.error = error
  ctx.responseHeaders = { 'content-type': 'text/plain; charset=utf-8', ...headers }
  finishResponse(rt, ctx, 'all')
  if (res.headersSent || res.destroyed) return
  // A response policy may have replaced the body (transformation).
  const payload = ctx.responseBody ?? Buffer.from(body)
  ctx.responseHeaders['content-length'] = String(payload.length)
  if (payload.length > 0) ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'response', body: payload.subarray(0, rt.traceBodyLimit).toString('base64'), truncated: payload.length > rt.traceBodyLimit })
  // Node refuses header values it cannot send; a policy bug must not crash the request.
  try {
    res.writeHead(status, ctx.responseHeaders as Record<string, string | string[]>)
  } catch {
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(payload.length) })
  }
  res.end(ctx.method === 'HEAD' ? undefined : payload)
}

/**
 * The finish step every answer goes through before its head is written — the proxy's own
 * (respondLocal), a backend's (http/upstream-call.ts) and the MCP layer's (mcp/http.ts):
 * the response policies of the phases entered (`outer` when the backend phase's already
 * ran), then the trace's "final response" snapshot. `ctx.status` and `ctx.responseHeaders`
 * are set by the caller before and are final after.
 */
export function finishResponse (rt: { env: Record<string, string> }, ctx: RequestContext, which: 'outer' | 'all'): void {
  applyResponsePolicies(ctx, which)
  const status = ctx.status
  ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'final response', requestState: responseSnapshot(ctx, rt.env, false) }, { severity: severityOf(status) })
}

/**
 * Runs the response hooks of the phases entered so far, innermost first (backend, then
 * route, then gateway). A proxied response runs `backend` first (the trace's "backend
 * response ready" stage sits between), then `outer`; a local answer runs `all`.
 */
export function applyResponsePolicies (ctx: RequestContext, which: 'backend' | 'outer' | 'all'): void {
  for (let i = ctx.phases.length - 1; i >= 0; i--) {
    const { phase, set } = ctx.phases[i]!
    if (set.empty) continue
    if (which === 'backend' && phase !== 'backend') continue
    if (which === 'outer' && phase === 'backend') continue
    for (const policy of set.policies) policy.onResponse?.(ctx)
  }
}
