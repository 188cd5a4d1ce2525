/**
 * The Gemini / Vertex AI emulator (e2e/lib/llm-emulators/gemini.ts) checked by Google's own
 * client, `@google/genai`, talking to it directly (`httpOptions.baseUrl` on loopback): what the
 * SDK accepts from the emulator is what Portico must consume. Then the other direction: what
 * Portico's Gemini ENCODER produces (llm/formats/gemini.ts: whole answers, streams, errors),
 * served by a tiny server, must parse in the same SDK. Claude on Vertex is checked with
 * `@anthropic-ai/sdk` through a fetch that does what Anthropic's Vertex client does (URL and body).
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { GoogleGenAI, ApiError, type GenerateContentResponse } from '@google/genai'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { setForTest } from '@portico/testkit/for-test'
import { startGeminiEmulator, type GeminiEmulator } from '../lib/llm-emulators/gemini.ts'
import { geminiFormat } from '@portico/engine/llm/formats/gemini'
import type { ChatResponse, StreamEvent } from '@portico/engine/llm/canonical'
import type { ProviderAdapter, ProviderRequest } from '@portico/engine/llm/provider'
import { geminiProvider } from '@portico/engine/llm/providers/gemini'
import { vertexProvider } from '@portico/engine/llm/providers/vertex'

const WEATHER_TOOL = {
  functionDeclarations: [{
    name: 'get_current_weather',
    description: 'Get the current weather in a given location',
    parametersJsonSchema: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['location'] }
  }]
}

/** A google-auth client stand-in that hands the SDK a fixed access token (no token endpoint needed). */
const fixedToken = (token: string) => ({ getRequestHeaders: async () => new Headers({ authorization: `Bearer ${token}` }) })

async function collect (stream: AsyncGenerator<GenerateContentResponse>): Promise<GenerateContentResponse[]> {
  const out: GenerateContentResponse[] = []
  for await (const chunk of stream) out.push(chunk)
  return out
}

describe('Gemini emulator, checked by @google/genai', () => {
  let emulator: GeminiEmulator
  let ai: GoogleGenAI

  before(async () => {
    emulator = await startGeminiEmulator()
    // Portico calls v1beta (every feature of the REST reference); the SDK's default is v1 now.
    ai = new GoogleGenAI({ apiKey: emulator.apiKey, httpOptions: { baseUrl: emulator.url, apiVersion: 'v1beta' } })
  })
  after(async () => { await emulator.close() })

  test('generateContent: text, usage, model version; the key went in x-goog-api-key', async () => {
    const response = await ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'Explain how AI works in a few words', config: { systemInstruction: 'Be brief.', temperature: 0.2, maxOutputTokens: 50 } })
    assert.equal(response.text, 'AI learns patterns from data to make predictions or decisions.')
    assert.equal(response.candidates?.[0]?.finishReason, 'STOP')
    assert.equal(response.usageMetadata?.promptTokenCount, 8)
    assert.equal(response.modelVersion, 'gemini-2.0-flash')
    const call = emulator.calls.at(-1)
    assert.equal(call?.path, '/v1beta/models/gemini-2.0-flash:generateContent')
    assert.equal(call?.headers['x-goog-api-key'], emulator.apiKey)
    // The SDK's own request shape, which Portico's encoder produces too.
    assert.deepEqual(call?.body.systemInstruction, { parts: [{ text: 'Be brief.' }], role: 'user' })
    assert.deepEqual(call?.body.generationConfig, { temperature: 0.2, maxOutputTokens: 50 })
  })

  test('generateContentStream: SSE chunks (CRLF framing, UTF-8) reassemble the text', async () => {
    emulator.answerWith('text')
    const chunks = await collect(await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'Explain how AI works' }))
    assert.equal(chunks.length, 3)
    assert.equal(chunks.map(c => c.text).join(''), 'AI learns patterns from data to make predictions — fast ✓.')
    assert.equal(chunks.at(-1)?.candidates?.[0]?.finishReason, 'STOP')
    assert.equal(chunks.at(-1)?.usageMetadata?.candidatesTokenCount, 13)
    assert.equal(emulator.calls.at(-1)?.path, '/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse')
  })

  test('function calling: a parallel call whole in one answer, then the function responses', async () => {
    const first = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'How is the weather in Columbus and New York?', config: { tools: [WEATHER_TOOL] } })
    assert.deepEqual(first.functionCalls?.map(c => [c.name, c.args]), [['get_current_weather', { location: 'Columbus, OH' }], ['get_current_weather', { location: 'New York, NY' }]])
    const history = [
      { role: 'user', parts: [{ text: 'How is the weather in Columbus and New York?' }] },
      first.candidates?.[0]?.content ?? {},
      { role: 'user', parts: first.functionCalls?.map(c => ({ functionResponse: { name: c.name, response: { output: '15 C' } } })) }
    ]
    const second = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: history, config: { tools: [WEATHER_TOOL] } })
    assert.equal(typeof second.text, 'string')
    // The thought signature went back with the first call, as the SDK keeps it.
    const sent = emulator.calls.at(-1)?.body.contents as Array<{ parts: Array<Record<string, unknown>> }>
    assert.equal(sent[1]?.parts[0]?.thoughtSignature, 'CiQB0e2Kb9ZkX1ZbY2FsbGVkIGEgdG9vbCBiZWNhdXNlIGl0IG5lZWRz')

    emulator.answerWith('tool-calls')
    const streamed = await collect(await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'Weather in Boston?', config: { tools: [WEATHER_TOOL] } }))
    assert.deepEqual(streamed.flatMap(c => c.functionCalls ?? []).map(c => c.args), [{ location: 'Boston, MA', unit: 'fahrenheit' }])
  })

  test('errors: Google\'s error bodies become the SDK\'s ApiError with the status', async () => {
    emulator.answerWith('error:rate-limit')
    await assert.rejects(ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' }), (e: unknown) => e instanceof ApiError && e.status === 429 && /RESOURCE_EXHAUSTED/.test(e.message))
    emulator.answerWith('error:overloaded')
    await assert.rejects(async () => await collect(await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'hi' })), (e: unknown) => e instanceof ApiError && e.status === 503)
    const wrongKey = new GoogleGenAI({ apiKey: 'AIza-wrong', httpOptions: { baseUrl: emulator.url, apiVersion: 'v1beta' } })
    await assert.rejects(wrongKey.models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' }), (e: unknown) => e instanceof ApiError && e.status === 400 && /API_KEY_INVALID/.test(e.message))
    // A request Google would refuse is refused in Google's words.
    const r = await fetch(`${emulator.url}/v1beta/models/gemini-2.0-flash:generateContent`, { method: 'POST', headers: { 'x-goog-api-key': emulator.apiKey }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'x', bogus: 1 }] }] }) })
    assert.equal(r.status, 400)
    assert.match(((await r.json()) as { error: { message: string } }).error.message, /Unknown name "bogus"/)
  })

  test('Portico\'s encoded requests (every golden case) pass the emulator\'s checks, on the Gemini API and Vertex', async () => {
    const dir = new URL('../../packages/engine/test/golden/llm/gemini/requests/', import.meta.url)
    const encoded = readdirSync(dir).filter(f => f.endsWith('.encoded.json'))
    assert.ok(encoded.length >= 10)
    for (const file of encoded) {
      const body = readFileSync(new URL(file, dir), 'utf8')
      const g = await fetch(`${emulator.url}/v1beta/models/gemini-2.0-flash:generateContent`, { method: 'POST', headers: { 'x-goog-api-key': emulator.apiKey, 'content-type': 'application/json' }, body })
      assert.equal(g.status, 200, `${file}: ${await g.text()}`)
      const v = await fetch(`${emulator.url}/v1/projects/${emulator.project}/locations/global/publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse`, { method: 'POST', headers: { authorization: `Bearer ${emulator.vertexToken}`, 'content-type': 'application/json' }, body })
      assert.equal(v.status, 200, `${file}: ${await v.text()}`)
      await v.arrayBuffer().catch(() => {})
    }
  })

  test('hostile transcripts, read off the socket by Portico\'s stream decoder: one clean error each, or the right text', async () => {
    const read = async (kind: string) => {
      emulator.answerWith(`hostile:${kind}`)
      const response = await fetch(`${emulator.url}/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse`, { method: 'POST', headers: { 'x-goog-api-key': emulator.apiKey }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }) })
      const decoder = geminiFormat.newStreamDecoder()
      const events: StreamEvent[] = []
      for await (const piece of response.body ?? []) events.push(...decoder.push(Buffer.from(piece)))
      events.push(...decoder.end())
      return events
    }
    for (const kind of ['cut-mid-call', 'error-mid-stream', 'no-finish', 'endless-line']) {
      const events = await read(kind)
      assert.equal(events.filter(e => e.type === 'error').length, 1, kind)
      assert.equal(events.at(-1)?.type, 'error', kind)
    }
    const utf8 = await read('split-utf8')
    assert.equal(utf8.filter(e => e.type === 'text_delta').map(e => e.type === 'text_delta' ? e.text : '').join(''), 'héllo — wörld ✓ 😀.')
    assert.equal(utf8.at(-1)?.type, 'finish')
    emulator.answerWith('hostile:error-200')
    const r = await fetch(`${emulator.url}/v1beta/models/gemini-2.0-flash:generateContent`, { method: 'POST', headers: { 'x-goog-api-key': emulator.apiKey }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }) })
    assert.equal(r.status, 200)
    assert.deepEqual(geminiFormat.decodeResponse(await r.json() as Record<string, unknown>), { status: 429, kind: 'rate_limit', message: 'You exceeded your current quota, please check your plan and billing details.' })
  })

  test('Portico\'s adapters (path, authorisation, body) against the emulator: Gemini API, Vertex Gemini, Vertex Claude', async () => {
    const origin = { host: '127.0.0.1', port: emulator.port, protocol: 'http' as const }
    const send = async (adapter: ProviderAdapter, model: string, streaming: boolean, json: Record<string, unknown>) => {
      const body = adapter.adaptBody?.(json, { operation: 'chat', model, streaming }) ?? json
      const request: ProviderRequest = { operation: 'chat', model, streaming, body: Buffer.from(JSON.stringify(body)), headers: { 'content-type': 'application/json', authorization: 'Bearer client-key-for-portico' } }
      await adapter.authorize(request, origin)
      return await fetch(`${emulator.url}${adapter.path(request)}`, { method: 'POST', headers: request.headers, body: request.body })
    }
    const neutral = { model: 'gemini-2.0-flash', system: ['Be brief.'], messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'Explain how AI works' }] }], stream: false }
    const body = geminiFormat.encodeRequest(neutral, 'gemini-2.0-flash') as Record<string, unknown>

    const gemini = geminiProvider({ apiKey: emulator.apiKey })
    const answer = geminiFormat.decodeResponse(await (await send(gemini, 'gemini-2.0-flash', false, body)).json() as Record<string, unknown>) as ChatResponse
    assert.deepEqual(answer.content, [{ type: 'text', text: 'AI learns patterns from data to make predictions or decisions.' }])
    assert.equal(emulator.calls.at(-1)?.headers.authorization, undefined, 'the client\'s credentials stay home')

    const tokens = { token: async () => emulator.vertexToken }
    const vertex = vertexProvider({ project: emulator.project, region: 'us-central1', tokens })
    const streamed = await send(vertex, 'gemini-2.0-flash', true, body)
    assert.equal(streamed.headers.get('content-type'), 'text/event-stream')
    const decoder = geminiFormat.newStreamDecoder()
    const events: StreamEvent[] = []
    for await (const piece of streamed.body ?? []) events.push(...decoder.push(Buffer.from(piece)))
    events.push(...decoder.end())
    assert.equal(events.at(-1)?.type, 'finish')
    assert.equal(emulator.calls.at(-1)?.path, `/v1/projects/${emulator.project}/locations/us-central1/publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse`)

    const claude = vertexProvider({ project: emulator.project, region: 'us-east5', model: 'claude-sonnet-4-5@20250929', tokens })
    const message = await (await send(claude, 'claude-sonnet-4-5@20250929', false, { model: 'claude-sonnet-4-5@20250929', max_tokens: 64, messages: [{ role: 'user', content: 'Hello' }] })).json() as { content: Array<{ text: string }> }
    assert.equal(message.content[0]?.text, 'Hello! How can I help you today?')
    assert.equal(emulator.calls.at(-1)?.body.anthropic_version, 'vertex-2023-10-16')

    const wrong = vertexProvider({ project: emulator.project, tokens: { token: async () => 'ya29.stale' } })
    const refused = await send(wrong, 'gemini-2.0-flash', false, body)
    assert.equal(refused.status, 401)
    assert.equal(geminiFormat.decodeError(refused.status, await refused.json()).kind, 'authentication')
  })

  test('Vertex AI (Gemini): project path, Bearer token checked', async () => {
    const vertex = new GoogleGenAI({ vertexai: true, project: emulator.project, location: 'us-central1', httpOptions: { baseUrl: emulator.url, apiVersion: 'v1' }, googleAuthOptions: { authClient: fixedToken(emulator.vertexToken) as never } })
    const response = await vertex.models.generateContent({ model: 'gemini-2.0-flash', contents: 'Explain how AI works' })
    assert.equal(response.text, 'AI learns patterns from data to make predictions or decisions.')
    const call = emulator.calls.at(-1)
    assert.equal(call?.api, 'vertex')
    assert.equal(call?.path, `/v1/projects/${emulator.project}/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent`)
    emulator.answerWith('reasoning')
    const chunks = await collect(await vertex.models.generateContentStream({ model: 'gemini-2.5-pro', contents: 'Three physicists' }))
    assert.match(chunks.map(c => c.text ?? '').join(''), /Newton/)
    const stranger = new GoogleGenAI({ vertexai: true, project: emulator.project, location: 'us-central1', httpOptions: { baseUrl: emulator.url, apiVersion: 'v1' }, googleAuthOptions: { authClient: fixedToken('ya29.expired') as never } })
    await assert.rejects(stranger.models.generateContent({ model: 'gemini-2.0-flash', contents: 'x' }), (e: unknown) => e instanceof ApiError && e.status === 401 && /UNAUTHENTICATED/.test(e.message))
  })

  test('Gemini API OpenAI-compatible models and embeddings, checked by the openai SDK (Google\'s documented base URL)', async () => {
    const openai = new OpenAI({ apiKey: emulator.apiKey, baseURL: `${emulator.url}/v1beta/openai/`, maxRetries: 0 })
    const models = await openai.models.list()
    assert.deepEqual(models.data.map(m => m.id), ['models/gemini-2.5-flash', 'models/gemini-embedding-001'])
    // The SDK asks for base64 by default and decodes it; a float answer is taken too.
    const e = await openai.embeddings.create({ model: 'gemini-embedding-001', input: ['a b', 'c'], encoding_format: 'float' })
    assert.deepEqual(e.data.map(d => d.embedding), [[0.0125, -0.03, 0.5], [0.0125, -0.03, 0.5]])
    assert.equal(emulator.openaiCalls.at(-1)?.headers.authorization, `Bearer ${emulator.apiKey}`)
    const wrong = new OpenAI({ apiKey: 'AIza-wrong', baseURL: `${emulator.url}/v1beta/openai/`, maxRetries: 0 })
    await assert.rejects(wrong.models.list(), (err: unknown) => err instanceof OpenAI.APIError && err.status === 400)
  })

  test('Vertex AI text embeddings: @google/genai\'s embedContent is :predict with instances; the emulator\'s answer parses', async () => {
    const vertex = new GoogleGenAI({ vertexai: true, project: emulator.project, location: 'us-central1', httpOptions: { baseUrl: emulator.url, apiVersion: 'v1' }, googleAuthOptions: { authClient: fixedToken(emulator.vertexToken) as never } })
    const out = await vertex.models.embedContent({ model: 'text-embedding-005', contents: ['hello world', 'bye'], config: { outputDimensionality: 2 } })
    assert.deepEqual(out.embeddings?.map(e => e.values), [[0.1, 0.2], [0.1, 0.2]])
    assert.deepEqual(out.embeddings?.map(e => e.statistics?.tokenCount), [2, 1])
    const call = emulator.openaiCalls.at(-1)
    assert.equal(call?.operation, 'predict')
    assert.deepEqual(call?.body, { model: 'text-embedding-005', instances: [{ content: 'hello world' }, { content: 'bye' }], parameters: { outputDimensionality: 2 } })
  })

  test('Vertex AI (Claude): rawPredict / streamRawPredict through @anthropic-ai/sdk', async () => {
    // What Anthropic's Vertex client does: the model moves into the path, anthropic_version into the body.
    const vertexFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const body = JSON.parse(String(init?.body)) as Record<string, unknown>
      const { model, ...rest } = body
      const method = rest.stream === true ? 'streamRawPredict' : 'rawPredict'
      const url = `${emulator.url}/v1/projects/${emulator.project}/locations/us-east5/publishers/anthropic/models/${String(model)}:${method}`
      const headers = new Headers(init?.headers)
      headers.delete('x-api-key')
      headers.set('authorization', `Bearer ${emulator.vertexToken}`)
      return await fetch(url, { ...init, headers, body: JSON.stringify({ anthropic_version: 'vertex-2023-10-16', ...rest }) })
    }
    const claude = new Anthropic({ apiKey: 'unused', baseURL: 'http://vertex.invalid', fetch: vertexFetch as typeof fetch, maxRetries: 0 })
    const message = await claude.messages.create({ model: 'claude-sonnet-4-5@20250929', max_tokens: 100, messages: [{ role: 'user', content: 'Hello' }] })
    assert.equal(message.content[0]?.type === 'text' ? message.content[0].text : '', 'Hello! How can I help you today?')
    assert.equal(emulator.calls.at(-1)?.api, 'vertex-anthropic')
    const stream = claude.messages.stream({ model: 'claude-sonnet-4-5@20250929', max_tokens: 100, messages: [{ role: 'user', content: 'Hello' }] })
    const final = await stream.finalMessage()
    assert.equal(final.usage.output_tokens, 9)
    assert.equal(emulator.calls.at(-1)?.method, 'streamRawPredict')
  })
})

describe('Portico\'s Gemini encoder output, parsed by @google/genai', () => {
  let server: Backend
  let ai: GoogleGenAI
  // What the server answers next: each test sets its own (setForTest: put back after it).
  const serve: { next: { status: number, type: string, body: string } } = { next: { status: 200, type: 'application/json', body: '{}' } }
  const OPTIONS = { now: 1767225600, requestModel: 'gemini-2.0-flash' }

  before(async () => {
    server = await startBackend((req, res) => {
      req.resume()
      req.on('end', () => { res.writeHead(serve.next.status, { 'content-type': serve.next.type }); res.end(serve.next.body) })
    })
    ai = new GoogleGenAI({ apiKey: 'AIza-test-portico', httpOptions: { baseUrl: server.url } })
  })
  after(async () => { await server.close() })

  test('a whole answer: text, reasoning, tool calls, usage', async t => {
    const neutral: ChatResponse = {
      id: 'msg_01', model: 'claude-sonnet-4-5', stopReason: 'tool_use',
      content: [{ type: 'reasoning', text: 'The user wants weather.', signature: 'sig==' }, { type: 'text', text: 'Checking.' }, { type: 'tool_call', id: 'toolu_01', name: 'get_current_weather', input: { location: 'Oslo' } }],
      usage: { inputTokens: 20, outputTokens: 15, cachedInputTokens: 5, reasoningTokens: 6 }
    }
    setForTest(t, serve, 'next', { status: 200, type: 'application/json', body: JSON.stringify(geminiFormat.encodeResponse(neutral, OPTIONS)) })
    const response = await ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'weather in Oslo?' })
    assert.equal(response.text, 'Checking.')
    assert.deepEqual(response.functionCalls, [{ id: 'toolu_01', name: 'get_current_weather', args: { location: 'Oslo' } }])
    assert.equal(response.candidates?.[0]?.content?.parts?.[0]?.thought, true)
    assert.deepEqual(response.usageMetadata, { promptTokenCount: 20, candidatesTokenCount: 9, totalTokenCount: 35, cachedContentTokenCount: 5, thoughtsTokenCount: 6 })
    assert.equal(response.responseId, 'msg_01')
  })

  test('a stream: text deltas, a whole tool call, the finish with usage; an error mid-stream throws', async t => {
    const events: StreamEvent[] = [
      { type: 'start', id: 'chatcmpl-1', model: 'gpt-4o-mini' },
      { type: 'block_start', index: 0, block: { type: 'text' } },
      { type: 'text_delta', index: 0, text: 'Hel' },
      { type: 'text_delta', index: 0, text: 'lo — ✓' },
      { type: 'block_stop', index: 0 },
      { type: 'block_start', index: 1, block: { type: 'tool_call', id: 'call_1', name: 'f' } },
      { type: 'tool_args_delta', index: 1, json: '{"a":' },
      { type: 'tool_args_delta', index: 1, json: '[1,2]}' },
      { type: 'block_stop', index: 1 },
      { type: 'finish', stopReason: 'tool_use', usage: { inputTokens: 3, outputTokens: 4 } }
    ]
    const encoder = geminiFormat.newStreamEncoder(OPTIONS)
    setForTest(t, serve, 'next', { status: 200, type: 'text/event-stream', body: events.map(e => encoder.encode(e)).join('') + encoder.end() })
    const chunks = await collect(await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'hi' }))
    assert.equal(chunks.map(c => c.text ?? '').join(''), 'Hello — ✓')
    assert.deepEqual(chunks.flatMap(c => c.functionCalls ?? []), [{ id: 'call_1', name: 'f', args: { a: [1, 2] } }])
    assert.equal(chunks.at(-1)?.candidates?.[0]?.finishReason, 'STOP')
    assert.equal(chunks.at(-1)?.usageMetadata?.totalTokenCount, 7)

    const failing = geminiFormat.newStreamEncoder(OPTIONS)
    setForTest(t, serve, 'next', { status: 200, type: 'text/event-stream', body: [events[0], events[1], events[2], { type: 'error', error: { status: 529, kind: 'overloaded', message: 'Overloaded' } } as StreamEvent].map(e => failing.encode(e as StreamEvent)).join('') })
    await assert.rejects(collect(await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents: 'hi' })), (e: unknown) => e instanceof ApiError && e.status === 529 && /UNAVAILABLE/.test(e.message))
  })

  test('an error answer: the SDK reads status and message', async t => {
    const error = { status: 429, kind: 'rate_limit' as const, message: 'Rate limit reached for requests' }
    setForTest(t, serve, 'next', { status: 429, type: 'application/json', body: JSON.stringify(geminiFormat.encodeError(error)) })
    await assert.rejects(ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' }), (e: unknown) => e instanceof ApiError && e.status === 429 && /RESOURCE_EXHAUSTED/.test(e.message) && /Rate limit reached/.test(e.message))
  })
})
