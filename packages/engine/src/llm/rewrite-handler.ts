/**
 * The response side of a translated model list or embeddings call (llm/operations.ts): the
 * provider's whole answer is read (bounded), its 2xx JSON rewritten into the client's shape, an
 * error into the client format's error shape with its status. Usage (embeddings' input tokens)
 * is recorded from the answer.
 */

import type { Dispatcher } from 'undici'
import type { RequestContext } from '../request/context.ts'
import type { LlmUsage } from '../request/calls.ts'
import type { TranslationError, WireFormat } from './canonical.ts'
import { isTranslationError, translationError } from './canonical.ts'
import { recordLlmUsage } from './usage.ts'
import { WrappingHandler } from '../http/wrapping-handler.ts'
import { performance } from '../util/clock.ts'
import { LLM_TRANSLATED_RESPONSE_LIMIT } from './translate-handler.ts'

type Headers = Record<string, string | string[] | undefined>

/** How an answer is rewritten (set by llm/request.ts). */
export interface LlmAnswerRewrite {
  /** The client's format: errors are said in its shape. */
  client: WireFormat
  /** The provider's format, which reads its error bodies. */
  provider: WireFormat
  /** A 2xx JSON answer → the client's body and the usage it reports (null: none, as for model lists). */
  answer (json: unknown, headers: Headers): { body: Record<string, unknown>, usage: LlmUsage | null } | TranslationError
}

export class LlmRewriteHandler extends WrappingHandler {
  private readonly ctx: RequestContext
  private readonly rewrite: LlmAnswerRewrite
  private status = 0
  private headers: Headers = {}
  private chunks: Buffer[] | null = []
  private size = 0
  private problem: string | null = null
  private error: TranslationError | null = null

  constructor (inner: Dispatcher.DispatchHandler, ctx: RequestContext, rewrite: LlmAnswerRewrite) {
    super(inner)
    this.ctx = ctx
    this.rewrite = rewrite
  }

  override onResponseStart (_c: Dispatcher.DispatchController, statusCode: number, headers: Headers): void {
    this.status = statusCode
    this.headers = headers
    const encoded = headers['content-encoding']
    if (encoded !== undefined && encoded !== 'identity') this.problem = `the provider's answer is compressed (${String(encoded)})`
  }

  override onResponseData (_c: Dispatcher.DispatchController, chunk: Buffer): void {
    const call = this.ctx.llm
    if (call !== null && call.firstChunkAt === 0) call.firstChunkAt = performance.now()
    if (this.chunks === null) return
    this.size += chunk.length
    if (this.size > LLM_TRANSLATED_RESPONSE_LIMIT) {
      this.chunks = null
      this.problem = `the provider's answer is larger than ${LLM_TRANSLATED_RESPONSE_LIMIT} bytes`
      return
    }
    this.chunks.push(chunk)
  }

  override onResponseEnd (c: Dispatcher.DispatchController): void {
    const { status, body, usage } = this.result()
    recordLlmUsage(this.ctx, usage, this.problem ?? 'the answer carried no usage')
    const bytes = Buffer.from(JSON.stringify(body))
    const headers: Headers = { ...this.headers, 'content-type': 'application/json', 'content-length': String(bytes.length) }
    delete headers['content-encoding']
    delete headers['transfer-encoding']
    if (status >= 400) Object.assign(headers, this.rewrite.client.errorHeaders?.(this.error ?? translationError(status, 'api_error', '')))
    super.onResponseStart(c, status, headers)
    super.onResponseData(c, bytes)
    super.onResponseEnd(c, {})
  }

  override onResponseError (c: Dispatcher.DispatchController, err: Error): void {
    recordLlmUsage(this.ctx, null, `the answer was cut: ${err.message}`)
    super.onResponseError(c, err)
  }

  private result (): { status: number, body: Record<string, unknown>, usage: LlmUsage | null } {
    const fail = (e: TranslationError): { status: number, body: Record<string, unknown>, usage: null } => {
      this.error = e
      this.problem ??= e.message
      return { status: e.status, body: this.rewrite.client.encodeError(e), usage: null }
    }
    if (this.chunks === null || this.problem !== null) return fail(translationError(502, 'api_error', `invalid answer from the provider: ${this.problem ?? 'unreadable'}`))
    let json: unknown = null
    try {
      json = JSON.parse(Buffer.concat(this.chunks).toString('utf8'))
    } catch {}
    this.chunks = null
    if (this.status < 200 || this.status >= 300) return fail(this.rewrite.provider.decodeError(this.status, json))
    const out = this.rewrite.answer(json, this.headers)
    if (isTranslationError(out)) return fail(out)
    return { status: this.status, body: out.body, usage: out.usage }
  }
}

export function withLlmRewrite (inner: Dispatcher.DispatchHandler, ctx: RequestContext, rewrite: LlmAnswerRewrite): Dispatcher.DispatchHandler {
  return new LlmRewriteHandler(inner, ctx, rewrite)
}
