/**
 * MCP 2026-07-28 ("modern", stateless) clients on an MCP route, beside the initialize-era
 * revisions that client/http.ts serves on the same endpoint.
 *
 * A modern request carries its protocol version, client capabilities and client info in
 * `params._meta` (and the version again in the MCP-Protocol-Version header); there is no
 * initialize and no Mcp-Session-Id. Two ways to serve one:
 *  - the route's one target speaks 2026-07-28 too: the request is forwarded as sent
 *    (upstream/stateless-forward.ts), no state kept;
 *  - otherwise Portico answers `server/discover` itself, from its targets' initialize
 *    results, and sends the item methods (tools, prompts, resources, completion) over the
 *    backend's shared upstream session for 2026-07-28 clients (McpGateway.modernSession),
 *    so targets keep speaking their own initialize-era revision; a target's input requests
 *    become `input_required` results (session/modern-call.ts). Results are reshaped for the
 *    client: `resultType`, the cache hints of CacheableResult, and
 *    `io.modelcontextprotocol/serverInfo` in `_meta`.
 *
 * `subscriptions/listen` carries the targets' change notifications (session/listen.ts). Not
 * bridged yet: the tasks extension.
 */

import { randomUUID } from 'node:crypto'
import type { RequestContext } from '../../request/context.ts'
import type { BackendIR } from '../../ir/types.ts'
import type { McpGateway } from '../session/gateway.ts'
import type { McpSession } from '../session/session.ts'
import type { McpHttpHelpers } from './answer.ts'
import { SseWriter } from '../protocol/sse-writer.ts'
import { PostChannel } from './post-channel.ts'
import { honouredFilter, parseFilter, stamped } from '../revisions/revision-2026-listen.ts'
import { forwardToModernTarget } from '../upstream/stateless-forward.ts'
import { ModernCall, type CallBinding } from '../session/modern-call.ts'
import {
  capabilitiesOf, discoverResult, META_LOG_LEVEL, META_SUBSCRIPTION_ID, metaOf, upstreamRequest
} from '../revisions/revision-2026.ts'
import {
  errorResponse, MISSING_CLIENT_CAPABILITY, INVALID_PARAMS, INVALID_REQUEST, isRequest,
  LATEST_PROTOCOL_VERSION, METHOD_NOT_FOUND, resultResponse, targetUnavailable,
  type JsonRpcMessage, type JsonRpcRequest
} from '../protocol/jsonrpc.ts'

/** The methods a modern client is served (everything else is 404 Method not found). */
const FORWARDED = new Set(['tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list', 'resources/read', 'resources/templates/list', 'completion/complete', 'subscriptions/listen'])


/** One modern POST (already classified): a notification, server/discover, or an item method. */
export async function handleModernPost (gw: McpGateway, ctx: RequestContext, backend: BackendIR, message: JsonRpcMessage, version: string, h: McpHttpHelpers): Promise<void> {
  const spec = backend.mcp!
  // Both ends speak 2026-07-28: forwarded as sent (one target, so no names to prefix).
  const only = spec.targets.length === 1 && spec.prefixMode === 'conditional' ? spec.targets[0]! : undefined
  if (only?.kind === 'mcp' && await gw.modernTargets.isModern(only)) {
    return await forwardToModernTarget(gw.modernTargets, ctx, only, message, h.itemFilter(ctx), h)
  }
  if (!isRequest(message)) {
    // 2026-07-28 defines no client notifications over HTTP (closing the stream cancels);
    // one is accepted and dropped: forwarding it into the shared session could reach
    // another client's request.
    ctx.mcp = { method: 'method' in message ? message.method : 'response', target: '', protocolVersion: version }
    h.traceStart(ctx)
    return h.reply(ctx, 202, null)
  }
  const req = message
  const allTargets = spec.targets.map(t => t.name).join(',')
  if (req.method !== 'server/discover' && !FORWARDED.has(req.method)) {
    ctx.mcp = { method: req.method, target: '', protocolVersion: version }
    return h.reply(ctx, 404, errorResponse(req.id, METHOD_NOT_FOUND, `Method not found: ${req.method}`))
  }
  let session: McpSession
  try {
    session = await gw.modernSession(backend, capabilitiesOf(metaOf(req) ?? {}))
  } catch (err) {
    ctx.mcp = { method: req.method, target: allTargets, protocolVersion: version }
    ctx.error = (err as Error).message
    return h.reply(ctx, 200, targetUnavailable(req.id, (err as Error).message))
  }
  const merged = session.initializeResult(LATEST_PROTOCOL_VERSION)
  if (req.method === 'server/discover') {
    ctx.mcp = { method: req.method, target: allTargets, protocolVersion: version }
    h.traceStart(ctx)
    return h.reply(ctx, 200, resultResponse(req.id, discoverResult(merged)))
  }

  if (req.method === 'subscriptions/listen') return listen(gw, ctx, session, req, merged, h)

  // The same description and authorization filter as an initialize-era request.
  ctx.mcp = { ...session.describe(req)!, protocolVersion: version }
  const filter = h.itemFilter(ctx)
  h.traceStart(ctx)
  const meta = metaOf(req) ?? {}
  const post = new PostChannel(ctx.res, { requestIds: [req.id], batch: false, headers: {}, log: null, head: h.headHook(ctx), statusOf: modernStatus, span: ctx.span, onCall: () => h.traceTargetCall(ctx) })
  post.onError = error => h.traceTargetError(ctx, error)
  const binding: CallBinding = { channel: post, clientId: req.id, clientToken: meta.progressToken, logLevel: meta[META_LOG_LEVEL] }
  const params = (req.params ?? {}) as Record<string, unknown>

  const what = { backend: backend.key, method: req.method, name: ctx.mcp?.name ?? '' }
  /** A new upstream call; `prefilled`: answers from earlier rounds (a call run again here). */
  const start = (prefilled: Record<string, unknown>): ModernCall => {
    const upstreamId = `p26-${randomUUID()}`
    const upstreamToken = meta.progressToken !== undefined ? `p26-${randomUUID()}` : undefined
    const timeoutMs = Math.max(...spec.targets.map(t => t.requestTimeoutMs))
    const call: ModernCall = new ModernCall(binding, {
      upstreamId,
      method: req.method,
      upstreamToken,
      serverInfo: merged.serverInfo,
      clientCapabilities: capabilitiesOf(meta),
      answer: response => session.handle(response, call),
      park: parked => gw.parked.park(parked, what, timeoutMs, () => {
        session.handle({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: upstreamId, reason: 'the client did not come back with the input asked for' } }, parked)
      })
    }, prefilled)
    session.handle(upstreamRequest(req, upstreamId, upstreamToken), call, filter)
    return call
  }

  let call: ModernCall
  if (params.requestState === undefined) {
    call = start({})
  } else {
    // A retry of a call that asked for input: it carries on with the client's inputResponses
    // where it is parked, or runs again here with every answer given so far.
    const found = gw.parked.find(params.requestState, what)
    const hidden = ctx.mcp !== null && ctx.mcp.kind !== undefined && filter !== undefined && !filter({ method: req.method, kind: ctx.mcp.kind, name: ctx.mcp.name ?? '', target: ctx.mcp.target })
    const problem = 'refused' in found
      ? found.refused
      : hidden ? `Unknown ${ctx.mcp!.kind!}: ${ctx.mcp!.name ?? ''}` : checkInputResponses(params.inputResponses, 'call' in found ? found.call : null)
    if (problem !== null) {
      post.deliver(errorResponse(req.id, INVALID_PARAMS, problem))
      return
    }
    if ('call' in found) {
      call = found.call
      gw.parked.unpark(call)
      call.resume(binding, params.inputResponses)
    } else {
      call = start({ ...('rerun' in found ? found.rerun : {}), ...(params.inputResponses as Record<string, unknown> | undefined) })
    }
  }
  // Closing the response stream is the client's cancellation in 2026-07-28 (not once the
  // POST was answered with input_required: the call then waits for the retry).
  ctx.res.once('close', () => {
    if (call.done || !call.isBoundTo(post)) return
    session.handle({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: call.upstreamId, reason: 'the client closed the response stream' } }, call)
  })
}

/**
 * subscriptions/listen: an SSE stream that opens with the acknowledgment (the part of the
 * filter the targets can honour, URIs this caller may not see left out) and then carries
 * the matching change notifications of the backend's targets, until the client closes it
 * or Portico drains (then the request is answered, the graceful end).
 */
function listen (gw: McpGateway, ctx: RequestContext, session: McpSession, req: JsonRpcRequest, merged: Record<string, unknown>, h: McpHttpHelpers): void {
  ctx.mcp = { method: req.method, target: [...session.targets.keys()].join(','), protocolVersion: String(ctx.req.headers['mcp-protocol-version']) }
  const wanted = parseFilter((req.params as Record<string, unknown> | undefined)?.notifications)
  if (typeof wanted === 'string') {
    h.traceStart(ctx)
    return h.reply(ctx, 200, errorResponse(req.id, INVALID_PARAMS, `Invalid params: ${wanted}`))
  }
  const filter = h.itemFilter(ctx)
  const honoured = honouredFilter(wanted, (merged.capabilities ?? {}) as Record<string, unknown>)
  if (honoured.resourceSubscriptions !== undefined && filter !== undefined) {
    honoured.resourceSubscriptions = honoured.resourceSubscriptions.filter(uri => {
      const owner = session.naming.unwrapUri(uri)
      return owner !== null && filter({ method: req.method, kind: 'resource', name: owner.uri, target: owner.target })
    })
  }
  h.traceStart(ctx)
  const writer = new SseWriter(ctx.res, {}, h.headHook(ctx))
  const send = (m: JsonRpcMessage) => writer.event(JSON.stringify(m))
  send(stamped({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: honoured } }, req.id))
  const remove = session.hub.add(honoured, m => send(stamped(m, req.id)), session)
  const endGracefully = () => {
    send(resultResponse(req.id, { resultType: 'complete', _meta: { [META_SUBSCRIPTION_ID]: req.id } }))
    writer.end()
  }
  gw.listenStreams.add(endGracefully)
  ctx.res.once('close', () => {
    remove()
    gw.listenStreams.delete(endGracefully)
  })
}

/**
 * The HTTP status of a 2026-07-28 JSON answer: a MissingRequiredClientCapabilityError
 * (-32021, whoever raised it) is 400, as the revision's HTTP binding says; other answers 200.
 */
function modernStatus (message: JsonRpcMessage): number {
  return 'error' in message && message.error.code === MISSING_CLIENT_CAPABILITY ? 400 : 200
}

/** Why a retry's inputResponses cannot be used (the parked call's own check, or the shape alone), or null. */
function checkInputResponses (responses: unknown, call: ModernCall | null): string | null {
  if (call !== null) return call.checkResponses(responses)
  if (responses === undefined) return null
  if (responses === null || typeof responses !== 'object' || Array.isArray(responses)) return 'Invalid params: inputResponses must be an object'
  for (const [key, value] of Object.entries(responses as Record<string, unknown>)) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return `Invalid params: inputResponses["${key}"] must be a result object`
  }
  return null
}
/** GET and DELETE of a 2026-07-28 client: no session stream, no sessions (405, as the spec says). */
export function modernMethodNotAllowed (ctx: RequestContext, h: McpHttpHelpers): void {
  ctx.mcp = { method: ctx.method, target: '' }
  h.reply(ctx, 405, errorResponse(null, INVALID_REQUEST, `Method not allowed: ${ctx.method} (2026-07-28 has no session stream or sessions; POST only)`), { allow: 'POST' })
}
