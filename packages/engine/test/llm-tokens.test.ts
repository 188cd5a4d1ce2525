/**
 * The `tokenize: true` estimate (llm/tokens.ts): o200k_base token counts, checked against
 * js-tiktoken's own encoder and a few known counts, and the cookbook's per-message overhead.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { getEncoding } from 'js-tiktoken'
import { countTokens, estimateEmbeddingTokens, estimatePromptTokens } from '../src/llm/tokens.ts'

const reference = getEncoding('o200k_base')

test('countTokens counts o200k_base tokens, as js-tiktoken does', () => {
  // Known counts with o200k_base.
  assert.equal(countTokens('hello world'), 2)
  assert.equal(countTokens('The quick brown fox jumps over the lazy dog.'), 10)
  assert.equal(countTokens('tiktoken is great!'), 6)
  assert.equal(countTokens(''), 0)
  for (const text of ['hello world', 'Grüße aus Köln — 東京タワー 🚀', '{"type":"object","properties":{"city":{"type":"string"}}}', 'apple '.repeat(90), '  spaces\n\nand\tlines  ']) {
    assert.equal(countTokens(text), reference.encode(text).length, text)
  }
})

test('estimatePromptTokens: the messages\' text, 3 tokens per message (system prompts too), 3 for the reply, tools as JSON', () => {
  const tokens = (s: string): number => reference.encode(s).length
  assert.equal(estimatePromptTokens({ model: 'm', system: [], messages: [], stream: false }), 3)
  const plain = estimatePromptTokens({
    model: 'm',
    system: ['be brief'],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'count to twelve please' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'one two' }, { type: 'tool_call', id: 'c1', name: 'count', input: { to: 12 } }] },
      { role: 'user', content: [{ type: 'tool_result', callId: 'c1', content: [{ type: 'text', text: 'done' }] }] }
    ],
    stream: false
  })
  assert.equal(plain, 3 + (3 + tokens('be brief')) + (3 + tokens('count to twelve please')) + (3 + tokens('one two') + tokens('count') + tokens('{"to":12}')) + (3 + tokens('done')))
  const tools = [{ name: 'weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } }]
  assert.equal(estimatePromptTokens({ model: 'm', system: [], messages: [], tools, stream: false }), 3 + tokens(JSON.stringify(tools)))
})

test('estimateEmbeddingTokens: strings tokenized, token arrays counted', () => {
  assert.equal(estimateEmbeddingTokens('hello world'), 2)
  assert.equal(estimateEmbeddingTokens(['hello world', 'tiktoken is great!']), 8)
  assert.equal(estimateEmbeddingTokens([[1, 2, 3], [4]]), 4)
  assert.equal(estimateEmbeddingTokens(null), 0)
})
