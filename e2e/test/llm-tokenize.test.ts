/**
 * `tokenize: true` on an `ai` backend: before a request is sent, its prompt tokens are
 * estimated (o200k_base) and checked against the route's `localRateLimit` buckets of type
 * `tokens`. A prompt larger than what the bucket holds is answered 429 in the client's own
 * error shape (OpenAI chat, Anthropic Messages) and never reaches the provider; one that fits
 * goes on and the bucket is charged the answer's real usage, as without the estimate. The
 * provider is an OpenAI-compatible server on loopback (one token per word).
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { countTokens, promptTokens, startLlmServer, type LlmServer } from '../lib/llm.ts'

const REPLY = 'one two three four five six seven eight nine ten eleven twelve'
const SMALL = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'count to twelve please' }]
/** About 96 tokens (90 words and the overhead): fits in a full 100-token budget, not in what one exchange leaves. */
const LARGE = [{ role: 'user', content: 'apple '.repeat(90).trim() }]
const BUDGET = 100

describe('ai backends with tokenize: true', () => {
  let llm: LlmServer
  let portico: PorticoProcess

  const post = async (path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    await fetch(`${portico.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

  before(async () => {
    llm = await startLlmServer({ reply: REPLY })
    const ai = (name: string, tokenize: boolean) => ({ name, provider: { openAI: {} }, hostOverride: llm.host, ...(tokenize ? { tokenize: true } : {}) })
    const tokens = { localRateLimit: [{ maxTokens: BUDGET, tokensPerFill: BUDGET, fillInterval: '1h', type: 'tokens' as const }] }
    portico = await startPortico({
      config: (p): ConfigFile => ({
        gateways: { default: gateway(p) },
        routes: [
          { name: 'tok', matches: [{ path: { pathPrefix: '/tok' } }], policies: tokens, backends: [{ ai: ai('tok-llm', true) }] },
          { name: 'tok-anthropic', matches: [{ path: { pathPrefix: '/anthropic' } }], policies: tokens, backends: [{ ai: ai('tok-anthropic-llm', true) }] },
          { name: 'plain', matches: [{ path: { pathPrefix: '/plain' } }], policies: tokens, backends: [{ ai: ai('plain-llm', false) }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await llm?.close()
  })

  test('a prompt that fits goes on and is charged its real usage; a larger one is refused with 429 before the provider sees it', { timeout: 15_000 }, async () => {
    const small = await post('/tok/v1/chat/completions', { model: 'gpt-test', messages: SMALL })
    assert.equal(small.status, 200, await small.clone().text())
    const answer = await small.json() as { usage: { total_tokens: number } }
    const cost = promptTokens(SMALL) + countTokens(REPLY)
    assert.equal(answer.usage.total_tokens, cost)
    const seen = llm.bodies.length

    const refused = await post('/tok/v1/chat/completions', { model: 'gpt-test', messages: LARGE })
    assert.equal(refused.status, 429)
    assert.equal(llm.bodies.length, seen, 'the provider never saw the refused request')
    // The bucket was charged the answer's real usage (18), not the estimate, not twice.
    assert.equal(refused.headers.get('x-ratelimit-remaining'), String(BUDGET - cost))
    assert.equal(refused.headers.get('x-ratelimit-limit'), String(BUDGET))
    const retry = Number(refused.headers.get('retry-after'))
    assert.ok(retry > 3000 && retry <= 3600, `retry-after is the time to the next fill: ${retry}`)
    assert.match(refused.headers.get('content-type') ?? '', /application\/json/)
    const body = await refused.json() as { error: { type: string, code: string | null, message: string } }
    // OpenAI's own shape for a rate limit (what its SDKs turn into RateLimitError).
    assert.equal(body.error.code, 'rate_limit_exceeded', JSON.stringify(body))
    assert.match(body.error.message, /the prompt is about \d+ tokens and the token budget holds 82/)

    // The estimate takes nothing: a small request still fits and goes on.
    const again = await post('/tok/v1/chat/completions', { model: 'gpt-test', messages: SMALL })
    assert.equal(again.status, 200)
    assert.equal(llm.bodies.length, seen + 1)
  })

  test('an Anthropic Messages client gets Anthropic\'s error shape', { timeout: 15_000 }, async () => {
    const seen = llm.bodies.length
    const anthropic = { 'anthropic-version': '2023-06-01' }
    // A small one is translated, sent and charged its real usage (100 → 82).
    const ok = await post('/anthropic/v1/messages', { model: 'claude-test', max_tokens: 50, system: 'be brief', messages: [{ role: 'user', content: 'count to twelve please' }] }, anthropic)
    assert.equal(ok.status, 200, await ok.clone().text())
    assert.equal(llm.bodies.length, seen + 1)

    const refused = await post('/anthropic/v1/messages', { model: 'claude-test', max_tokens: 50, messages: LARGE }, anthropic)
    assert.equal(refused.status, 429)
    assert.equal(llm.bodies.length, seen + 1, 'the provider never saw the refused request')
    const body = await refused.json() as { type: string, error: { type: string, message: string } }
    assert.equal(body.type, 'error', JSON.stringify(body))
    assert.equal(body.error.type, 'rate_limit_error')
    assert.match(body.error.message, /the prompt is about \d+ tokens and the token budget holds 82/)
  })

  test('a prompt above maxTokens can never fit: 429 without retry-after', { timeout: 15_000 }, async () => {
    const refused = await post('/anthropic/v1/messages', { model: 'claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'apple '.repeat(500).trim() }] })
    assert.equal(refused.status, 429)
    assert.equal(refused.headers.get('retry-after'), null)
    const body = await refused.json() as { error: { message: string } }
    assert.match(body.error.message, /more than the token budget's maxTokens 100/)
  })

  test('without tokenize the same large prompt is admitted (the bucket is not empty) and charged afterwards', { timeout: 15_000 }, async () => {
    const seen = llm.bodies.length
    const res = await post('/plain/v1/chat/completions', { model: 'gpt-test', messages: LARGE })
    assert.equal(res.status, 200)
    assert.equal(llm.bodies.length, seen + 1)
  })
})
