/**
 * The response side of an `ai` backend: reads the token usage out of the provider's answer
 * as it streams to the client (nothing is held back or changed). A JSON answer is kept up to
 * `LLM_RESPONSE_LIMIT` and parsed at its end. Of a server-sent event stream only the last
 * `SSE_TAIL_BYTES` are kept, and at its end the last event carrying a `usage` object is
 * parsed: OpenAI sends it in the last event before `[DONE]` (with
 * `stream_options.include_usage`), the Responses API in its final `response.completed`.
 * Scanning every event instead cost more CPU than proxying the stream (bench/llm.ts):
 * OpenAI's events each carry `"usage":null` until the last.
 *
 * Anthropic's stream gives the input tokens in its first event (`message_start`) and the output
 * in its last (`message_delta`): the head of a stream (`SSE_HEAD_BYTES`) is kept too, and its
 * first usage event gives the input count when the tail's usage has an output count but none.
 *
 * Usage shapes read: OpenAI chat completions (`prompt_tokens`, `completion_tokens`,
 * `total_tokens`) and the input/output naming of OpenAI's Responses API and servers that
 * follow it (`input_tokens`, `output_tokens`), at the top level or under `response` /
 * `message` (streamed envelopes); with them the parts used for pricing (llm/cost.ts): cached
 * input (`prompt_tokens_details` / `input_tokens_details.cached_tokens`, Anthropic's
 * `cache_read_input_tokens`), cache writes (`cache_creation_input_tokens`) and reasoning
 * (`completion_tokens_details` / `output_tokens_details.reasoning_tokens`). Anthropic's
 * `input_tokens` leaves its cache reads and writes out: they are added, so the input count
 * means what it means for a translated answer (llm/formats/anthropic-messages.ts).
 */

import type { RequestContext } from '../request/context.ts'
import type { LlmUsage } from '../request/calls.ts'
import { llmCost } from './cost.ts'

/** Largest non-streamed answer whose usage is read (bigger ones pass through uncounted). */
export const LLM_RESPONSE_LIMIT = 4 * 1024 * 1024

/** How much of the end of a stream is kept to find the usage event in. */
export const SSE_TAIL_BYTES = 64 * 1024

/** How much of the start of a stream is kept for a usage event there (Anthropic's message_start). */
export const SSE_HEAD_BYTES = 16 * 1024

const USAGE_KEY = Buffer.from('"usage"')
const NEWLINE = 0x0a

export class LlmUsageTap {
  private readonly sse: boolean
  /** The body so far (JSON), or its last chunks (SSE); null once a JSON body is past the limit. */
  private chunks: Buffer[] | null = []
  private size = 0
  /** The first bytes of a stream (views, no copy), up to SSE_HEAD_BYTES. */
  private head: Buffer[] = []
  private headSize = 0
  private input: number | null = null
  private output: number | null = null
  private total: number | null = null
  private cached: number | undefined
  private cacheCreation: number | undefined
  private reasoning: number | undefined
  private model: string | null = null
  /** Why no usage could be read, when that is known. */
  problem: string | null = null

  constructor (contentType: string | string[] | undefined) {
    this.sse = typeof contentType === 'string' && contentType.startsWith('text/event-stream')
  }

  push (chunk: Buffer): void {
    const chunks = this.chunks
    if (chunks === null) return
    // Kept without a copy (copying showed as 7 % of the proxy's CPU on streams): undici's
    // chunks are views of socket reads, which nothing writes to again.
    chunks.push(chunk)
    this.size += chunk.length
    if (this.sse) {
      if (this.headSize < SSE_HEAD_BYTES) {
        const part = chunk.length <= SSE_HEAD_BYTES - this.headSize ? chunk : chunk.subarray(0, SSE_HEAD_BYTES - this.headSize)
        this.head.push(part)
        this.headSize += part.length
      }
      // Keep just enough chunks to cover the tail.
      while (this.size - chunks[0]!.length >= SSE_TAIL_BYTES) this.size -= chunks.shift()!.length
    } else if (this.size > LLM_RESPONSE_LIMIT) {
      this.chunks = null
      this.problem = `answer larger than ${LLM_RESPONSE_LIMIT} bytes: usage not read`
    }
  }

  /** The usage the answer reported, or null when it reported none. */
  finish (): LlmUsage | null {
    const chunks = this.chunks
    this.chunks = null
    if (chunks !== null && this.size > 0) {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      if (this.sse) {
        this.lastUsageEvent(body)
        // Only to complete a tally the tail gave (output without input), never instead of one.
        if (this.input === null && this.output !== null && this.headSize > 0) this.headUsage()
      } else this.read(body.toString('utf8'))
    }
    if (this.input === null && this.output === null && this.total === null) {
      this.problem ??= 'the answer carried no usage'
      return null
    }
    const usage: LlmUsage = {
      inputTokens: this.input,
      outputTokens: this.output,
      totalTokens: this.total ?? (this.input ?? 0) + (this.output ?? 0),
      responseModel: this.model
    }
    if (this.cached !== undefined) usage.cachedInputTokens = this.cached
    if (this.cacheCreation !== undefined) usage.cacheCreationInputTokens = this.cacheCreation
    if (this.reasoning !== undefined) usage.reasoningTokens = this.reasoning
    return usage
  }

  /**
   * The input count of the first usage event of the stream's head (Anthropic's message_start),
   * the tail's output and total kept: they are the final ones.
   */
  private headUsage (): void {
    const head = this.head.length === 1 ? this.head[0]! : Buffer.concat(this.head)
    this.head = []
    const tail = { output: this.output, total: this.total, model: this.model }
    let at = head.indexOf(USAGE_KEY)
    while (at !== -1 && !isObjectValue(head, at + USAGE_KEY.length)) at = head.indexOf(USAGE_KEY, at + 1)
    if (at === -1) return
    const start = head.lastIndexOf(NEWLINE, at) + 1
    const end = head.indexOf(NEWLINE, at)
    if (end === -1) return // the event is cut at the head's end
    const line = head.toString('utf8', start, end)
    const data = line.endsWith('\r') ? line.slice(0, -1) : line
    if (!data.startsWith('data:')) return
    this.read(data.slice(5))
    if (tail.output !== null) this.output = tail.output
    this.total = tail.total
    if (tail.model !== null) this.model = tail.model
  }

  /** Parses the last `data:` line of `tail` whose `"usage"` is an object, searching backwards. */
  private lastUsageEvent (tail: Buffer): void {
    let at = tail.lastIndexOf(USAGE_KEY)
    while (at !== -1) {
      if (isObjectValue(tail, at + USAGE_KEY.length)) {
        const start = tail.lastIndexOf(NEWLINE, at) + 1
        const end = tail.indexOf(NEWLINE, at)
        const line = tail.toString('utf8', start, end === -1 ? tail.length : end)
        const data = line.endsWith('\r') ? line.slice(0, -1) : line
        if (data.startsWith('data:')) {
          this.read(data.slice(5))
          return
        }
      }
      at = at === 0 ? -1 : tail.lastIndexOf(USAGE_KEY, at - 1)
    }
  }

  private read (json: string): void {
    let value: unknown
    try {
      value = JSON.parse(json)
    } catch {
      this.problem = 'the answer is not JSON: usage not read'
      return
    }
    if (!isObject(value)) return
    const envelope = isObject(value.response) ? value.response : isObject(value.message) ? value.message : value
    const usage = isObject(value.usage) ? value.usage : isObject(envelope.usage) ? envelope.usage : null
    if (usage === null) return
    // Anthropic counts cache reads and writes beside input_tokens, not in it: added, so the
    // input count means the same for every provider (OpenTelemetry's gen_ai.usage.input_tokens
    // includes cached tokens; llm/formats/anthropic-messages.ts decodes it the same way).
    const cacheRead = count(usage.cache_read_input_tokens)
    const cacheWrite = count(usage.cache_creation_input_tokens)
    const input = count(usage.prompt_tokens) ?? count(usage.input_tokens)
    this.input = input !== null ? input + (cacheRead ?? 0) + (cacheWrite ?? 0) : this.input
    this.output = count(usage.completion_tokens) ?? count(usage.output_tokens) ?? this.output
    this.total = count(usage.total_tokens) ?? this.total
    // OpenAI chat's *_tokens_details, the Responses API's, Anthropic's cache counts; a zero
    // is left out, as the OpenAI format modules do (llm/formats/openai-chat.ts).
    const cached = detail(usage.prompt_tokens_details, 'cached_tokens') ?? detail(usage.input_tokens_details, 'cached_tokens') ?? cacheRead
    if (cached !== null && cached > 0) this.cached = cached
    if (cacheWrite !== null && cacheWrite > 0) this.cacheCreation = cacheWrite
    const reasoning = detail(usage.completion_tokens_details, 'reasoning_tokens') ?? detail(usage.output_tokens_details, 'reasoning_tokens')
    if (reasoning !== null && reasoning > 0) this.reasoning = reasoning
    const model = typeof value.model === 'string' ? value.model : envelope.model
    if (typeof model === 'string') this.model = model
  }
}

/** Is the JSON value at `i` (after optional spaces, a colon and spaces) an object? */
function isObjectValue (buf: Buffer, i: number): boolean {
  while (i < buf.length && (buf[i] === 0x20 || buf[i] === 0x09)) i++
  if (buf[i] !== 0x3a /* : */) return false
  i++
  while (i < buf.length && (buf[i] === 0x20 || buf[i] === 0x09)) i++
  return buf[i] === 0x7b /* { */
}

function isObject (v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function count (v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null
}

function detail (details: unknown, key: string): number | null {
  return isObject(details) ? count(details[key]) : null
}

/**
 * The answer is over (or was cut): records the usage on `ctx.llm`, traces it, and hands the
 * token count to the token-based rate limits that admitted the request.
 */
export function endLlmCall (ctx: RequestContext, tap: LlmUsageTap): void {
  if (ctx.llm === null || ctx.llm.usage !== null) return
  recordLlmUsage(ctx, tap.finish(), tap.problem)
}

/** Records an answer's usage (or why there is none): the pass-through tap's, or a translated answer's neutral usage. */
export function recordLlmUsage (ctx: RequestContext, usage: LlmUsage | null, problem: string | null): void {
  const call = ctx.llm
  if (call === null || call.usage !== null) return
  if (usage === null) {
    ctx.tracer?.emit({ type: 'llmResponse', usage: null, reason: problem }, { severity: 'warn' })
    return
  }
  call.usage = usage
  const pricing = ctx.backend?.ai?.pricing
  const cost = pricing === undefined ? null : llmCost(pricing, call.model, usage)
  if (cost !== null) call.cost = cost
  if (ctx.tracer !== null) {
    // The parts of the counts, when there are any (zeros left out, whichever way the answer came).
    const parts = { ...(usage.cachedInputTokens! > 0 ? { cachedInputTokens: usage.cachedInputTokens } : {}), ...(usage.cacheCreationInputTokens! > 0 ? { cacheCreationInputTokens: usage.cacheCreationInputTokens } : {}), ...(usage.reasoningTokens! > 0 ? { reasoningTokens: usage.reasoningTokens } : {}) }
    const priced = cost !== null ? { cost: cost.amount, currency: cost.currency } : pricing !== undefined ? { cost: null } : {}
    ctx.tracer.emit({ type: 'llmResponse', responseModel: usage.responseModel, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, totalTokens: usage.totalTokens, ...parts, ...priced })
  }
  const hooks = ctx.llmTokenHooks
  if (hooks !== null) for (const hook of hooks) hook(usage.totalTokens, cost)
}
