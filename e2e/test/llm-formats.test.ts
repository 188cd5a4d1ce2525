/**
 * Client formats and operations beyond chat completions / Responses / Messages, end to end: the
 * real gateway, the emulators of e2e/lib/llm-emulators/ as providers (each checked by its own
 * SDK), the official SDKs as clients.
 *
 * - Model lists: the openai SDK's `models.list()` from an Anthropic provider (Anthropic's list
 *   in OpenAI's shape), the Anthropic SDK's `models.list()` from OpenAI and Gemini providers (in
 *   Anthropic's shape) and passed through from Anthropic; Bedrock's refusal in OpenAI's shape.
 * - Embeddings: Gemini (its OpenAI-compatible endpoint, passed through), Bedrock (InvokeModel,
 *   Titan and Cohere, translated; the openai SDK's default base64 encoding), Anthropic (refused).
 * - Gemini-format clients (`@google/genai`, base URL → Portico) and Bedrock-format clients
 *   (`@aws-sdk/client-bedrock-runtime`, endpoint → Portico, dummy credentials: Portico
 *   authenticates clients by its own policies) to an OpenAI provider: whole answers, streams
 *   (Gemini SSE, Bedrock's binary event stream), tool calls, errors.
 * - A Responses-only server (`custom` of format openai-responses): chat completions and Anthropic
 *   Messages clients translated to `/v1/responses` and back, whole and streamed.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI, ApiError, type GenerateContentResponse } from '@google/genai'
import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand, type ConverseStreamOutput } from '@aws-sdk/client-bedrock-runtime'
import type { ConfigFile } from '@portico/engine'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { startGeminiEmulator, type GeminiEmulator } from '../lib/llm-emulators/gemini.ts'
import { BEDROCK_TEST_CREDENTIALS, startBedrockEmulator, type BedrockEmulator } from '../lib/llm-emulators/bedrock.ts'

const OPENAI_KEY = 'sk-test-portico'
const CLIENT_KEY = 'sk-client-not-for-providers'

describe('model lists, embeddings, Gemini- and Bedrock-format clients through Portico', () => {
  let openaiEmu: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let geminiEmu: GeminiEmulator
  let bedrockEmu: BedrockEmulator
  let portico: PorticoProcess

  const openai = (path: string): OpenAI => new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const anthropic = (path: string): Anthropic => new Anthropic({ apiKey: CLIENT_KEY, baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const genai = (path: string): GoogleGenAI => new GoogleGenAI({ apiKey: 'AIza-client-not-for-providers', httpOptions: { baseUrl: `${portico.url}${path}`, apiVersion: 'v1beta' } })
  const bedrock = (path: string): BedrockRuntimeClient => new BedrockRuntimeClient({ region: 'us-east-1', endpoint: `${portico.url}${path}`, credentials: { accessKeyId: 'AKIDCLIENTDUMMY', secretAccessKey: 'client-dummy-secret' }, maxAttempts: 1 })

  before(async () => {
    openaiEmu = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY })
    geminiEmu = await startGeminiEmulator()
    bedrockEmu = await startBedrockEmulator()
    portico = await startPortico({
      env: { LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'anthropic', matches: [{ path: { pathPrefix: '/anthropic' } }], backends: [{ ai: { name: 'anthropic-llm', provider: { anthropic: {} }, hostOverride: anthropicEmu.url }, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }] },
          { name: 'openai', matches: [{ path: { pathPrefix: '/openai' } }], backends: [{ ai: { name: 'openai-llm', provider: { openAI: {} }, hostOverride: openaiEmu.url }, policies: { backendAuth: { key: OPENAI_KEY } } }] },
          { name: 'openai-fixed', matches: [{ path: { pathPrefix: '/fixed' } }], backends: [{ ai: { name: 'openai-fixed', provider: { openAI: { model: 'gpt-4o-mini' } }, hostOverride: openaiEmu.url }, policies: { backendAuth: { key: OPENAI_KEY } } }] },
          { name: 'gemini', matches: [{ path: { pathPrefix: '/gemini' } }], backends: [{ ai: { name: 'gemini-llm', provider: { gemini: {} }, hostOverride: geminiEmu.url }, policies: { backendAuth: { key: geminiEmu.apiKey } } }] },
          { name: 'bedrock', matches: [{ path: { pathPrefix: '/bedrock' } }], backends: [{ ai: { name: 'bedrock-llm', provider: { bedrock: { region: 'us-east-1' } }, hostOverride: bedrockEmu.url }, policies: { backendAuth: { aws: { accessKeyId: BEDROCK_TEST_CREDENTIALS.accessKeyId, secretAccessKey: BEDROCK_TEST_CREDENTIALS.secretAccessKey } } } }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await openaiEmu?.close()
    await anthropicEmu?.close()
    await geminiEmu?.close()
    await bedrockEmu?.close()
  })

  test('openai SDK models.list from Anthropic: Anthropic\'s list in OpenAI\'s shape', { timeout: 15_000 }, async () => {
    const models = await openai('/anthropic/v1').models.list()
    assert.deepEqual(models.data.map(m => [m.id, m.object, m.owned_by, m.created]), [['claude-sonnet-4-6', 'model', 'anthropic', 1771286400], ['claude-haiku-4-5', 'model', 'anthropic', 1760486400]])
    assert.equal(anthropicEmu.headers.at(-1)!['x-api-key'], ANTHROPIC_TEST_KEY)
  })

  test('anthropic SDK models.list: from OpenAI and Gemini in Anthropic\'s shape, from Anthropic passed through', { timeout: 15_000 }, async () => {
    const fromOpenAI = await anthropic('/openai').models.list()
    assert.deepEqual(fromOpenAI.data.map(m => [m.id, m.type, m.display_name, m.created_at]), [['gpt-4o-mini', 'model', 'gpt-4o-mini', '2024-07-16T23:32:21Z'], ['text-embedding-3-small', 'model', 'text-embedding-3-small', '2024-01-22T18:43:17Z']])
    assert.equal(openaiEmu.received.at(-1)!.url, '/v1/models')
    assert.equal(openaiEmu.received.at(-1)!.headers.authorization, `Bearer ${OPENAI_KEY}`)
    const fromGemini = await anthropic('/gemini').models.list()
    assert.deepEqual(fromGemini.data.map(m => m.id), ['models/gemini-2.5-flash', 'models/gemini-embedding-001'])
    const fromAnthropic = await anthropic('/anthropic').models.list()
    assert.deepEqual(fromAnthropic.data.map(m => m.display_name), ['Claude Sonnet 4.6', 'Claude Haiku 4.5'])
  })

  test('Bedrock has no model list and Anthropic no embeddings: 404 in the client\'s error shape, nothing sent', { timeout: 15_000 }, async () => {
    const before = bedrockEmu.calls.length
    await assert.rejects(openai('/bedrock/v1').models.list(), (e: unknown) => e instanceof OpenAI.NotFoundError && /Bedrock Runtime has no model list/.test(e.message))
    await assert.rejects(anthropic('/bedrock').models.list(), (e: unknown) => e instanceof Anthropic.NotFoundError && /no model list/.test(e.message))
    assert.equal(bedrockEmu.calls.length, before)
    await assert.rejects(openai('/anthropic/v1').embeddings.create({ model: 'voyage-3', input: 'x' }), (e: unknown) => e instanceof OpenAI.NotFoundError && /Anthropic has no embeddings API/.test(e.message))
  })

  test('openai SDK → gemini: models and embeddings at the Gemini API\'s OpenAI-compatible endpoints, the key from backendAuth', { timeout: 15_000 }, async () => {
    const models = await openai('/gemini/v1').models.list()
    assert.ok(models.data.some(m => m.id === 'models/gemini-2.5-flash'))
    const e = await openai('/gemini/v1').embeddings.create({ model: 'gemini-embedding-001', input: ['a', 'b'], encoding_format: 'float' })
    assert.deepEqual(e.data.map(d => d.embedding), [[0.0125, -0.03, 0.5], [0.0125, -0.03, 0.5]])
    const call = geminiEmu.openaiCalls.at(-1)!
    assert.equal(call.headers['x-goog-api-key'], geminiEmu.apiKey)
    assert.equal(call.headers.authorization, undefined)
    assert.deepEqual(call.body, { model: 'gemini-embedding-001', input: ['a', 'b'], encoding_format: 'float' })
    await waitFor(() => portico.logs().some(l => l.route === 'gemini' && l['gen_ai.usage.input_tokens'] === 8))
  })

  test('openai SDK → bedrock embeddings: InvokeModel Titan and Cohere, base64 vectors as the SDK asks, usage counted; refusals name the field', { timeout: 15_000 }, async () => {
    // The SDK sends encoding_format: base64 unless told otherwise, and decodes the vectors itself.
    const titan = await openai('/bedrock/v1').embeddings.create({ model: 'amazon.titan-embed-text-v2:0', input: 'hello there world', dimensions: 3 })
    assert.deepEqual(titan.data[0]!.embedding, [0.125, 0.25, 0.375])
    assert.equal(titan.usage.prompt_tokens, 3)
    const call = bedrockEmu.calls.at(-1)!
    assert.equal(call.operation, 'invoke')
    assert.equal(call.auth, 'sigv4')
    assert.deepEqual(call.body, { inputText: 'hello there world', dimensions: 3 })
    const cohere = await openai('/bedrock/v1').embeddings.create({ model: 'cohere.embed-english-v3', input: ['a b', 'c'], encoding_format: 'float' })
    assert.equal(cohere.data.length, 2)
    assert.deepEqual(cohere.data[1]!.embedding, [1.125, 1.25, 1.375, 1.5])
    assert.equal(cohere.usage.prompt_tokens, 3, 'from x-amzn-bedrock-input-token-count')
    await waitFor(() => portico.logs().some(l => l.route === 'bedrock' && l['gen_ai.usage.input_tokens'] === 3 && l['gen_ai.request.model'] === 'cohere.embed-english-v3'))
    await assert.rejects(openai('/bedrock/v1').embeddings.create({ model: 'amazon.titan-embed-text-v2:0', input: ['a', 'b'] }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'input')
  })

  test('@google/genai → openAI provider: generateContent and generateContentStream translated, tool calls, errors in Google\'s shape', { timeout: 15_000 }, async () => {
    const ai = genai('/openai')
    const r = await ai.models.generateContent({ model: 'gpt-4o-mini', contents: 'Say hello', config: { systemInstruction: 'Be brief.', maxOutputTokens: 50 } })
    assert.equal(r.text, 'Hello!')
    assert.equal(r.candidates?.[0]?.finishReason, 'STOP')
    assert.equal(r.usageMetadata?.promptTokenCount, 19)
    const sent = openaiEmu.received.at(-1)!
    assert.equal(sent.url, '/v1/chat/completions')
    assert.equal(sent.body?.model, 'gpt-4o-mini')
    assert.deepEqual(sent.body?.messages, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }])

    const chunks: GenerateContentResponse[] = []
    for await (const chunk of await ai.models.generateContentStream({ model: 'gpt-4o-mini', contents: 'Say hello' })) chunks.push(chunk)
    assert.equal(chunks.map(c => c.text ?? '').join(''), 'Hello! How can I help — ünïcode?')
    assert.equal(chunks.at(-1)?.candidates?.[0]?.finishReason, 'STOP')
    assert.equal(openaiEmu.received.at(-1)!.body?.stream, true)

    const tools = [{ functionDeclarations: [{ name: 'get_weather', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }, { name: 'get_time', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } } } }] }]
    const called = await ai.models.generateContent({ model: 'gpt-4o-mini', contents: 'weather?', config: { tools } })
    assert.deepEqual(called.functionCalls?.map(c => c.name), ['get_weather', 'get_time'])
    assert.deepEqual(called.functionCalls?.[0]?.args, { city: 'Paris' })

    await assert.rejects(ai.models.generateContent({ model: 'error-rate-limit', contents: 'x' }), (e: unknown) => e instanceof ApiError && e.status === 429)
    // A REST client's `?key=` is its own credential: never forwarded; a stream without alt=sse (a JSON array) is refused in Google's shape.
    const keyed = await fetch(`${portico.url}/openai/v1beta/models/gpt-4o-mini:generateContent?key=AIza-client-secret`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }) })
    assert.equal(keyed.status, 200)
    assert.equal(openaiEmu.received.at(-1)!.url, '/v1/chat/completions')
    const array = await fetch(`${portico.url}/openai/v1beta/models/gpt-4o-mini:streamGenerateContent`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }) })
    assert.equal(array.status, 400)
    assert.equal(((await array.json()) as { error: { status: string } }).error.status, 'INVALID_ARGUMENT')
    await waitFor(() => portico.logs().some(l => l.route === 'openai' && l['gen_ai.request.model'] === 'gpt-4o-mini' && l['gen_ai.usage.input_tokens'] === 19))
  })

  test('@aws-sdk/client-bedrock-runtime → openAI provider: Converse and ConverseStream (binary event stream) translated, tool use', { timeout: 15_000 }, async () => {
    const client = bedrock('/openai')
    const out = await client.send(new ConverseCommand({ modelId: 'gpt-4o-mini', system: [{ text: 'Be brief.' }], messages: [{ role: 'user', content: [{ text: 'Say hello' }] }], inferenceConfig: { maxTokens: 50 } }))
    assert.equal(out.output?.message?.content?.[0]?.text, 'Hello!')
    assert.equal(out.stopReason, 'end_turn')
    assert.equal(out.usage?.inputTokens, 19)
    const sent = openaiEmu.received.at(-1)!
    assert.equal(sent.body?.model, 'gpt-4o-mini')
    assert.equal(sent.headers.authorization, `Bearer ${OPENAI_KEY}`, 'the client\'s SigV4 authorization never reaches the provider')
    assert.deepEqual(Object.keys(sent.headers).filter(h => h.startsWith('x-amz-')), [], 'nor its x-amz-* headers')

    const stream = await client.send(new ConverseStreamCommand({ modelId: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ text: 'Say hello' }] }] }))
    const events: ConverseStreamOutput[] = []
    for await (const event of stream.stream!) events.push(event)
    assert.equal(events.map(e => e.contentBlockDelta?.delta?.text ?? '').join(''), 'Hello! How can I help — ünïcode?')
    assert.equal(events.find(e => e.messageStop !== undefined)?.messageStop?.stopReason, 'end_turn')
    assert.ok(events.some(e => e.metadata?.usage !== undefined))

    const toolConfig = { tools: [{ toolSpec: { name: 'get_weather', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } } } }, { toolSpec: { name: 'get_time', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } } } }] }
    const used = await client.send(new ConverseCommand({ modelId: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ text: 'weather?' }] }], toolConfig }))
    assert.equal(used.stopReason, 'tool_use')
    assert.deepEqual(used.output?.message?.content?.filter(b => b.toolUse !== undefined).map(b => [b.toolUse!.name, b.toolUse!.input]), [['get_weather', { city: 'Paris' }], ['get_time', { city: 'Paris' }]])

    await assert.rejects(client.send(new ConverseCommand({ modelId: 'error-rate-limit', messages: [{ role: 'user', content: [{ text: 'x' }] }] })), (e: unknown) => (e as { name?: string }).name === 'ThrottlingException')
    client.destroy()
  })

  test('a provider stream cut mid-tool-call: a clean error in the Gemini SDK and a typed exception in the Bedrock SDK, the gateway serves on', { timeout: 15_000 }, async () => {
    const tools = [{ functionDeclarations: [{ name: 'get_weather', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } } } }] }]
    await assert.rejects(async () => {
      for await (const _ of await genai('/openai').models.generateContentStream({ model: 'cut-mid-tool-call', contents: 'weather?', config: { tools } })) { /* drain */ }
    }, (e: unknown) => e instanceof Error)
    const client = bedrock('/openai')
    const stream = await client.send(new ConverseStreamCommand({ modelId: 'cut-mid-tool-call', messages: [{ role: 'user', content: [{ text: 'weather?' }] }], toolConfig: { tools: [{ toolSpec: { name: 'get_weather', inputSchema: { json: { type: 'object' } } } }] } }))
    await assert.rejects(async () => {
      for await (const _ of stream.stream!) { /* drain */ }
    }, (e: unknown) => ['ModelStreamErrorException', 'InternalServerException'].includes((e as { name?: string }).name ?? ''))
    const ok = await client.send(new ConverseCommand({ modelId: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ text: 'Say hello' }] }] }))
    assert.equal(ok.output?.message?.content?.[0]?.text, 'Hello!')
    client.destroy()
  })

  test('Gemini and Bedrock clients to a provider of their own format: passed through, the provider\'s credentials in place of the client\'s, usage read by the format\'s decoder', { timeout: 15_000 }, async () => {
    const r = await genai('/gemini').models.generateContent({ model: 'gemini-2.0-flash', contents: 'Explain how AI works', config: { safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT' as never, threshold: 'BLOCK_ONLY_HIGH' as never }] } })
    assert.equal(r.text, 'AI learns patterns from data to make predictions or decisions.')
    const call = geminiEmu.calls.at(-1)!
    assert.equal(call.path, '/v1beta/models/gemini-2.0-flash:generateContent')
    assert.equal(call.headers['x-goog-api-key'], geminiEmu.apiKey)
    assert.deepEqual(call.body.safetySettings, [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_ONLY_HIGH' }], 'a Gemini-only field goes as sent')
    const chunks: GenerateContentResponse[] = []
    for await (const chunk of await genai('/gemini').models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'Explain how AI works' })) chunks.push(chunk)
    assert.ok(chunks.length > 1)
    assert.equal(geminiEmu.calls.at(-1)!.path, '/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse')
    // Usage read by the format's own decoder as the bytes pass: the whole answer's, then the stream's.
    await waitFor(() => portico.logs().some(l => l.route === 'gemini' && l['gen_ai.usage.input_tokens'] === 8 && l['gen_ai.usage.output_tokens'] === 11))
    await waitFor(() => portico.logs().some(l => l.route === 'gemini' && l['gen_ai.usage.input_tokens'] === 8 && l['gen_ai.usage.output_tokens'] === 13))

    const client = bedrock('/bedrock')
    const out = await client.send(new ConverseCommand({ modelId: 'anthropic.claude-3-haiku-20240307-v1:0', messages: [{ role: 'user', content: [{ text: 'Say hello' }] }] }))
    assert.equal(out.stopReason, 'end_turn')
    const sent = bedrockEmu.calls.at(-1)!
    assert.equal(sent.auth, 'sigv4', 'signed by Portico with its own keys (the emulator verified it), not the client\'s dummy ones')
    assert.equal(sent.modelId, 'anthropic.claude-3-haiku-20240307-v1:0')
    const stream = await client.send(new ConverseStreamCommand({ modelId: 'anthropic.claude-3-haiku-20240307-v1:0', messages: [{ role: 'user', content: [{ text: 'Say hello' }] }] }))
    let text = ''
    for await (const event of stream.stream!) text += event.contentBlockDelta?.delta?.text ?? ''
    assert.ok(text.length > 0)
    await waitFor(() => portico.logs().some(l => l.route === 'bedrock' && l['gen_ai.usage.input_tokens'] === 14 && l['gen_ai.usage.output_tokens'] === 6))
    await waitFor(() => portico.logs().some(l => l.route === 'bedrock' && l['gen_ai.request.model'] === 'anthropic.claude-3-haiku-20240307-v1:0' && typeof l['gen_ai.usage.output_tokens'] === 'number' && l['gen_ai.usage.output_tokens'] !== 6))
    client.destroy()
  })
})

describe('a Responses-only provider (custom, format openai-responses) through Portico', () => {
  let emu: OpenAIEmulator
  let portico: PorticoProcess

  before(async () => {
    emu = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    portico = await startPortico({
      env: { LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [{ name: 'responses-only', matches: [{ path: { pathPrefix: '/r' } }], backends: [{ ai: { name: 'responses-only', provider: { custom: { format: 'openai-responses' } }, hostOverride: emu.url }, policies: { backendAuth: { key: OPENAI_KEY } } }] }]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await emu?.close()
  })

  test('openai SDK chat completions → /v1/responses and back, whole and streamed, usage counted', { timeout: 15_000 }, async () => {
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${portico.url}/r/v1`, maxRetries: 0 })
    const c = await client.chat.completions.create({ model: 'gpt-4.1', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }], max_completion_tokens: 20 })
    assert.equal(c.choices[0]!.message.content, 'Hello there!')
    assert.equal(c.choices[0]!.finish_reason, 'stop')
    assert.equal(c.usage?.prompt_tokens, 12)
    const sent = emu.received.at(-1)!
    assert.equal(sent.url, '/v1/responses')
    assert.equal(sent.headers.authorization, `Bearer ${OPENAI_KEY}`)
    assert.equal(sent.body?.instructions, 'Be brief.')
    assert.equal(sent.body?.max_output_tokens, 20)
    const chunks: string[] = []
    for await (const chunk of await client.chat.completions.create({ model: 'gpt-4.1', messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } })) chunks.push(chunk.choices[0]?.delta.content ?? '')
    assert.equal(chunks.join(''), 'Hello there!')
    assert.equal(emu.received.at(-1)!.body?.stream, true)
    await waitFor(() => portico.logs().some(l => l.route === 'responses-only' && l['gen_ai.usage.input_tokens'] === 12 && l['gen_ai.usage.output_tokens'] === 3))
  })

  test('anthropic SDK messages → /v1/responses and back, whole and streamed', { timeout: 15_000 }, async () => {
    const client = new Anthropic({ apiKey: CLIENT_KEY, baseURL: `${portico.url}/r`, maxRetries: 0 })
    const m = await client.messages.create({ model: 'gpt-4.1', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] })
    assert.equal(m.content[0]!.type === 'text' ? m.content[0]!.text : '', 'Hello there!')
    assert.equal(m.stop_reason, 'end_turn')
    const final = await client.messages.stream({ model: 'gpt-4.1', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] }).finalMessage()
    assert.equal(final.content[0]!.type === 'text' ? final.content[0]!.text : '', 'Hello there!')
    assert.equal(final.usage.output_tokens, 3)
  })
})

async function waitFor (check: () => boolean, ms = 3000): Promise<void> {
  await waitUntil(check, ms, 'the access log')
}
