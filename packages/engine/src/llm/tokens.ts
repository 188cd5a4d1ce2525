/**
 * A pre-call estimate of a chat request's prompt tokens (`tokenize: true` on an `ai`
 * backend), with a real tokenizer: js-tiktoken's o200k_base (GPT-4o's). It is loaded at its
 * first use (a few MiB of ranks), and only used when a `type: tokens` local rate limit
 * applies to the request, so a gateway without one pays nothing.
 *
 * Counted as OpenAI's cookbook counts chat tokens: each message's text plus 3 tokens of
 * overhead per message (system prompts included), 3 for the reply's priming; tool
 * definitions count as their JSON. Images and reasoning are not counted (the estimate is a
 * lower bound of what other tokenizers say, and providers' own counts differ by a few
 * percent): it decides whether a request can fit, the answer's real usage is what is charged.
 */

import type { ChatRequest } from './canonical.ts'
import { lazyRequire } from '../util/lazy-require.ts'

interface Encoder { encode: (text: string) => number[] }
type Lite = { Tiktoken: new (ranks: unknown) => Encoder }

const lite = lazyRequire<Lite>('js-tiktoken/lite')
const o200k = lazyRequire<{ default?: unknown }>('js-tiktoken/ranks/o200k_base')
let encoder: Encoder | undefined

function newEncoder (): Encoder {
  const ranks = o200k() // the CommonJS build exports the ranks themselves
  return new (lite().Tiktoken)(ranks.default ?? ranks)
}

/** Tokens of `text` with o200k_base. */
export function countTokens (text: string): number {
  if (text === '') return 0
  encoder ??= newEncoder()
  return encoder.encode(text).length
}

const PER_MESSAGE = 3
const REPLY_PRIMING = 3

/** Estimated prompt tokens of a chat request. */
export function estimatePromptTokens (request: ChatRequest): number {
  let n = REPLY_PRIMING
  for (const s of request.system) n += PER_MESSAGE + countTokens(s)
  for (const m of request.messages) {
    n += PER_MESSAGE
    for (const part of m.content) {
      if (part.type === 'text') n += countTokens(part.text)
      else if (part.type === 'tool_call') n += countTokens(part.name) + countTokens(JSON.stringify(part.input))
      else if (part.type === 'tool_result') for (const c of part.content) if (c.type === 'text') n += countTokens(c.text)
    }
  }
  if (request.tools !== undefined && request.tools.length > 0) n += countTokens(JSON.stringify(request.tools))
  return n
}

/** Estimated tokens of an embeddings request's `input` (strings; token arrays count as their length). */
export function estimateEmbeddingTokens (input: unknown): number {
  if (typeof input === 'string') return countTokens(input)
  if (!Array.isArray(input)) return 0
  let n = 0
  for (const x of input) n += typeof x === 'string' ? countTokens(x) : typeof x === 'number' ? 1 : Array.isArray(x) ? x.length : 0
  return n
}
