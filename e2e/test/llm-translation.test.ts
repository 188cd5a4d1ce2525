/**
 * Translation through an `ai` backend, with the official `openai` SDK as the client and the
 * OpenAI emulator (e2e/lib/llm-emulators/openai.ts) as the provider:
 *
 * - a `custom` provider of format openai-chat forces the whole translation path (the
 *   request decoded into the neutral shape and encoded again, the answer and each stream
 *   event decoded and re-encoded): chat, streaming event by event (the first chunk reaches
 *   the client before the provider sends the last), tools (parallel, streamed), structured
 *   output, refusals naming the field, provider errors in the client's shape, usage counted;
 * - Azure OpenAI (deployment paths with api-version, and the v1 API; the key in `api-key`),
 *   with the AzureOpenAI client and with a plain OpenAI client through the same route;
 * - models and embeddings passed to an OpenAI provider.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import OpenAI, { AzureOpenAI } from 'openai'
import { zodResponseFormat } from 'openai/helpers/zod'
import { z } from 'zod'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { setForTest } from '@portico/testkit/for-test'

const TOOLS = [
  { type: 'function' as const, function: { name: 'get_weather', description: 'Current weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }
]
const HI = [{ role: 'system' as const, content: 'be brief' }, { role: 'user' as const, content: 'hi' }]

describe('ai backends: translation', () => {
  let emu: OpenAIEmulator
  let portico: PorticoProcess
  let admin: string

  const client = (path: string): OpenAI => new OpenAI({ apiKey: 'sk-client', baseURL: `${portico.url}${path}`, maxRetries: 0 })

  before(async () => {
    emu = await startOpenAIEmulator({ apiKey: 'sk-test-portico', azureKey: 'azure-test-key' })
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          {
            name: 'custom',
            matches: [{ path: { pathPrefix: '/custom' } }],
            backends: [{ ai: { name: 'custom-llm', provider: { custom: { format: 'openai-chat' } }, hostOverride: emu.url }, policies: { backendAuth: { key: 'sk-test-portico' } } }]
          },
          {
            name: 'openai',
            matches: [{ path: { pathPrefix: '/openai' } }],
            backends: [{ ai: { name: 'openai-llm', provider: { openAI: {} }, hostOverride: emu.url }, policies: { backendAuth: { key: 'sk-test-portico' } } }]
          },
          {
            name: 'azure',
            matches: [{ path: { pathPrefix: '/azure' } }],
            backends: [{ ai: { name: 'azure-llm', provider: { azure: { deploymentName: 'gpt4o-deploy', apiVersion: '2024-10-21' } }, hostOverride: emu.url }, policies: { backendAuth: { key: 'azure-test-key' } } }]
          },
          {
            name: 'azure-v1',
            matches: [{ path: { pathPrefix: '/azure-v1' } }],
            backends: [{ ai: { name: 'azure-v1-llm', provider: { azure: { deploymentName: 'gpt4o-deploy' } }, hostOverride: emu.url }, policies: { backendAuth: { key: 'azure-test-key' } } }]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await emu?.close()
  })

  test('custom (translated both ways): a chat completion, its usage counted from the neutral usage', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/custom/chat/completions')
    await trace.ready
    const c = await client('/custom').chat.completions.create({ model: 'gpt-4o-mini', messages: HI, max_tokens: 20, temperature: 0.2 })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    assert.equal(c.object, 'chat.completion')
    assert.deepEqual(c.usage && { p: c.usage.prompt_tokens, c: c.usage.completion_tokens, t: c.usage.total_tokens }, { p: 19, c: 10, t: 29 })
    const seen = emu.received.at(-1)!
    assert.deepEqual(seen.body, { model: 'gpt-4o-mini', messages: HI, max_tokens: 20, temperature: 0.2 }, 'the provider got the re-encoded request')
    assert.equal(seen.headers.authorization, 'Bearer sk-test-portico')
    const events = await trace.done
    const request = events.find(e => e.message.type === 'llmRequest')!.message
    assert.equal(request.inputFormat, 'openai-chat')
    assert.equal(request.provider, 'custom')
    const response = events.find(e => e.message.type === 'llmResponse')!.message
    assert.deepEqual(response, { type: 'llmResponse', responseModel: 'gpt-4o-mini-2024-07-18', inputTokens: 19, outputTokens: 10, totalTokens: 29 })
  })

  test('custom: a stream is translated event by event — the first chunk reaches the client before the provider sends the rest', { timeout: 15_000 }, async t => {
    let release!: () => void
    let releasedByTimer = false
    const held = new Promise<void>(resolve => {
      release = resolve
      setTimeout(() => { releasedByTimer = true; resolve() }, 5000).unref()
    })
    setForTest(t, emu, 'gate', async () => await held)
    const stream = await client('/custom').chat.completions.create({ model: 'gpt-4o-mini', messages: HI, stream: true })
    let text = ''
    let usage: OpenAI.CompletionUsage | undefined
    let finish: string | null = null
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content ?? ''
      if (delta !== '' && text === '') release()
      text += delta
      if (chunk.choices[0]?.finish_reason != null) finish = chunk.choices[0].finish_reason
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(releasedByTimer, false, 'the first token arrived while the provider held the rest back')
    assert.equal(text, 'Hello! How can I help — ünïcode?')
    assert.equal(finish, 'stop')
    assert.equal(usage?.total_tokens, 17)
    assert.deepEqual(emu.received.at(-1)!.body!.stream_options, { include_usage: true })
  })

  test('custom: tool calls, whole and streamed (parallel), and tool results sent back', { timeout: 15_000 }, async () => {
    const whole = await client('/custom').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'weather and time in Paris?' }], tools: TOOLS, tool_choice: 'auto' })
    const calls = whole.choices[0]!.message.tool_calls!
    assert.equal(whole.choices[0]!.finish_reason, 'tool_calls')
    assert.deepEqual(calls.map(c => c.type === 'function' ? [c.id, c.function.name, JSON.parse(c.function.arguments)] : null), [['call_w1', 'get_weather', { city: 'Paris' }], ['call_t1', 'get_time', { city: 'Paris' }]])
    const runner = client('/custom').chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'weather and time?' }], tools: TOOLS })
    const final = await runner.finalChatCompletion()
    assert.deepEqual(final.choices[0]!.message.tool_calls?.map(t => t.type === 'function' ? [t.function.name, JSON.parse(t.function.arguments)] : null), [['get_weather', { city: 'Paris' }], ['get_time', { city: 'Paris' }]])
    const answer = await client('/custom').chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'weather and time in Paris?' }, whole.choices[0]!.message, { role: 'tool', tool_call_id: 'call_w1', content: '18°C' }, { role: 'tool', tool_call_id: 'call_t1', content: '14:05' }],
      tools: TOOLS
    })
    assert.equal(answer.choices[0]!.message.content, 'Hello!')
    const sent = emu.received.at(-1)!.body!.messages as Array<Record<string, unknown>>
    assert.deepEqual(sent.slice(2), [{ role: 'tool', tool_call_id: 'call_w1', content: '18°C' }, { role: 'tool', tool_call_id: 'call_t1', content: '14:05' }])
  })

  test('custom: structured output (json_schema) goes through and parses', { timeout: 15_000 }, async () => {
    const c = await client('/custom').chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Extract: Alice is 30.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false } } }
    })
    assert.deepEqual(JSON.parse(c.choices[0]!.message.content!), { name: 'Alice', age: 30 })
    assert.equal((emu.received.at(-1)!.body!.response_format as { type: string }).type, 'json_schema')
    // The SDK's own structured-output helper (a zod schema, strict json_schema, parsed answer).
    const parsed = await client('/custom').chat.completions.parse({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Extract: Alice is 30.' }],
      response_format: zodResponseFormat(z.object({ name: z.string(), age: z.number().int() }), 'person')
    })
    assert.deepEqual(parsed.choices[0]!.message.parsed, { name: 'Alice', age: 30 })
    const sent = emu.received.at(-1)!.body!.response_format as { json_schema: { name: string, strict: boolean, schema: { required: string[] } } }
    assert.deepEqual([sent.json_schema.name, sent.json_schema.strict, sent.json_schema.schema.required], ['person', true, ['name', 'age']])
  })

  test('custom: what cannot be translated is a 400 naming the field; provider errors come back in OpenAI\'s shape and status', { timeout: 15_000 }, async () => {
    const before = emu.received.length
    await assert.rejects(client('/custom').chat.completions.create({ model: 'gpt-4o-mini', messages: HI, n: 2 }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === 'n' && /n = 2/.test(err.message))
    await assert.rejects(client('/custom').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } }] }] }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === 'messages[0].content[0].type')
    assert.equal(emu.received.length, before, 'refused before the provider saw them')
    await assert.rejects(client('/custom').chat.completions.create({ model: 'error-rate-limit', messages: HI }),
      (err: unknown) => err instanceof OpenAI.RateLimitError && /Rate limit reached/.test(err.message))
    await assert.rejects(client('/custom').chat.completions.create({ model: 'error-overloaded', messages: HI, stream: true }),
      (err: unknown) => err instanceof OpenAI.InternalServerError && err.status === 503)
  })

  test('custom, hostile provider: a 200 carrying an error, a stream cut mid-tool-call — clean OpenAI-shaped errors', { timeout: 15_000 }, async () => {
    await assert.rejects(client('/custom').chat.completions.create({ model: 'error-in-200', messages: HI }),
      (err: unknown) => err instanceof OpenAI.APIError && err.status === 502 && /error while processing/.test(err.message))
    const stream = await client('/custom').chat.completions.create({ model: 'cut-mid-tool-call', messages: HI, tools: TOOLS, stream: true })
    const seen: string[] = []
    await assert.rejects((async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.tool_calls?.[0]?.function?.name ?? '')
    })(), (err: unknown) => err instanceof OpenAI.APIError && /invalid answer from the provider/.test(err.message))
    assert.ok(seen.includes('get_weather'), 'the part before the cut reached the client')
    // A whole answer to a stream request still reaches the SDK as a stream.
    const whole = await client('/custom').chat.completions.create({ model: 'ignores-stream', messages: HI, stream: true })
    let text = ''
    for await (const chunk of whole) text += chunk.choices[0]?.delta.content ?? ''
    assert.equal(text, 'Hello!')
    // Others are unaffected.
    assert.equal((await client('/custom').chat.completions.create({ model: 'gpt-4o-mini', messages: HI })).choices[0]!.message.content, 'Hello!')
  })

  test('openAI and azure: a Responses API client is passed through to the provider\'s Responses endpoint, its usage counted', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/openai/v1/responses')
    await trace.ready
    const r = await client('/openai/v1').responses.create({ model: 'gpt-4.1', input: 'hi' })
    assert.equal(r.output_text, 'Hello there!')
    assert.equal(emu.received.at(-1)!.url, '/v1/responses')
    const events = await trace.done
    const request = events.find(e => e.message.type === 'llmRequest')!.message
    assert.deepEqual([request.inputFormat, request.providerFormat], ['openai-responses', 'openai-responses'])
    assert.deepEqual(events.find(e => e.message.type === 'llmResponse')!.message, { type: 'llmResponse', responseModel: 'gpt-4.1-2025-04-14', inputTokens: 12, outputTokens: 3, totalTokens: 15 })
    const stream = await client('/azure').responses.create({ model: 'gpt-4.1', input: 'hi', stream: true })
    let text = ''
    for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta
    assert.equal(text, 'Hello there!')
    assert.equal(emu.received.at(-1)!.url, '/openai/responses?api-version=2024-10-21')
  })

  test('openAI: models and embeddings pass through to the provider\'s paths', { timeout: 15_000 }, async () => {
    const models = await client('/openai/v1').models.list()
    assert.ok(models.data.some(m => m.id === 'gpt-4o-mini'))
    assert.equal(emu.received.at(-1)!.url, '/v1/models')
    const e = await client('/openai/v1').embeddings.create({ model: 'text-embedding-3-small', input: 'a' })
    assert.equal(e.data.length, 1)
    assert.equal(emu.received.at(-1)!.url, '/v1/embeddings')
  })

  test('azure: deployment paths with api-version and the api-key header, for the AzureOpenAI client and a plain OpenAI one', { timeout: 15_000 }, async () => {
    const azure = new AzureOpenAI({ endpoint: `${portico.url}/azure`, apiKey: 'client-key', apiVersion: '2025-01-01-preview', deployment: 'whatever', maxRetries: 0 })
    const c = await azure.chat.completions.create({ model: 'gpt-4o-mini', messages: HI })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    let seen = emu.received.at(-1)!
    assert.equal(seen.url, '/openai/deployments/gpt4o-deploy/chat/completions?api-version=2024-10-21', 'the backend\'s deployment and api-version')
    assert.equal(seen.headers['api-key'], 'azure-test-key')
    assert.equal(seen.headers.authorization, undefined, 'the client\'s Authorization does not reach Azure')
    const stream = await client('/azure').chat.completions.create({ model: 'gpt-4o-mini', messages: HI, stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    assert.equal(text, 'Hello! How can I help — ünïcode?')
    const v1 = await client('/azure-v1').chat.completions.create({ model: 'gpt-4o-mini', messages: HI })
    assert.equal(v1.choices[0]!.message.content, 'Hello!')
    seen = emu.received.at(-1)!
    assert.equal(seen.url, '/openai/v1/chat/completions')
    assert.equal(seen.body!.model, 'gpt4o-deploy')
    assert.equal(seen.headers['api-key'], 'azure-test-key')
    const dump = await (await fetch(`${admin}/config_dump`)).text()
    assert.doesNotMatch(dump, /azure-test-key|sk-test-portico/, 'keys are redacted in /config_dump')
  })
})
