/**
 * The bridge between the initialize-era revisions (2024-11-05 … 2025-11-25) and 2026-07-28,
 * as messages: no sockets, no sessions, no state. Both sides use it — the client side
 * (client/stateless-2026.ts: which era a POST is, its headers against its body, the
 * discover answer, results reshaped for a 2026-07-28 client) and the upstream side
 * (upstream/stateless.ts: a 2026-07-28 target made to look like an initialize-era one) —
 * and it imports neither: only protocol/.
 *
 * A 2026-07-28 request carries its protocol version, client capabilities and client info in
 * `params._meta` (and the version again in the MCP-Protocol-Version header); there is no
 * initialize and no Mcp-Session-Id. A result carries `resultType`, the cache hints of
 * CacheableResult, and `io.modelcontextprotocol/serverInfo` in `_meta`.
 *
 * A later revision adds a file beside this one (its own bridge), one client listener in
 * client/ and one upstream transport in upstream/ (see ../README.md).
 */

import type { IncomingHttpHeaders } from 'node:http'
import {
  ALL_PROTOCOL_VERSIONS, errorResponse, HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, isNotification, isRequest,
  isResponse, isSupportedVersion, MODERN_PROTOCOL_VERSIONS, resultResponse, UNSUPPORTED_PROTOCOL_VERSION,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcNotification, type JsonRpcRequest
} from '../protocol/jsonrpc.ts'

export const MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[0]!
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
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId'
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo'
/** Results that are CacheableResult in 2026-07-28 (ttlMs and cacheScope required). */
const CACHEABLE = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/read', 'resources/templates/list'])
/** Methods whose Mcp-Name header mirrors `params.name` / `params.uri`. */
const NAME_FIELD: Record<string, 'name' | 'uri'> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' }

/** How one POST is to be served. */
export type Era =
  | { era: 'legacy' }
  | { era: 'modern', version: string }
  | { era: 'reject', status: number, body: JsonRpcMessage }

export function metaOf (m: JsonRpcMessage): Record<string, unknown> | undefined {
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
 * reach 2026-07-28 clients over subscriptions/listen (mcp/session/listen.ts).
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
  // The multi-round-trip fields are between the client and Portico (mcp/session/modern-call.ts).
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

/**
 * CacheableResult hints: nothing may be reused without asking again (ttlMs 0: targets can
 * change their lists, and Portico does not relay list_changed yet), and only by this caller
 * (`private`: authorization rules may filter lists per caller).
 */
export function withCacheHints (result: Record<string, unknown>): Record<string, unknown> {
  return { ...result, ttlMs: typeof result.ttlMs === 'number' ? result.ttlMs : 0, cacheScope: 'private' }
}

export function withServerInfo (result: Record<string, unknown>, serverInfo: unknown): Record<string, unknown> {
  if (serverInfo === null || typeof serverInfo !== 'object') return result
  const meta = (result._meta !== null && typeof result._meta === 'object' ? result._meta : {}) as Record<string, unknown>
  if (META_SERVER_INFO in meta) return result
  return { ...result, _meta: { ...meta, [META_SERVER_INFO]: serverInfo } }
}

/** An initialize-era result in the 2026-07-28 shape for `method`. */
export function modernResult (method: string, result: Record<string, unknown>, serverInfo: unknown): Record<string, unknown> {
  let out: Record<string, unknown> = typeof result.resultType === 'string' ? result : { resultType: 'complete', ...result }
  if (CACHEABLE.has(method)) out = withCacheHints(out)
  return withServerInfo(out, serverInfo)
}

/** The client capabilities a 2026-07-28 request names in its `_meta` ({} when none). */
export function capabilitiesOf (meta: Record<string, unknown>): Record<string, unknown> {
  const caps = meta[META_CLIENT_CAPABILITIES]
  return caps !== null && typeof caps === 'object' && !Array.isArray(caps) ? caps as Record<string, unknown> : {}
}

/** Whether a GET/DELETE comes from a modern client (by its MCP-Protocol-Version header). */
export function isModernHeader (headers: IncomingHttpHeaders): boolean {
  return isModernVersion(headers['mcp-protocol-version'])
}

// The upstream side: an initialize-era session in front of a 2026-07-28 target
// (upstream/stateless.ts).

/**
 * The Mcp-Name header value of a request (`params.name` / `params.uri`), as the
 * `=?base64?…?=` sentinel when it is not plain ASCII (decodeHeaderValue reads it back);
 * undefined for methods without one.
 */
export function encodeNameHeader (method: string, params: Record<string, unknown>): string | undefined {
  const field = NAME_FIELD[method]
  const name = field !== undefined ? params[field] : undefined
  if (typeof name !== 'string') return undefined
  return /^[\x20-\x7e]*$/.test(name) ? name : `=?base64?${Buffer.from(name).toString('base64')}?=`
}

/** The headers of a 2026-07-28 POST for `method`: MCP-Protocol-Version, Mcp-Method, Mcp-Name. */
export function modernRequestHeaders (method: string, params: Record<string, unknown>): Record<string, string> {
  const headers: Record<string, string> = {
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-protocol-version': MODERN_VERSION,
    'mcp-method': method
  }
  const name = encodeNameHeader(method, params)
  if (name !== undefined) headers['mcp-name'] = name
  return headers
}

/**
 * The `_meta` of a request sent to a 2026-07-28 target on behalf of an initialize-era
 * session: the request's own keys, then the revision, the session client's capabilities and
 * info (from its initialize), and the level it set with logging/setLevel (if any).
 */
export function modernRequestMeta (own: unknown, client: { capabilities: Record<string, unknown>, clientInfo: Record<string, unknown> }, logLevel: string | undefined): Record<string, unknown> {
  const meta: Record<string, unknown> = {
    ...((own ?? {}) as Record<string, unknown>),
    [META_PROTOCOL_VERSION]: MODERN_VERSION,
    [META_CLIENT_CAPABILITIES]: client.capabilities,
    [META_CLIENT_INFO]: client.clientInfo
  }
  if (logLevel !== undefined) meta[META_LOG_LEVEL] = logLevel
  return meta
}

/**
 * The initialize result an initialize-era client gets from a 2026-07-28 target's
 * `server/discover` result: the revision the client asked for, the target's capabilities,
 * its serverInfo (from `_meta`) and instructions.
 */
export function initializeFromDiscover (discover: Record<string, unknown>, requestedVersion: unknown): Record<string, unknown> {
  const meta = (discover._meta ?? {}) as Record<string, unknown>
  const result: Record<string, unknown> = {
    protocolVersion: String(requestedVersion ?? MODERN_VERSION),
    capabilities: discover.capabilities ?? {},
    serverInfo: meta[META_SERVER_INFO] ?? { name: 'unknown', version: '0' }
  }
  if (typeof discover.instructions === 'string') result.instructions = discover.instructions
  return result
}

/**
 * A change notification of a target's `subscriptions/listen` stream as an initialize-era
 * server sends it: without the subscription id in `_meta` (the inverse of session/listen.ts's
 * stamped()).
 */
export function unstamped (message: { method: string, params?: Record<string, unknown> }): JsonRpcNotification {
  const params = { ...(message.params ?? {}) }
  const meta = { ...((params._meta ?? {}) as Record<string, unknown>) }
  delete meta[META_SUBSCRIPTION_ID]
  if (Object.keys(meta).length > 0) params._meta = meta
  else delete params._meta
  return { jsonrpc: '2.0', method: message.method, params }
}
