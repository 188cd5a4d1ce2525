/**
 * The request phase of an ext_proc stream (Envoy's `envoy.service.ext_proc.v3.
 * ExternalProcessor/Process`), in every request body mode: the request headers, then the body
 * as the mode says, until the processor has answered all of it. One piece for the `extProc`
 * policy (policy/ext-proc.ts) and for an InferencePool's endpoint picker (the EPP protocol,
 * gateway-api-inference-extension docs/proposals/004-endpoint-picker-protocol).
 *
 * Contract of `runExtProcRequestPhase(ctx, options)`:
 * - The caller opens the stream (`new ExtProcStream(client, messageTimeoutMs)`, its
 *   `traceHeaders` set) and closes or finishes it; this function only sends the request's
 *   messages and reads their answers. The first message carries `protocol_config` (the body
 *   modes) and `metadata_context` (options.metadataContext, e.g. the EPP's
 *   `envoy.lb.subset_hint`).
 * - Header mutations are applied to `options.headers` in place as they arrive (pseudo-headers
 *   and host are never changed; more than MAX_MUTATION_BYTES of them in one phase is a
 *   failure; a caller's `checkMutation` may refuse an answer whole first). Nothing is sent upstream meanwhile: the caller makes the upstream call after
 *   this resolves, so mutations from the headers answer AND from the body answers apply —
 *   the EPP answers the headers only once it has seen the whole body, with
 *   `x-gateway-destination-endpoint` in the header mutation and/or `dynamicMetadata['envoy.lb']`.
 * - The body: `buffered` reads it whole (up to maxBodyBytes) and sends one message;
 *   `streamed` sends each chunk as the client sends it and waits for that chunk's answer (a
 *   `body` mutation replaces the chunk, `clear_body` drops it) before reading the next;
 *   `fullDuplexStreamed` sends the headers and every chunk without waiting, and reads the
 *   answers as they come (request_headers first, then request_body answers whose
 *   `streamed_response` chunks ARE the new body, the last with end_of_stream; a
 *   request_trailers answer is accepted and ignored — no trailers are sent). The reference
 *   endpoint picker (lwepp) is such a processor: no answer before the body's last chunk, then
 *   the headers' answer and the whole body back in ≤62,000-byte chunks. The last chunk
 *   carries end_of_stream (an empty one when the length was not declared). In the streamed
 *   modes the body the processor answers is gathered into `ctx.requestBody`
 *   (content-length fixed, transfer-encoding dropped) — bounded by maxBodyBytes both ways:
 *   the client's body past it is `too-large` (413), the processor's past it a failure.
 * - mode_override in the headers answer changes the body modes when `allowModeOverride`
 *   (as Envoy: never to or from fullDuplexStreamed); the response modes it sets are returned.
 * - Every wait on the processor is at most the stream's message timeout; a phase takes at most
 *   MAX_MESSAGES answers. After `error` or `closed` the client's body is as it was (the bytes
 *   read so far put back, or in ctx.requestBody), so a failOpen caller can go on unchanged.
 * - The response phase follows on the same stream: http/ext-proc-response-phase.ts
 *   `extProcResponseInterceptor`, for the policy and the endpoint picker alike (the picker's
 *   served endpoint goes as its `metadataContext`); full duplex reads its answers in order
 *   with `DuplexAnswers('response', ...)` below.
 */

import { applyHeaderMutations, removeHeaders, type HeaderMutation } from '../auth/ext-authz-check.ts'
import { headerMutations } from '../auth/ext-authz-grpc.ts'
import {
  BODY_SEND_MODE, answerTo, bodyModeOf, headerMapMessage, metadataContextMessage,
  type BodyMode, type CommonResponseMessage, type ExchangeResult, type ExtProcStream, type HeaderMutationMessage, type HeaderValueOptionMessage,
  type ImmediateResponseMessage, type ProcessingModeMessage, type Received
} from '../traffic/ext-proc-grpc.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { readRequestBody, requestBodyChunks, requestHasBody, type BodyContext } from './request-body.ts'

/** Header mutation bytes (names + values) accepted from the processor in one phase. */
export const MAX_MUTATION_BYTES = 65_536
/** Answers read in one request phase: a processor that trickles messages forever is cut. */
export const MAX_MESSAGES = 10_000

export interface ExtProcModes {
  requestHeaderMode: 'send' | 'skip'
  responseHeaderMode: 'send' | 'skip'
  requestBodyMode: BodyMode
  responseBodyMode: BodyMode
}

export interface RequestPhaseOptions {
  stream: ExtProcStream
  modes: ExtProcModes
  /** Whether the processor's mode_override is honoured (Envoy Gateway's allowModeOverride). */
  allowModeOverride?: boolean
  /** Largest body held, the client's and the processor's. */
  maxBodyBytes: number
  /** `:authority`, `:method`, `:path`, `:scheme`. */
  pseudo: Record<string, string>
  /** The request's headers: sent, then changed in place by the processor's mutations. */
  headers: HeaderMap
  /** ProcessingRequest.metadata_context of the first message: namespace → JSON object. */
  metadataContext?: Record<string, Record<string, unknown>>
  /**
   * A stricter check of every header mutation (the headers, body and immediate answers')
   * before it applies: a reason refuses the whole answer and fails the phase. The endpoint
   * picker's caller refuses malformed names and values here rather than applying part.
   */
  checkMutation?: (m: HeaderMutationMessage | undefined) => string | null
  /** Observers of each message sent and each answer read (spans, traces). */
  hooks?: {
    sent?: (phase: string) => void
    answered?: (phase: string, result: ExchangeResult) => void
  }
}

interface PhaseProgress {
  /** What the processor changed, for the trace: `set x`, `request body replaced (n bytes)`. */
  changes: string[]
  /** dynamic_metadata of every answer, merged by namespace (later keys win). */
  dynamicMetadata: Record<string, Record<string, unknown>>
}

export type RequestPhaseResult = PhaseProgress & (
  /** Go on: headers changed in place; the body to send upstream is in ctx.requestBody when it went through the processor. */
  | { kind: 'continue', modes: ExtProcModes }
  /** The processor answers the request itself. */
  | { kind: 'immediate', status: number, headers: HeaderMap, body: Buffer, details: string }
  /** The processor ended the stream cleanly: the request goes on without it (body as it was). */
  | { kind: 'closed' }
  /** The processor failed (unreachable, error, out of turn, too slow, too much): body as it was. */
  | { kind: 'error', reason: string }
  /** The client's body is larger than maxBodyBytes (the rest is drained): answer 413. */
  | { kind: 'too-large' }
  /** The client's body failed (bodyReadFailure gives the answer). */
  | { kind: 'body-error', error: Error }
)

export async function runExtProcRequestPhase (ctx: BodyContext, o: RequestPhaseOptions): Promise<RequestPhaseResult> {
  const progress: PhaseProgress = { changes: [], dynamicMetadata: {} }
  const modes = { ...o.modes }
  const bodyLike = ctx.upgrade === null && (ctx.requestBody !== null ? ctx.requestBody.length > 0 : requestHasBody(ctx.req.headers))
  let first = true
  let mutationBytes = 0
  const write = async (message: Record<string, unknown>, phase: string): Promise<ExchangeResult | null> => {
    if (first) {
      message.protocol_config = { request_body_mode: BODY_SEND_MODE[modes.requestBodyMode], response_body_mode: BODY_SEND_MODE[modes.responseBodyMode] }
      if (o.metadataContext !== undefined) message.metadata_context = metadataContextMessage(o.metadataContext)
      first = false
    }
    o.hooks?.sent?.(phase)
    return await o.stream.write(message)
  }
  /** Applies an answer's header mutation and metadata; an error when the processor sends too much. */
  const take = (r: ExchangeResult): string | null => {
    if (r.kind !== 'response') return null
    const refused = o.checkMutation?.(r.response.header_mutation) ?? null
    if (refused !== null) return refused
    if (r.dynamicMetadata !== undefined) mergeMetadata(progress.dynamicMetadata, r.dynamicMetadata)
    mutationBytes += mutationSize(r.response.header_mutation)
    if (mutationBytes > MAX_MUTATION_BYTES) return `header mutations larger than ${MAX_MUTATION_BYTES} bytes`
    applyMutation(o.headers, r.response.header_mutation, progress.changes)
    return null
  }
  const end = (r: Exclude<ExchangeResult, { kind: 'response' }>): RequestPhaseResult => {
    if (r.kind === 'immediate') {
      const refused = o.checkMutation?.(r.immediate.headers) ?? null
      if (refused !== null) return { ...progress, kind: 'error', reason: refused }
      return { ...progress, ...immediateAnswer(r.immediate, progress.changes) }
    }
    return { ...progress, ...r }
  }

  if (modes.requestBodyMode === 'fullDuplexStreamed') return await fullDuplex(ctx, o, modes, bodyLike, progress, write, take, end)

  // Headers, then the body, each answered before the next is sent.
  let replaced = false
  if (modes.requestHeaderMode === 'send') {
    const sent = await write({ request_headers: { headers: headerMapMessage(o.pseudo, o.headers), end_of_stream: !bodyLike } }, 'request_headers')
    const r = sent ?? answerTo(await o.stream.receive(), 'request_headers')
    o.hooks?.answered?.('request_headers', r)
    if (r.kind !== 'response') return end(r)
    const tooMuch = take(r)
    if (tooMuch !== null) return { ...progress, kind: 'error', reason: tooMuch }
    if (r.modeOverride !== undefined && o.allowModeOverride === true) applyModeOverride(modes, r.modeOverride, progress.changes)
    if (r.response.status === 1) {
      replaced = true
      const body = newBody(r.response, true)
      if (body !== null) replaceBody(ctx, o.headers, body, progress.changes)
    }
  }
  if (!bodyLike || replaced || modes.requestBodyMode === 'none') return { ...progress, kind: 'continue', modes }

  if (modes.requestBodyMode === 'buffered') {
    const read = await readRequestBody(ctx, { maxBytes: o.maxBodyBytes, whenTooLarge: 'drain' })
    if (read === 'too-large') return { ...progress, kind: 'too-large' }
    if (read instanceof Error) return { ...progress, kind: 'body-error', error: read }
    const sent = await write({ request_body: { body: ctx.requestBody ?? Buffer.alloc(0), end_of_stream: true } }, 'request_body')
    const r = sent ?? answerTo(await o.stream.receive(), 'request_body')
    o.hooks?.answered?.('request_body', r)
    if (r.kind !== 'response') return end(r)
    const tooMuch = take(r)
    if (tooMuch !== null) return { ...progress, kind: 'error', reason: tooMuch }
    const body = newBody(r.response, true)
    if (body !== null) replaceBody(ctx, o.headers, body, progress.changes)
    return { ...progress, kind: 'continue', modes }
  }

  // streamed: chunk by chunk, each answered before the next is read.
  const body = new BodyGather(ctx, o.maxBodyBytes)
  const declared = declaredLength(ctx)
  let sentEnd = false
  const chunks = requestBodyChunks(ctx, o.maxBodyBytes)
  let replacedChunks = 0
  while (true) {
    const chunk = await body.next(chunks, progress)
    if (!Buffer.isBuffer(chunk)) return chunk
    if (body.clientDone && sentEnd) break
    const eos = body.clientDone || (declared !== null && body.inBytes === declared)
    const sent = await write({ request_body: { body: chunk, end_of_stream: eos } }, 'request_body')
    const r = sent ?? answerTo(await o.stream.receive(), 'request_body')
    o.hooks?.answered?.('request_body', r)
    if (r.kind !== 'response') return body.restoreAnd(end(r), chunks)
    const tooMuch = take(r)
    if (tooMuch !== null) return body.restoreAnd({ ...progress, kind: 'error', reason: tooMuch }, chunks)
    const m = r.response.body_mutation
    const out = m?.body !== undefined && m.body !== null ? Buffer.from(m.body) : m?.clear_body === true ? Buffer.alloc(0) : chunk
    if (out !== chunk) replacedChunks++
    if (!body.add(out)) return body.restoreAnd({ ...progress, kind: 'error', reason: `the processor's body is larger than maxBodyBytes (${o.maxBodyBytes})` }, chunks)
    sentEnd = eos
    if (body.clientDone) break
  }
  body.install(o.headers)
  // One entry for the whole body, not one per chunk (a long upload has thousands).
  progress.changes.push(`request body streamed: ${body.answers} chunks answered, ${replacedChunks} replaced`)
  return { ...progress, kind: 'continue', modes }
}

/**
 * FULL_DUPLEX_STREAMED: the headers and every chunk go out as they come; the answers are
 * read whenever they arrive (between chunks without waiting, then until the processor has
 * answered the headers and ended its body). Answers must come in order: headers, body, trailers.
 */
async function fullDuplex (
  ctx: BodyContext,
  o: RequestPhaseOptions,
  modes: ExtProcModes,
  bodyLike: boolean,
  progress: PhaseProgress,
  write: (message: Record<string, unknown>, phase: string) => Promise<ExchangeResult | null>,
  take: (r: ExchangeResult) => string | null,
  end: (r: Exclude<ExchangeResult, { kind: 'response' }>) => RequestPhaseResult
): Promise<RequestPhaseResult> {
  const headersSent = modes.requestHeaderMode === 'send'
  const body = new BodyGather(ctx, o.maxBodyBytes)
  const duplex = new DuplexAnswers('request', headersSent, bodyLike)
  /** One answer: null when taken, a result when the phase ends. */
  const handle = (message: Received): RequestPhaseResult | null => {
    const a = duplex.take(message)
    if (a.kind === 'body') {
      o.hooks?.answered?.('request_body', a.r)
      if (!body.add(a.chunk)) return { ...progress, kind: 'error', reason: `the processor's body is larger than maxBodyBytes (${o.maxBodyBytes})` }
    } else if (a.kind === 'headers') o.hooks?.answered?.('request_headers', a.r)
    else if (a.kind === 'end') return end(a.r)
    else if (a.kind === 'error') return { ...progress, kind: 'error', reason: a.reason }
    if (a.kind === 'ignored') return null
    const tooMuch = take(a.r)
    return tooMuch === null ? null : { ...progress, kind: 'error', reason: tooMuch }
  }

  if (headersSent) {
    const failed = await write({ request_headers: { headers: headerMapMessage(o.pseudo, o.headers), end_of_stream: !bodyLike } }, 'request_headers')
    if (failed !== null) return end(failed as Exclude<ExchangeResult, { kind: 'response' }>)
  }
  const chunks = bodyLike ? requestBodyChunks(ctx, o.maxBodyBytes) : null
  if (chunks !== null) {
    const declared = declaredLength(ctx)
    let sentEnd = false
    while (!sentEnd) {
      // Answers that came meanwhile first: an immediate response ends the request now.
      while (o.stream.pending) {
        const done = handle(await o.stream.receive())
        if (done !== null) return body.restoreAnd(done, chunks)
      }
      const chunk = await body.next(chunks, progress)
      if (!Buffer.isBuffer(chunk)) return chunk
      sentEnd = body.clientDone || (declared !== null && body.inBytes === declared)
      const failed = await write({ request_body: { body: chunk, end_of_stream: sentEnd } }, 'request_body')
      if (failed !== null) return body.restoreAnd(end(failed as Exclude<ExchangeResult, { kind: 'response' }>), chunks)
    }
    // The declared length reached: the stream's own end is read (nothing more is sent).
    if (!body.clientDone) {
      const rest = await chunks.next()
      if (rest.done !== true) return body.tooLarge(progress)
      if (rest.value instanceof Error) return { ...progress, kind: 'body-error', error: rest.value }
      body.clientDone = true
    }
  }
  while (!duplex.done) {
    const done = handle(await o.stream.receive())
    if (done !== null) return body.restoreAnd(done, chunks)
  }
  if (bodyLike) {
    body.install(o.headers)
    progress.changes.push(`request body streamed: ${body.answers} streamed_response chunks`)
  }
  return { ...progress, kind: 'continue', modes }
}

/** One answer of the full-duplex streamed mode, as DuplexAnswers.take reads it. */
export type DuplexAnswer =
  | { kind: 'headers', r: Extract<ExchangeResult, { kind: 'response' }> }
  /** A body answer: `chunk` is the next bytes of the new body (its streamed_response). */
  | { kind: 'body', r: Extract<ExchangeResult, { kind: 'response' }>, chunk: Buffer }
  /** A trailers answer (no trailers are sent: nothing to apply). */
  | { kind: 'ignored' }
  /** The phase ends: an immediate response, the stream closed, or failed. */
  | { kind: 'end', r: Exclude<ExchangeResult, { kind: 'response' }> }
  | { kind: 'error', reason: string }

/**
 * The answers of one direction (request or response) in FULL_DUPLEX_STREAMED, in the order
 * Envoy requires — headers, then body (as streamed_response chunks, the last with
 * end_of_stream), then trailers — whenever they come. `done` once the headers are answered
 * (when they were sent) and the body ended (when there was one). Bounded: MAX_MESSAGES.
 */
export class DuplexAnswers {
  private readonly direction: 'request' | 'response'
  private headersAnswered: boolean
  private bodyAnswered: boolean
  private messages = 0

  constructor (direction: 'request' | 'response', headersSent: boolean, bodySent: boolean) {
    this.direction = direction
    this.headersAnswered = !headersSent
    this.bodyAnswered = !bodySent
  }

  get done (): boolean {
    return this.headersAnswered && this.bodyAnswered
  }

  take (message: Received): DuplexAnswer {
    if (message.kind !== 'message') return { kind: 'end', r: message }
    if (++this.messages > MAX_MESSAGES) return { kind: 'error', reason: `more than ${MAX_MESSAGES} answers in the ${this.direction} phase` }
    const m = message.message
    const d = this.direction
    const trailers = d === 'request' ? m.request_trailers : m.response_trailers
    if (trailers !== undefined && trailers !== null) return { kind: 'ignored' }
    const bodyAnswer = d === 'request' ? m.request_body : m.response_body
    const isBody = bodyAnswer !== undefined && bodyAnswer !== null
    const r = answerTo(message, isBody ? `${d}_body` : `${d}_headers`)
    if (r.kind !== 'response') return { kind: 'end', r }
    if (!isBody) {
      if (this.headersAnswered) return { kind: 'error', reason: `protocol error: an unexpected ${d}_headers answer` }
      if (r.response.status === 1) return { kind: 'error', reason: 'protocol error: CONTINUE_AND_REPLACE in the full-duplex streamed mode' }
      this.headersAnswered = true
      return { kind: 'headers', r }
    }
    if (!this.headersAnswered) return { kind: 'error', reason: `protocol error: a ${d}_body answer before the ${d}_headers answer` }
    if (this.bodyAnswered) return { kind: 'error', reason: `protocol error: a ${d}_body answer after the body ended` }
    const mutation = r.response.body_mutation
    if (mutation?.body !== undefined || mutation?.clear_body !== undefined) return { kind: 'error', reason: 'protocol error: the full-duplex streamed mode takes body mutations as streamed_response' }
    const streamed = mutation?.streamed_response
    if (streamed?.end_of_stream === true) this.bodyAnswered = true
    return { kind: 'body', r, chunk: Buffer.from(streamed?.body ?? Buffer.alloc(0)) }
  }
}

/**
 * The body of a streamed mode: the client's chunks (kept to put back if the processor fails)
 * and the processor's answer, both bounded by maxBodyBytes.
 */
class BodyGather {
  private readonly ctx: BodyContext
  private readonly max: number
  private readonly originals: Buffer[] = []
  private readonly out: Buffer[] = []
  inBytes = 0
  private outBytes = 0
  answers = 0
  clientDone = false

  constructor (ctx: BodyContext, max: number) {
    this.ctx = ctx
    this.max = max
  }

  /**
   * The client's next chunk, kept as read (an empty one once the body has ended: then
   * `clientDone`), or how the phase ends when the body is too large or its read failed.
   */
  async next (chunks: AsyncGenerator<Buffer, 'end' | 'too-large' | Error>, progress: PhaseProgress): Promise<Buffer | RequestPhaseResult> {
    const next = await chunks.next()
    if (next.done !== true) {
      this.originals.push(next.value)
      this.inBytes += next.value.length
      return next.value
    }
    if (next.value === 'too-large') return this.tooLarge(progress)
    if (next.value instanceof Error) return { ...progress, kind: 'body-error', error: next.value }
    this.clientDone = true
    return Buffer.alloc(0)
  }

  /** False when the processor's body passes the limit. */
  add (chunk: Buffer): boolean {
    this.answers++
    this.outBytes += chunk.length
    if (this.outBytes > this.max) return false
    if (chunk.length > 0) this.out.push(chunk)
    return true
  }

  /** The processor's body becomes the request's. */
  install (headers: HeaderMap): void {
    const body = Buffer.concat(this.out)
    this.ctx.requestBody = body
    headers['content-length'] = String(body.length)
    delete headers['transfer-encoding']
  }

  /** The client's body larger than the limit: the rest is drained for the 413. */
  tooLarge (progress: PhaseProgress): RequestPhaseResult {
    this.ctx.req.resume()
    return { ...progress, kind: 'too-large' }
  }

  /**
   * The phase ends early: the client's bytes read so far go back where the next reader finds
   * them (in front of the stream, or ctx.requestBody when it has ended).
   */
  restoreAnd (result: RequestPhaseResult, chunks: AsyncGenerator<Buffer, unknown> | null): RequestPhaseResult {
    // Stops the reader (its listeners removed, the stream paused) before the bytes go back.
    void chunks?.return(undefined)
    if (this.originals.length > 0 || this.clientDone) {
      const read = Buffer.concat(this.originals)
      if (this.clientDone || this.ctx.req.readableEnded) this.ctx.requestBody = read
      else if (this.ctx.requestBody === null) this.ctx.req.unshift(read)
    }
    return result
  }
}

function declaredLength (ctx: BodyContext): number | null {
  if (ctx.requestBody !== null) return ctx.requestBody.length
  const n = Number(ctx.req.headers['content-length'] ?? NaN)
  return Number.isInteger(n) && n >= 0 ? n : null
}

function mergeMetadata (into: Record<string, Record<string, unknown>>, from: Record<string, unknown>): void {
  for (const [ns, v] of Object.entries(from)) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) continue
    into[ns] = { ...into[ns], ...(v as Record<string, unknown>) }
  }
}

function mutationSize (m: HeaderMutationMessage | undefined): number {
  if (m === undefined || m === null) return 0
  let n = 0
  for (const h of m.set_headers ?? []) n += (h.header?.key?.length ?? 0) + (h.header?.value?.length ?? 0) + (h.header?.raw_value?.length ?? 0)
  for (const r of m.remove_headers ?? []) n += r.length
  return n
}

function replaceBody (ctx: BodyContext, headers: HeaderMap, body: Buffer, changes: string[]): void {
  const hadBody = ctx.requestBody === null && requestHasBody(ctx.req.headers)
  ctx.requestBody = body
  headers['content-length'] = String(body.length)
  delete headers['transfer-encoding']
  // A body replaced at the headers: the client's own body is not needed any more.
  if (hadBody) ctx.req.resume()
  changes.push(`request body replaced (${body.length} bytes)`)
}

/** The new body of a buffered or headers answer (`body` or `clear_body`); null to keep it. */
export function newBody (c: CommonResponseMessage, allowed: boolean): Buffer | null {
  const m = c.body_mutation
  if (!allowed || m === undefined || m === null) return null
  if (m.body !== undefined && m.body !== null) return Buffer.from(m.body)
  if (m.clear_body === true) return Buffer.alloc(0)
  return null
}

/**
 * A HeaderMutation's `set_headers` as Envoy's ext_proc filter applies them: an entry whose
 * `append` is unset REPLACES the header (mutation_utils: `append` defaults to false there,
 * unlike the router's and ext_authz's upstream headers). A processor that hands back the
 * response headers it was sent (the reference endpoint picker does, with neither field set)
 * must not double them (`content-type: application/json,application/json`).
 */
export function extProcSetHeaders (options: HeaderValueOptionMessage[] | undefined): HeaderMutation[] {
  return headerMutations(options as never, 'overwrite')
}

/**
 * A HeaderMutation applied to `headers`: pseudo-headers and host are never changed (Envoy
 * ignores them too), nor the names `keeps` holds (the endpoint picker's: the body's framing).
 */
export function applyMutation (headers: HeaderMap, m: HeaderMutationMessage | undefined, changes: string[], keeps?: (name: string) => boolean): void {
  if (m === undefined || m === null) return
  const changeable = (name: string): boolean => !name.startsWith(':') && name !== 'host' && keeps?.(name) !== true
  const set: HeaderMutation[] = extProcSetHeaders(m.set_headers).filter(x => changeable(x.name))
  applyHeaderMutations(headers, set)
  const remove = (m.remove_headers ?? []).map(h => h.toLowerCase()).filter(changeable)
  removeHeaders(headers, remove)
  if (set.length > 0) changes.push(`set ${set.map(s => s.name).join(', ')}`)
  if (remove.length > 0) changes.push(`removed ${remove.join(', ')}`)
}

/** An ImmediateResponse as the answer to send (a status outside 200-599 is 500). */
export function immediateAnswer (i: ImmediateResponseMessage, changes: string[], keeps?: (name: string) => boolean): { kind: 'immediate', status: number, headers: HeaderMap, body: Buffer, details: string } {
  const code = i.status?.code ?? 0
  const headers: HeaderMap = {}
  applyMutation(headers, i.headers, changes, keeps)
  changes.push(`immediate response ${code}`)
  return {
    kind: 'immediate',
    status: code >= 200 && code <= 599 ? code : 500,
    headers,
    body: i.body !== undefined && i.body !== null ? Buffer.from(i.body) : Buffer.alloc(0),
    details: i.details ?? ''
  }
}

/**
 * mode_override (Envoy: honoured on the headers answer when allowed; never to or from
 * FULL_DUPLEX_STREAMED; the message is the whole new mode, its unset body modes NONE).
 */
function applyModeOverride (modes: ExtProcModes, m: ProcessingModeMessage, changes: string[]): void {
  const request = bodyModeOf(m.request_body_mode)
  const response = bodyModeOf(m.response_body_mode)
  if (request !== null && request !== 'fullDuplexStreamed' && modes.requestBodyMode !== 'fullDuplexStreamed') modes.requestBodyMode = request
  if (response !== null && response !== 'fullDuplexStreamed' && modes.responseBodyMode !== 'fullDuplexStreamed') modes.responseBodyMode = response
  if (m.response_header_mode === 2) modes.responseHeaderMode = 'skip'
  else if (m.response_header_mode === 1) modes.responseHeaderMode = 'send'
  changes.push(`mode override: request body ${modes.requestBodyMode}, response body ${modes.responseBodyMode}`)
}
