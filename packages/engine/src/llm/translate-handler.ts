/**
 * The response side of a translated `ai` call (the client's format is not the provider's):
 * the provider's answer is decoded into the neutral shape and encoded in the client's.
 *
 * - A stream (2xx, `text/event-stream` or the provider's stream type): the head goes at once
 *   with the client format's content type, and each provider read is decoded and re-encoded
 *   as soon as its events are complete — never held back, so the first token reaches the
 *   client as soon as it arrives. A stream cut, malformed or ending mid-answer gets the
 *   client format's error event; one the client side cannot express ends the stream.
 * - A whole answer or an error (anything else): read whole (bounded), then the translated
 *   head and body go together; a provider error becomes the client format's error shape with
 *   its status, a 200 carrying an error body too.
 *
 * The usage recorded (metrics, access log, token limits) is the neutral one the answer gave.
 */

import type { Dispatcher } from 'undici'
import type { RequestContext } from '../request/context.ts'
import type { LlmUsage } from '../request/calls.ts'
import type { ChatResponse, EncodeOptions, StreamDecoder, StreamEvent, TranslationError, Usage, WireFormat } from './canonical.ts'
import type { LlmTranslation } from './request.ts'
import { isTranslationError, translationError } from './canonical.ts'
import { recordLlmUsage } from './usage.ts'
import { WrappingHandler } from '../http/wrapping-handler.ts'
import { performance } from '../util/clock.ts'
import { isPorticoError } from '../util/errors.ts'
import { randomUUID } from 'node:crypto'
import { guardResponse, StreamGuard } from './guard/guard.ts'

/** Largest whole answer (or error body) translated; a larger one is a 502 in the client's shape. */
export const LLM_TRANSLATED_RESPONSE_LIMIT = 8 * 1024 * 1024

type Headers = Record<string, string | string[] | undefined>

const EMPTY = Buffer.alloc(0)

export class LlmTranslateHandler extends WrappingHandler {
  private readonly ctx: RequestContext
  private readonly t: LlmTranslation
  private mode: 'stream' | 'whole' | 'none' = 'none'
  private decoder: StreamDecoder | null = null
  private encoder: ByteStreamEncoder | null = null
  private status = 0
  private headers: Headers = {}
  private statusMessage: string | undefined
  private chunks: Buffer[] | null = []
  private size = 0
  private model = ''
  private startUsage: Usage | null = null
  private usage: Usage | null = null
  private problem: string | null = null
  /** The error a whole answer became (its headers, for formats that have some). */
  private error: TranslationError | null = null
  /** The provider's id for this call (a header), the answer's id when the answer has none (Bedrock's). */
  private requestId = ''
  /** `promptGuard.response` over a streamed answer (regex guards), when the backend has some. */
  private guard: StreamGuard | null = null

  constructor (inner: Dispatcher.DispatchHandler, ctx: RequestContext, translation: LlmTranslation) {
    super(inner)
    this.ctx = ctx
    this.t = translation
  }

  override onResponseStart (c: Dispatcher.DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.requestId = providerRequestId(headers)
    const type = headers['content-type']
    const encoded = headers['content-encoding']
    const compressed = encoded !== undefined && encoded !== 'identity'
    if (this.t.streaming && statusCode >= 200 && statusCode < 300 && !compressed && typeof type === 'string' && isStreamType(type)) {
      this.mode = 'stream'
      this.decoder = this.t.provider.newStreamDecoder()
      this.encoder = byteStreamEncoder(this.t.client, { now: Math.floor(Date.now() / 1000), requestModel: this.t.requestModel })
      if (this.t.responseGuards !== undefined) this.guard = new StreamGuard(this.ctx, this.t.model, this.t.responseGuards)
      const out: Headers = { ...headers, 'content-type': this.t.client.streamContentType }
      delete out['content-length']
      super.onResponseStart(c, statusCode, out, statusMessage)
      return
    }
    // Held until the answer is whole: its status may change (an error body in a 200).
    this.mode = 'whole'
    this.status = statusCode
    this.headers = headers
    this.statusMessage = statusMessage
    if (compressed) this.problem = `the provider's answer is compressed (${String(encoded)})`
  }

  override onResponseData (c: Dispatcher.DispatchController, chunk: Buffer): void {
    const call = this.ctx.llm
    if (call !== null && call.firstChunkAt === 0) call.firstChunkAt = performance.now()
    if (this.mode === 'stream') {
      // Passed on even when empty (a keep-alive, an event the client format has no form for):
      // the stream's idle clock counts the provider's progress, as on the pass-through path.
      super.onResponseData(c, this.encode(this.guarded(this.decoder!.push(chunk))))
      return
    }
    const chunks = this.chunks
    if (chunks === null) return
    this.size += chunk.length
    if (this.size > LLM_TRANSLATED_RESPONSE_LIMIT) {
      this.chunks = null
      this.problem = `the provider's answer is larger than ${LLM_TRANSLATED_RESPONSE_LIMIT} bytes`
      return
    }
    chunks.push(chunk)
  }

  override onResponseEnd (c: Dispatcher.DispatchController, trailers: Headers): void {
    if (this.mode === 'stream') {
      const out = Buffer.concat([this.encode(this.guardedEnd(this.decoder!.end())), this.encoder!.end()])
      if (out.length > 0) super.onResponseData(c, out)
      this.record()
      super.onResponseEnd(c, trailers)
      return
    }
    const whole = this.whole()
    if (whole.response !== undefined && this.t.responseGuards !== undefined) {
      // The answer's guards may ask a service: the answer goes when they have decided.
      const response = whole.response
      guardResponse(this.ctx, this.t.model, this.t.responseGuards, response).then(refused => {
        if (refused !== null) {
          this.error = refused
          this.deliver(c, { status: refused.status, body: this.t.client.encodeError(refused) })
        } else {
          this.deliver(c, { status: whole.status, body: this.t.client.encodeResponse(response, { now: Math.floor(Date.now() / 1000), requestModel: this.t.requestModel }), response })
        }
      }, (err: unknown) => {
        const e = translationError(500, 'api_error', `the answer's guardrails failed: ${(err as Error).message}`)
        this.error = e
        this.deliver(c, { status: e.status, body: this.t.client.encodeError(e) })
      })
      return
    }
    this.deliver(c, whole)
  }

  /** Neutral stream events through the answer's guards (when there are some). */
  private guarded (events: StreamEvent[]): StreamEvent[] {
    const guard = this.guard
    if (guard === null) return events
    // After a guard's refusal the provider's stream is read to its end but not passed on.
    if (guard.ended) return []
    return guard.process(events)
  }

  /** The last events of a stream through the guards, and whatever text they still held. */
  private guardedEnd (events: StreamEvent[]): StreamEvent[] {
    const out = this.guarded(events)
    return this.guard === null || this.guard.ended ? out : [...out, ...this.guard.flush()]
  }

  /** Sends a whole answer (or its error) to the client. */
  private deliver (c: Dispatcher.DispatchController, whole: { status: number, body: Record<string, unknown>, response?: ChatResponse }): void {
    const { status, body, response } = whole
    // A stream asked for and a whole answer given (some servers ignore `stream`): the client,
    // whose SDK reads a stream, gets the answer as one.
    const asStream = response !== undefined && this.t.streaming
    const bytes = asStream ? this.streamOf(response) : Buffer.from(JSON.stringify(body))
    const headers: Headers = { ...this.headers, 'content-type': asStream ? this.t.client.streamContentType : 'application/json', 'content-length': String(bytes.length) }
    if (status >= 400 && this.error !== null) Object.assign(headers, this.t.client.errorHeaders?.(this.error))
    delete headers['content-encoding']
    delete headers['transfer-encoding']
    this.record()
    super.onResponseStart(c, status, headers, status === this.status ? this.statusMessage : undefined)
    super.onResponseData(c, bytes)
    super.onResponseEnd(c, {})
  }

  override onResponseError (c: Dispatcher.DispatchController, err: Error): void {
    // Cut short: the usage seen so far still counts (as on the pass-through path).
    this.problem ??= `the answer was cut: ${err.message}`
    if (this.mode === 'stream' && !this.ctx.res.destroyed && !isPorticoError(err, 'PORTICO_DOWNSTREAM_CLOSED')) {
      // The provider's stream broke after the head went out: the client gets its format's
      // error event and a proper end (its SDK raises a clean error), not a cut connection.
      // The access log still records the failure.
      const out = Buffer.concat([this.encode(this.guardedEnd(this.decoder!.end())), this.encoder!.end()])
      if (out.length > 0) super.onResponseData(c, out)
      this.ctx.error = `the provider's stream broke: ${err.message}`
      this.record()
      super.onResponseEnd(c, {})
      return
    }
    this.record()
    super.onResponseError(c, err)
  }

  /** A whole answer as the client format's stream. */
  private streamOf (response: ChatResponse): Buffer {
    const encoder = byteStreamEncoder(this.t.client, { now: Math.floor(Date.now() / 1000), requestModel: this.t.requestModel })
    const events: StreamEvent[] = [{ type: 'start', id: response.id, model: response.model, ...(response.created !== undefined ? { created: response.created } : {}) }]
    response.content.forEach((part, index) => {
      if (part.type === 'text') events.push({ type: 'block_start', index, block: { type: 'text' } }, { type: 'text_delta', index, text: part.text })
      else if (part.type === 'reasoning') events.push({ type: 'block_start', index, block: { type: 'reasoning' } }, { type: 'reasoning_delta', index, text: part.text, ...(part.signature !== undefined ? { signature: part.signature } : {}) })
      else if (part.type === 'tool_call') events.push({ type: 'block_start', index, block: { type: 'tool_call', id: part.id, name: part.name } }, { type: 'tool_args_delta', index, json: JSON.stringify(part.input) })
      else return
      events.push({ type: 'block_stop', index })
    })
    events.push({ type: 'finish', stopReason: response.stopReason, ...(response.stopSequence !== undefined ? { stopSequence: response.stopSequence } : {}), usage: response.usage })
    return Buffer.concat([...events.map(e => encoder.encode(e)), encoder.end()])
  }

  /** The translated whole answer: the client's JSON body and its status (and the neutral answer, when there is one). */
  private whole (): { status: number, body: Record<string, unknown>, response?: ChatResponse } {
    const { client, provider } = this.t
    const fail = (e: TranslationError): { status: number, body: Record<string, unknown> } => {
      this.error = e
      return { status: e.status, body: client.encodeError(e) }
    }
    if (this.chunks === null || this.problem !== null) return fail(translationError(502, 'api_error', `invalid answer from the provider: ${this.problem ?? 'unreadable'}`))
    const text = Buffer.concat(this.chunks).toString('utf8')
    this.chunks = null
    let json: unknown = null
    try {
      json = JSON.parse(text)
    } catch {}
    if (this.status < 200 || this.status >= 300) return fail(provider.decodeError(this.status, json))
    if (json === null || typeof json !== 'object' || Array.isArray(json)) return fail(translationError(502, 'api_error', 'invalid answer from the provider: not a JSON object'))
    const decoded = provider.decodeResponse(json as Record<string, unknown>)
    if (isTranslationError(decoded)) return fail(decoded)
    const neutral = this.named(decoded)
    this.model = neutral.model
    this.usage = neutral.usage
    return { status: this.status, body: client.encodeResponse(neutral, { now: Math.floor(Date.now() / 1000), requestModel: this.t.requestModel }), response: neutral }
  }

  private encode (events: StreamEvent[]): Buffer {
    const out: Buffer[] = []
    const encoder = this.encoder!
    for (let e of events) {
      if (e.type === 'start') {
        e = this.named(e)
        this.model = e.model
        if (e.usage !== undefined) this.startUsage = e.usage
      } else if (e.type === 'finish') {
        this.usage = mergeUsage(this.startUsage, e.usage)
      } else if (e.type === 'error') {
        this.problem = e.error.message
      }
      const bytes = encoder.encode(e)
      if (bytes.length > 0) out.push(bytes)
    }
    return out.length === 0 ? EMPTY : out.length === 1 ? out[0]! : Buffer.concat(out)
  }

  /**
   * An answer (or a stream's start) with an id and a model: a provider that names neither
   * (Bedrock: the model is in the path) gets its request id header and the model it was
   * asked for, so clients see sensible values rather than empty ones.
   */
  private named<T extends { id: string, model: string }> (answer: T): T {
    if (answer.id !== '' && answer.model !== '') return answer
    return { ...answer, id: answer.id !== '' ? answer.id : this.requestId !== '' ? this.requestId : randomUUID(), model: answer.model !== '' ? answer.model : this.t.model }
  }

  private record (): void {
    const usage = this.usage ?? this.startUsage
    let recorded: LlmUsage | null = null
    if (usage !== null) {
      recorded = { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, totalTokens: usage.inputTokens + usage.outputTokens, responseModel: this.model === '' ? null : this.model }
      if (usage.cachedInputTokens !== undefined) recorded.cachedInputTokens = usage.cachedInputTokens
      if (usage.cacheCreationInputTokens !== undefined) recorded.cacheCreationInputTokens = usage.cacheCreationInputTokens
      if (usage.reasoningTokens !== undefined) recorded.reasoningTokens = usage.reasoningTokens
    }
    recordLlmUsage(this.ctx, recorded, this.problem ?? 'the answer carried no usage')
  }
}

/** The client format's stream encoder, giving bytes whether its wire form is text (SSE) or binary (Bedrock's event stream). */
interface ByteStreamEncoder {
  encode (event: StreamEvent): Buffer
  end (): Buffer
}

function byteStreamEncoder (format: WireFormat, options: EncodeOptions): ByteStreamEncoder {
  const bytes = (b: Uint8Array): Buffer => b.length === 0 ? EMPTY : Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)
  const text = (s: string): Buffer => s === '' ? EMPTY : Buffer.from(s)
  if (format.newBinaryStreamEncoder !== undefined) {
    const binary = format.newBinaryStreamEncoder(options)
    return { encode: e => bytes(binary.encode(e)), end: () => bytes(binary.end()) }
  }
  const encoder = format.newStreamEncoder(options)
  return { encode: e => text(encoder.encode(e)), end: () => text(encoder.end()) }
}

/** A stream's final usage, with the input counted at its start where the end left it out (Anthropic's message_start). */
function mergeUsage (start: Usage | null, end: Usage | null): Usage | null {
  if (end === null) return start
  if (start === null || end.inputTokens > 0) return end
  return { ...end, inputTokens: start.inputTokens }
}

/** The provider's request id: AWS's `x-amzn-requestid`, else the common `x-request-id` / `request-id`. */
function providerRequestId (headers: Headers): string {
  for (const name of ['x-amzn-requestid', 'x-request-id', 'request-id']) {
    const value = headers[name]
    if (typeof value === 'string' && /^[A-Za-z0-9_.:-]{1,128}$/.test(value)) return value
  }
  return ''
}

function isStreamType (type: string): boolean {
  return type.startsWith('text/event-stream') || type.startsWith('application/vnd.amazon.eventstream')
}

export function withLlmTranslation (inner: Dispatcher.DispatchHandler, ctx: RequestContext, translation: LlmTranslation): Dispatcher.DispatchHandler {
  return new LlmTranslateHandler(inner, ctx, translation)
}
