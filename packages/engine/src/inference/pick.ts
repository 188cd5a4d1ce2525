/**
 * The request side of the endpoint picker protocol (Gateway API Inference Extension,
 * docs/proposals/004-endpoint-picker-protocol), on one ext_proc stream:
 *
 * - the gateway sends the request headers (with the subset hint, when set, in
 *   metadata_context.filter_metadata["envoy.lb.subset_hint"]["x-gateway-destination-endpoint-subset"])
 *   and then the body in chunks, FULL_DUPLEX_STREAMED, without waiting between them — the
 *   reference picker answers the headers only once it has read the body's last chunk;
 * - the picker answers the headers with the pick: the `x-gateway-destination-endpoint`
 *   header mutation and/or dynamic_metadata["envoy.lb"]["x-gateway-destination-endpoint"]
 *   (a comma-separated, ordered fallback list), and each body chunk (an empty answer keeps
 *   the chunk; streamed_response chunks, or a whole body, replace the body);
 * - or an immediate response (503 no endpoint, 429 shed), which the client gets.
 *
 * Everything is bounded: one deadline for the whole pick, the header mutation's size and
 * entries, the replaced body's size. A picker breaking any of it has failed (the pool's
 * failureMode decides what then).
 */

import type { HeaderMap } from '../ir/header-map.ts'
import type { HeaderMutation } from '../auth/ext-authz-check.ts'
import { headerMutations } from '../auth/ext-authz-grpc.ts'
import { headerMapMessage, metadataContextMessage, structToJson, type ExtProcStream, type HeaderMutationMessage } from '../traffic/ext-proc-grpc.ts'

export const DESTINATION_ENDPOINT = 'x-gateway-destination-endpoint'
export const DESTINATION_NAMESPACE = 'envoy.lb'
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint'
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset'
export const SERVED_KEY = 'x-gateway-destination-endpoint-served'

/** Body chunks sent to the picker. */
const BODY_CHUNK_BYTES = 64 * 1024

/** Headers a picker's mutation leaves alone: the gateway frames the body and names the host. */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'host', 'connection', 'upgrade', 'te'])

/** Answers read for one body beyond one per chunk sent (streamed_response chunks need not match ours). */
const MAX_EXTRA_ANSWERS = 1024

/** Most header mutation entries (set + remove) and bytes (names and values) an answer may carry. */
export const MAX_MUTATION_ENTRIES = 64
export const MAX_MUTATION_BYTES = 32 * 1024

/**
 * BodySendMode of ProtocolConfiguration: FULL_DUPLEX_STREAMED for the request, NONE for the
 * response (a picker asks for it with mode_override: processResponseBody).
 */
const PROTOCOL_CONFIG = { request_body_mode: 4, response_body_mode: 0 }

export interface PickInput {
  pseudo: Record<string, string>
  headers: HeaderMap
  /** The request body read whole (null: none). */
  body: Buffer | null
  /** The pool's endpoints sent as the subset hint; null: no hint. */
  subset: string[] | null
  /** Date.now() ms by which the pick must be complete (each answer also waits at most the stream's timeout). */
  deadline: number
  /** Largest body the picker may send back. */
  maxBodyBytes: number
}

export interface RequestChanges {
  set: HeaderMutation[]
  remove: string[]
  /** The body the picker replaced the request's with; null: unchanged. */
  body: Buffer | null
}

export type PickAnswer =
  /** `responseBody`: the picker asked for the response body (mode_override). */
  | { kind: 'picked', value: string, source: 'header' | 'metadata', changes: RequestChanges, responseBody: boolean }
  | { kind: 'immediate', status: number, body: Buffer, headers: HeaderMutation[], details: string }
  | { kind: 'failed', reason: string }

/** The string at `namespace`.`key` of an answer's dynamic_metadata, or undefined. */
function metadataString (m: Parameters<typeof structToJson>[0], namespace: string, key: string): string | undefined {
  if (m === undefined || m === null) return undefined
  const inner = structToJson(m)[namespace]
  const v = inner !== null && typeof inner === 'object' ? (inner as Record<string, unknown>)[key] : undefined
  return typeof v === 'string' ? v : undefined
}

/**
 * Sends the request (the stream is the caller's: it opens it with its trace context and
 * closes or finishes it) and reads the pick. The stream's message timeout bounds each wait;
 * `deadline` the whole pick.
 */
export async function askPicker (stream: ExtProcStream, input: PickInput): Promise<PickAnswer> {
  const hasBody = input.body !== null && input.body.length > 0
  const first: Record<string, unknown> = {
    request_headers: { headers: headerMapMessage(input.pseudo, input.headers), end_of_stream: !hasBody },
    protocol_config: PROTOCOL_CONFIG
  }
  if (input.subset !== null) first.metadata_context = metadataContextMessage({ [SUBSET_NAMESPACE]: { [SUBSET_KEY]: input.subset } })
  const unsent = await stream.write(first)
  if (unsent !== null) return { kind: 'failed', reason: unsent.kind === 'error' ? unsent.reason : 'the stream closed' }
  let chunks = 0
  if (hasBody) {
    const body = input.body!
    for (let at = 0; at < body.length; at += BODY_CHUNK_BYTES) {
      const end = Math.min(body.length, at + BODY_CHUNK_BYTES)
      const failed = await stream.write({ request_body: { body: body.subarray(at, end), end_of_stream: end === body.length } })
      if (failed !== null) return { kind: 'failed', reason: failed.kind === 'error' ? failed.reason : 'the stream closed' }
      chunks++
      if (Date.now() > input.deadline) return { kind: 'failed', reason: 'no pick in time' }
    }
  }

  let pick: { value: string, source: 'header' | 'metadata' } | null = null
  let headersAnswered = false
  let bodyAnswers = 0
  let streamed: Buffer[] | null = null
  let streamedBytes = 0
  let streamedDone = false
  const changes: RequestChanges = { set: [], remove: [], body: null }
  let responseBody = false
  const bodyDone = (): boolean => !hasBody || (streamed !== null ? streamedDone : bodyAnswers >= chunks)

  let answers = 0
  while (!(headersAnswered && bodyDone())) {
    if (Date.now() > input.deadline) return { kind: 'failed', reason: 'no pick in time' }
    if (++answers > chunks + MAX_EXTRA_ANSWERS) return { kind: 'failed', reason: `more than ${chunks + MAX_EXTRA_ANSWERS} answers` }
    const r = await stream.receive()
    if (r.kind === 'error') return { kind: 'failed', reason: r.reason }
    if (r.kind === 'closed') return { kind: 'failed', reason: `the picker ended the stream before it picked${headersAnswered ? ' (body unanswered)' : ''}` }
    const m = r.message
    const immediate = m.immediate_response
    if (immediate !== undefined && immediate !== null) {
      const checked = checkMutation(immediate.headers)
      if (typeof checked === 'string') return { kind: 'failed', reason: checked }
      const status = immediate.status?.code ?? 0
      return { kind: 'immediate', status: status >= 200 && status <= 599 ? status : 503, body: Buffer.from(immediate.body ?? []), headers: checked.set, details: immediate.details ?? '' }
    }
    // STREAMED, BUFFERED, BUFFERED_PARTIAL or FULL_DUPLEX_STREAMED: the picker wants the response body.
    if ((m.mode_override?.response_body_mode ?? 0) !== 0) responseBody = true
    const fromMetadata = metadataString(m.dynamic_metadata, DESTINATION_NAMESPACE, DESTINATION_ENDPOINT)
    if (fromMetadata !== undefined && pick === null) pick = { value: fromMetadata, source: 'metadata' }
    if (m.request_headers !== undefined && m.request_headers !== null) {
      if (headersAnswered) return { kind: 'failed', reason: 'protocol error: the request headers answered twice' }
      headersAnswered = true
      const common = m.request_headers.response ?? {}
      const checked = checkMutation(common.header_mutation)
      if (typeof checked === 'string') return { kind: 'failed', reason: checked }
      // The header is the protocol's first way; the metadata must say the same (if it differs, the header wins).
      if (checked.destination !== null) pick = { value: checked.destination, source: 'header' }
      changes.set.push(...checked.set)
      changes.remove.push(...checked.remove)
    } else if (m.request_body !== undefined && m.request_body !== null) {
      if (!hasBody) return { kind: 'failed', reason: 'protocol error: a body answer to a request without a body' }
      bodyAnswers++
      const common = m.request_body.response ?? {}
      const checked = checkMutation(common.header_mutation)
      if (typeof checked === 'string') return { kind: 'failed', reason: checked }
      changes.set.push(...checked.set)
      changes.remove.push(...checked.remove)
      const mutation = common.body_mutation
      if (mutation?.streamed_response !== undefined && mutation.streamed_response !== null) {
        const chunk = Buffer.from(mutation.streamed_response.body ?? [])
        streamedBytes += chunk.length
        if (streamedBytes > input.maxBodyBytes) return { kind: 'failed', reason: `the picker's body is larger than ${input.maxBodyBytes} bytes` }
        ;(streamed ??= []).push(chunk)
        if (mutation.streamed_response.end_of_stream === true) streamedDone = true
      } else if (mutation?.body !== undefined && mutation.body !== null) {
        changes.body = Buffer.from(mutation.body)
      } else if (mutation?.clear_body === true) {
        changes.body = Buffer.alloc(0)
      }
    } else if (fromMetadata === undefined) {
      return { kind: 'failed', reason: `protocol error: unexpected ${m.response ?? 'empty'} answer` }
    }
  }
  if (streamed !== null) changes.body = Buffer.concat(streamed)
  if (pick === null) return { kind: 'failed', reason: `the picker named no endpoint (neither the ${DESTINATION_ENDPOINT} header nor ${DESTINATION_NAMESPACE} metadata)` }
  return { kind: 'picked', ...pick, changes, responseBody }
}

/**
 * The response body to the picker (when it asked, mode_override): sent in chunks, its answer
 * per chunk read as on the request side — an empty answer keeps the chunk, streamed_response
 * chunks or a whole body replace it. Returns the body to send on (null: unchanged) or why
 * the picker failed.
 */
export async function processResponseBody (stream: ExtProcStream, body: Buffer, deadline: number, maxBodyBytes: number): Promise<{ body: Buffer | null } | { failed: string }> {
  let chunks = 0
  for (let at = 0; at < body.length || chunks === 0; at += BODY_CHUNK_BYTES) {
    const end = Math.min(body.length, at + BODY_CHUNK_BYTES)
    const failed = await stream.write({ response_body: { body: body.subarray(at, end), end_of_stream: end === body.length } })
    if (failed !== null) return failed.kind === 'error' ? { failed: failed.reason } : { body: null }
    chunks++
  }
  let answers = 0
  let streamed: Buffer[] | null = null
  let streamedBytes = 0
  let done = false
  let replaced: Buffer | null = null
  while (!(streamed !== null ? done : answers >= chunks)) {
    if (Date.now() > deadline) return { failed: 'no answer in time' }
    if (answers > chunks + MAX_EXTRA_ANSWERS) return { failed: `more than ${chunks + MAX_EXTRA_ANSWERS} answers` }
    const r = await stream.receive()
    if (r.kind === 'error') return { failed: r.reason }
    if (r.kind === 'closed') return { body: streamed !== null ? Buffer.concat(streamed) : replaced }
    const answer = r.message.response_body
    if (answer === undefined || answer === null) return { failed: `protocol error: unexpected ${r.message.response ?? 'empty'} answer to the response body` }
    answers++
    const mutation = answer.response?.body_mutation
    if (mutation?.streamed_response !== undefined && mutation.streamed_response !== null) {
      const chunk = Buffer.from(mutation.streamed_response.body ?? [])
      streamedBytes += chunk.length
      if (streamedBytes > maxBodyBytes) return { failed: `the picker's response body is larger than ${maxBodyBytes} bytes` }
      ;(streamed ??= []).push(chunk)
      if (mutation.streamed_response.end_of_stream === true) done = true
    } else if (mutation?.body !== undefined && mutation.body !== null) replaced = Buffer.from(mutation.body)
    else if (mutation?.clear_body === true) replaced = Buffer.alloc(0)
  }
  return { body: streamed !== null ? Buffer.concat(streamed) : replaced }
}

/**
 * A header mutation checked whole: bounded, every name a token and every value free of CR,
 * LF and NUL (a picker's mutation is refused, not partly applied), with the destination
 * endpoint header taken out.
 */
export function checkMutation (m: HeaderMutationMessage | undefined | null): { set: HeaderMutation[], remove: string[], destination: string | null } | string {
  const setIn = m?.set_headers ?? []
  const removeIn = m?.remove_headers ?? []
  if (setIn.length + removeIn.length > MAX_MUTATION_ENTRIES) return `header mutation with more than ${MAX_MUTATION_ENTRIES} entries`
  let bytes = 0
  let destination: string | null = null
  const rest: typeof setIn = []
  for (const o of setIn) {
    const key = o.header?.key ?? ''
    const value = o.header?.value !== undefined && o.header.value !== '' ? o.header.value : Buffer.from(o.header?.raw_value ?? []).toString('utf8')
    bytes += key.length + value.length
    if (bytes > MAX_MUTATION_BYTES) return `header mutation larger than ${MAX_MUTATION_BYTES} bytes`
    if (!/^:?[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key) || /[\r\n\0]/.test(value)) return `malformed header mutation (${JSON.stringify(key.slice(0, 64))})`
    if (key.toLowerCase() === DESTINATION_ENDPOINT) destination = value
    else rest.push(o)
  }
  for (const r of removeIn) {
    bytes += r.length
    if (bytes > MAX_MUTATION_BYTES) return `header mutation larger than ${MAX_MUTATION_BYTES} bytes`
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(r)) return `malformed header mutation (remove ${JSON.stringify(r.slice(0, 64))})`
  }
  // The body's framing is the gateway's: a picker does not set or remove it (nor host, nor pseudo-headers).
  const framing = (name: string): boolean => FRAMING.has(name) || name.startsWith(':')
  return { set: headerMutations(rest).filter(m => !framing(m.name)), remove: removeIn.map(r => r.toLowerCase()).filter(r => !framing(r)), destination }
}
