/**
 * Bedrock end to end through Portico: official SDKs as clients (`openai`, `@anthropic-ai/sdk`),
 * a real Portico process, and the Bedrock emulator (e2e/lib/llm-emulators/bedrock.ts) as the
 * provider, which VERIFIES every SigV4 signature with the AWS SDK's own signer over the request
 * as received (or a Bedrock API key). Credentials: static fake keys in the config, the AWS
 * default chain from the Portico process's environment, a Bedrock API key. The emulator picks
 * its recorded answer by the model in the path, so one route serves every case.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import {
  BEDROCK_TEST_API_KEY, BEDROCK_TEST_CREDENTIALS, startBedrockEmulator,
  type BedrockAnswer, type BedrockCall, type BedrockEmulator
} from '../lib/llm-emulators/bedrock.ts'

const MODEL = 'anthropic.claude-sonnet-4-20250514-v1:0'
const TOOLS = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Current weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] } } }]

/** The recorded answer for a model name (the model is the path's: the route sets none). */
function answerFor (call: BedrockCall): BedrockAnswer {
  switch (call.modelId) {
    case 'throttle': return { error: 'rate-limit' }
    case 'throttled-stream': return { stream: 'throttled' }
    case 'cut-stream': return { stream: 'cut-tool-call' }
  }
  const tools = call.body.toolConfig !== undefined
  // A conversation that already holds tool results is answered in text.
  const results = JSON.stringify(call.body.messages).includes('"toolResult"')
  if (call.streaming) return { stream: tools && !results ? 'tool-calls' : 'text' }
  return { response: tools && !results ? 'tool-calls' : 'text' }
}

describe('ai backends: Bedrock through Portico', () => {
  let emu: BedrockEmulator
  let slow: BedrockEmulator
  let portico: PorticoProcess
  let admin: string

  const openai = (prefix: string): OpenAI => new OpenAI({ apiKey: 'sk-client-not-for-aws', baseURL: `${portico.url}${prefix}`, maxRetries: 0 })

  before(async () => {
    emu = await startBedrockEmulator({ answer: answerFor })
    slow = await startBedrockEmulator({ answer: answerFor, frameDelayMs: 250 })
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    const route = (name: string, target: BedrockEmulator, policies?: Record<string, unknown>, settings: Record<string, string> = {}): NonNullable<ConfigFile['routes']>[number] => ({
      name,
      matches: [{ path: { pathPrefix: `/${name}` } }],
      backends: [{ ai: { name: `bedrock-${name}`, provider: { bedrock: { region: 'us-east-1', ...settings } }, hostOverride: target.url }, ...(policies !== undefined ? { policies } : {}) }]
    })
    portico = await startPortico({
      // The default chain's first source: the environment of the Portico process (no instance
      // metadata lookups here).
      env: {
        ADMIN_ADDR: `127.0.0.1:${adminPort}`,
        LOG_LEVEL: 'info',
        AWS_ACCESS_KEY_ID: BEDROCK_TEST_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: BEDROCK_TEST_CREDENTIALS.secretAccessKey,
        AWS_EC2_METADATA_DISABLED: 'true'
      },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          route('keys', emu, { backendAuth: { aws: { accessKeyId: BEDROCK_TEST_CREDENTIALS.accessKeyId, secretAccessKey: BEDROCK_TEST_CREDENTIALS.secretAccessKey } } }),
          route('chain', emu),
          route('apikey', emu, { backendAuth: { key: BEDROCK_TEST_API_KEY } }),
          route('badkeys', emu, { backendAuth: { aws: { accessKeyId: BEDROCK_TEST_CREDENTIALS.accessKeyId, secretAccessKey: 'portico-wrong-secret-not-real' } } }),
          route('fixed', emu, { backendAuth: { aws: { accessKeyId: BEDROCK_TEST_CREDENTIALS.accessKeyId, secretAccessKey: BEDROCK_TEST_CREDENTIALS.secretAccessKey } } }, { model: MODEL, guardrailIdentifier: 'gr-portico-test', guardrailVersion: '3' }),
          route('slow', slow, { backendAuth: { key: BEDROCK_TEST_API_KEY } })
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await emu?.close()
    await slow?.close()
  })

  test('openai SDK, SigV4 from keys in the config: a chat completion in OpenAI\'s shape, signed, usage counted', { timeout: 15_000 }, async () => {
    const refusedBefore = emu.refused.length
    const c = await openai('/keys').chat.completions.create({ model: MODEL, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'Say hello in French' }], max_tokens: 50, temperature: 0.3 })
    assert.equal(c.object, 'chat.completion')
    assert.equal(c.choices[0]!.message.content, 'Bonjour !')
    assert.equal(c.choices[0]!.finish_reason, 'stop')
    assert.equal(c.model, MODEL, 'the model asked (Converse answers name none)')
    assert.match(c.id, /^[0-9a-f-]{36}$/, 'the id is Bedrock\'s request id')
    assert.deepEqual(c.usage && [c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens], [14, 6, 20])
    const call = emu.calls.at(-1)!
    assert.equal(call.auth, 'sigv4', 'the emulator verified the signature with the AWS SDK\'s signer')
    assert.equal(emu.refused.length, refusedBefore)
    assert.equal(call.modelId, MODEL)
    assert.equal(call.streaming, false)
    assert.deepEqual(call.body, { messages: [{ role: 'user', content: [{ text: 'Say hello in French' }] }], system: [{ text: 'be brief' }], inferenceConfig: { maxTokens: 50, temperature: 0.3 } })
    assert.equal(call.headers['x-api-key'], undefined)
    assert.doesNotMatch(String(call.headers.authorization), /sk-client/, 'the client\'s key never reaches AWS')
    await waitFor(() => portico.logs().some(l => l.route === 'keys' && l['gen_ai.usage.output_tokens'] !== undefined))
    const log = portico.logs().find(l => l.route === 'keys' && l['gen_ai.usage.output_tokens'] !== undefined)!
    assert.equal(log['gen_ai.usage.input_tokens'], 14)
    assert.equal(log['gen_ai.usage.output_tokens'], 6)
    assert.equal(log['gen_ai.request.model'], MODEL)
  })

  test('openai SDK: a stream translated from the binary event stream, with usage', { timeout: 15_000 }, async () => {
    const stream = await openai('/keys').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    const ids = new Set<string>()
    for await (const chunk of stream) {
      ids.add(chunk.id)
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.choices[0]?.finish_reason != null) finish = chunk.choices[0].finish_reason
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(text, 'Bonjour, ça va ?')
    assert.equal(finish, 'stop')
    assert.deepEqual(usage && [usage.prompt_tokens, usage.completion_tokens], [14, 7])
    assert.equal(ids.size, 1)
    assert.match([...ids][0]!, /^[0-9a-f-]{36}$/)
    const call = emu.calls.at(-1)!
    assert.deepEqual([call.auth, call.streaming], ['sigv4', true])
  })

  test('openai SDK: tools, whole and streamed, and a tool-result turn', { timeout: 15_000 }, async () => {
    const whole = await openai('/keys').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris and Rome?' }], tools: TOOLS, tool_choice: 'auto' })
    const message = whole.choices[0]!.message
    assert.equal(whole.choices[0]!.finish_reason, 'tool_calls')
    assert.equal(message.content, 'I\'ll check both cities.')
    assert.deepEqual(message.tool_calls?.map(t => t.type === 'function' ? [t.id, t.function.name, JSON.parse(t.function.arguments)] : null),
      [['tooluse_paris01', 'get_weather', { city: 'Paris' }], ['tooluse_rome02', 'get_weather', { city: 'Rome', unit: 'celsius' }]])
    const sent = emu.calls.at(-1)!.body.toolConfig as { tools: Array<{ toolSpec: { name: string } }>, toolChoice: unknown }
    assert.deepEqual([sent.tools.map(t => t.toolSpec.name), sent.toolChoice], [['get_weather'], { auto: {} }])

    const runner = openai('/keys').chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: TOOLS })
    const final = await runner.finalChatCompletion()
    assert.deepEqual(final.choices[0]!.message.tool_calls?.map(t => t.type === 'function' ? [t.id, t.function.name, JSON.parse(t.function.arguments)] : null),
      [['tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', 'get_weather', { city: 'Paris' }]])
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls')

    const answer = await openai('/keys').chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        message,
        { role: 'tool', tool_call_id: 'tooluse_paris01', content: '18°C' },
        { role: 'tool', tool_call_id: 'tooluse_rome02', content: '24°C' }
      ],
      tools: TOOLS
    })
    assert.equal(answer.choices[0]!.message.content, 'Bonjour !')
    const turns = emu.calls.at(-1)!.body.messages as Array<{ role: string, content: Array<Record<string, unknown>> }>
    assert.deepEqual(turns.map(t => t.role), ['user', 'assistant', 'user'])
    assert.deepEqual(turns[2]!.content, [
      { toolResult: { toolUseId: 'tooluse_paris01', content: [{ text: '18°C' }] } },
      { toolResult: { toolUseId: 'tooluse_rome02', content: [{ text: '24°C' }] } }
    ])
    assert.equal(emu.calls.at(-1)!.auth, 'sigv4')
  })

  test('@anthropic-ai/sdk messages.stream → Bedrock: Anthropic\'s events, its final message', { timeout: 15_000 }, async () => {
    const anthropic = new Anthropic({ apiKey: 'sk-ant-client-not-for-aws', baseURL: `${portico.url}/keys`, maxRetries: 0 })
    const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
    let text = ''
    stream.on('text', delta => { text += delta })
    const final = await stream.finalMessage()
    assert.equal(text, 'Bonjour, ça va ?')
    assert.equal(final.stop_reason, 'end_turn')
    assert.equal(final.model, MODEL)
    assert.match(final.id, /^[0-9a-f-]{36}$/)
    assert.deepEqual([final.usage.input_tokens, final.usage.output_tokens], [14, 7])
    const call = emu.calls.at(-1)!
    assert.deepEqual([call.auth, call.streaming, call.headers['x-api-key']], ['sigv4', true, undefined])
    assert.deepEqual(call.body.inferenceConfig, { maxTokens: 100 })
    // And whole, with tools.
    const tools = await anthropic.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'Weather in Paris and Rome?' }], tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }] })
    assert.equal(tools.stop_reason, 'tool_use')
    assert.deepEqual(tools.content.filter(b => b.type === 'tool_use').map(b => b.type === 'tool_use' ? [b.id, b.input] : null), [['tooluse_paris01', { city: 'Paris' }], ['tooluse_rome02', { city: 'Rome', unit: 'celsius' }]])
  })

  test('openai SDK, Responses API → Bedrock: whole and streamed', { timeout: 15_000 }, async () => {
    const r = await openai('/keys').responses.create({ model: MODEL, input: 'Say hello in French' })
    assert.equal(r.output_text, 'Bonjour !')
    assert.equal(r.model, MODEL)
    assert.deepEqual([r.usage?.input_tokens, r.usage?.output_tokens], [14, 6])
    const stream = await openai('/keys').responses.create({ model: MODEL, input: 'hi', stream: true })
    let text = ''
    for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta
    assert.equal(text, 'Bonjour, ça va ?')
    assert.deepEqual([emu.calls.at(-1)!.auth, emu.calls.at(-1)!.streaming], ['sigv4', true])
  })

  test('credentials from the environment (the AWS default chain) sign; a client\'s query is not sent (the signature covers the query); a Bedrock API key is sent as Bearer; wrong keys are Bedrock\'s 403', { timeout: 15_000 }, async () => {
    const chained = await openai('/chain').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(chained.choices[0]!.message.content, 'Bonjour !')
    assert.match(String(emu.calls.at(-1)!.headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKIDPORTICOTESTONLY\//)
    assert.equal(emu.calls.at(-1)!.auth, 'sigv4')

    // A client's query string is not sent: the signature covers the query Bedrock gets (none).
    const queried = new OpenAI({ apiKey: 'sk-client', baseURL: `${portico.url}/keys`, maxRetries: 0, defaultQuery: { 'api-version': '2024-10-21' } })
    assert.equal((await queried.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).choices[0]!.message.content, 'Bonjour !')
    assert.equal(emu.calls.at(-1)!.auth, 'sigv4')

    const keyed = await openai('/apikey').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(keyed.choices[0]!.message.content, 'Bonjour !')
    assert.deepEqual([emu.calls.at(-1)!.auth, emu.calls.at(-1)!.headers.authorization], ['bearer', `Bearer ${BEDROCK_TEST_API_KEY}`])

    // A backend model replaces the client's; it is the one in the path. The backend's guardrail
    // is in the body, which is signed with it.
    const fixed = await openai('/fixed').chat.completions.create({ model: 'whatever', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(fixed.model, MODEL)
    assert.equal(emu.calls.at(-1)!.modelId, MODEL)
    assert.deepEqual(emu.calls.at(-1)!.body.guardrailConfig, { guardrailIdentifier: 'gr-portico-test', guardrailVersion: '3' })
    assert.equal(emu.calls.at(-1)!.auth, 'sigv4')

    const calls = emu.calls.length
    await assert.rejects(openai('/badkeys').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
      (err: unknown) => err instanceof OpenAI.PermissionDeniedError && /signature/.test(err.message))
    assert.equal(emu.calls.length, calls)
    assert.equal(emu.refused.at(-1), 'InvalidSignatureException')

    const dump = await (await fetch(`${admin}/config_dump`)).text()
    assert.match(dump, /bedrock-keys/)
    assert.doesNotMatch(dump, new RegExp(`${BEDROCK_TEST_CREDENTIALS.secretAccessKey}|${BEDROCK_TEST_CREDENTIALS.accessKeyId}|${BEDROCK_TEST_API_KEY}|portico-wrong-secret`), 'credentials are redacted in /config_dump')
  })

  test('a ThrottlingException is a 429 in the client\'s shape; an exception inside the stream is the client format\'s error event', { timeout: 15_000 }, async () => {
    await assert.rejects(openai('/keys').chat.completions.create({ model: 'throttle', messages: [{ role: 'user', content: 'hi' }] }),
      (err: unknown) => err instanceof OpenAI.RateLimitError && err.status === 429 && /Too many requests/.test(err.message))
    await assert.rejects(openai('/keys').chat.completions.create({ model: 'throttle', messages: [{ role: 'user', content: 'hi' }], stream: true }),
      (err: unknown) => err instanceof OpenAI.RateLimitError)
    const anthropic = new Anthropic({ apiKey: 'sk-ant-client', baseURL: `${portico.url}/keys`, maxRetries: 0 })
    await assert.rejects(anthropic.messages.create({ model: 'throttle', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      (err: unknown) => err instanceof Anthropic.RateLimitError && err.status === 429)

    // throttlingException after the first words: the OpenAI SDK raises the error event.
    const stream = await openai('/keys').chat.completions.create({ model: 'throttled-stream', messages: [{ role: 'user', content: 'a story' }], stream: true })
    let text = ''
    await assert.rejects((async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    })(), (err: unknown) => err instanceof OpenAI.APIError && /Too many tokens/.test(err.message))
    assert.equal(text, 'Once upon')
    // The Anthropic SDK gets Anthropic's `error` event.
    const astream = anthropic.messages.stream({ model: 'throttled-stream', max_tokens: 10, messages: [{ role: 'user', content: 'a story' }] })
    await assert.rejects(astream.finalMessage(), (err: unknown) => err instanceof Anthropic.APIError && /Too many tokens/.test(err.message))
    // A stream cut inside a tool call: a clean error, not a hang or a half answer.
    const cut = await openai('/keys').chat.completions.create({ model: 'cut-stream', messages: [{ role: 'user', content: 'weather' }], tools: TOOLS, stream: true })
    await assert.rejects((async () => { for await (const _ of cut); })(), (err: unknown) => err instanceof OpenAI.APIError)
    // Others are unaffected.
    assert.equal((await openai('/keys').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).choices[0]!.message.content, 'Bonjour !')
  })

  test('the first streamed token reaches the client before the provider finished', { timeout: 20_000 }, async () => {
    const stream = await openai('/slow').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true })
    let first = 0
    let text = ''
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content ?? ''
      if (delta !== '' && first === 0) first = performance.now()
      text += delta
    }
    const end = performance.now()
    assert.equal(text, 'Bonjour, ça va ?')
    // The emulator waits 250 ms after each frame: at least three more frames follow the first text.
    assert.ok(end - first >= 600, `the first token arrived ${Math.round(end - first)} ms before the end`)
    assert.equal(slow.calls.at(-1)!.auth, 'bearer')
    // The stream's usage (its metadata event) is counted too.
    await waitFor(() => portico.logs().some(l => l.route === 'slow' && l['gen_ai.usage.output_tokens'] !== undefined))
    const log = portico.logs().find(l => l.route === 'slow' && l['gen_ai.usage.output_tokens'] !== undefined)!
    assert.deepEqual([log['gen_ai.usage.input_tokens'], log['gen_ai.usage.output_tokens'], log['gen_ai.response.model']], [14, 7, MODEL])
  })
})

async function waitFor (check: () => boolean, timeoutMs = 5000): Promise<void> {
  await waitUntil(check, timeoutMs, 'the condition', 50)
}
