/**
 * Wraps an `ai` backend call's handler: reads the token usage out of the answer as it
 * streams past (llm/usage.ts) and settles the call when it ends — or is cut short, which
 * still spent the tokens reported so far. The pipeline adds it only for `ai` backends.
 */

import type { Dispatcher } from 'undici'
import { endLlmCall, LlmUsageTap } from './usage.ts'
import { WrappingHandler } from '../http/wrapping-handler.ts'
import { performance } from '../util/clock.ts'
import { llmAnswerRewrite, llmTranslation, llmUsageFormat } from './request.ts'
import { LlmFormatUsageHandler } from './format-usage-handler.ts'
import { withLlmTranslation } from './translate-handler.ts'
import { withLlmRewrite } from './rewrite-handler.ts'

/** The request's state, as llm/usage.ts reads it. */
type UsageContext = Parameters<typeof endLlmCall>[0]

export class LlmUsageHandler extends WrappingHandler {
  private readonly ctx: UsageContext
  private tap: LlmUsageTap | null = null

  constructor (inner: Dispatcher.DispatchHandler, ctx: UsageContext) {
    super(inner)
    this.ctx = ctx
  }

  override onResponseStart (c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    super.onResponseStart(c, statusCode, headers, statusMessage)
    // The content type as the response policies left it; only an answer the client gets
    // counts (the head itself is written with the first body byte, http/client-response.ts).
    if (!this.ctx.res.destroyed) this.tap = new LlmUsageTap(this.ctx.responseHeaders['content-type'])
  }

  override onResponseData (c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.tap !== null) {
      const call = this.ctx.llm
      if (call !== null && call.firstChunkAt === 0) call.firstChunkAt = performance.now()
      this.tap.push(chunk)
    }
    super.onResponseData(c, chunk)
  }

  override onResponseEnd (c: Dispatcher.DispatchController, trailers: Record<string, string | string[] | undefined>): void {
    if (this.tap !== null) endLlmCall(this.ctx, this.tap)
    super.onResponseEnd(c, trailers)
  }

  override onResponseError (c: Dispatcher.DispatchController, err: Error): void {
    if (this.tap !== null) endLlmCall(this.ctx, this.tap)
    super.onResponseError(c, err)
  }
}

/**
 * A CallWrapper-shaped constructor for the pipeline (pipeline/backend-call.ts): the usage tap
 * when the answer passes through, the translator (which reads the usage it decodes) when the
 * client's format is not the provider's, the rewriter for a translated model list or embeddings.
 */
export function withLlmUsage (inner: Dispatcher.DispatchHandler, ctx: UsageContext): Dispatcher.DispatchHandler {
  const translation = llmTranslation(ctx)
  if (translation !== undefined) return withLlmTranslation(inner, ctx, translation)
  const rewrite = llmAnswerRewrite(ctx)
  if (rewrite !== undefined) return withLlmRewrite(inner, ctx, rewrite)
  const format = llmUsageFormat(ctx)
  return format === undefined ? new LlmUsageHandler(inner, ctx) : new LlmFormatUsageHandler(inner, ctx, format)
}
