/**
 * The OpenAI emulator (e2e/lib/llm-emulators/openai.ts) checked by the official `openai`
 * SDK talking to it directly — OpenAI and AzureOpenAI clients: what the SDK accepts from the
 * emulator is what Portico must produce and consume.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import OpenAI, { AzureOpenAI } from 'openai'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { setForTest } from '@portico/testkit/for-test'

const TOOLS = [
  { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }
]

describe('OpenAI emulator, checked by the openai SDK', () => {
  let emu: OpenAIEmulator
  let client: OpenAI

  before(async () => {
    emu = await startOpenAIEmulator({ apiKey: 'sk-test-portico', azureKey: 'azure-test-key' })
    client = new OpenAI({ apiKey: 'sk-test-portico', baseURL: `${emu.url}/v1`, maxRetries: 0 })
  })
  after(async () => { await emu?.close() })

  test('chat, streamed chat with usage, tool calls streamed and whole', async () => {
    const c = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    assert.equal(c.usage?.total_tokens, 29)
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(text, 'Hello! How can I help — ünïcode?')
    assert.equal(usage?.prompt_tokens, 9)
    const runner = client.chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'weather and time?' }], tools: TOOLS })
    const final = await runner.finalChatCompletion()
    assert.deepEqual(final.choices[0]!.message.tool_calls?.map(t => t.type === 'function' ? [t.function.name, JSON.parse(t.function.arguments)] : null), [['get_weather', { city: 'Paris' }], ['get_time', { city: 'Paris' }]])
    const whole = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'weather?' }], tools: TOOLS })
    assert.equal(whole.choices[0]!.finish_reason, 'tool_calls')
  })

  test('moderations: one result per string, flagged categories, every omni-moderation field the SDK types', async () => {
    const one = await client.moderations.create({ model: 'omni-moderation-latest', input: 'a calm sentence' })
    assert.match(one.id, /^modr-/)
    assert.equal(one.model, 'omni-moderation-2024-09-26')
    assert.equal(one.results.length, 1)
    assert.equal(one.results[0]!.flagged, false)
    const many = await client.moderations.create({ input: ['fine', 'not fine [flag:violence]'] })
    assert.deepEqual(many.results.map(r => r.flagged), [false, true])
    const r = many.results[1]!
    assert.equal(r.categories.violence, true)
    assert.equal(r.categories.hate, false)
    assert.ok(r.category_scores.violence > 0.5)
    assert.deepEqual(r.category_applied_input_types['sexual/minors'], ['text'])
    assert.deepEqual(Object.keys(r.categories).sort(), Object.keys(r.category_scores).sort())
    const multi = await client.moderations.create({ input: [{ type: 'text', text: 'x [flag:harassment]' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] })
    assert.equal(multi.results.length, 1)
    assert.equal(multi.results[0]!.categories.harassment, true)
    await assert.rejects(client.moderations.create({ input: 42 as unknown as string }), (err: unknown) => err instanceof OpenAI.BadRequestError)
    const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${emu.url}/v1`, maxRetries: 0 })
    await assert.rejects(wrong.moderations.create({ input: 'x' }), (err: unknown) => err instanceof OpenAI.AuthenticationError)
  })

  test('a scripted answer: one chunk per piece, or the pieces joined', async t => {
    setForTest(t, emu, 'script', ['Write to jane.ro', 'e@example.com today'])
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    const deltas: string[] = []
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas.push(chunk.choices[0].delta.content)
    assert.deepEqual(deltas, ['Write to jane.ro', 'e@example.com today'])
    const whole = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(whole.choices[0]!.message.content, 'Write to jane.roe@example.com today')
  })

  test('errors: the SDK\'s typed errors with the recorded status', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'error-rate-limit', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => err instanceof OpenAI.RateLimitError && /Rate limit reached/.test(err.message))
    const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${emu.url}/v1`, maxRetries: 0 })
    await assert.rejects(wrong.models.list(), (err: unknown) => err instanceof OpenAI.AuthenticationError)
  })

  test('the Responses API, whole and streamed', async () => {
    const r = await client.responses.create({ model: 'gpt-4.1', input: 'hi' })
    assert.equal(r.output_text, 'Hello there!')
    assert.equal(r.usage?.total_tokens, 15)
    const stream = await client.responses.create({ model: 'gpt-4.1', input: 'hi', stream: true })
    let text = ''
    let done: OpenAI.Responses.Response | undefined
    for await (const e of stream) {
      if (e.type === 'response.output_text.delta') text += e.delta
      if (e.type === 'response.completed') done = e.response
    }
    assert.equal(text, 'Hello there!')
    assert.equal(done?.usage?.output_tokens, 3)
  })

  test('models and embeddings', async () => {
    const models = await client.models.list()
    assert.ok(models.data.some(m => m.id === 'gpt-4o-mini'))
    const e = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] })
    assert.equal(e.data.length, 2)
  })

  test('Azure: the AzureOpenAI client on deployment paths with api-version, and the v1 API', async () => {
    const azure = new AzureOpenAI({ endpoint: emu.url, apiKey: 'azure-test-key', apiVersion: '2024-10-21', deployment: 'gpt4o-deploy', maxRetries: 0 })
    const c = await azure.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    const seen = emu.received.at(-1)!
    assert.equal(seen.url, '/openai/deployments/gpt4o-deploy/chat/completions?api-version=2024-10-21')
    assert.equal(seen.headers['api-key'], 'azure-test-key')
    const v1 = new OpenAI({ apiKey: 'unused', baseURL: `${emu.url}/openai/v1`, defaultHeaders: { 'api-key': 'azure-test-key' }, maxRetries: 0 })
    assert.equal((await v1.chat.completions.create({ model: 'gpt4o-deploy', messages: [{ role: 'user', content: 'hi' }] })).choices[0]!.message.content, 'Hello!')
    const bad = new AzureOpenAI({ endpoint: emu.url, apiKey: 'nope', apiVersion: '2024-10-21', deployment: 'd', maxRetries: 0 })
    await assert.rejects(bad.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => err instanceof OpenAI.AuthenticationError)
  })
})
