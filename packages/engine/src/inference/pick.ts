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
import { bodyModeOf, type BodyMode, type ExtProcStream, type HeaderMutationMessage } from '../traffic/ext-proc-grpc.ts'
import { extProcSetHeaders, runExtProcRequestPhase, type ExtProcModes } from '../http/ext-proc-request-phase.ts'
import type { BodyContext } from '../http/request-body.ts'

export const DESTINATION_ENDPOINT = 'x-gateway-destination-endpoint'
export const DESTINATION_NAMESPACE = 'envoy.lb'
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint'
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset'
export const SERVED_KEY = 'x-gateway-destination-endpoint-served'

/** Headers a picker's mutation leaves alone: the gateway frames the body and names the host. */
const FRAMING = ['content-length', 'transfer-encoding', 'host', 'connection', 'upgrade', 'te']
const FRAMING_SET = new Set(FRAMING)

/** Most header mutation entries (set + remove) and bytes (names and values) an answer may carry. */
export const MAX_MUTATION_ENTRIES = 64
export const MAX_MUTATION_BYTES = 32 * 1024

/**
 * FULL_DUPLEX_STREAMED for the request, NONE for the response (a picker asks for the
 * response body with mode_override: PickAnswer.responseBodyMode).
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
  /**
   * `responseBodyMode`: how the picker asked for the response body (mode_override's
   * response_body_mode, the last one that is not NONE; BUFFERED_PARTIAL is `buffered`).
   */
  | { kind: 'picked', value: string, source: 'header' | 'metadata', responseBodyMode: BodyMode }
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
  let responseBodyMode: BodyMode = 'none'
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
      answered: (_phase, r) => {
        const n = r.kind === 'response' ? r.modeOverride?.response_body_mode ?? 0 : 0
        if (n !== 0) responseBodyMode = bodyModeOf(n) ?? 'buffered'
      }
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
  return { kind: 'picked', ...pick, responseBodyMode }
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
  return { set: extProcSetHeaders(rest).filter(m => !keptFromPicker(m.name)), remove: removeIn.map(r => r.toLowerCase()).filter(r => !keptFromPicker(r)), destination }
}

/**
 * Headers a picker's mutation leaves alone (dropped, not applied): the body's framing is the
 * gateway's, and so are host, pseudo-headers (`:status` too) and the destination header.
 */
export function keptFromPicker (name: string): boolean {
  return FRAMING_SET.has(name) || name.startsWith(':') || name === DESTINATION_ENDPOINT
}
