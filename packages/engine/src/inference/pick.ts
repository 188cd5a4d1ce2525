/**
 * The request side of the endpoint picker protocol (Gateway API Inference Extension,
 * docs/proposals/004-endpoint-picker-protocol), on one ext_proc stream — the ext_proc request
 * phase every caller shares (http/ext-proc-request-phase.ts, FULL_DUPLEX_STREAMED), with
 * what is the picker's own:
 *
 * - the subset hint, when set, in
 *   metadata_context.filter_metadata["envoy.lb.subset_hint"]["x-gateway-destination-endpoint-subset"];
 * - the pick read from the answers: the `x-gateway-destination-endpoint` header mutation
 *   (the protocol's first way: it wins) and/or
 *   dynamic_metadata["envoy.lb"]["x-gateway-destination-endpoint"] (a comma-separated, ordered
 *   fallback list). The reference picker answers the headers only after the body's last chunk,
 *   then sends the whole body back as streamed_response chunks — Envoy's full-duplex order;
 * - every header mutation checked whole (checkMutation) before anything applies: bounded,
 *   well-formed, the body's framing left to the gateway;
 * - one deadline for the whole pick (each answer also waits at most the stream's timeout);
 * - mode_override in any answer asking for the response body.
 *
 * A picker breaking any of it has failed (the pool's failureMode decides what then).
 */

import type { HeaderMap } from '../ir/header-map.ts'
import type { HeaderMutation } from '../auth/ext-authz-check.ts'
import { extProcSetHeaders, type ExtProcStream, type HeaderMutationMessage } from '../traffic/ext-proc-grpc.ts'
import { runExtProcRequestPhase, type ExtProcModes } from '../http/ext-proc-request-phase.ts'
import type { BodyContext } from '../http/request-body.ts'

export const DESTINATION_ENDPOINT = 'x-gateway-destination-endpoint'
export const DESTINATION_NAMESPACE = 'envoy.lb'
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint'
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset'
export const SERVED_KEY = 'x-gateway-destination-endpoint-served'

/** Response body chunks sent to the picker. */
const BODY_CHUNK_BYTES = 64 * 1024

/** Headers a picker's mutation leaves alone: the gateway frames the body and names the host. */
const FRAMING = ['content-length', 'transfer-encoding', 'host', 'connection', 'upgrade', 'te']
const FRAMING_SET = new Set(FRAMING)

/** Answers read for a response body beyond one per chunk sent (streamed_response chunks need not match ours). */
const MAX_EXTRA_ANSWERS = 1024

/** Most header mutation entries (set + remove) and bytes (names and values) an answer may carry. */
export const MAX_MUTATION_ENTRIES = 64
export const MAX_MUTATION_BYTES = 32 * 1024

/**
 * FULL_DUPLEX_STREAMED for the request, NONE for the response (a picker asks for the
 * response body with mode_override: processResponseBody).
 */
const MODES: ExtProcModes = { requestHeaderMode: 'send', responseHeaderMode: 'send', requestBodyMode: 'fullDuplexStreamed', responseBodyMode: 'none' }

export interface PickInput {
  pseudo: Record<string, string>
  /** The request's headers: the picker's mutations apply to them only when it picked. */
  headers: HeaderMap
  /** The pool's endpoints sent as the subset hint; null: no hint. */
  subset: string[] | null
  /** Date.now() ms by which the pick must be complete (each answer also waits at most the stream's timeout). */
  deadline: number
  /** Largest body the picker may send back (the request's was read whole within it). */
  maxBodyBytes: number
}

export type PickAnswer =
  /** `responseBody`: the picker asked for the response body (mode_override). */
  | { kind: 'picked', value: string, source: 'header' | 'metadata', responseBody: boolean }
  | { kind: 'immediate', status: number, body: Buffer, headers: HeaderMap, details: string }
  | { kind: 'failed', reason: string }

/**
 * Sends the request (the stream is the caller's: it opens it with its trace context and
 * closes or finishes it) and reads the pick. The request body is the one read whole into
 * ctx.requestBody (so a fallback can send it again); the picker's body replaces it when it
 * picked. On `failed` and `immediate` the request (headers and body) is as it was.
 */
export async function askPicker (stream: ExtProcStream, ctx: BodyContext, input: PickInput): Promise<PickAnswer> {
  const headers: HeaderMap = { ...input.headers }
  // What the client said is not the picker's pick.
  delete headers[DESTINATION_ENDPOINT]
  const originalBody = ctx.requestBody
  let fromHeader: string | null = null
  let responseBody = false
  const check = (m: HeaderMutationMessage | undefined): string | null => {
    const checked = checkMutation(m)
    if (typeof checked === 'string') return checked
    if (checked.destination !== null) fromHeader ??= checked.destination
    return null
  }
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'late'>(resolve => { timer = setTimeout(() => resolve('late'), Math.max(0, input.deadline - Date.now())) })
  const phase = runExtProcRequestPhase(ctx, {
    stream,
    modes: MODES,
    maxBodyBytes: input.maxBodyBytes,
    pseudo: input.pseudo,
    headers,
    ...(input.subset !== null ? { metadataContext: { [SUBSET_NAMESPACE]: { [SUBSET_KEY]: input.subset } } } : {}),
    checkMutation: check,
    hooks: {
      // STREAMED, BUFFERED, BUFFERED_PARTIAL or FULL_DUPLEX_STREAMED in any answer: the picker wants the response body.
      answered: (_phase, r) => { if (r.kind === 'response' && (r.modeOverride?.response_body_mode ?? 0) !== 0) responseBody = true }
    }
  })
  const r = await Promise.race([phase, late])
  clearTimeout(timer)
  if (r === 'late') {
    // The phase ends on the closed stream; the body it held goes back before the caller goes on.
    stream.close()
    await phase
    ctx.requestBody = originalBody
    return { kind: 'failed', reason: 'no pick in time' }
  }
  if (r.kind !== 'continue') ctx.requestBody = originalBody
  if (r.kind === 'immediate') return { kind: 'immediate', status: r.status, body: r.body, headers: r.headers, details: r.details }
  if (r.kind === 'error') return { kind: 'failed', reason: r.reason }
  if (r.kind === 'closed') return { kind: 'failed', reason: 'the picker ended the stream before it picked' }
  if (r.kind === 'too-large') return { kind: 'failed', reason: `the request body is larger than ${input.maxBodyBytes} bytes` }
  if (r.kind === 'body-error') return { kind: 'failed', reason: `the request body failed: ${r.error.message}` }
  const meta = r.dynamicMetadata[DESTINATION_NAMESPACE]?.[DESTINATION_ENDPOINT]
  const pick = fromHeader !== null ? { value: fromHeader as string, source: 'header' as const } : typeof meta === 'string' ? { value: meta, source: 'metadata' as const } : null
  if (pick === null) {
    ctx.requestBody = originalBody
    return { kind: 'failed', reason: `the picker named no endpoint (neither the ${DESTINATION_ENDPOINT} header nor ${DESTINATION_NAMESPACE} metadata)` }
  }
  // The picker's mutations apply; the body's framing stays the gateway's (set anew for a body it sent back).
  const hasBody = ctx.requestBody !== null && originalBody !== null
  for (const name of FRAMING) {
    if (hasBody && (name === 'content-length' || name === 'transfer-encoding')) continue
    if (input.headers[name] !== undefined) headers[name] = input.headers[name]!
    else delete headers[name]
  }
  for (const k of Object.keys(input.headers)) delete input.headers[k]
  Object.assign(input.headers, headers)
  return { kind: 'picked', ...pick, responseBody }
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
  const framing = (name: string): boolean => FRAMING_SET.has(name) || name.startsWith(':')
  return { set: extProcSetHeaders(rest).filter(m => !framing(m.name)), remove: removeIn.map(r => r.toLowerCase()).filter(r => !framing(r)), destination }
}
