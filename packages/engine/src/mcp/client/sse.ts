/**
 * The legacy HTTP+SSE transport, client side (revision 2024-11-05): `GET …/sse` opens the
 * one stream of a session and names its endpoint; `POST …/message?sessionId=` carries the
 * client's messages, answered 202, their responses on the stream.
 */

import { randomUUID } from 'node:crypto'
import type { RequestContext } from '../../request/context.ts'
import type { BackendIR } from '../../ir/types.ts'
import type { McpGateway } from '../session/gateway.ts'
import { SseWriter } from '../protocol/sse-writer.ts'
import { errorResponse, INVALID_REQUEST, isRequest, resultResponse, sessionNotFound, targetUnavailable, type JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { headHook, initOf, itemFilter, readMessages, reply, traceStart, type McpRuntime } from './answer.ts'

export function legacyOpen (gw: McpGateway, rt: McpRuntime, ctx: RequestContext): void {
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

export async function legacyPost (gw: McpGateway, rt: McpRuntime, ctx: RequestContext, backend: BackendIR): Promise<void> {
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
