/**
 * The response phase of an ext_proc stream (Envoy's `envoy.service.ext_proc.v3.
 * ExternalProcessor/Process`): the response headers, then the body as the mode says, as a
 * response interceptor (http/response-intercept.ts). One piece for the `extProc` policy
 * (policy/ext-proc.ts) and for an InferencePool's endpoint picker (pipeline/inference-pool.ts),
 * each opening the stream and running the request phase (http/ext-proc-request-phase.ts) first.
 *
 * - Headers: sent with `:status`; the answer's header mutation applies (a `:status` in it
 *   changes the status), CONTINUE_AND_REPLACE's body replaces the answer's. In
 *   fullDuplexStreamed with a body they are sent without waiting: the processor may answer
 *   them late, but before any body answer (DuplexAnswers).
 * - Body, `buffered` (or an answer the proxy makes whole): held up to maxBodyBytes, one
 *   message, its mutation replaces it; over the limit is a failure. `streamed`: a backend's
 *   chunks go to the processor as they come (onChunk), each answered before the next; its
 *   `body` mutation replaces that chunk. `fullDuplexStreamed`: each chunk sent without
 *   waiting; the `streamed_response` chunks go on to the client as they come — with the
 *   next chunk, or while the backend is idle (answersReady / onAnswers: the stream watched
 *   without a timeout, since the processor may hold them); at the end the rest is waited
 *   for (each wait at most the stream's message timeout).
 * - A failure (an error, out of turn, too slow, too much, a refused mutation): `failOpen` lets
 *   the answer go on unprocessed — except once full-duplex chunks went to the processor (it
 *   holds bytes of the answer): then, as any failure before the client's first byte, the
 *   answer is `failed(reason)`; after the first byte the client's response is cut. A stream
 *   the processor ends cleanly lets the answer go on without it (mid full-duplex body: cut).
 * - Trailers are not sent (a trailers answer is accepted and ignored).
 *
 * What the endpoint picker adds, as options: `metadataContext` on the response headers
 * message (the served endpoint), `checkMutation` (its stricter bounds, refusing an answer
 * whole), `keeps` (headers its mutations leave alone: the body's framing), `applies` (only an
 * endpoint's answer goes to it, not the gateway's own).
 */

import type { ChunkResult, InterceptResult, ResponseDraft, ResponseInterceptor } from './response-intercept.ts'
import { headerMapMessage, metadataContextMessage, type ExchangeResult, type ExtProcStream, type HeaderMutationMessage } from '../traffic/ext-proc-grpc.ts'
import { DuplexAnswers, applyMutation, immediateAnswer, newBody, type ExtProcModes, type RequestPhaseOptions } from './ext-proc-request-phase.ts'

/** A failure that ends the answer (the caller's status, body and reason). */
export type PhaseFailure = Extract<InterceptResult, { action: 'fail' }>

export interface ResponsePhaseOptions {
  stream: ExtProcStream
  modes: Pick<ExtProcModes, 'responseHeaderMode' | 'responseBodyMode'>
  /** Largest body held (buffered), and most the processor may answer for one chunk (full duplex). */
  maxBodyBytes: number
  /** failOpen: a failure lets the answer through unprocessed where it still can (see above). */
  failureMode: 'failOpen' | 'failClosed'
  /** The processor's `host:port`, for traces. */
  target: string
  /** The answer for a failure that ends it (the processor's `reason`). */
  failed: (reason: string) => PhaseFailure
  /**
   * What happened, for the caller's trace: `details` as the extProc policy words it,
   * `problem` the bare reason of a failure.
   */
  trace: (result: 'apply' | 'skip' | 'deny', details: string, problem?: string) => void
  /** Observers of each message sent and each answer read (spans). */
  hooks?: RequestPhaseOptions['hooks']
  /** Whether this answer goes to the processor at all; when not, the stream is finished and the answer passes. */
  applies?: () => boolean
  /** ProcessingRequest.metadata_context of the response headers message (namespace → JSON object). */
  metadataContext?: () => Record<string, Record<string, unknown>>
  /** A stricter check of every header mutation before it applies: a reason refuses the answer whole (a failure). */
  checkMutation?: (m: HeaderMutationMessage | undefined) => string | null
  /** Header names (lower case, `:status` included) the processor's mutations leave alone. */
  keeps?: (name: string) => boolean
}

export function extProcResponseInterceptor (o: ResponsePhaseOptions): ResponseInterceptor {
  const { stream, modes: mode, target, hooks } = o
  let active = true
  let bodyReplaced = false
  /** Response headers sent in the full-duplex mode, their answer read with the body's. */
  let headersPending = false
  const send = async (message: Record<string, unknown>, expect: 'response_headers' | 'response_body'): Promise<ExchangeResult> => {
    hooks?.sent?.(expect)
    const r = await stream.exchange(message, expect)
    hooks?.answered?.(expect, r)
    return r
  }
  const fail = (reason: string): InterceptResult => {
    stream.close()
    active = false
    if (o.failureMode === 'failOpen') {
      o.trace('skip', `processor ${target} failed on the response, allowed by failureMode failOpen: ${reason}`, reason)
      return { action: 'continue' }
    }
    o.trace('deny', `processor ${target} failed on the response: ${reason}`, reason)
    return o.failed(reason)
  }
  /** Streamed body chunks the processor answered, and how many it replaced: one trace event at the end, not one per chunk. */
  const streamedStats = { chunks: 0, replaced: 0 }
  const apply = (draft: ResponseDraft, r: ExchangeResult, toBody: boolean, quiet = false): InterceptResult | 'replaced' => {
    const changes: string[] = []
    switch (r.kind) {
      case 'closed':
        active = false
        stream.close()
        o.trace('skip', `processor ${target} ended the stream; the response goes on without it`)
        return { action: 'continue' }
      case 'error':
        return fail(r.reason)
      case 'immediate': {
        const refused = o.checkMutation?.(r.immediate.headers) ?? null
        if (refused !== null) return fail(refused)
        active = false
        stream.close()
        const answer = immediateAnswer(r.immediate, changes, o.keeps)
        draft.status = answer.status
        draft.headers = { 'content-type': 'text/plain; charset=utf-8', ...answer.headers }
        draft.body = answer.body
        o.trace('deny', `immediate response ${draft.status} instead of the answer`)
        return { action: 'respond' }
      }
      case 'response': {
        const c = r.response
        const refused = o.checkMutation?.(c.header_mutation) ?? null
        if (refused !== null) return fail(refused)
        const statusSet = o.keeps?.(':status') === true ? undefined : (c.header_mutation?.set_headers ?? []).find(h => (h.header?.key ?? '').toLowerCase() === ':status')
        if (statusSet !== undefined) {
          const v = Number(statusSet.header?.value !== undefined && statusSet.header.value !== '' ? statusSet.header.value : Buffer.from(statusSet.header?.raw_value ?? []).toString('utf8'))
          if (Number.isInteger(v) && v >= 200 && v <= 599) {
            draft.status = v
            changes.push(`status ${v}`)
          }
        }
        applyMutation(draft.headers, c.header_mutation, changes, o.keeps)
        const replace = c.status === 1
        const body = newBody(c, toBody || replace)
        if (body !== null) {
          draft.body = body
          bodyReplaced = true
          changes.push(`response body replaced (${body.length} bytes)`)
        }
        if (!quiet) o.trace('apply', `response ${toBody ? 'body' : 'headers'} processed by ${target}${changes.length > 0 ? `: ${changes.join('; ')}` : ''}`)
        return replace ? 'replaced' : { action: 'continue' }
      }
    }
  }
  /** FULL_DUPLEX_STREAMED on a whole body: it goes out whole, then the answers are read as they come (headers first when sent). */
  const duplexBody = async (draft: ResponseDraft): Promise<InterceptResult> => {
    hooks?.sent?.('response_body')
    const failed = await stream.write({ response_body: { body: draft.body ?? Buffer.alloc(0), end_of_stream: true } })
    if (failed !== null) return finish(apply(draft, failed, true))
    const duplex = new DuplexAnswers('response', headersPending, true)
    const out: Buffer[] = []
    let size = 0
    while (!duplex.done) {
      const a = duplex.take(await stream.receive())
      if (a.kind === 'end') {
        hooks?.answered?.('response_body', a.r)
        return finish(apply(draft, a.r, true))
      }
      if (a.kind === 'error') return fail(a.reason)
      if (a.kind === 'ignored') continue
      const isBody = a.kind === 'body'
      hooks?.answered?.(isBody ? 'response_body' : 'response_headers', a.r)
      const applied = apply(draft, a.r, false)
      if (applied !== 'replaced' && applied.action !== 'continue') return applied
      if (!active) return { action: 'continue' }
      if (isBody) {
        size += a.chunk.length
        if (size > o.maxBodyBytes) return fail(`the processor's body is larger than maxBodyBytes (${o.maxBodyBytes})`)
        out.push(a.chunk)
      }
    }
    draft.body = Buffer.concat(out)
    bodyReplaced = true
    stream.finish()
    return { action: 'continue' }
  }
  /** The streamed modes on a backend's body, chunk by chunk (http/response-intercept.ts onChunk). */
  let duplex: DuplexAnswers | null = null
  /** Chunks went to a full-duplex processor: its failure cannot let the rest through (the bytes it holds are lost). */
  let duplexSent = false
  const asChunk = (r: InterceptResult | 'replaced', data: Buffer): ChunkResult => r === 'replaced' || r.action === 'continue' ? { action: 'data', data } : r
  const streamedChunk = async (draft: ResponseDraft, chunk: Buffer, end: boolean): Promise<ChunkResult> => {
    const r = await send({ response_body: { body: chunk, end_of_stream: end } }, 'response_body')
    if (end) stream.finish()
    if (r.kind !== 'response') return asChunk(apply(draft, r, true), chunk)
    const before = draft.body
    const out = apply(draft, r, true, true)
    // A body mutation replaces this chunk (apply put it in draft.body).
    const data = draft.body !== before && draft.body !== null ? draft.body : chunk
    streamedStats.chunks++
    if (data !== chunk) streamedStats.replaced++
    draft.body = before
    bodyReplaced = false
    if (end) traceStreamed()
    return asChunk(out, data)
  }
  const traceStreamed = (): void => {
    const { chunks, replaced } = streamedStats
    o.trace('apply', `response body streamed through ${target}: ${chunks} ${mode.responseBodyMode === 'streamed' ? `chunks answered, ${replaced} replaced` : 'streamed_response chunks'}`)
  }
  const duplexChunk = async (draft: ResponseDraft, chunk: Buffer, end: boolean): Promise<ChunkResult> => {
    duplex ??= new DuplexAnswers('response', headersPending, true)
    hooks?.sent?.('response_body')
    const failed = await stream.write({ response_body: { body: chunk, end_of_stream: end } })
    duplexSent = true
    if (failed !== null) return duplexFailed(draft, failed)
    return await duplexAnswers(draft, end)
  }
  /** What the stream said when the body was idle (answersReady): an answer, or that it ended. */
  let watched: 'answer' | 'ended' | null = null
  /**
   * The full-duplex answers waiting (and at the body's end, every one until the processor
   * ended its body): what they bring back goes on at once.
   */
  const duplexAnswers = async (draft: ResponseDraft, end: boolean): Promise<ChunkResult> => {
    const answers = duplex!
    // The stream ended with nothing left while the body was idle: receive says how.
    const ended = watched === 'ended' && !stream.pending
    watched = null
    const out: Buffer[] = []
    let size = 0
    while (stream.pending || ended || (end && !answers.done)) {
      const a = answers.take(await stream.receive())
      if (a.kind === 'end') {
        hooks?.answered?.('response_body', a.r)
        return duplexFailed(draft, a.r)
      }
      if (a.kind === 'error') return duplexFailed(draft, { kind: 'error', reason: a.reason })
      if (a.kind === 'ignored') continue
      hooks?.answered?.(a.kind === 'body' ? 'response_body' : 'response_headers', a.r)
      // A refused mutation mid-body is a failure failOpen cannot pass over either.
      const refused = o.checkMutation?.(a.r.response.header_mutation) ?? null
      if (refused !== null) return duplexFailed(draft, { kind: 'error', reason: refused })
      const applied = apply(draft, a.r, false, a.kind === 'body')
      if (applied !== 'replaced' && applied.action !== 'continue') return applied
      if (a.kind === 'body') {
        streamedStats.chunks++
        size += a.chunk.length
        // What one backend chunk brings back is passed on at once; a processor that answers far more is cut.
        if (size > o.maxBodyBytes) return duplexFailed(draft, { kind: 'error', reason: `the processor answered more than maxBodyBytes (${o.maxBodyBytes}) for one chunk` })
        out.push(a.chunk)
      }
    }
    if (end) {
      stream.finish()
      traceStreamed()
    }
    return { action: 'data', data: Buffer.concat(out) }
  }
  /** A full-duplex failure mid-body: failOpen cannot pass the rest on (the processor holds bytes of it): the answer fails. */
  const duplexFailed = (draft: ResponseDraft, r: Exclude<ExchangeResult, { kind: 'response' }>): ChunkResult => {
    if (r.kind === 'immediate') return asChunk(apply(draft, r, true), Buffer.alloc(0))
    const reason = r.kind === 'error' ? r.reason : 'the processor ended the stream in the middle of the body'
    stream.close()
    active = false
    o.trace('deny', `processor ${target} failed on the streamed response body: ${reason}`, reason)
    return o.failed(reason)
  }
  const finish = (out: InterceptResult | 'replaced'): InterceptResult => {
    stream.finish()
    return out === 'replaced' ? { action: 'continue' } : out
  }
  return {
    maxBodyBytes: o.maxBodyBytes,
    async onHeaders (draft: ResponseDraft): Promise<InterceptResult> {
      if (o.applies !== undefined && !o.applies()) {
        active = false
        stream.finish()
        return { action: 'continue' }
      }
      if (mode.responseHeaderMode !== 'send') return { action: 'continue' }
      const message: Record<string, unknown> = { response_headers: { headers: headerMapMessage({ ':status': String(draft.status) }, draft.headers), end_of_stream: !draft.hasBody } }
      if (o.metadataContext !== undefined) message.metadata_context = metadataContextMessage(o.metadataContext())
      if (mode.responseBodyMode === 'fullDuplexStreamed' && draft.hasBody) {
        // Not waited for: a full-duplex processor may answer the headers only after the body.
        hooks?.sent?.('response_headers')
        const failed = await stream.write(message)
        if (failed !== null) return finish(apply(draft, failed, false))
        headersPending = true
        return { action: 'continue' }
      }
      const r = await send(message, 'response_headers')
      const out = apply(draft, r, false)
      if (out === 'replaced') {
        active = false
        stream.finish()
        return { action: 'continue' }
      }
      if (active && !(mode.responseBodyMode !== 'none' && draft.hasBody)) stream.finish()
      return out
    },
    wantsBody (): boolean {
      return active && !bodyReplaced && mode.responseBodyMode !== 'none'
    },
    async onBody (draft: ResponseDraft): Promise<InterceptResult> {
      if (mode.responseBodyMode === 'fullDuplexStreamed') return await duplexBody(draft)
      // buffered, and streamed with the body as its one chunk: a body mutation replaces it.
      const r = await send({ response_body: { body: draft.body ?? Buffer.alloc(0), end_of_stream: true } }, 'response_body')
      return finish(apply(draft, r, true))
    },
    onBodyTooLarge (): InterceptResult {
      return fail(`response body larger than maxBodyBytes (${o.maxBodyBytes})`)
    },
    streamsBody (): boolean {
      return mode.responseBodyMode === 'streamed' || mode.responseBodyMode === 'fullDuplexStreamed'
    },
    answersReady (): Promise<void> | null {
      // Only full duplex answers without being asked, and only once a chunk went out.
      if (!active || duplex === null || mode.responseBodyMode !== 'fullDuplexStreamed') return null
      return stream.readable().then(state => { watched = state })
    },
    async onAnswers (draft: ResponseDraft): Promise<ChunkResult> {
      // Stopped meanwhile (a failure, the client gone): nothing to take.
      if (!active || duplex === null || stream.closed) return { action: 'data', data: Buffer.alloc(0) }
      return await duplexAnswers(draft, false)
    },
    async onChunk (draft: ResponseDraft, chunk: Buffer, end: boolean): Promise<ChunkResult> {
      // Processing stopped (failOpen, a stream the processor ended): the rest goes through.
      if (!active && !duplexSent) return { action: 'data', data: chunk }
      if (!active) return o.failed('it stopped in the middle of the body')
      return mode.responseBodyMode === 'fullDuplexStreamed' ? await duplexChunk(draft, chunk, end) : await streamedChunk(draft, chunk, end)
    }
  }
}
