/**
 * What a request records of its MCP and LLM calls (RequestContext `mcp` and `llm`), for
 * traces, access logs and metrics. mcp/ and llm/ fill them in; they live here, below those
 * rooms, because RequestContext names them.
 */

import type { McpSnapshot } from '../trace/events.ts'

/** Which MCP operation a request is, for traces, logs and metrics: what its snapshots show. */
export type McpCallInfo = McpSnapshot

/** What the proxy knows about one LLM call; `usage` is set once the answer told it. */
export interface LlmCall {
  /** The provider, as OpenTelemetry's gen_ai.provider.name names it (`openai`, `azure.ai.openai`, `anthropic`, ...). */
  system: string
  /** `chat`, `embeddings` (gen_ai.operation.name). */
  operation: 'chat' | 'embeddings'
  /** The client's wire format (`openai-chat`, `anthropic-messages`, ...). */
  inputFormat: string
  /** The provider's wire format: the answer is translated when it differs from `inputFormat`. */
  providerFormat: string
  /** `model` as the client sent it ('' when absent). */
  requestModel: string
  /** `model` as sent to the provider. */
  model: string
  streaming: boolean
  usage: LlmUsage | null
  /** Monotonic ms when the first bytes of the answer's body arrived (0 before): time to first token of a stream. */
  firstChunkAt: number
  /** What the answer cost, once its usage is known and the backend has `pricing` for its model. */
  cost?: LlmCost
}

/** A call's cost: exact, in 10^-12 currency units (`picos`), and as a decimal string. */
export interface LlmCost {
  /** The cost as a plain decimal (`0.000325`), exact. */
  amount: string
  picos: bigint
  currency: string
}

export interface LlmUsage {
  inputTokens: number | null
  outputTokens: number | null
  /** What token-based rate limits take: the provider's total, else input + output. */
  totalTokens: number
  /** Of the input tokens, those read from a prompt cache (when the answer said). */
  cachedInputTokens?: number
  /** Of the input tokens, those written to a prompt cache (Anthropic, Bedrock). */
  cacheCreationInputTokens?: number
  /** Of the output tokens, those spent on reasoning (when the answer said). */
  reasoningTokens?: number
  /** `model` of the answer (the provider's exact version), when it says. */
  responseModel: string | null
}

