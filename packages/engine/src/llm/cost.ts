/**
 * What an LLM answer cost, from the backend's `pricing` (rates per million tokens, as
 * agentgateway's model catalog names them: input, output, cacheRead, cacheWrite, reasoning)
 * and the answer's real usage.
 *
 * Exact: a rate is kept as an integer of millionths of the currency per million tokens (at
 * most 6 decimals, as agentgateway's catalog allows), so tokens × rate is an integer of
 * 10^-12 currency units ("picos"), computed with BigInt. Sums of costs (the metrics counter)
 * add those integers: no float drift however many requests are summed.
 *
 * The usage is the neutral one (llm/canonical.ts Usage): cached and cache-written tokens are
 * part of the input count, reasoning tokens part of the output count. A rate for one of those
 * parts takes it out of its whole (as agentgateway's `usage_for` does with a provider whose
 * input includes the cache); without its own rate a part stays in its whole, at its rate.
 */

import type { AiPricingIR, AiRatesIR } from '../ir/types.ts'
import type { LlmCost, LlmUsage } from '../request/calls.ts'
import { formatPicos } from '../util/picos.ts'

export { formatPicos }

/** Most decimals a rate may have: millionths of the currency per million tokens. */
export const RATE_DECIMALS = 6
const RATE = /^(\d{1,12})(?:\.(\d{1,6}))?$/

/**
 * A rate as written in the config (a decimal string, or a number written as one) in
 * millionths of the currency per million tokens, or why it is not one.
 */
export function parseRate (value: string | number): number | string {
  const text = typeof value === 'number' ? String(value) : value.trim()
  const m = RATE.exec(text)
  if (m === null) return `"${text}" is not a price per million tokens: a decimal with at most ${RATE_DECIMALS} decimals, like "2.5" or "0.075"`
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(RATE_DECIMALS, '0'))
}

const GLOBS = new WeakMap<AiPricingIR, RegExp[]>()

function globsOf (pricing: AiPricingIR): RegExp[] {
  let globs = GLOBS.get(pricing)
  if (globs === undefined) {
    globs = pricing.models.map(m => new RegExp(`^${m.model.split('*').map(part => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`))
    GLOBS.set(pricing, globs)
  }
  return globs
}

/**
 * The rates for a call: the first `models` entry whose glob (`*` any characters) matches
 * the model the provider was asked for or the one it answered with, else the backend-wide
 * rates; null when neither prices it.
 */
export function ratesFor (pricing: AiPricingIR, model: string, responseModel: string | null): AiRatesIR | null {
  const globs = globsOf(pricing)
  for (let i = 0; i < globs.length; i++) {
    const glob = globs[i]!
    if (glob.test(model) || (responseModel !== null && glob.test(responseModel))) return pricing.models[i]!.rates
  }
  return pricing.rates ?? null
}

/** What each kind of token of the answer is priced as (token counts, every one ≥ 0). */
export interface PricedTokens {
  input: number
  cacheRead: number
  cacheWrite: number
  output: number
  reasoning: number
}

/** The answer's tokens split by rate: a part with a rate of its own is taken out of its whole. */
export function pricedTokens (rates: AiRatesIR, usage: LlmUsage): PricedTokens {
  let input = usage.inputTokens ?? 0
  let output = usage.outputTokens ?? 0
  let cacheRead = 0
  let cacheWrite = 0
  let reasoning = 0
  if (rates.cacheRead !== undefined && usage.cachedInputTokens !== undefined) {
    cacheRead = Math.min(usage.cachedInputTokens, input)
    input -= cacheRead
  }
  if (rates.cacheWrite !== undefined && usage.cacheCreationInputTokens !== undefined) {
    cacheWrite = Math.min(usage.cacheCreationInputTokens, input)
    input -= cacheWrite
  }
  if (rates.reasoning !== undefined && usage.reasoningTokens !== undefined) {
    reasoning = Math.min(usage.reasoningTokens, output)
    output -= reasoning
  }
  return { input, cacheRead, cacheWrite, output, reasoning }
}

/** The cost of `usage` at `rates`, in 10^-12 currency units. */
export function costPicos (rates: AiRatesIR, usage: LlmUsage): bigint {
  const t = pricedTokens(rates, usage)
  return BigInt(t.input) * BigInt(rates.input) +
    BigInt(t.cacheRead) * BigInt(rates.cacheRead ?? 0) +
    BigInt(t.cacheWrite) * BigInt(rates.cacheWrite ?? 0) +
    BigInt(t.output) * BigInt(rates.output) +
    BigInt(t.reasoning) * BigInt(rates.reasoning ?? 0)
}

/** The call's cost, or null when the backend's pricing has no rates for its model. */
export function llmCost (pricing: AiPricingIR, model: string, usage: LlmUsage): LlmCost | null {
  const rates = ratesFor(pricing, model, usage.responseModel)
  if (rates === null) return null
  const picos = costPicos(rates, usage)
  return { amount: formatPicos(picos), picos, currency: pricing.currency }
}

/**
 * What `tokens` input tokens of `model` cost at the backend's input rate (the `tokenize: true`
 * estimate checked against cost budgets), or null when nothing prices the model.
 */
export function inputCost (pricing: AiPricingIR, model: string, tokens: number): { picos: bigint, currency: string } | null {
  const rates = ratesFor(pricing, model, null)
  return rates === null ? null : { picos: BigInt(tokens) * BigInt(rates.input), currency: pricing.currency }
}
