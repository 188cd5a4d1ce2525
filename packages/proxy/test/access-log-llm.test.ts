/**
 * The access-log line of an LLM call: OpenTelemetry's gen_ai names, and both wire formats
 * when the call was translated (the client's and the provider's), so a line tells which
 * requests paid for a translation.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { accessLogFields } from '../src/access-log.ts'

function ctx (inputFormat: string, providerFormat: string): never {
  return {
    listener: { ir: { gateway: 'default/portico', name: 'http' } },
    routeKey: 'default/chat',
    backend: { name: 'default/claude' },
    sourceAddress: '127.0.0.1',
    method: 'POST',
    host: 'gw',
    originalPath: '/v1/chat/completions',
    status: 200,
    reason: 'Upstream',
    startMono: performance.now(),
    mcp: null,
    grpc: null,
    error: null,
    span: null,
    modelChoice: null,
    inferencePick: null,
    llm: {
      system: 'anthropic', operation: 'chat', inputFormat, providerFormat, requestModel: 'claude', model: 'claude-sonnet-4-6',
      streaming: true, firstChunkAt: 0, usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15, responseModel: 'claude-sonnet-4-6-20260101' }
    }
  } as never
}

test('a translated LLM call logs its operation, provider and both wire formats', () => {
  const fields = accessLogFields(ctx('openai-chat', 'anthropic-messages'))
  assert.equal(fields['gen_ai.operation.name'], 'chat')
  assert.equal(fields['gen_ai.provider.name'], 'anthropic')
  assert.equal(fields['gen_ai.request.model'], 'claude-sonnet-4-6')
  assert.equal(fields['gen_ai.response.model'], 'claude-sonnet-4-6-20260101')
  assert.equal(fields['gen_ai.usage.input_tokens'], 10)
  assert.equal(fields['gen_ai.usage.output_tokens'], 5)
  assert.equal(fields['portico.llm.input_format'], 'openai-chat')
  assert.equal(fields['portico.llm.provider_format'], 'anthropic-messages')
})

test('a passed-through LLM call names no formats (nothing was translated)', () => {
  const fields = accessLogFields(ctx('anthropic-messages', 'anthropic-messages'))
  assert.equal(fields['gen_ai.provider.name'], 'anthropic')
  assert.equal('portico.llm.input_format' in fields, false)
  assert.equal('portico.llm.provider_format' in fields, false)
})

test('a priced call logs its cost and currency; an unpriced one neither', () => {
  const priced = ctx('openai-chat', 'openai-chat') as unknown as { llm: Record<string, unknown> }
  priced.llm.cost = { amount: '0.0002832', picos: 283_200_000n, currency: 'USD' }
  const fields = accessLogFields(priced as never)
  assert.equal(fields['portico.llm.cost'], 0.0002832)
  assert.equal(fields['portico.llm.currency'], 'USD')
  assert.equal(JSON.stringify(fields).includes('"portico.llm.cost":0.0002832'), true, 'a plain number in the JSON line')
  const unpriced = accessLogFields(ctx('openai-chat', 'openai-chat'))
  assert.equal('portico.llm.cost' in unpriced, false)
})
