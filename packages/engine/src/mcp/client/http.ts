/**
 * The client side of an MCP route: the streamable HTTP transport (revisions 2025-03-26,
 * 2025-06-18 and 2025-11-25) and the legacy HTTP+SSE transport, on the route's paths.
 * 2026-07-28 clients (no initialize, no session; version in each request's `_meta`) are
 * recognised per POST and served by mcp/client/stateless-2026.ts on the same endpoint.
 *
 *  POST   one JSON-RPC message (or a batch, for 2025-03-26 clients): requests are answered
 *         as JSON or as an SSE stream; notifications and responses alone get 202.
 *  GET    the session's stream for server-initiated messages (Last-Event-ID resumes).
 *  DELETE ends the session.
 *  GET …/sse + POST …/message?sessionId=  the legacy transport.
 *
 * Errors follow the spec: missing session id 400, unknown session 404, bad
 * MCP-Protocol-Version 400 (UnsupportedProtocolVersionError, -32022), Mcp-Method/Mcp-Name
 * that disagree with the body 400 (HeaderMismatch, -32020), wrong Accept 406, wrong Content-Type 415, body too large 413,
 * Origin/Host refused 403; JSON-RPC errors -32700 (parse) and -32600 (invalid request).
 */

import { randomUUID } from 'node:crypto'
import type { RequestContext } from '../../request/context.ts'
import type { BackendIR, McpBackendSpecIR } from '../../ir/types.ts'
import type { HeaderMap } from '../../ir/header-map.ts'
import { StdioCapacityError, type McpGateway } from '../session/gateway.ts'
import type { McpSession } from '../session/session.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import { SseWriter, type Head, type HeadHook } from '../protocol/sse-writer.ts'
import { PostChannel } from './post-channel.ts'
import {
  errorResponse, gatewayErrorReason, INVALID_REQUEST, isRequest, PARSE_ERROR, resultResponse, sessionNotFound, targetUnavailable, validMessage,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcRequest
} from '../protocol/jsonrpc.ts'
import { requestSnapshot } from '../../trace/snapshot.ts'
import { traceCallResult, traceCallStart } from '../../trace/backend-call.ts'
import { readRequestBody } from '../../http/request-body.ts'
import { interceptAnswer, takeInterceptors, type ResponseDraft, type ResponseInterceptor } from '../../http/response-intercept.ts'
import { hostnameMatches } from '../../routing/hostname.ts'
import { corsAllowsOrigin } from '../../request/cors-origins.ts'
import type { ClientInit } from '../upstream/target.ts'
import { classify, isModernHeader } from '../revisions/revision-2026.ts'
import { handleModernPost, modernMethodNotAllowed, type McpHttpHelpers } from './stateless-2026.ts'
import { performance } from '../../util/clock.ts'
import { isPorticoError } from '../../util/errors.ts'

const SESSION_HEADER = 'mcp-session-id'

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
    case 'POST': return await post(gw, rt, ctx, backend)
    case 'GET': return await get(gw, rt, ctx, backend)
    case 'DELETE': return await del(gw, rt, ctx, backend)
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

// ---- trace and response helpers -------------------------------------------------------

/**
 * The request as it leaves for the MCP layer (the trace's "final request"). `call`: a target
 * is called for it now (traceTargetCall); otherwise only when the session calls one.
 */
function traceStart (rt: McpRuntime, ctx: RequestContext, call = false): void {
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
function traceTargetCall (ctx: RequestContext): void {
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
function headHook (rt: McpRuntime, ctx: RequestContext): HeadHook {
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
function traceTargetError (ctx: RequestContext, error: { code: number, message: string, data?: unknown }): void {
  // Only the gateway's own answers for a target: a target's error with the same code is an answer.
  const reason = gatewayErrorReason(error)
  if (reason !== 'target-unavailable' && reason !== 'target-timeout') return
  ctx.error ??= error.message
  // Before the head, the error goes into backendCallResult; after it (an SSE answer), on its own.
  if (ctx.upstreamHeadersAt !== 0) ctx.tracer?.emit({ type: 'mcpTargetError', code: error.code, error: error.message }, { severity: 'error' })
}

function reply (rt: McpRuntime, ctx: RequestContext, status: number, body: JsonRpcMessage | JsonRpcMessage[] | null, headers: Record<string, string> = {}): void {
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
function writeWhole (rt: McpRuntime, ctx: RequestContext, status: number, headers: HeaderMap, body: Buffer, error: string | null, reason?: string): void {
  const { res } = ctx
  if (error !== null) ctx.error = error
  const final = finishHead(rt, ctx, status, headers, error, reason)
  if (res.headersSent || res.destroyed) return
  // A response policy may have replaced the body (transformation), as on any route.
  const payload = ctx.responseBody ?? body
  res.writeHead(status, { ...final, 'content-length': String(payload.length) })
  res.end(payload)
}

function acceptsBoth (accept: string | undefined): boolean {
  if (accept === undefined) return false
  if (accept.includes('*/*')) return true
  return accept.includes('application/json') && accept.includes('text/event-stream')
}

function initOf (req: JsonRpcRequest): ClientInit {
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
async function readMessages (rt: McpRuntime, ctx: RequestContext, spec: McpBackendSpecIR): Promise<{ messages: JsonRpcMessage[], batch: boolean } | null> {
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

// ---- streamable HTTP ---------------------------------------------------------------------

async function post (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
  const spec = backend.mcp!
  const { req } = ctx
  if (!acceptsBoth(req.headers.accept)) {
    return reply(rt, ctx, 406, errorResponse(null, INVALID_REQUEST, 'Not Acceptable: Client must accept both application/json and text/event-stream'))
  }
  if (!String(req.headers['content-type'] ?? '').toLowerCase().startsWith('application/json')) {
    return reply(rt, ctx, 415, errorResponse(null, INVALID_REQUEST, 'Unsupported Media Type: Content-Type must be application/json'))
  }
  const read = await readMessages(rt, ctx, spec)
  if (read === null) return
  const { messages, batch } = read
  const first = messages[0]!
  // The era (and an unsupported MCP-Protocol-Version, or Mcp-Method/Mcp-Name that disagree
  // with the body) is known only with the body: 2026-07-28 puts the version in `_meta`.
  const era = classify(req.headers, messages, batch)
  if (era.era === 'reject') return reply(rt, ctx, era.status, era.body)
  if (era.era === 'modern') return await handleModernPost(gw, ctx, backend, first, era.version, helpers(rt))

  const initialize = messages.find(m => isRequest(m) && m.method === 'initialize') as JsonRpcRequest | undefined
  if (initialize !== undefined) {
    if (messages.length > 1) return reply(rt, ctx, 400, errorResponse(initialize.id, INVALID_REQUEST, 'Invalid Request: initialize must be sent alone'))
    ctx.mcp = { method: 'initialize', target: spec.targets.map(t => t.name).join(','), protocolVersion: initOf(initialize).protocolVersion }
    // The session starts by initializing its targets.
    traceStart(rt, ctx, true)
    let session: McpSession
    try {
      session = spec.statefulMode === 'stateless' ? await gw.statelessSession(backend) : await gw.createSession(backend, initOf(initialize))
    } catch (err) {
      ctx.error = (err as Error).message
      // Every stdio process of the backend is held by a session in use: overloaded, not broken.
      if (err instanceof StdioCapacityError) return reply(rt, ctx, 503, targetUnavailable(initialize.id, err.message), { 'retry-after': '5' })
      return reply(rt, ctx, 200, targetUnavailable(initialize.id, (err as Error).message))
    }
    const headers: Record<string, string> = session.id !== '' && spec.statefulMode === 'stateful' ? { [SESSION_HEADER]: session.id } : {}
    return reply(rt, ctx, 200, resultResponse(initialize.id, session.initializeResult((initialize.params ?? {}).protocolVersion)), headers)
  }

  let session: McpSession | null
  if (spec.statefulMode === 'stateless') {
    try {
      session = await gw.statelessSession(backend)
    } catch (err) {
      const id = isRequest(first) ? first.id : null
      return reply(rt, ctx, 200, targetUnavailable(id, (err as Error).message))
    }
  } else {
    const sid = req.headers[SESSION_HEADER]
    if (typeof sid !== 'string' || sid === '') {
      return reply(rt, ctx, 400, errorResponse(null, INVALID_REQUEST, 'Bad Request: Mcp-Session-Id header is required'))
    }
    session = await gw.getSession(backend, sid)
    if (session === null) return reply(rt, ctx, 404, sessionNotFound())
  }

  ctx.mcp = session.describe(messages.find(isRequest) ?? first)
  traceStart(rt, ctx)
  const requestIds = messages.filter(isRequest).map(m => m.id)
  if (requestIds.length === 0) {
    for (const m of messages) session.handle(m, session.stream)
    return reply(rt, ctx, 202, null)
  }
  const headers: Record<string, string> = spec.statefulMode === 'stateful' ? { [SESSION_HEADER]: session.id } : {}
  const channel = new PostChannel(ctx.res, { requestIds, batch, headers, log: spec.statefulMode === 'stateful' ? session.events : null, head: headHook(rt, ctx), span: ctx.span, onCall: () => traceTargetCall(ctx) })
  channel.onError = error => traceTargetError(ctx, error)
  const filter = itemFilter(ctx)
  for (const m of messages) session.handle(m, channel, filter)
}

/** This module's reply, trace and authorization helpers, lent to mcp/client/stateless-2026.ts. */
function helpers (rt: McpRuntime): McpHttpHelpers {
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
function itemFilter (ctx: RequestContext): ItemFilter | undefined {
  if (ctx.mcpAuthorization.length === 0) return undefined
  return item => ctx.mcpAuthorization.every(a => a.allows(ctx, item))
}

async function get (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
  const spec = backend.mcp!
  if (isModernHeader(ctx.req.headers)) return modernMethodNotAllowed(ctx, helpers(rt))
  if (spec.statefulMode === 'stateless') return reply(rt, ctx, 405, errorResponse(null, INVALID_REQUEST, 'Method not allowed: stateless mode has no session stream'), { allow: 'POST' })
  const accept = ctx.req.headers.accept ?? ''
  if (!accept.includes('text/event-stream') && !accept.includes('*/*')) {
    return reply(rt, ctx, 406, errorResponse(null, INVALID_REQUEST, 'Not Acceptable: Client must accept text/event-stream'))
  }
  const sid = ctx.req.headers[SESSION_HEADER]
  if (typeof sid !== 'string' || sid === '') return reply(rt, ctx, 400, errorResponse(null, INVALID_REQUEST, 'Bad Request: Mcp-Session-Id header is required'))
  const session = await gw.getSession(backend, sid)
  if (session === null) return reply(rt, ctx, 404, sessionNotFound())
  ctx.mcp = { method: 'GET', target: '' }
  traceStart(rt, ctx)

  const lastEventId = ctx.req.headers['last-event-id']
  const headers = { [SESSION_HEADER]: session.id }
  if (typeof lastEventId === 'string' && lastEventId !== '') {
    const replay = session.events.after(lastEventId)
    if (replay !== null && replay.stream !== session.stream.streamId) {
      // Resuming the stream of an earlier POST: what was missed, then the rest as it comes.
      const writer = new SseWriter(ctx.res, headers, headHook(rt, ctx))
      for (const e of replay.events) writer.event(e.data, e.id)
      if (replay.ended) writer.end()
      else session.events.attach(replay.stream, writer)
      return
    }
    if (session.stream.connected) return reply(rt, ctx, 409, errorResponse(null, INVALID_REQUEST, 'Conflict: only one stream per session'))
    const writer = new SseWriter(ctx.res, headers, headHook(rt, ctx))
    const seq = replay !== null ? Number(lastEventId.slice(lastEventId.lastIndexOf(':') + 1)) : undefined
    session.stream.connect(writer, seq)
    ctx.res.once('close', () => session.stream.disconnect(writer))
    return
  }
  if (session.stream.connected) return reply(rt, ctx, 409, errorResponse(null, INVALID_REQUEST, 'Conflict: only one stream per session'))
  const writer = new SseWriter(ctx.res, headers, headHook(rt, ctx))
  session.stream.connect(writer)
  ctx.res.once('close', () => session.stream.disconnect(writer))
}

async function del (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
  if (isModernHeader(ctx.req.headers)) return modernMethodNotAllowed(ctx, helpers(rt))
  if (backend.mcp!.statefulMode === 'stateless') return reply(rt, ctx, 405, errorResponse(null, INVALID_REQUEST, 'Method not allowed: stateless mode has no sessions'), { allow: 'POST' })
  const sid = ctx.req.headers[SESSION_HEADER]
  if (typeof sid !== 'string' || sid === '') return reply(rt, ctx, 400, errorResponse(null, INVALID_REQUEST, 'Bad Request: Mcp-Session-Id header is required'))
  const session = await gw.getSession(backend, sid)
  if (session === null) return reply(rt, ctx, 404, sessionNotFound())
  ctx.mcp = { method: 'DELETE', target: '' }
  // Ending the session ends the targets' sessions.
  traceStart(rt, ctx, true)
  await gw.deleteSession(session)
  reply(rt, ctx, 200, null)
}

// ---- legacy HTTP+SSE (2024-11-05) --------------------------------------------------------

function legacyOpen (gw: McpGateway, rt: McpRuntime, ctx: RequestContext): void {
  const id = randomUUID()
  ctx.mcp = { method: 'SSE', target: '' }
  traceStart(rt, ctx)
  const writer = new SseWriter(ctx.res, {}, headHook(rt, ctx))
  gw.legacy.set(id, { writer, session: null })
  const base = ctx.path.slice(0, ctx.path.lastIndexOf('/'))
  writer.event(`${base}/message?sessionId=${id}`, undefined, 'endpoint')
  ctx.res.once('close', () => {
    const entry = gw.legacy.get(id)
    gw.legacy.delete(id)
    if (entry?.session != null) void gw.closeLegacySession(entry.session)
  })
}

async function legacyPost (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
  const id = new URLSearchParams(ctx.query).get('sessionId') ?? ''
  const entry = gw.legacy.get(id)
  if (entry === undefined) return reply(rt, ctx, 404, sessionNotFound())
  const { writer } = entry
  const read = await readMessages(rt, ctx, backend.mcp!)
  if (read === null) return
  let session = entry.session
  const initialize = read.messages.find(m => isRequest(m) && m.method === 'initialize') as JsonRpcRequest | undefined
  ctx.mcp = session?.describe(read.messages[0]!) ?? { method: 'initialize', target: backend.target }
  traceStart(rt, ctx)
  reply(rt, ctx, 202, null)
  if (initialize !== undefined) {
    if (session !== null) {
      writer.event(JSON.stringify(errorResponse(initialize.id, INVALID_REQUEST, 'session already initialized')), undefined, 'message')
      return
    }
    try {
      session = await gw.createLegacySession(backend, initOf(initialize), started => { if (writer.open) entry.session = started })
    } catch (err) {
      writer.event(JSON.stringify(targetUnavailable(initialize.id, (err as Error).message)), undefined, 'message')
      return
    }
    if (!writer.open) {
      void session.close()
      return
    }
    session.id = id
    entry.session = session
    session.stream.connect(writer)
    writer.event(JSON.stringify(resultResponse(initialize.id, session.initializeResult((initialize.params ?? {}).protocolVersion))), undefined, 'message')
    return
  }
  if (session === null) {
    for (const m of read.messages) if (isRequest(m)) writer.event(JSON.stringify(errorResponse(m.id, INVALID_REQUEST, 'session not initialized')), undefined, 'message')
    return
  }
  const filter = itemFilter(ctx)
  for (const m of read.messages) session.handle(m, session.stream, filter)
}
