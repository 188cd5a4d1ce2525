/**
 * The usage of a pass-through call whose format the generic usage reader (llm/usage.ts, tuned
 * for OpenAI's and Anthropic's names) does not know: a Gemini client to a `gemini` provider, a
 * Bedrock client to `bedrock`. The answer passes to the client untouched, byte for byte, and a
 * copy is read with the format's own decoder (the module that translates it elsewhere): a
 * stream event by event (the decoder keeps at most one event), a whole answer up to
 * `LLM_RESPONSE_LIMIT`. Its usage is what the call records.
 */

import type { Dispatcher } from 'undici'
import type { RequestContext } from '../request/context.ts'
import type { StreamDecoder, StreamEvent, Usage, WireFormat } from './canonical.ts'
import { isTranslationError } from './canonical.ts'
import { LLM_RESPONSE_LIMIT } from './usage.ts'
import { recordLlmUsage } from './usage.ts'
import { WrappingHandler } from '../http/wrapping-handler.ts'
import { performance } from '../util/clock.ts'

type Headers = Record<string, string | string[] | undefined>

export class LlmFormatUsageHandler extends WrappingHandler {
  private readonly ctx: RequestContext
  private readonly format: WireFormat
  private decoder: StreamDecoder | null = null
  private chunks: Buffer[] | null = null
  private size = 0
  private ok = false
  private model: string | null = null
  private startUsage: Usage | null = null
  private usage: Usage | null = null
  private problem: string | null = null

  constructor (inner: Dispatcher.DispatchHandler, ctx: RequestContext, format: WireFormat) {
    super(inner)
    this.ctx = ctx
    this.format = format
  }

  override onResponseStart (c: Dispatcher.DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.ok = statusCode >= 200 && statusCode < 300
    const type = headers['content-type']
    const encoded = headers['content-encoding']
    if (encoded !== undefined && encoded !== 'identity') this.problem = `the provider's answer is compressed (${String(encoded)})`
    else if (this.ok && typeof type === 'string' && (type.startsWith('text/event-stream') || type.startsWith('application/vnd.amazon.eventstream'))) this.decoder = this.format.newStreamDecoder()
    else if (this.ok) this.chunks = []
    super.onResponseStart(c, statusCode, headers, statusMessage)
  }

  override onResponseData (c: Dispatcher.DispatchController, chunk: Buffer): void {
    const call = this.ctx.llm
    if (call !== null && call.firstChunkAt === 0) call.firstChunkAt = performance.now()
    if (this.decoder !== null) this.read(this.decoder.push(chunk))
    else if (this.chunks !== null) {
      this.size += chunk.length
      if (this.size > LLM_RESPONSE_LIMIT) {
        this.chunks = null
        this.problem = `answer larger than ${LLM_RESPONSE_LIMIT} bytes: usage not read`
      } else this.chunks.push(chunk)
    }
    super.onResponseData(c, chunk)
  }

  override onResponseEnd (c: Dispatcher.DispatchController, trailers: Headers): void {
    if (this.decoder !== null) this.read(this.decoder.end())
    else if (this.chunks !== null) {
      let json: unknown = null
      try {
        json = JSON.parse(Buffer.concat(this.chunks).toString('utf8'))
      } catch {}
      this.chunks = null
      if (json !== null && typeof json === 'object' && !Array.isArray(json)) {
        const answer = this.format.decodeResponse(json as Record<string, unknown>)
        if (!isTranslationError(answer)) {
          this.usage = answer.usage
          if (answer.model !== '') this.model = answer.model
        }
      }
    }
    this.record()
    super.onResponseEnd(c, trailers)
  }

  override onResponseError (c: Dispatcher.DispatchController, err: Error): void {
    this.problem ??= `the answer was cut: ${err.message}`
    this.record()
    super.onResponseError(c, err)
  }

  private read (events: StreamEvent[]): void {
    for (const e of events) {
      if (e.type === 'start') {
        if (e.model !== '') this.model = e.model
        if (e.usage !== undefined) this.startUsage = e.usage
      } else if (e.type === 'finish') this.usage = e.usage
    }
  }

  private record (): void {
    let usage = this.usage ?? this.startUsage
    if (usage !== null && this.usage !== null && this.startUsage !== null && usage.inputTokens === 0) usage = { ...usage, inputTokens: this.startUsage.inputTokens }
    recordLlmUsage(this.ctx, usage === null ? null : { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, totalTokens: usage.inputTokens + usage.outputTokens, responseModel: this.model }, this.problem ?? (this.ok ? 'the answer carried no usage' : 'the provider answered an error'))
  }
}
