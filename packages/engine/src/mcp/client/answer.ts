/**
 * What every client-facing listener of an MCP route shares: the runtime the pipeline lends
 * (its finish step), the answer's head through the pipeline's response policies and trace,
 * whole JSON-RPC replies, the POST body read and checked, the trace events of a target call,
 * and the route's authorization as a filter over items. The listeners — streamable HTTP
 * (streamable.ts), legacy HTTP+SSE (sse.ts), 2026-07-28 (stateless-2026.ts) — only decide
 * what to answer.
 */

import type { RequestContext } from '../../request/context.ts'
import type { McpBackendSpecIR } from '../../ir/types.ts'
import type { HeaderMap } from '../../ir/header-map.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import type { Head, HeadHook } from '../protocol/sse-writer.ts'
import { errorResponse, gatewayErrorReason, INVALID_REQUEST, PARSE_ERROR, validMessage, type JsonRpcId, type JsonRpcMessage, type JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { requestSnapshot } from '../../trace/snapshot.ts'
import { traceCallResult, traceCallStart } from '../../trace/backend-call.ts'
import { readRequestBody } from '../../http/request-body.ts'
import { interceptAnswer, takeInterceptors, type ResponseDraft, type ResponseInterceptor } from '../../http/response-intercept.ts'
import type { ClientInit } from '../upstream/target.ts'
import { performance } from '../../util/clock.ts'
import { isPorticoError } from '../../util/errors.ts'

/** What the listeners lend stateless-2026.ts: their reply, trace and authorization helpers. */
export interface McpHttpHelpers {
  reply(ctx: RequestContext, status: number, body: JsonRpcMessage | null, headers?: Record<string, string>): void
  /** The trace's final request; `call`: a target is called for it now. */
  traceStart(ctx: RequestContext, call?: boolean): void
  /** A target is called for this request (the trace's backend call starts). */
  traceTargetCall(ctx: RequestContext): void
  headHook(ctx: RequestContext): HeadHook
  itemFilter(ctx: RequestContext): ItemFilter | undefined
  traceTargetError(ctx: RequestContext, error: { code: number, message: string }): void
}

/**
 * What the MCP layer needs from the pipeline that runs it, passed in so that mcp/ does not
 * import pipeline/.
 */
export interface McpRuntime {
  /** `env` of the trace's snapshots. */
  env: Record<string, string>
  /**
   * The finish step every answer goes through (pipeline/respond.ts finishResponse): the
   * response policies of the phases entered (cors, responseHeaderModifier, ...) and the
   * trace's closing snapshot, once `ctx.status` and `ctx.responseHeaders` are set.
   */
  finish(ctx: RequestContext): void
}

/**
 * The request as it leaves for the MCP layer (the trace's "final request"). `call`: a target
 * is called for it now (traceTargetCall); otherwise only when the session calls one.
 */
export function traceStart (rt: McpRuntime, ctx: RequestContext, call = false): void {
  ctx.upstreamStart = performance.now()
  if (ctx.tracer === null) return
  ctx.tracer.emit({ type: 'requestSnapshot', stage: 'final request', requestState: requestSnapshot(ctx, rt.env, { backend: true }) })
  if (call) traceTargetCall(ctx)
}

/** Requests whose trace has a backendCallStart: only they get a backendCallResult. */
const calling = new WeakSet<RequestContext>()

/**
 * A target is called for this request: the trace's backendCallStart, once. Only then does
 * its answer's head end a backend call in the trace — an answer the gateway made itself (a
 * tools/call MCP authorization refused, a ping, an unknown session) shows no backend call,
 * as no backend was called.
 */
export function traceTargetCall (ctx: RequestContext): void {
  if (ctx.tracer === null || calling.has(ctx)) return
  calling.add(ctx)
  traceCallStart(ctx, ctx.mcp?.target !== undefined && ctx.mcp.target !== '' ? ctx.mcp.target : ctx.backend!.target)
}

/**
 * Every MCP answer's head goes through here: status and reason bookkeeping, the trace's
 * backendCallResult (when a target was called), then the pipeline's finish step (response policies, closing snapshot).
 * Returns the headers to write. `reason`: an answer a response policy made (extProc).
 */
function finishHead (rt: McpRuntime, ctx: RequestContext, status: number, headers: HeaderMap, error: string | null, reason?: string): Record<string, string | string[]> {
  ctx.status = status
  ctx.reason = reason ?? (status >= 400 ? 'MCP' : 'Upstream')
  ctx.responseHeaders = headers
  ctx.upstreamHeadersAt = performance.now()
  if (ctx.upstreamStart === 0) traceStart(rt, ctx)
  if (calling.has(ctx)) traceCallResult(ctx, status, error)
  rt.finish(ctx)
  return ctx.responseHeaders as Record<string, string | string[]>
}

/**
 * The head of a streamed answer (SSE, a POST's JSON) goes through the same finish step —
 * after the request's response interceptors (extProc's response phase), when it has any.
 */
export function headHook (rt: McpRuntime, ctx: RequestContext): HeadHook {
  return (status, headers) => {
    const ordered = ctx.responseInterceptors === null ? null : takeInterceptors(ctx)
    if (ordered === null) return { status, headers: finishHead(rt, ctx, status, { ...headers }, ctx.error) }
    return interceptHead(rt, ctx, ordered, status, headers)
  }
}

/**
 * A streamed answer's head through the response interceptors: their header step only (its
 * body cannot be held; config/to-ir.ts refuses a body mode on MCP routes). When they replace
 * the answer (an immediate response, a body set at the headers, a failure) it is written
 * here and the stream is over (null).
 */
async function interceptHead (rt: McpRuntime, ctx: RequestContext, ordered: ResponseInterceptor[], status: number, headers: Record<string, string>): Promise<Head> {
  const draft: ResponseDraft = { status, headers: { ...headers }, body: null, hasBody: true }
  const answer = await interceptAnswer(ctx, ordered, draft, 'stream')
  if (answer === null) return null
  if (answer.body !== null) {
    writeWhole(rt, ctx, answer.status, answer.headers, answer.body, answer.error ?? ctx.error, answer.reason ?? undefined)
    return null
  }
  return { status: answer.status, headers: finishHead(rt, ctx, answer.status, answer.headers, ctx.error) }
}

/**
 * A call the gateway answered for a target (it failed, timed out, was killed) goes into
 * the access log and the trace, though the HTTP status is 200: the error is in the body.
 */
export function traceTargetError (ctx: RequestContext, error: { code: number, message: string, data?: unknown }): void {
  // Only the gateway's own answers for a target: a target's error with the same code is an answer.
  const reason = gatewayErrorReason(error)
  if (reason !== 'target-unavailable' && reason !== 'target-timeout') return
  ctx.error ??= error.message
  // Before the head, the error goes into backendCallResult; after it (an SSE answer), on its own.
  if (ctx.upstreamHeadersAt !== 0) ctx.tracer?.emit({ type: 'mcpTargetError', code: error.code, error: error.message }, { severity: 'error' })
}

export function reply (rt: McpRuntime, ctx: RequestContext, status: number, body: JsonRpcMessage | JsonRpcMessage[] | null, headers: Record<string, string> = {}): void {
  const error = status >= 400 && body !== null && !Array.isArray(body) && 'error' in body ? body.error.message : null
  if (error !== null) ctx.error = error
  const head = body === null ? { ...headers } : { 'content-type': 'application/json', ...headers }
  const payload = Buffer.from(body === null ? '' : JSON.stringify(body))
  const ordered = ctx.responseInterceptors === null ? null : takeInterceptors(ctx)
  if (ordered === null) return writeWhole(rt, ctx, status, head, payload, error)
  // A whole answer: the response interceptors see it (and its body) first, as on any route.
  const draft: ResponseDraft = { status, headers: head, body: null, hasBody: payload.length > 0 }
  void interceptAnswer(ctx, ordered, draft, payload).then(answer => {
    if (answer !== null) writeWhole(rt, ctx, answer.status, answer.headers, answer.body ?? payload, answer.error ?? error, answer.reason ?? undefined)
  })
}

/** A whole answer: its head through the finish step, then the body. */
export function writeWhole (rt: McpRuntime, ctx: RequestContext, status: number, headers: HeaderMap, body: Buffer, error: string | null, reason?: string): void {
  const { res } = ctx
  if (error !== null) ctx.error = error
  const final = finishHead(rt, ctx, status, headers, error, reason)
  if (res.headersSent || res.destroyed) return
  // A response policy may have replaced the body (transformation), as on any route.
  const payload = ctx.responseBody ?? body
  res.writeHead(status, { ...final, 'content-length': String(payload.length) })
  res.end(payload)
}

export function initOf (req: JsonRpcRequest): ClientInit {
  const p = (req.params ?? {}) as Record<string, unknown>
  return {
    protocolVersion: typeof p.protocolVersion === 'string' ? p.protocolVersion : '2025-03-26',
    capabilities: (p.capabilities ?? {}) as Record<string, unknown>,
    clientInfo: (p.clientInfo ?? { name: 'unknown', version: '0' }) as Record<string, unknown>
  }
}

/**
 * Parses and checks a POST body: one message or (2025-03-26) a batch. Returns the messages
 * or the error reply that was sent.
 */
export async function readMessages (rt: McpRuntime, ctx: RequestContext, spec: McpBackendSpecIR): Promise<{ messages: JsonRpcMessage[], batch: boolean } | null> {
  const read = await readRequestBody(ctx, { maxBytes: spec.maxMessageBytes, whenTooLarge: 'drain' })
  if (read instanceof Error) {
    // A client too slow with its body (idle timeout, minimum rate): 408, as on any route.
    if (isPorticoError(read, 'PORTICO_REQUEST_BODY_TIMEOUT')) {
      reply(rt, ctx, 408, errorResponse(null, INVALID_REQUEST, `Request body timeout: ${read.message}`), { connection: 'close' })
      return null
    }
    throw read
  }
  if (read === 'too-large') {
    reply(rt, ctx, 413, errorResponse(null, INVALID_REQUEST, `Message too large: the limit is ${spec.maxMessageBytes} bytes`), { connection: 'close' })
    return null
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(read === 'none' ? '' : ctx.requestBody!.toString('utf8'))
  } catch (err) {
    reply(rt, ctx, 400, errorResponse(null, PARSE_ERROR, `Parse error: ${(err as Error).message}`))
    return null
  }
  const batch = Array.isArray(parsed)
  const list = batch ? parsed as unknown[] : [parsed]
  if (list.length === 0) {
    reply(rt, ctx, 400, errorResponse(null, INVALID_REQUEST, 'Invalid Request: empty batch'))
    return null
  }
  for (const m of list) {
    if (!validMessage(m)) {
      const id = m !== null && typeof m === 'object' && ('id' in m) && (typeof (m as { id: unknown }).id === 'string' || typeof (m as { id: unknown }).id === 'number') ? (m as { id: JsonRpcId }).id : null
      reply(rt, ctx, 400, errorResponse(id, INVALID_REQUEST, 'Invalid Request: not a JSON-RPC 2.0 message'))
      return null
    }
  }
  return { messages: list as JsonRpcMessage[], batch }
}

/** The reply, trace and authorization helpers, as lent to client/stateless-2026.ts. */
export function helpers (rt: McpRuntime): McpHttpHelpers {
  return {
    reply: (ctx, status, body, headers) => reply(rt, ctx, status, body, headers),
    traceStart: (ctx, call) => traceStart(rt, ctx, call),
    traceTargetCall,
    headHook: ctx => headHook(rt, ctx),
    itemFilter,
    traceTargetError
  }
}

/** The route's MCP authorization for this caller, as a filter over items. */
export function itemFilter (ctx: RequestContext): ItemFilter | undefined {
  if (ctx.mcpAuthorization.length === 0) return undefined
  return item => ctx.mcpAuthorization.every(a => a.allows(ctx, item))
}
