/**
 * MCP 2026-07-28 ("modern", stateless) clients on an MCP route, beside the initialize-era
 * revisions that mcp/http.ts serves on the same endpoint.
 *
 * A modern request carries its protocol version, client capabilities and client info in
 * `params._meta` (and the version again in the MCP-Protocol-Version header); there is no
 * initialize and no Mcp-Session-Id. Two ways to serve one:
 *  - the route's one target speaks 2026-07-28 too: the request is forwarded as sent
 *    (mcp/modern-target.ts), no state kept;
 *  - otherwise Portico answers `server/discover` itself, from its targets' initialize
 *    results, and sends the item methods (tools, prompts, resources, completion) over the
 *    backend's shared upstream session for 2026-07-28 clients (McpGateway.modernSession),
 *    so targets keep speaking their own initialize-era revision; a target's input requests
 *    become `input_required` results (mcp/modern-call.ts). Results are reshaped for the
 *    client: `resultType`, the cache hints of CacheableResult, and
 *    `io.modelcontextprotocol/serverInfo` in `_meta`.
 *
 * `subscriptions/listen` carries the targets' change notifications (mcp/listen.ts). Not
 * bridged yet: the tasks extension.
 */

import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { RequestContext } from '../request/context.ts'
import type { BackendIR } from '../ir/types.ts'
import type { McpGateway } from './gateway.ts'
import type { ItemFilter, McpSession } from './session.ts'
import { PostChannel, SseWriter, type Channel, type HeadHook } from './channels.ts'
import { honouredFilter, META_SUBSCRIPTION_ID, parseFilter, stamped } from './listen.ts'
import { forwardToModernTarget } from './modern-target.ts'
import { ModernCall, withCacheHints, withServerInfo, type CallBinding } from './modern-call.ts'
import {
  ALL_PROTOCOL_VERSIONS, errorResponse, HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, INVALID_PARAMS, INVALID_REQUEST, isNotification, isRequest,
  isResponse, isSupportedVersion, LATEST_PROTOCOL_VERSION, METHOD_NOT_FOUND,
  MODERN_PROTOCOL_VERSIONS, resultResponse, targetUnavailable,
  UNSUPPORTED_PROTOCOL_VERSION,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcRequest
} from './jsonrpc.ts'

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion'
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities'
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo'
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel'
const MODERN_META_PREFIX = 'io.modelcontextprotocol/'

/** Every version Portico speaks to clients, newest first: the `supported` list of its errors. */
export function supportedVersions (): string[] {
  return [...ALL_PROTOCOL_VERSIONS]
}

export function isModernVersion (v: unknown): v is string {
  return typeof v === 'string' && MODERN_PROTOCOL_VERSIONS.includes(v)
}

/** The methods a modern client is served (everything else is 404 Method not found). */
const FORWARDED = new Set(['tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list', 'resources/read', 'resources/templates/list', 'completion/complete', 'subscriptions/listen'])
/** Results that are CacheableResult in 2026-07-28 (ttlMs and cacheScope required). */
const CACHEABLE = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/read', 'resources/templates/list'])
/** Methods whose Mcp-Name header mirrors `params.name` / `params.uri`. */
const NAME_FIELD: Record<string, 'name' | 'uri'> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' }
const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']
/** 2025-11-25 and earlier answered an unknown resource with -32002; 2026-07-28 uses -32602. */
const LEGACY_RESOURCE_NOT_FOUND = -32002

/** How one POST is to be served. */
export type Era =
  | { era: 'legacy' }
  | { era: 'modern', version: string }
  | { era: 'reject', status: number, body: JsonRpcMessage }

function metaOf (m: JsonRpcMessage): Record<string, unknown> | undefined {
  if (!('method' in m)) return undefined
  const meta = (m.params as Record<string, unknown> | undefined)?._meta
  return meta !== null && typeof meta === 'object' && !Array.isArray(meta) ? meta as Record<string, unknown> : undefined
}

function header (headers: IncomingHttpHeaders, name: string): string | string[] | undefined {
  return headers[name]
}

export function unsupportedVersion (id: JsonRpcId | null, requested: string): JsonRpcMessage {
  return errorResponse(id, UNSUPPORTED_PROTOCOL_VERSION, `Unsupported protocol version: ${requested}`, { supported: supportedVersions(), requested })
}

/** A 2026-07-28 request whose `_meta` envelope is missing or malformed: 400 with -32602. */
function invalidMeta (id: JsonRpcId | null, problem: string): Era {
  return { era: 'reject', status: 400, body: errorResponse(id, INVALID_PARAMS, `Invalid params: ${problem}`) }
}

function mismatch (id: JsonRpcId | null, message: string): Era {
  return { era: 'reject', status: 400, body: errorResponse(id, HEADER_MISMATCH, `Header mismatch: ${message}`) }
}

/**
 * Which era a POST belongs to, from the MCP-Protocol-Version header and the body:
 * - `_meta[io.modelcontextprotocol/protocolVersion]` makes it modern (a 2026-07-28 version
 *   is served, an unknown one is UnsupportedProtocolVersionError, an initialize-era one is
 *   left to the initialize-era path); the header must then be present and equal to it;
 * - without it, a modern header version is a notification (accepted) or a malformed
 *   request; an unknown header version is UnsupportedProtocolVersionError; else legacy.
 * Mcp-Method / Mcp-Name are checked against the body whenever they are sent (an
 * intermediary may have routed or applied policy on them), and are required on modern
 * requests, as the spec's server validation asks.
 */
export function classify (headers: IncomingHttpHeaders, messages: JsonRpcMessage[], batch: boolean): Era {
  const first = messages[0]!
  const id = isRequest(first) ? first.id : null
  const rawVersion = header(headers, 'mcp-protocol-version')
  if (Array.isArray(rawVersion)) return mismatch(id, 'MCP-Protocol-Version header sent more than once')
  const metaVersion = metaOf(first)?.[META_PROTOCOL_VERSION]

  if (metaVersion !== undefined && !(typeof metaVersion === 'string' && isSupportedVersion(metaVersion))) {
    if (typeof metaVersion !== 'string') return invalidMeta(id, `_meta ${META_PROTOCOL_VERSION} must be a string`)
    // Header and body first: when they disagree that is the error, whichever is unknown.
    if (rawVersion !== undefined && rawVersion !== metaVersion) return mismatch(id, `MCP-Protocol-Version header value '${rawVersion}' does not match body value '${metaVersion}'`)
    if (!isModernVersion(metaVersion)) return { era: 'reject', status: 400, body: unsupportedVersion(id, metaVersion) }
    if (batch) return { era: 'reject', status: 400, body: errorResponse(null, INVALID_REQUEST, `Invalid Request: a ${metaVersion} POST carries one message, not a batch`) }
    if (rawVersion === undefined) return mismatch(id, 'MCP-Protocol-Version header is required')
    if (isResponse(first)) return { era: 'reject', status: 400, body: errorResponse(null, INVALID_REQUEST, 'Invalid Request: a client must not send responses') }
    if (isRequest(first)) {
      const caps = metaOf(first)?.[META_CLIENT_CAPABILITIES]
      if (caps === null || typeof caps !== 'object' || Array.isArray(caps)) return invalidMeta(id, `_meta ${META_CLIENT_CAPABILITIES} is required (an object)`)
    }
    // Header requirements for notification POSTs are not defined by 2026-07-28: checked only when sent.
    const problem = checkStandardHeaders(headers, first, isRequest(first))
    return problem !== null ? mismatch(id, problem) : { era: 'modern', version: metaVersion }
  }

  if (rawVersion !== undefined && isModernVersion(rawVersion)) {
    if (!batch && isNotification(first)) {
      const problem = checkStandardHeaders(headers, first, false)
      return problem !== null ? mismatch(null, problem) : { era: 'modern', version: rawVersion }
    }
    if (!batch && isRequest(first) && first.method === 'initialize') {
      return { era: 'reject', status: 400, body: errorResponse(id, INVALID_REQUEST, `Invalid Request: initialize is not part of ${rawVersion}; send initialize with an initialize-era MCP-Protocol-Version or none`) }
    }
    // A 2026-07-28 request whose _meta lacks its version: the envelope is invalid (-32602).
    return invalidMeta(id, `_meta ${META_PROTOCOL_VERSION} is required on a ${rawVersion} request`)
  }
  if (rawVersion !== undefined && !isSupportedVersion(rawVersion)) return { era: 'reject', status: 400, body: unsupportedVersion(id, rawVersion) }
  for (const m of messages) {
    const problem = checkStandardHeaders(headers, m, false)
    if (problem !== null) return mismatch(isRequest(m) ? m.id : null, problem)
  }
  return { era: 'legacy' }
}

/**
 * The `=?base64?…?=` sentinel of Mcp-Name (values that are not plain ASCII); null when the
 * value is not one. A malformed sentinel decodes to null too and then fails the comparison.
 */
export function decodeHeaderValue (value: string): string | null {
  if (!value.startsWith('=?base64?') || !value.endsWith('?=') || value.length < 11) return value
  const b64 = value.slice(9, -2)
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) return null
  return Buffer.from(b64, 'base64').toString('utf8')
}

/**
 * Mcp-Method and Mcp-Name against the body: null when they agree (or are absent and not
 * `required`), else what is wrong.
 */
export function checkStandardHeaders (headers: IncomingHttpHeaders, message: JsonRpcMessage, required: boolean): string | null {
  if (!('method' in message)) return null
  const method = header(headers, 'mcp-method')
  if (Array.isArray(method)) return 'Mcp-Method header sent more than once'
  if (method === undefined) {
    if (required) return 'Mcp-Method header is required'
  } else if (method !== message.method) {
    return `Mcp-Method header value '${method}' does not match body value '${message.method}'`
  }
  const field = NAME_FIELD[message.method]
  const name = header(headers, 'mcp-name')
  if (Array.isArray(name)) return 'Mcp-Name header sent more than once'
  if (field === undefined) return null
  const params = (message.params ?? {}) as Record<string, unknown>
  const bodyValue = typeof params[field] === 'string' ? params[field] : undefined
  if (name === undefined) return required ? `Mcp-Name header is required for ${message.method}` : null
  const decoded = decodeHeaderValue(name)
  if (decoded === null) return `Mcp-Name header value '${name}' is not valid base64`
  if (decoded !== bodyValue) return `Mcp-Name header value '${name}' does not match body value '${String(bodyValue ?? '')}'`
  return null
}

/**
 * A 2026-07-28 `capabilities` object from the initialize-era merge: no `tasks` (an
 * extension now, not bridged). `listChanged` and `subscribe` stay: their notifications
 * reach 2026-07-28 clients over subscriptions/listen (mcp/listen.ts).
 */
export function modernCapabilities (caps: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(caps)) if (key !== 'tasks') out[key] = value
  return out
}

/** What server/discover answers, from the session's merged initialize result. */
export function discoverResult (merged: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = {
    resultType: 'complete',
    supportedVersions: supportedVersions(),
    capabilities: modernCapabilities((merged.capabilities ?? {}) as Record<string, unknown>)
  }
  if (typeof merged.instructions === 'string') result.instructions = merged.instructions
  return withCacheHints(withServerInfo(result, merged.serverInfo))
}

/**
 * The request as sent on the shared upstream session: a gateway-unique id (clients of the
 * shared session would otherwise collide on ids like 1), the modern `_meta` keys dropped
 * (targets speak an initialize-era revision), and a gateway-unique progress token.
 */
export function upstreamRequest (req: JsonRpcRequest, id: string, progressToken: string | undefined): JsonRpcRequest {
  const params = { ...(req.params ?? {}) } as Record<string, unknown>
  // The multi-round-trip fields are between the client and Portico (mcp/modern-call.ts).
  delete params.inputResponses
  delete params.requestState
  const meta = metaOf(req)
  if (meta !== undefined) {
    const kept: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(meta)) if (!k.startsWith(MODERN_META_PREFIX) && k !== 'progressToken') kept[k] = v
    if (progressToken !== undefined && meta.progressToken !== undefined) kept.progressToken = progressToken
    if (Object.keys(kept).length > 0) params._meta = kept
    else delete params._meta
  }
  const out: JsonRpcRequest = { jsonrpc: '2.0', id, method: req.method }
  if (Object.keys(params).length > 0 || req.params !== undefined) out.params = params
  return out
}

/** What mcp/http.ts lends this module: its reply, trace and authorization helpers. */
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

function capabilitiesOf (meta: Record<string, unknown>): Record<string, unknown> {
  const caps = meta[META_CLIENT_CAPABILITIES]
  return caps !== null && typeof caps === 'object' && !Array.isArray(caps) ? caps as Record<string, unknown> : {}
}

/** GET and DELETE of a 2026-07-28 client: no session stream, no sessions (405, as the spec says). */
export function modernMethodNotAllowed (ctx: RequestContext, h: McpHttpHelpers): void {
  ctx.mcp = { method: ctx.method, target: '' }
  h.reply(ctx, 405, errorResponse(null, INVALID_REQUEST, `Method not allowed: ${ctx.method} (2026-07-28 has no session stream or sessions; POST only)`), { allow: 'POST' })
}

/** Whether a GET/DELETE comes from a modern client (by its MCP-Protocol-Version header). */
export function isModernHeader (headers: IncomingHttpHeaders): boolean {
  return isModernVersion(headers['mcp-protocol-version'])
}
