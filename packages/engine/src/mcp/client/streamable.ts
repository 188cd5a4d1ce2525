/**
 * The streamable HTTP transport, client side (revisions 2025-03-26, 2025-06-18, 2025-11-25):
 *
 *  POST   one JSON-RPC message (or a batch, for 2025-03-26 clients): requests are answered
 *         as JSON or as an SSE stream; notifications and responses alone get 202.
 *  GET    the session's stream for server-initiated messages (Last-Event-ID resumes).
 *  DELETE ends the session.
 *
 * A POST of a 2026-07-28 client is handed to stateless-2026.ts (by the revision bridge's
 * classify()); its GET and DELETE are 405.
 */

import type { RequestContext } from '../../request/context.ts'
import type { BackendIR } from '../../ir/types.ts'
import { StdioCapacityError, type McpGateway } from '../session/gateway.ts'
import type { McpSession } from '../session/session.ts'
import { SseWriter } from '../protocol/sse-writer.ts'
import { PostChannel } from './post-channel.ts'
import { errorResponse, INVALID_REQUEST, isRequest, resultResponse, sessionNotFound, targetUnavailable, type JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { classify, isModernHeader } from '../revisions/revision-2026.ts'
import { handleModernPost, modernMethodNotAllowed } from './stateless-2026.ts'
import { headHook, helpers, initOf, itemFilter, readMessages, reply, traceStart, traceTargetCall, traceTargetError, type McpRuntime } from './answer.ts'

const SESSION_HEADER = 'mcp-session-id'

function acceptsBoth (accept: string | undefined): boolean {
  if (accept === undefined) return false
  if (accept.includes('*/*')) return true
  return accept.includes('application/json') && accept.includes('text/event-stream')
}

export async function streamablePost (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
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

export async function streamableGet (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
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

export async function streamableDelete (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
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
