/**
 * The 2026-07-28 side of a call served by an initialize-era target, as messages: how the
 * target's requests for input (sampling, elicitation, roots) become `input_required`
 * results, how the client's `inputResponses` are checked, and how the rest of the call's
 * traffic is reshaped for a 2026-07-28 client (its log level, the final result or error).
 *
 * Pure functions: the call's state — which requests are waiting, the call parked between
 * POSTs, the sealed requestState — is the session's (session/modern-call.ts). They are here
 * so the next revision's bridge can be written beside them without reading session code.
 */

import { createHash } from 'node:crypto'
import { INVALID_PARAMS } from '../protocol/jsonrpc.ts'
import { withServerInfo } from './revision-2026.ts'

/** The syslog levels of logging/setLevel, least severe first. */
const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']
/** 2025-11-25 and earlier answered an unknown resource with -32002; 2026-07-28 uses -32602. */
const LEGACY_RESOURCE_NOT_FOUND = -32002
/** The requests a call may answer with input_required (2026-07-28's list, tasks aside). */
const BRIDGED_METHODS = new Set(['tools/call', 'prompts/get', 'resources/read'])
/** Input requests and the client capability each needs. */
const INPUT_CAPABILITY: Record<string, string> = { 'sampling/createMessage': 'sampling', 'elicitation/create': 'elicitation', 'roots/list': 'roots' }

/**
 * The key of an input request in `inputRequests`: derived from what is asked (method and
 * params, `_meta` aside) and how many times the call asked the same, so a replica that runs
 * the call again gets the same keys for the same questions (see session/modern-call.ts).
 */
export function inputKey (method: string, params: Record<string, unknown>, occurrence: number): string {
  const { _meta: _m, ...rest } = params
  return `in-${createHash('sha256').update(method).update('\0').update(canonicalJson(rest)).digest('base64url').slice(0, 16)}-${occurrence}`
}

/** JSON with object keys sorted, so equal values give equal text. */
function canonicalJson (value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  const o = value as Record<string, unknown>
  return `{${Object.keys(o).sort().filter(k => o[k] !== undefined).map(k => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`
}

/**
 * Why a target's request `inputMethod`, made during the client's `callMethod`, cannot be
 * put to a 2026-07-28 client with `clientCapabilities` (the target gets -32601, as from a
 * client without the capability), or null when it can.
 */
export function inputRefusal (inputMethod: string, callMethod: string, clientCapabilities: Record<string, unknown>): string | null {
  const capability = INPUT_CAPABILITY[inputMethod]
  if (capability === undefined) return `Method not found: ${inputMethod} (not an input request a 2026-07-28 client can answer)`
  if (!BRIDGED_METHODS.has(callMethod)) return `Method not found: ${inputMethod} (a 2026-07-28 client is asked for input only during tools/call, prompts/get or resources/read)`
  if (!(capability in clientCapabilities)) return `Method not found: ${inputMethod} (the client did not declare the ${capability} capability)`
  return null
}

/** The `input_required` result: what is asked, by key, and the requestState the retry must send back. */
export function inputRequiredResult (inputRequests: Record<string, { method: string, params: Record<string, unknown> }>, requestState: string, serverInfo: unknown): Record<string, unknown> {
  return withServerInfo({ resultType: 'input_required', inputRequests, requestState }, serverInfo)
}

/**
 * A retry's `inputResponses` checked before anything is sent: null when usable, else why
 * not. `askedMethod` gives the method of an input still asked for under a key (undefined
 * for other keys, which are ignored: an answer to a question not asked is harmless).
 */
export function checkInputResponses (responses: unknown, askedMethod: (key: string) => string | undefined): string | null {
  if (responses === undefined) return null
  if (responses === null || typeof responses !== 'object' || Array.isArray(responses)) return 'Invalid params: inputResponses must be an object'
  for (const [key, value] of Object.entries(responses as Record<string, unknown>)) {
    const method = askedMethod(key)
    if (method === undefined) continue
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return `Invalid params: inputResponses["${key}"] must be the result of the ${method} request`
  }
  return null
}

/** Whether a log message at `level` reaches a client that asked for `wanted` (its `_meta` logLevel; none: no log messages). */
export function logWanted (level: unknown, wanted: unknown): boolean {
  const floor = LOG_LEVELS.indexOf(String(wanted))
  return floor >= 0 && LOG_LEVELS.indexOf(String(level)) >= floor
}

/** An initialize-era error in 2026-07-28 terms (an unknown resource is -32602 now). */
export function modernError<E extends { code: number }> (error: E): E {
  return error.code === LEGACY_RESOURCE_NOT_FOUND ? { ...error, code: INVALID_PARAMS } : error
}
