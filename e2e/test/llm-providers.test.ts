/**
 * Anthropic, Gemini and Vertex AI as `ai` providers, end to end: the real gateway
 * (packages/testkit), the emulators of e2e/lib/llm-emulators/ as the providers (each checked
 * by its provider's own SDK elsewhere), and the official SDKs as clients:
 *
 * - the `openai` SDK → provider `anthropic`: chat completions whole and streamed, with tools,
 *   in OpenAI's shape; usage in the access log; the provider saw backendAuth's key in
 *   `x-api-key`, never the client's;
 * - `@anthropic-ai/sdk` → provider `openAI` (what Claude Code does through a gateway):
 *   messages.create and messages.stream with tools; the first streamed token reaches the
 *   client while the provider still holds the rest back;
 * - the `openai` SDK → provider `gemini` (the key in `x-goog-api-key`) and → `vertex`, Gemini
 *   and Claude models, with a service-account key whose `token_uri` is a loopback OAuth server
 *   that verifies the signed JWT; the emulator checks the access token;
 * - a provider's 429 arrives in the client format's error shape and status.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createVerify, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ConfigFile } from '@portico/engine'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { startGeminiEmulator, type GeminiEmulator } from '../lib/llm-emulators/gemini.ts'
import { setForTest } from '@portico/testkit/for-test'

const OPENAI_KEY = 'sk-test-portico'
const CLIENT_KEY = 'sk-client-not-for-providers'
const VERTEX_TOKEN = 'ya29.test-portico-vertex'
const SA_EMAIL = 'portico@portico-test.iam.gserviceaccount.com'

const OPENAI_TOOLS = [
  { type: 'function' as const, function: { name: 'get_weather', description: 'Current weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] } } },
  { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }
]
const ANTHROPIC_TOOLS: Anthropic.Tool[] = [
  { name: 'get_weather', description: 'Current weather in a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  { name: 'get_time', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }
]

/** A loopback OAuth token endpoint that verifies the JWT-bearer assertion as Google's does, and grants VERTEX_TOKEN. */
async function startTokenServer (publicKey: KeyObject): Promise<{ url: string, grants: number, close: () => Promise<void> }> {
  const state = { url: '', grants: 0, close: async () => {} }
  const server = http.createServer((request, response) => {
    let body = ''
    request.on('data', c => { body += String(c) })
    request.on('end', () => {
      const form = new URLSearchParams(body)
      const reply = (status: number, json: unknown): void => { response.writeHead(status, { 'content-type': 'application/json' }); response.end(JSON.stringify(json)) }
      if (request.method !== 'POST' || request.url !== '/token') return reply(404, { error: 'not_found' })
      if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return reply(400, { error: 'unsupported_grant_type' })
      const [h, p, s] = (form.get('assertion') ?? '').split('.')
      const verify = createVerify('RSA-SHA256')
      verify.update(`${h}.${p}`)
      if (s === undefined || !verify.verify(publicKey, Buffer.from(s, 'base64url'))) return reply(400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' })
      const claims = JSON.parse(Buffer.from(p as string, 'base64url').toString()) as { iss: string, scope: string }
      if (claims.iss !== SA_EMAIL || !claims.scope.includes('https://www.googleapis.com/auth/cloud-platform')) return reply(400, { error: 'invalid_grant', error_description: 'bad claims' })
      state.grants++
      reply(200, { access_token: VERTEX_TOKEN, expires_in: 3599, token_type: 'Bearer' })
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`
  state.close = async () => { await new Promise(resolve => server.close(resolve)) }
  return state
}

/** Every header value a provider received, for "the client's key never got there". */
function headerValues (headers: http.IncomingHttpHeaders): string {
  return Object.values(headers).flat().join('\n')
}

describe('ai providers anthropic, gemini, vertex through Portico, official SDKs as clients', () => {
  let openaiEmu: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let geminiEmu: GeminiEmulator
  let tokens: Awaited<ReturnType<typeof startTokenServer>>
  let portico: PorticoProcess

  const openai = (path: string): OpenAI => new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const anthropic = (path: string): Anthropic => new Anthropic({ apiKey: CLIENT_KEY, baseURL: `${portico.url}${path}`, maxRetries: 0 })

  before(async () => {
    openaiEmu = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY })
    geminiEmu = await startGeminiEmulator({ vertexToken: VERTEX_TOKEN, project: 'portico-test' })
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
    tokens = await startTokenServer(publicKey)
    const dir = mkdtempSync(join(tmpdir(), 'portico-vertex-e2e-'))
    const keyFile = join(dir, 'service-account.json')
    // A key whose token endpoint is down: the gateway's own credentials fail.
    writeFileSync(join(dir, 'dead-token-uri.json'), JSON.stringify({ type: 'service_account', client_email: SA_EMAIL, private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }), token_uri: 'http://127.0.0.1:1/token' }))
    writeFileSync(keyFile, JSON.stringify({
      type: 'service_account',
      project_id: 'portico-test',
      private_key_id: 'k1',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
      client_email: SA_EMAIL,
      client_id: '1',
      token_uri: tokens.url
    }))
    portico = await startPortico({
      env: { LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          {
            name: 'anthropic',
            matches: [{ path: { pathPrefix: '/anthropic' } }],
            backends: [{ ai: { name: 'anthropic-llm', provider: { anthropic: {} }, hostOverride: anthropicEmu.url }, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }]
          },
          {
            name: 'custom-anthropic',
            matches: [{ path: { pathPrefix: '/custom-anthropic' } }],
            backends: [{ ai: { name: 'custom-anthropic', provider: { custom: { format: 'anthropic-messages' } }, hostOverride: anthropicEmu.url }, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }]
          },
          {
            name: 'openai',
            matches: [{ path: { pathPrefix: '/openai' } }],
            backends: [{ ai: { name: 'openai-llm', provider: { openAI: {} }, hostOverride: openaiEmu.url }, policies: { backendAuth: { key: OPENAI_KEY } } }]
          },
          {
            name: 'gemini',
            matches: [{ path: { pathPrefix: '/gemini' } }],
            backends: [{ ai: { name: 'gemini-llm', provider: { gemini: { model: 'gemini-2.5-flash' } }, hostOverride: geminiEmu.url }, policies: { backendAuth: { key: geminiEmu.apiKey } } }]
          },
          {
            name: 'vertex',
            matches: [{ path: { pathPrefix: '/vertex' } }],
            backends: [{ ai: { name: 'vertex-gemini', provider: { vertex: { projectId: 'portico-test', region: 'us-central1', model: 'gemini-2.5-flash' } }, hostOverride: geminiEmu.url }, policies: { backendAuth: { gcp: { credential: { file: keyFile } } } } }]
          },
          {
            name: 'vertex-no-token',
            matches: [{ path: { pathPrefix: '/vertex-no-token' } }],
            backends: [{ ai: { name: 'vertex-no-token', provider: { vertex: { projectId: 'portico-test', region: 'us-central1', model: 'gemini-2.5-flash' } }, hostOverride: geminiEmu.url }, policies: { backendAuth: { gcp: { credential: { file: join(dir, 'dead-token-uri.json') } } } } }]
          },
          {
            name: 'vertex-embed',
            matches: [{ path: { pathPrefix: '/vertex-embed' } }],
            backends: [{ ai: { name: 'vertex-embed', provider: { vertex: { projectId: 'portico-test', region: 'us-central1' } }, hostOverride: geminiEmu.url }, policies: { backendAuth: { gcp: { credential: { file: keyFile } } } } }]
          },
          {
            name: 'vertex-claude',
            matches: [{ path: { pathPrefix: '/vertex-claude' } }],
            backends: [{ ai: { name: 'vertex-claude', provider: { vertex: { projectId: 'portico-test', region: 'us-central1', model: 'claude-sonnet-4-5' } }, hostOverride: geminiEmu.url }, policies: { backendAuth: { gcp: { credential: { file: keyFile } } } } }]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await openaiEmu?.close()
    await anthropicEmu?.close()
    await geminiEmu?.close()
    await tokens?.close()
  })

  test('openai SDK → anthropic: a chat completion in OpenAI\'s shape, usage in the access log, the provider saw backendAuth\'s x-api-key only', { timeout: 15_000 }, async () => {
    const c = await openai('/anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], max_tokens: 100 })
    assert.equal(c.object, 'chat.completion')
    assert.equal(c.choices[0]!.message.content, 'Bonjour ! Grüße — ✓ 日本語')
    assert.equal(c.choices[0]!.finish_reason, 'stop')
    // Anthropic's input_tokens exclude cache reads and writes; OpenAI's prompt_tokens include them.
    assert.equal(c.usage?.prompt_tokens, 2095 + 120 + 1800)
    assert.equal(c.usage?.completion_tokens, 503)
    const sent = anthropicEmu.bodies.at(-1)!
    assert.equal(sent.system, 'be brief')
    assert.equal(sent.max_tokens, 100)
    const headers = anthropicEmu.headers.at(-1)!
    assert.equal(headers['x-api-key'], ANTHROPIC_TEST_KEY)
    assert.equal(headers.authorization, undefined)
    assert.equal(headers['anthropic-version'], '2023-06-01')
    assert.doesNotMatch(headerValues(headers), new RegExp(CLIENT_KEY))
    await waitFor(() => portico.logs().some(l => l.route === 'anthropic' && l['gen_ai.usage.output_tokens'] === 503))
    const log = portico.logs().find(l => l.route === 'anthropic' && l['gen_ai.usage.output_tokens'] === 503)!
    assert.equal(log['gen_ai.usage.input_tokens'], 4015)
    assert.equal(log['gen_ai.request.model'], 'claude-sonnet-4-6')
  })

  test('openai SDK → anthropic: a stream arrives as OpenAI chunks, usage at the end', { timeout: 15_000 }, async () => {
    const stream = await openai('/anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk')
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.choices[0]?.finish_reason != null) finish = chunk.choices[0].finish_reason
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(text, 'Bonjour ! Grüße — ✓ 日本語 🎉')
    assert.equal(finish, 'stop')
    assert.equal(usage?.completion_tokens, 15)
    assert.equal(usage?.prompt_tokens, 35)
    assert.equal(anthropicEmu.bodies.at(-1)!.stream, true)
    await waitFor(() => portico.logs().some(l => l.route === 'anthropic' && l['gen_ai.usage.output_tokens'] === 15))
  })

  test('openai SDK → anthropic: tool calls, whole and streamed, and the results sent back as tool_result blocks', { timeout: 15_000 }, async () => {
    const whole = await openai('/anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'tool-calls' }], tools: OPENAI_TOOLS })
    const message = whole.choices[0]!.message
    assert.equal(whole.choices[0]!.finish_reason, 'tool_calls')
    assert.equal(message.content, 'I\'ll check both.')
    assert.deepEqual(message.tool_calls?.map(t => t.type === 'function' ? [t.id, t.function.name, JSON.parse(t.function.arguments)] : null), [['toolu_01', 'get_weather', { city: 'Paris', unit: 'celsius' }], ['toolu_02', 'get_time', { city: 'Tokyo' }]])
    const sentTools = anthropicEmu.bodies.at(-1)!.tools as Array<Record<string, unknown>>
    assert.deepEqual(sentTools.map(t => t.name), ['get_weather', 'get_time'])
    assert.deepEqual(sentTools[0]!.input_schema, OPENAI_TOOLS[0]!.function.parameters)

    const runner = openai('/anthropic').chat.completions.stream({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'tool-calls' }], tools: OPENAI_TOOLS })
    const final = await runner.finalChatCompletion()
    const streamed = final.choices[0]!.message.tool_calls!
    assert.equal(streamed.length, 1)
    assert.equal(streamed[0]!.type === 'function' ? streamed[0]!.function.name : '', 'get_weather')
    assert.deepEqual(JSON.parse(streamed[0]!.type === 'function' ? streamed[0]!.function.arguments : ''), { city: 'San Francisco, CA', unit: 'fahrenheit' }, 'arguments reassembled from input_json_delta pieces')
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls')

    await openai('/anthropic').chat.completions.create({
      model: 'claude-sonnet-4-6',
      messages: [{ role: 'user', content: 'weather?' }, message, { role: 'tool', tool_call_id: 'toolu_01', content: '18°C' }, { role: 'tool', tool_call_id: 'toolu_02', content: '14:05' }],
      tools: OPENAI_TOOLS
    })
    const turns = anthropicEmu.bodies.at(-1)!.messages as Array<{ role: string, content: Array<Record<string, unknown>> }>
    assert.deepEqual(turns.at(-1)!.content.map(b => [b.type, b.tool_use_id]), [['tool_result', 'toolu_01'], ['tool_result', 'toolu_02']], 'parallel results: one user turn')
  })

  test('anthropic SDK → anthropic: passed through, the client\'s x-api-key replaced by backendAuth\'s, usage counted', { timeout: 15_000 }, async () => {
    const m = await anthropic('/anthropic').messages.create({ model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(m.content[0]!.type === 'text' ? m.content[0]!.text : '', 'Bonjour ! Grüße — ✓ 日本語')
    const headers = anthropicEmu.headers.at(-1)!
    assert.equal(headers['x-api-key'], ANTHROPIC_TEST_KEY)
    assert.doesNotMatch(headerValues(headers), new RegExp(CLIENT_KEY))
    const stream = anthropic('/anthropic').messages.stream({ model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
    const final = await stream.finalMessage()
    assert.equal(final.usage.output_tokens, 15)
    // Passed through, the usage is read from Anthropic's own events: input from message_start
    // (its 25 input_tokens and 10 cache reads, counted together as when translated), output from message_delta.
    await waitFor(() => portico.logs().some(l => l.route === 'anthropic' && l['gen_ai.usage.output_tokens'] === 15 && l['gen_ai.usage.input_tokens'] === 35))
  })

  test('a custom Anthropic-compatible server: both client formats translated to it', { timeout: 15_000 }, async () => {
    const c = await openai('/custom-anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'Bonjour ! Grüße — ✓ 日本語')
    const m = await anthropic('/custom-anthropic').messages.create({ model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(m.content[0]!.type === 'text' ? m.content[0]!.text : '', 'Bonjour ! Grüße — ✓ 日本語')
    assert.equal(anthropicEmu.headers.at(-1)!['x-api-key'], ANTHROPIC_TEST_KEY)
  })

  test('a provider\'s 429 arrives in the client format\'s error shape and status', { timeout: 15_000 }, async () => {
    const fromAnthropic = await openai('/anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'rate-limit' }] }).then(() => null, (e: unknown) => e)
    assert.ok(fromAnthropic instanceof OpenAI.RateLimitError, String(fromAnthropic))
    assert.equal(fromAnthropic.status, 429)
    assert.match(fromAnthropic.message, /per-minute rate limit/)

    const fromOpenAI = await anthropic('/openai').messages.create({ model: 'error-rate-limit', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e)
    assert.ok(fromOpenAI instanceof Anthropic.RateLimitError, String(fromOpenAI))
    assert.equal(fromOpenAI.status, 429)
    assert.equal((fromOpenAI.error as { type: string, error: { type: string } }).type, 'error')
    assert.equal((fromOpenAI.error as { error: { type: string } }).error.type, 'rate_limit_error')

    geminiEmu.answerWith('error:rate-limit')
    const fromGemini = await openai('/gemini').chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e)
    assert.ok(fromGemini instanceof OpenAI.RateLimitError, String(fromGemini))
    assert.equal(fromGemini.status, 429)
  })

  test('anthropic SDK → openAI provider: messages.create with tools, the key from backendAuth only', { timeout: 15_000 }, async () => {
    const text = await anthropic('/openai').messages.create({ model: 'gpt-4o-mini', max_tokens: 64, system: 'be brief', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(text.type, 'message')
    assert.equal(text.content[0]!.type === 'text' ? text.content[0]!.text : '', 'Hello!')
    assert.equal(text.stop_reason, 'end_turn')
    assert.equal(text.usage.output_tokens, 10)
    const seen = openaiEmu.received.at(-1)!
    assert.equal(seen.url, '/v1/chat/completions')
    assert.equal(seen.headers.authorization, `Bearer ${OPENAI_KEY}`)
    assert.equal(seen.headers['x-api-key'], undefined)
    assert.doesNotMatch(headerValues(seen.headers), new RegExp(CLIENT_KEY))
    assert.deepEqual((seen.body!.messages as unknown[])[0], { role: 'system', content: 'be brief' })

    const tools = await anthropic('/openai').messages.create({ model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'weather and time in Paris?' }], tools: [ANTHROPIC_TOOLS[0]!] })
    assert.equal(tools.stop_reason, 'tool_use')
    assert.deepEqual(tools.content.filter(b => b.type === 'tool_use').map(b => b.type === 'tool_use' ? [b.id, b.name, b.input] : null), [['call_w1', 'get_weather', { city: 'Paris' }], ['call_t1', 'get_time', { city: 'Paris' }]])
    const sentTools = openaiEmu.received.at(-1)!.body!.tools as Array<{ function: { name: string } }>
    assert.deepEqual(sentTools.map(t => t.function.name), ['get_weather'])
  })

  test('anthropic SDK → openAI provider: messages.stream with tools; the first token reaches the client before the provider sends the rest', { timeout: 15_000 }, async t => {
    let release!: () => void
    let releasedByTimer = false
    const held = new Promise<void>(resolve => {
      release = resolve
      setTimeout(() => { releasedByTimer = true; resolve() }, 5000).unref()
    })
    setForTest(t, openaiEmu, 'gate', async () => await held)
    const stream = anthropic('/openai').messages.stream({ model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
    let text = ''
    stream.on('text', delta => {
      if (text === '' && delta !== '') release()
      text += delta
    })
    const final = await stream.finalMessage()
    assert.equal(releasedByTimer, false, 'the first token arrived while the provider held the rest back')
    assert.equal(text, 'Hello! How can I help — ünïcode?')
    assert.equal(final.stop_reason, 'end_turn')
    assert.ok(final.usage.output_tokens > 0)

    const withTools = anthropic('/openai').messages.stream({ model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'weather and time?' }], tools: ANTHROPIC_TOOLS })
    const toolAnswer = await withTools.finalMessage()
    assert.equal(toolAnswer.stop_reason, 'tool_use')
    assert.deepEqual(toolAnswer.content.filter(b => b.type === 'tool_use').map(b => b.type === 'tool_use' ? [b.name, b.input] : null), [['get_weather', { city: 'Paris' }], ['get_time', { city: 'Paris' }]])
  })

  test('openai SDK → gemini: the key in x-goog-api-key, whole and streamed answers, tool calls', { timeout: 15_000 }, async () => {
    const c = await openai('/gemini').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'AI learns patterns from data to make predictions or decisions.')
    assert.equal(c.usage?.prompt_tokens, 8)
    assert.equal(c.usage?.completion_tokens, 11)
    const call = geminiEmu.calls.at(-1)!
    assert.equal(call.api, 'gemini')
    assert.equal(call.path, '/v1beta/models/gemini-2.5-flash:generateContent')
    assert.equal(call.headers['x-goog-api-key'], geminiEmu.apiKey)
    assert.equal(call.headers.authorization, undefined)
    assert.doesNotMatch(headerValues(call.headers), new RegExp(CLIENT_KEY))

    const stream = await openai('/gemini').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    assert.equal(text, 'AI learns patterns from data to make predictions — fast ✓.')
    assert.equal(geminiEmu.calls.at(-1)!.path, '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse')

    const tools = await openai('/gemini').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'weather?' }], tools: OPENAI_TOOLS })
    assert.equal(tools.choices[0]!.finish_reason, 'tool_calls')
    assert.deepEqual(tools.choices[0]!.message.tool_calls?.map(t => t.type === 'function' ? [t.function.name, JSON.parse(t.function.arguments)] : null), [['get_current_weather', { location: 'Columbus, OH' }], ['get_current_weather', { location: 'New York, NY' }]])
    await waitFor(() => portico.logs().some(l => l.route === 'gemini' && l['gen_ai.usage.output_tokens'] === 11))
  })

  test('gemini misbehaving mid-stream (an error event, a cut function call, split UTF-8, a 200 error body): clean errors in OpenAI\'s shape, the gateway serves on', { timeout: 20_000 }, async () => {
    const read = async (): Promise<{ text: string, error: unknown }> => {
      let text = ''
      try {
        const stream = await openai('/gemini').chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }], stream: true })
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
        return { text, error: null }
      } catch (error) {
        return { text, error }
      }
    }
    geminiEmu.answerWith('hostile:error-mid-stream')
    const mid = await read()
    assert.equal(mid.text, 'Once upon')
    assert.ok(mid.error instanceof OpenAI.APIError, String(mid.error))
    assert.match(String((mid.error as Error).message), /overloaded/)
    geminiEmu.answerWith('hostile:cut-mid-call')
    const cut = await read()
    assert.ok(cut.error instanceof OpenAI.APIError, String(cut.error))
    geminiEmu.answerWith('hostile:split-utf8')
    assert.deepEqual(await read(), { text: 'h\u00e9llo \u2014 w\u00f6rld \u2713 \ud83d\ude00.', error: null })
    geminiEmu.answerWith('hostile:error-200')
    const in200 = await openai('/gemini').chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e)
    assert.ok(in200 instanceof OpenAI.RateLimitError, String(in200))
    // And the next request is served as usual.
    assert.deepEqual(await read(), { text: 'AI learns patterns from data to make predictions — fast ✓.', error: null })
  })

  test('openai SDK → vertex (Gemini model): an access token from the service-account key, checked by the provider', { timeout: 20_000 }, async () => {
    const c = await openai('/vertex').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'AI learns patterns from data to make predictions or decisions.')
    const call = geminiEmu.calls.at(-1)!
    assert.equal(call.api, 'vertex')
    assert.equal(call.path, '/v1/projects/portico-test/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent')
    assert.equal(call.headers.authorization, `Bearer ${VERTEX_TOKEN}`)
    assert.doesNotMatch(headerValues(call.headers), new RegExp(CLIENT_KEY))
    const stream = await openai('/vertex').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    assert.equal(text, 'AI learns patterns from data to make predictions — fast ✓.')
    assert.ok(tokens.grants >= 1)
  })

  test('vertex: no access token to be had — a 503 in the client\'s error shape, nothing sent to the provider, no secret in the message', { timeout: 20_000 }, async () => {
    const before = geminiEmu.calls.length
    const err = await openai('/vertex-no-token').chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e)
    assert.ok(err instanceof OpenAI.APIError, String(err))
    assert.equal(err.status, 503)
    assert.match(err.message, /could not get a Google access token/)
    assert.doesNotMatch(err.message, /PRIVATE KEY|BEGIN/)
    const anthropicErr = await anthropic('/vertex-no-token').messages.create({ model: 'x', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e)
    assert.ok(anthropicErr instanceof Anthropic.APIError, String(anthropicErr))
    assert.equal(anthropicErr.status, 503)
    assert.equal(geminiEmu.calls.length, before)
  })

  test('openai SDK → vertex (Claude model): Anthropic Messages at rawPredict, no model and anthropic_version in the body, whole and streamed', { timeout: 20_000 }, async () => {
    const c = await openai('/vertex-claude').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'Hello! How can I help you today?')
    assert.equal(c.usage?.completion_tokens, 9)
    const call = geminiEmu.calls.at(-1)!
    assert.equal(call.api, 'vertex-anthropic')
    assert.equal(call.path, '/v1/projects/portico-test/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5:rawPredict')
    assert.equal(call.body.model, undefined)
    assert.equal(call.body.anthropic_version, 'vertex-2023-10-16')
    assert.equal(call.headers.authorization, `Bearer ${VERTEX_TOKEN}`)

    const stream = await openai('/vertex-claude').chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    assert.equal(text, 'Hello! How can I help you today?')
    assert.equal(geminiEmu.calls.at(-1)!.method, 'streamRawPredict')

    // An Anthropic client on Claude-on-Vertex: same format, passed through, the body adapted all the same.
    const m = await anthropic('/vertex-claude').messages.create({ model: 'ignored', max_tokens: 32, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(m.content[0]!.type === 'text' ? m.content[0]!.text : '', 'Hello! How can I help you today?')
    const passed = geminiEmu.calls.at(-1)!
    assert.equal(passed.body.model, undefined)
    assert.equal(passed.body.anthropic_version, 'vertex-2023-10-16')
    assert.equal(passed.headers.authorization, `Bearer ${VERTEX_TOKEN}`)
    assert.equal(passed.headers['x-api-key'], undefined, 'the Anthropic client\'s key is not sent to Google')
  })

  test('openai SDK → vertex embeddings: translated to the text-embedding model\'s :predict and back (base64 as the SDK asks), tokens counted; no model list', { timeout: 20_000 }, async () => {
    const e = await openai('/vertex-embed').embeddings.create({ model: 'text-embedding-005', input: ['hello world', 'bye'], dimensions: 2 })
    assert.deepEqual(e.data.map(d => d.embedding.map(x => Math.round(x * 100) / 100)), [[0.1, 0.2], [0.1, 0.2]])
    assert.equal(e.usage.prompt_tokens, 3)
    const call = geminiEmu.openaiCalls.at(-1)!
    assert.equal(call.operation, 'predict')
    assert.deepEqual(call.body, { model: 'text-embedding-005', instances: [{ content: 'hello world' }, { content: 'bye' }], parameters: { outputDimensionality: 2 } })
    assert.equal(call.headers.authorization, `Bearer ${VERTEX_TOKEN}`)
    await waitFor(() => portico.logs().some(l => l.route === 'vertex-embed' && l['gen_ai.usage.input_tokens'] === 3))
    await assert.rejects(openai('/vertex-embed').models.list(), (err: unknown) => err instanceof OpenAI.NotFoundError && /Vertex AI has no model list/.test(err.message))
  })
})

async function waitFor (check: () => boolean, ms = 3000): Promise<void> {
  await waitUntil(check, ms, 'the access log')
}
