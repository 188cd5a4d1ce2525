/**
 * Model lists and embeddings between formats (llm/operations.ts), and the client paths of the
 * Gemini and Bedrock formats (llm/formats/index.ts clientEndpoint).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { decodeBedrockEmbeddings, decodeModelList, decodeVertexEmbeddings, encodeBedrockEmbeddings, encodeModelList, encodeVertexEmbeddings } from '../src/llm/operations.ts'
import { clientEndpoint } from '../src/llm/formats/index.ts'
import { isTranslationError } from '../src/llm/canonical.ts'

const ANTHROPIC_LIST = { data: [{ type: 'model', id: 'claude-sonnet-4-6', display_name: 'Claude Sonnet 4.6', created_at: '2026-02-17T00:00:00Z' }], has_more: false, first_id: 'claude-sonnet-4-6', last_id: 'claude-sonnet-4-6' }
const OPENAI_LIST = { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 1721172741, owned_by: 'system' }] }

test('model lists: Anthropic → OpenAI and OpenAI → Anthropic', () => {
  const fromAnthropic = decodeModelList('anthropic', ANTHROPIC_LIST)
  assert.ok(!isTranslationError(fromAnthropic))
  assert.deepEqual(encodeModelList('openai', fromAnthropic, 'anthropic'), { object: 'list', data: [{ id: 'claude-sonnet-4-6', object: 'model', created: 1771286400, owned_by: 'anthropic' }] })
  const fromOpenAI = decodeModelList('openai', OPENAI_LIST)
  assert.ok(!isTranslationError(fromOpenAI))
  assert.deepEqual(encodeModelList('anthropic', fromOpenAI, 'openai'), { data: [{ type: 'model', id: 'gpt-4o-mini', display_name: 'gpt-4o-mini', created_at: '2024-07-16T23:32:21Z' }], has_more: false, first_id: 'gpt-4o-mini', last_id: 'gpt-4o-mini' })
  const broken = decodeModelList('openai', { object: 'list' })
  assert.ok(isTranslationError(broken) && broken.status === 502)
})

test('embeddings → Bedrock: Titan (one text, dimensions on v2), Cohere (texts, input_type); refusals name the field', () => {
  assert.deepEqual(encodeBedrockEmbeddings({ model: 'x', input: 'hello', dimensions: 256, encoding_format: 'float' }, 'amazon.titan-embed-text-v2:0'), { inputText: 'hello', dimensions: 256 })
  assert.deepEqual(encodeBedrockEmbeddings({ input: ['hello'] }, 'amazon.titan-embed-text-v2:0'), { inputText: 'hello' })
  assert.deepEqual(encodeBedrockEmbeddings({ input: ['a', 'b'], user: 'u1' }, 'cohere.embed-english-v3'), { texts: ['a', 'b'], input_type: 'search_query' })
  const refused = (body: Record<string, unknown>, model: string): string | undefined => {
    const out = encodeBedrockEmbeddings(body, model)
    assert.ok(isTranslationError(out), JSON.stringify(out))
    assert.equal(out.status, 400)
    return out.field
  }
  assert.equal(refused({ input: ['a', 'b'] }, 'amazon.titan-embed-text-v2:0'), 'input')
  assert.equal(refused({ input: 'a', dimensions: 256 }, 'amazon.titan-embed-text-v1'), 'dimensions')
  assert.equal(refused({ input: [1, 2, 3] }, 'cohere.embed-english-v3'), 'input')
  assert.equal(refused({ input: 'a' }, 'anthropic.claude-3-haiku'), 'model')
  assert.equal(refused({ input: 'a', extra: true }, 'cohere.embed-english-v3'), 'extra')
})

test('embeddings ← Bedrock: OpenAI\'s answer, floats or base64 float32 (what the openai SDK asks for), tokens from the body or the header', () => {
  const titan = decodeBedrockEmbeddings({ embedding: [0.5, -0.25], inputTextTokenCount: 3 }, { input: 'hi' }, 'amazon.titan-embed-text-v2:0', undefined)
  assert.ok(!isTranslationError(titan))
  assert.deepEqual(titan.body, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5, -0.25] }], model: 'amazon.titan-embed-text-v2:0', usage: { prompt_tokens: 3, total_tokens: 3 } })
  const cohere = decodeBedrockEmbeddings({ id: 'x', embeddings: [[1, 2], [3, 4]], response_type: 'embeddings_floats', texts: ['a', 'b'] }, { input: ['a', 'b'], encoding_format: 'base64' }, 'cohere.embed-english-v3', '7')
  assert.ok(!isTranslationError(cohere))
  assert.equal(cohere.promptTokens, 7)
  const data = (cohere.body.data as Array<{ embedding: string }>)
  const raw = Buffer.from(data[1]!.embedding, 'base64')
  assert.deepEqual([...new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length))], [3, 4])
  assert.ok(isTranslationError(decodeBedrockEmbeddings({ message: 'oops' }, {}, 'cohere.embed-english-v3', undefined)))
})

test('embeddings ↔ Vertex AI :predict', () => {
  assert.deepEqual(encodeVertexEmbeddings({ model: 'text-embedding-005', input: ['a', 'b'], dimensions: 64 }), { instances: [{ content: 'a' }, { content: 'b' }], parameters: { outputDimensionality: 64 } })
  const out = decodeVertexEmbeddings({ predictions: [{ embeddings: { values: [0.1], statistics: { token_count: 2, truncated: false } } }, { embeddings: { values: [0.2], statistics: { token_count: 3, truncated: false } } }], metadata: { billableCharacterCount: 2 } }, { input: ['a', 'b'] }, 'text-embedding-005')
  assert.ok(!isTranslationError(out))
  assert.equal(out.promptTokens, 5)
  assert.deepEqual((out.body.data as Array<{ embedding: number[] }>).map(d => d.embedding), [[0.1], [0.2]])
})

test('client paths: Gemini and Bedrock Converse name the model and the method; others as before', () => {
  assert.deepEqual(clientEndpoint('/v1beta/models/gemini-2.0-flash:generateContent'), { format: 'gemini', operation: 'chat', model: 'gemini-2.0-flash', streaming: false })
  assert.deepEqual(clientEndpoint('/google/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse'), { format: 'gemini', operation: 'chat', model: 'gemini-2.0-flash', streaming: true })
  assert.deepEqual(clientEndpoint('/aws/model/us.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream'), { format: 'bedrock-converse', operation: 'chat', model: 'us.anthropic.claude-3-5-haiku-20241022-v1:0', streaming: true })
  assert.deepEqual(clientEndpoint('/model/amazon.nova-lite-v1%3A0/converse'), { format: 'bedrock-converse', operation: 'chat', model: 'amazon.nova-lite-v1:0', streaming: false })
  assert.equal(clientEndpoint('/v1beta/models').operation, 'models')
  assert.equal(clientEndpoint('/v1/models').operation, 'models')
  // A malformed escape is not a model: an ordinary chat path as before.
  assert.equal(clientEndpoint('/model/%E0%A4%A/converse').format, 'openai-chat')
})
