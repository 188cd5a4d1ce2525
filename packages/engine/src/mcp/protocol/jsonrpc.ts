/**
 * JSON-RPC 2.0 as MCP uses it: message shapes, the error codes the gateway answers with,
 * and small constructors. Messages are handled as plain objects; shapes are checked by hand
 * on the hot path (the SDK's zod schemas are thorough but slow per message).
 */


export type JsonRpcId = string | number

export interface JsonRpcRequest {
  jsonrpc: '2.0'
  id: JsonRpcId
  method: string
  params?: Record<string, unknown>
}

export interface JsonRpcNotification {
  jsonrpc: '2.0'
  method: string
  params?: Record<string, unknown>
}

export interface JsonRpcResult {
  jsonrpc: '2.0'
  id: JsonRpcId
  result: Record<string, unknown>
}

export interface JsonRpcErrorResponse {
  jsonrpc: '2.0'
  id: JsonRpcId | null
  error: { code: number, message: string, data?: unknown }
}

export type JsonRpcResponse = JsonRpcResult | JsonRpcErrorResponse
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse

export const PARSE_ERROR = -32700
export const INVALID_REQUEST = -32600
export const METHOD_NOT_FOUND = -32601
export const INVALID_PARAMS = -32602
export const INTERNAL_ERROR = -32603
/**
 * Gateway errors about a target (down, restarting, failed, killed for an oversized message):
 * the SDK's "connection closed".
 */
export const TARGET_UNAVAILABLE = -32000
/** A target did not answer within its requestTimeout: the SDK's "request timed out". */
export const TARGET_TIMEOUT = -32001
/** An unknown Mcp-Session-Id (with HTTP 404), as the SDK's server answers it. */
export const SESSION_NOT_FOUND = -32001

/**
 * Why the gateway itself answered with an error (`error.data.reason`, with `source:
 * "portico"`): the codes follow the SDK's, so -32001 is both a target's timeout and an unknown
 * session, and a target may send -32000/-32001 of its own; the data tells them apart for
 * clients, traces and logs.
 */
export type GatewayErrorReason = 'target-unavailable' | 'target-timeout' | 'session-not-found'

function gatewayError (id: JsonRpcId | null, code: number, message: string, reason: GatewayErrorReason): JsonRpcErrorResponse {
  return errorResponse(id, code, message, { source: 'portico', reason })
}

/** A target is down, restarting, failed or was cut off (TARGET_UNAVAILABLE). */
export function targetUnavailable (id: JsonRpcId | null, message: string): JsonRpcErrorResponse {
  return gatewayError(id, TARGET_UNAVAILABLE, message, 'target-unavailable')
}

/** A target did not answer within its requestTimeout (TARGET_TIMEOUT). */
export function targetTimeout (id: JsonRpcId | null, message: string): JsonRpcErrorResponse {
  return gatewayError(id, TARGET_TIMEOUT, message, 'target-timeout')
}

/** An unknown or ended session (SESSION_NOT_FOUND, sent with HTTP 404). */
export function sessionNotFound (): JsonRpcErrorResponse {
  return gatewayError(null, SESSION_NOT_FOUND, 'Session not found', 'session-not-found')
}

/** The reason of an error the gateway made, or null for a target's own error. */
export function gatewayErrorReason (error: { data?: unknown }): GatewayErrorReason | null {
  const data = error.data as { source?: unknown, reason?: unknown } | undefined
  return data !== undefined && data !== null && data.source === 'portico' ? data.reason as GatewayErrorReason : null
}

/**
 * The MCP protocol versions, as the SDK's types.js defines them (test/mcp-protocol-versions
 * pins them equal). Not imported from there: types.js loads zod, about 1 MiB of source and
 * tens of MiB of heap, which the gateway itself never uses.
 */
export const LATEST_PROTOCOL_VERSION = '2025-11-25'
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = [LATEST_PROTOCOL_VERSION, '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07']

/**
 * The stateless ("modern") revisions, served per request without initialize or session
 * (mcp/revisions/revision-2026.ts). Kept apart from SUPPORTED_PROTOCOL_VERSIONS, which is the
 * initialize-era list the SDK v1 negotiates and the pin test compares.
 */
export const MODERN_PROTOCOL_VERSIONS: readonly string[] = ['2026-07-28']

/** Every version Portico speaks to clients, newest first: `supportedVersions` of discover and -32022. */
export const ALL_PROTOCOL_VERSIONS: readonly string[] = [...MODERN_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS]

/** MCP's own error codes from 2026-07-28 on (the -32020…-32099 range it reserves). */
export const HEADER_MISMATCH = -32020
/** A request needs a client capability the client did not declare (HTTP 400 in 2026-07-28). */
export const MISSING_CLIENT_CAPABILITY = -32021
export const UNSUPPORTED_PROTOCOL_VERSION = -32022

export function isRequest (m: JsonRpcMessage): m is JsonRpcRequest {
  return 'method' in m && 'id' in m && m.id !== undefined && m.id !== null
}

export function isNotification (m: JsonRpcMessage): m is JsonRpcNotification {
  return 'method' in m && !('id' in m && m.id !== undefined && m.id !== null)
}

export function isResponse (m: JsonRpcMessage): m is JsonRpcResponse {
  return !('method' in m) && ('result' in m || 'error' in m)
}

/** A structural check of one decoded JSON value: is it a JSON-RPC 2.0 message? */
export function validMessage (value: unknown): value is JsonRpcMessage {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const m = value as Record<string, unknown>
  if (m.jsonrpc !== '2.0') return false
  const idOk = (id: unknown) => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))
  if ('method' in m) {
    if (typeof m.method !== 'string') return false
    if ('params' in m && m.params !== undefined && (m.params === null || typeof m.params !== 'object')) return false
    return !('id' in m) || idOk(m.id)
  }
  if ('result' in m) return idOk(m.id) && m.result !== null && typeof m.result === 'object'
  if ('error' in m) {
    const e = m.error as Record<string, unknown> | null
    return (idOk(m.id) || m.id === null) && e !== null && typeof e === 'object' && typeof e.code === 'number' && typeof e.message === 'string'
  }
  return false
}

export function errorResponse (id: JsonRpcId | null, code: number, message: string, data?: unknown): JsonRpcErrorResponse {
  const error: JsonRpcErrorResponse['error'] = { code, message }
  if (data !== undefined) error.data = data
  return { jsonrpc: '2.0', id, error }
}

export function resultResponse (id: JsonRpcId, result: Record<string, unknown>): JsonRpcResult {
  return { jsonrpc: '2.0', id, result }
}

export function isSupportedVersion (v: string): boolean {
  return (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(v)
}
