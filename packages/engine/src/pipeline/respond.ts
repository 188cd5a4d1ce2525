/**
 * Answers from the proxy itself (no route, policy decisions, failures before the backend
 * answered). Response policies of the phases entered so far still apply -- the asynchronous
 * ones (extProc's response phase) first, as on a backend's answer -- and the trace gets the
 * same closing snapshots as a proxied response.
 */

import type { RequestContext, RequestReason } from '../request/context.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { responseSnapshot } from '../trace/snapshot.ts'
import { severityOf } from '../trace/recorder.ts'
import { interceptAnswer, takeInterceptors, type ResponseDraft, type ResponseInterceptor } from '../http/response-intercept.ts'
import { grpcMessageEncode } from '../http/grpc.ts'

const EMPTY = Buffer.alloc(0)

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
  if (ctx.responseInterceptors !== null) {
    const ordered = takeInterceptors(ctx)
    if (ordered !== null) return void intercepted(rt, ctx, ordered, status, body, reason, error, headers)
  }
  if (ctx.grpc !== null) return respondGrpc(rt, ctx, status, body, reason, error, headers)
  ctx.status = status
  ctx.reason = reason
  if (error !== null) ctx.error = error
  ctx.responseHeaders = { 'content-type': 'text/plain; charset=utf-8', ...headers }
  finishResponse(rt, ctx, 'all')
  if (res.headersSent || res.destroyed) return
  // A 204 or 304 has no body and says nothing of one (RFC 9110 §8.6, §15.3.5, §15.4.5): the
  // same rule as for a backend's (client-response.ts), whatever a directResponse's body says.
  const bodiless = status === 204 || status === 304
  // A response policy may have replaced the body (transformation).
  const payload = bodiless ? EMPTY : ctx.responseBody ?? Buffer.from(body)
  if (bodiless) {
    delete ctx.responseHeaders['content-length']
    delete ctx.responseHeaders['transfer-encoding']
  } else {
    ctx.responseHeaders['content-length'] = String(payload.length)
  }
  if (payload.length > 0) ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'response', body: payload.subarray(0, rt.traceBodyLimit).toString('base64'), truncated: payload.length > rt.traceBodyLimit })
  // Node refuses header values it cannot send; a policy bug must not crash the request.
  try {
    res.writeHead(status, ctx.responseHeaders as Record<string, string | string[]>)
  } catch {
    res.writeHead(status, bodiless ? { 'content-type': 'text/plain; charset=utf-8' } : { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(payload.length) })
  }
  res.end(ctx.method === 'HEAD' || bodiless ? undefined : payload)
}

/**
 * A local answer through the request's response interceptors first (extProc's response
 * phase: Envoy runs it on local replies too), then answered as they left it -- changed, or
 * replaced by their immediate response or failure. The interceptors are taken: answering
 * here does not run them again. A gRPC request's answer is shown to them as the HTTP
 * status and headers the gateway means; the gRPC status is made from what they leave.
 */
async function intercepted (
  rt: { env: Record<string, string>, traceBodyLimit: number },
  ctx: RequestContext,
  ordered: ResponseInterceptor[],
  status: number,
  body: string,
  reason: RequestReason,
  error: string | null,
  headers: HeaderMap | undefined
): Promise<void> {
  ctx.status = status
  ctx.reason = reason
  if (error !== null) ctx.error = error
  const payload = ctx.responseBody ?? Buffer.from(body)
  const noBody = payload.length === 0 || ctx.method === 'HEAD' || status === 204 || status === 304
  const draft: ResponseDraft = { status, headers: { 'content-type': 'text/plain; charset=utf-8', ...headers }, body: null, hasBody: !noBody }
  const answer = await interceptAnswer(ctx, ordered, draft, payload)
  if (answer === null) return
  if (answer.body !== null) ctx.responseBody = answer.body
  const text = answer.body !== null ? answer.body.toString('utf8') : body
  respondLocal(rt, ctx, answer.status, text, (answer.reason ?? reason) as RequestReason, answer.error ?? error, answer.headers)
}

/**
 * gRPC status codes for the gateway's own answers (gRPC's "HTTP to gRPC status code
 * mapping", with Envoy's choices where the gateway knows more: a rate limit is
 * RESOURCE_EXHAUSTED, a timeout DEADLINE_EXCEEDED).
 */
const GRPC_STATUS: Record<number, number> = { 400: 13, 401: 16, 403: 7, 404: 12, 408: 4, 413: 8, 429: 8, 431: 8, 502: 14, 503: 14, 504: 4 }
const GRPC_INTERNAL = 13

/** The gRPC status of an HTTP status the gateway answers with. */
export function grpcStatusOf (httpStatus: number): number {
  return GRPC_STATUS[httpStatus] ?? GRPC_INTERNAL
}

/**
 * A local answer to a gRPC request (no route, auth refused, rate limited, backend down,
 * timeout): gRPC clients read the status from `grpc-status` / `grpc-message`, not from the
 * HTTP status, so the answer is HTTP 200 with them in a trailers-only response (one HEADERS
 * frame ending the stream on HTTP/2). The access log and trace keep the HTTP status the
 * gateway meant (`ctx.status`) and the gRPC one in the response headers.
 */
function respondGrpc (rt: { env: Record<string, string> }, ctx: RequestContext, status: number, body: string, reason: RequestReason, error: string | null, headers?: HeaderMap): void {
  const { res } = ctx
  ctx.status = status
  ctx.reason = reason
  if (error !== null) ctx.error = error
  const code = grpcStatusOf(status)
  if (ctx.grpc !== null) ctx.grpc.status = code
  ctx.responseHeaders = { ...headers, 'content-type': ctx.grpc!.text ? 'application/grpc-web-text' : ctx.grpc!.web ? 'application/grpc-web' : 'application/grpc', 'grpc-status': String(code), 'grpc-message': grpcMessageEncode(body.trim()) }
  finishResponse(rt, ctx, 'all')
  if (res.headersSent || res.destroyed) return
  delete ctx.responseHeaders['content-length']
  res.statusCode = 200
  try {
    for (const [name, value] of Object.entries(ctx.responseHeaders)) if (value !== undefined) res.setHeader(name, value as string | string[])
  } catch {
    // A header a policy set that Node cannot send: the status still goes out.
  }
  res.end()
}

/**
 * The finish step every answer goes through before its head is written -- the proxy's own
 * (respondLocal), a backend's (http/upstream-call.ts) and the MCP layer's (mcp/client/http.ts):
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
