import { test } from 'node:test'
import assert from 'node:assert/strict'
import { costPicos, formatPicos, llmCost, parseRate, pricedTokens, ratesFor } from '../src/llm/cost.ts'
import { LlmUsageTap } from '../src/llm/usage.ts'
import type { AiPricingIR, AiRatesIR } from '../src/ir/types.ts'
import type { LlmUsage } from '../src/request/calls.ts'

const rates = (input: string, output: string, extra: Partial<Record<'cacheRead' | 'cacheWrite' | 'reasoning', string>> = {}): AiRatesIR => {
  const r: AiRatesIR = { input: parseRate(input) as number, output: parseRate(output) as number }
  for (const [k, v] of Object.entries(extra)) r[k as 'cacheRead'] = parseRate(v) as number
  return r
}
const usage = (input: number, output: number, parts: Partial<LlmUsage> = {}): LlmUsage => ({ inputTokens: input, outputTokens: output, totalTokens: input + output, responseModel: null, ...parts })

test('rates parse exactly into millionths per million tokens; anything else is refused with the reason', () => {
  assert.equal(parseRate('2.5'), 2_500_000)
  assert.equal(parseRate('0.075'), 75_000)
  assert.equal(parseRate('0.000001'), 1)
  assert.equal(parseRate(' 15 '), 15_000_000)
  assert.equal(parseRate(0.15), 150_000, 'a YAML number, as written')
  for (const bad of ['-1', '1e-7', '0.0000001', 'abc', '', '1.', '.5', 1e-7, -2]) {
    assert.match(String(parseRate(bad)), /is not a price per million tokens/, String(bad))
  }
})

test('costs are exact decimals, however small or large', () => {
  assert.equal(formatPicos(0n), '0')
  assert.equal(formatPicos(1n), '0.000000000001')
  assert.equal(formatPicos(325_000_000n), '0.000325')
  assert.equal(formatPicos(12_500_000_000_000n), '12.5')
  // 10 M tokens at $1,000 per million: beyond 2^53 picos, still exact.
  assert.equal(costPicos(rates('1000', '0'), usage(10_000_000, 0)), 10_000_000_000_000_000n)
  assert.equal(formatPicos(10_000_000_000_000_000n), '10000')
  // 0.1 + 0.2 as floats is 0.30000000000000004; as picos it is 0.3.
  const a = costPicos(rates('0.1', '0'), usage(1_000_000, 0))
  const b = costPicos(rates('0.2', '0'), usage(1_000_000, 0))
  assert.equal(formatPicos(a + b), '0.3')
})

test('gpt-4o-mini prices: input and output, cached input at its own rate and out of the input', () => {
  const mini = rates('0.15', '0.60', { cacheRead: '0.075' })
  // 1,200 input of which 1,024 cached, 300 output.
  const u = usage(1200, 300, { cachedInputTokens: 1024 })
  assert.deepEqual(pricedTokens(mini, u), { input: 176, cacheRead: 1024, cacheWrite: 0, output: 300, reasoning: 0 })
  // 176 × 0.15 + 1024 × 0.075 + 300 × 0.6 (per million) = 26.4 + 76.8 + 180 = 283.2 µ$
  assert.equal(formatPicos(costPicos(mini, u)), '0.0002832')
  // Without a cacheRead rate the cached tokens stay input, at the input rate.
  assert.equal(formatPicos(costPicos(rates('0.15', '0.60'), u)), '0.00036')
})

test('Anthropic prices: cache reads and writes each at their rate; reasoning at its own rate or the output rate', () => {
  const sonnet = rates('3', '15', { cacheRead: '0.3', cacheWrite: '3.75' })
  // Neutral counts: input 1000 + 2000 read + 500 written = 3500; output 500 of which 100 reasoning.
  const u = usage(3500, 500, { cachedInputTokens: 2000, cacheCreationInputTokens: 500, reasoningTokens: 100 })
  // agentgateway's own worked example (without audio): 0.003 + 0.0006 + 0.001875 + 0.0075 (+ reasoning at output 0.0015 kept in output).
  assert.equal(formatPicos(costPicos(sonnet, u)), '0.012975')
  const thinking = { ...sonnet, reasoning: parseRate('20') as number }
  assert.deepEqual(pricedTokens(thinking, u), { input: 1000, cacheRead: 2000, cacheWrite: 500, output: 400, reasoning: 100 })
  assert.equal(formatPicos(costPicos(thinking, u)), '0.013475')
  // Counts the provider got wrong (a part larger than its whole) never go negative.
  assert.deepEqual(pricedTokens(sonnet, usage(10, 5, { cachedInputTokens: 50 })), { input: 0, cacheRead: 10, cacheWrite: 0, output: 5, reasoning: 0 })
  // Unknown counts (null) cost nothing.
  assert.equal(costPicos(sonnet, { inputTokens: null, outputTokens: 7, totalTokens: 7, responseModel: null }), 105_000_000n)
})

test('the first models entry whose glob matches the model sent or answered wins, else the backend-wide rates', () => {
  const pricing: AiPricingIR = {
    currency: 'EUR',
    rates: rates('1', '2'),
    models: [
      { model: 'gpt-4o-mini*', rates: rates('0.15', '0.6') },
      { model: 'gpt-4o*', rates: rates('2.5', '10') },
      { model: 'claude-3.5-sonnet', rates: rates('3', '15') }
    ]
  }
  assert.equal(ratesFor(pricing, 'gpt-4o-mini', null), pricing.models[0]!.rates)
  assert.equal(ratesFor(pricing, 'gpt-4o-2024-08-06', null), pricing.models[1]!.rates)
  assert.equal(ratesFor(pricing, 'whatever', 'gpt-4o-mini-2024-07-18'), pricing.models[0]!.rates, 'the answer\'s model')
  assert.equal(ratesFor(pricing, 'claude-3x5-sonnet', null), pricing.rates, 'a dot is a dot, not any character')
  assert.equal(ratesFor(pricing, 'llama', null), pricing.rates)
  assert.equal(ratesFor({ ...pricing, rates: undefined }, 'llama', null), null)
  assert.deepEqual(llmCost(pricing, 'gpt-4o-mini', usage(1000, 1000)), { amount: '0.00075', picos: 750_000_000n, currency: 'EUR' })
  assert.equal(llmCost({ ...pricing, rates: undefined }, 'llama', usage(1, 1)), null)
})

test('the pass-through tap reads cached, cache-written and reasoning counts of every shape', () => {
  const read = (body: unknown) => {
    const tap = new LlmUsageTap('application/json')
    tap.push(Buffer.from(JSON.stringify(body)))
    return tap.finish()
  }
  // OpenAI chat completions: details inside prompt_tokens / completion_tokens.
  assert.deepEqual(read({ model: 'o3', usage: { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500, prompt_tokens_details: { cached_tokens: 1024 }, completion_tokens_details: { reasoning_tokens: 200 } } }),
    { inputTokens: 1200, outputTokens: 300, totalTokens: 1500, responseModel: 'o3', cachedInputTokens: 1024, reasoningTokens: 200 })
  // OpenAI Responses.
  assert.deepEqual(read({ model: 'o3', usage: { input_tokens: 50, output_tokens: 20, total_tokens: 70, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 5 } } }),
    { inputTokens: 50, outputTokens: 20, totalTokens: 70, responseModel: 'o3', reasoningTokens: 5 }, 'a zero count is left out')
  // Anthropic: cache reads and writes beside input_tokens, added to it as the translated path does.
  assert.deepEqual(read({ model: 'claude', usage: { input_tokens: 1000, cache_read_input_tokens: 2000, cache_creation_input_tokens: 500, output_tokens: 500 } }),
    { inputTokens: 3500, outputTokens: 500, totalTokens: 4000, responseModel: 'claude', cachedInputTokens: 2000, cacheCreationInputTokens: 500 })
  // An Anthropic stream: the cache counts of message_start (the head) are kept with the tail's output.
  const tap = new LlmUsageTap('text/event-stream')
  tap.push(Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"model":"claude","usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":0,"output_tokens":1}}}\n\n'))
  tap.push(Buffer.from('event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":42}}\n\n'))
  assert.deepEqual(tap.finish(), { inputTokens: 100, outputTokens: 42, totalTokens: 142, responseModel: 'claude', cachedInputTokens: 90 })
})
