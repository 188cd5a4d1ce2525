/**
 * The Anthropic emulator (e2e/lib/llm-emulators/anthropic.ts) checked by the official
 * `@anthropic-ai/sdk` talking to it directly: messages.create, messages.stream with tools and
 * thinking, models.list, and errors surfacing as the SDK's typed errors. What the SDK accepts
 * from the emulator is what Portico must consume from Anthropic.
 *
 * Then the reverse: Portico's Anthropic ENCODER (llm/formats/anthropic-messages.ts) serves the
 * SDK through a tiny server — whole answers, event streams and errors built from neutral
 * values — which is the bar for Portico serving Anthropic-format clients such as Claude Code.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import Anthropic, { type APIError } from '@anthropic-ai/sdk'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { setForTest } from '@portico/testkit/for-test'
import { ANTHROPIC_TEST_KEY, EMULATED_MODELS, loadAnthropicTranscripts, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { anthropicMessagesFormat as format, decodeAnthropicModelList, encodeAnthropicModelList } from '@portico/engine/llm/formats/anthropic-messages'
import { isTranslationError, translationError, type StreamEvent, type TranslationError } from '@portico/engine/llm/canonical'

const transcripts = loadAnthropicTranscripts()
const recorded = (name: string): Record<string, unknown> => transcripts.get(name)!.message!
const MODEL = 'claude-sonnet-4-6'
const ask = (text: string) => ({ model: MODEL, max_tokens: 1024, messages: [{ role: 'user' as const, content: text }] })
const TOOLS = [{ name: 'get_weather', description: 'Current weather for a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } }]

describe('Anthropic emulator, checked by @anthropic-ai/sdk', () => {
  let emulator: AnthropicEmulator
  let client: Anthropic

  before(async () => {
    emulator = await startAnthropicEmulator()
    client = new Anthropic({ apiKey: ANTHROPIC_TEST_KEY, baseURL: emulator.url, maxRetries: 0 })
  })
  after(async () => { await emulator.close() })

  test('messages.create: the recorded message, typed; the SDK\'s key and API version were checked', async () => {
    const message = await client.messages.create(ask('hello'))
    assert.deepEqual(message, recorded('text'))
    assert.equal(message.content[0]?.type, 'text')
    const headers = emulator.headers.at(-1)!
    // SDK 1.x sends the key as a bearer token and the 2026-10-21 API version.
    assert.equal(headers.authorization, `Bearer ${ANTHROPIC_TEST_KEY}`)
    assert.equal(headers['anthropic-version'], '2026-10-21')
    assert.equal(emulator.bodies.at(-1)!.max_tokens, 1024)
    // x-api-key and 2023-06-01 (what Portico's adapter sends) are accepted as well.
    const legacy = new Anthropic({ apiKey: null, baseURL: emulator.url, maxRetries: 0, defaultHeaders: { 'x-api-key': ANTHROPIC_TEST_KEY, 'anthropic-version': '2023-06-01' } })
    assert.deepEqual(await legacy.messages.create({ ...ask('hello'), temperature: 0.5 } as Anthropic.MessageCreateParamsNonStreaming), recorded('text'))
    assert.equal(emulator.headers.at(-1)!['x-api-key'], ANTHROPIC_TEST_KEY)
    assert.equal(emulator.headers.at(-1)!['anthropic-version'], '2023-06-01')
  })

  test('messages.create: tool calls, max tokens, stop sequence, thinking', async () => {
    for (const name of ['tool-calls', 'max-tokens', 'stop-sequence', 'reasoning', 'refusal']) {
      const message = await client.messages.create({ ...ask(name), tools: TOOLS })
      assert.deepEqual(message, recorded(name), name)
    }
  })

  test('messages.stream with tools: events in order, the final message assembled with parsed input', async () => {
    const stream = client.messages.stream({ ...ask('tool-calls'), tools: TOOLS })
    const types: string[] = []
    const json: string[] = []
    stream.on('streamEvent', e => types.push(e.type))
    stream.on('inputJson', partial => json.push(partial))
    const message = await stream.finalMessage()
    assert.deepEqual(types, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'content_block_start',
      'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
    assert.equal(message.stop_reason, 'tool_use')
    const call = message.content[1]
    assert.ok(call?.type === 'tool_use')
    assert.deepEqual(call.input, { city: 'San Francisco, CA', unit: 'fahrenheit' })
    assert.equal(call.id, 'toolu_01T1x1fJ34qAmk2tNTrN7Up6')
    assert.deepEqual(message.usage.output_tokens, 89)
    assert.ok(json.length > 0)
  })

  test('messages.stream: parallel tool calls, thinking with its signature, UTF-8 split across writes', async () => {
    const parallel = await client.messages.stream(ask('parallel-tool-calls')).finalMessage()
    assert.deepEqual(parallel.content.map(b => b.type === 'tool_use' ? [b.name, b.input] : b.type), [['get_weather', { city: 'Paris' }], ['get_time', { city: 'Tokyo' }]])
    const thinking = await client.messages.stream(ask('reasoning')).finalMessage()
    assert.deepEqual(thinking.content.map(b => b.type), ['thinking', 'redacted_thinking', 'text'])
    assert.ok(thinking.content[0]?.type === 'thinking' && thinking.content[0].signature === 'EqQBCgIYAhIMsig')
    const text = await client.messages.stream(ask('text')).finalText()
    assert.equal(text, 'Bonjour ! Grüße — ✓ 日本語 🎉')
  })

  test('models.list', async () => {
    const ids: string[] = []
    for await (const model of client.models.list()) ids.push(model.id)
    assert.deepEqual(ids, EMULATED_MODELS.map(m => m.id))
  })

  test('errors are the SDK\'s typed errors, with Anthropic\'s error type', async () => {
    const cases: Array<[string, new (...args: any[]) => APIError, number, string]> = [
      ['invalid-request', Anthropic.BadRequestError, 400, 'invalid_request_error'],
      ['auth', Anthropic.AuthenticationError, 401, 'authentication_error'],
      ['rate-limit', Anthropic.RateLimitError, 429, 'rate_limit_error'],
      ['overloaded', Anthropic.OverloadedError, 529, 'overloaded_error'],
      ['too-large', Anthropic.ContentTooLargeError, 413, 'request_too_large'],
      ['api-error', Anthropic.InternalServerError, 500, 'api_error']
    ]
    for (const [name, type, status, errorType] of cases) {
      await assert.rejects(client.messages.create(ask(name)), (err: unknown) => {
        assert.ok(err instanceof type, `${name}: ${String(err)}`)
        assert.equal(err.status, status)
        assert.equal((err.error as { error?: { type?: string } }).error?.type, errorType)
        return true
      })
    }
    const wrongKey = new Anthropic({ apiKey: 'sk-ant-wrong', baseURL: emulator.url, maxRetries: 0 })
    await assert.rejects(wrongKey.messages.create(ask('hello')), Anthropic.AuthenticationError)
    // The version header is required, as at the real API (the SDK always sends it; a bare fetch does not).
    const bare = await fetch(`${emulator.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': ANTHROPIC_TEST_KEY, 'content-type': 'application/json' }, body: JSON.stringify(ask('hello')) })
    assert.equal(bare.status, 400)
    assert.equal(((await bare.json()) as { error: { type: string } }).error.type, 'invalid_request_error')
    // 2026-10-21 removed the sampling parameters.
    await assert.rejects(client.messages.create({ ...ask('hello'), temperature: 0.2 } as Anthropic.MessageCreateParamsNonStreaming), (err: unknown) => err instanceof Anthropic.BadRequestError && /temperature/.test(err.message))
  })

  test('an error event mid-stream and a stream cut mid-tool-call fail the SDK\'s stream cleanly', async () => {
    await assert.rejects(client.messages.stream(ask('hostile-error-mid-stream')).finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err))
      assert.equal((err.error as { error?: { type?: string } }).error?.type, 'overloaded_error')
      return true
    })
    await assert.rejects(client.messages.stream(ask('hostile-cut-mid-tool-call')).finalMessage(), Anthropic.AnthropicError)
  })

  test('an endless stream (pings only) runs until the client aborts it', async () => {
    const stream = client.messages.stream(ask('hostile-endless'))
    const events: string[] = []
    stream.on('streamEvent', e => events.push(e.type))
    setTimeout(() => stream.abort(), 200)
    await assert.rejects(stream.finalMessage(), Anthropic.APIUserAbortError)
    assert.deepEqual(events, ['message_start'])
  })
})

/** Serves whatever `next` gives as the answer to each POST /v1/messages. */
async function encoderServer (next: () => { status: number, contentType: string, body: string }): Promise<Backend> {
  return startBackend((req, res) => {
    req.resume()
    req.on('end', () => {
      const answer = next()
      res.writeHead(answer.status, { 'content-type': answer.contentType, 'request-id': 'req_portico' })
      res.end(answer.body)
    })
  })
}

function neutralEvents (name: string): StreamEvent[] {
  const decoder = format.newStreamDecoder()
  return [...decoder.push(Buffer.from(transcripts.get(name)!.stream!)), ...decoder.end()]
}

function encodeEvents (events: StreamEvent[]): string {
  const encoder = format.newStreamEncoder({ now: 0, requestModel: MODEL })
  return events.map(e => encoder.encode(e)).join('') + encoder.end()
}

describe('Portico\'s Anthropic encoder, checked by @anthropic-ai/sdk', () => {
  let server: Backend
  let client: Anthropic
  // What the server answers next: each test sets its own (setForTest: put back after it).
  const serve: { answer: { status: number, contentType: string, body: string } } = { answer: { status: 500, contentType: 'text/plain', body: '' } }

  before(async () => {
    server = await encoderServer(() => serve.answer)
    client = new Anthropic({ apiKey: 'sk-ant-test-portico', baseURL: server.url, maxRetries: 0 })
  })
  after(async () => { await server.close() })

  test('encodeResponse: every recorded answer, decoded to neutral and encoded again, is a Message the SDK returns as is', async t => {
    for (const name of ['text', 'tool-calls', 'max-tokens', 'stop-sequence', 'reasoning', 'refusal']) {
      const neutral = format.decodeResponse(recorded(name))
      assert.ok(!isTranslationError(neutral))
      const body = format.encodeResponse(neutral, { now: 0, requestModel: MODEL })
      setForTest(t, serve, 'answer', { status: 200, contentType: 'application/json', body: JSON.stringify(body) })
      const message = await client.messages.create(ask(name))
      assert.deepEqual(message, body, name)
      assert.equal(message.type, 'message')
    }
  })

  test('the stream encoder: recorded streams re-encoded give the SDK the same final message', async t => {
    for (const name of ['text', 'tool-calls', 'parallel-tool-calls', 'max-tokens', 'stop-sequence', 'reasoning']) {
      setForTest(t, serve, 'answer', { status: 200, contentType: 'text/event-stream', body: encodeEvents(neutralEvents(name)) })
      const viaEncoder = await client.messages.stream(ask(name)).finalMessage()
      setForTest(t, serve, 'answer', { status: 200, contentType: 'text/event-stream', body: transcripts.get(name)!.stream! })
      const original = await client.messages.stream(ask(name)).finalMessage()
      // Redacted thinking has no neutral form (documented), and the usage is written out whole.
      const expected = { ...original, content: original.content.filter(b => b.type !== 'redacted_thinking'), usage: viaEncoder.usage }
      assert.deepEqual(viaEncoder, expected, name)
      assert.equal(viaEncoder.usage.output_tokens, original.usage.output_tokens, name)
    }
  })

  test('the stream encoder: an OpenAI-shaped neutral stream (no block stops, interleaved starts) is a valid Anthropic stream', async t => {
    const events: StreamEvent[] = [
      { type: 'start', id: 'chatcmpl-abc', model: 'gpt-4o-mini' },
      { type: 'block_start', index: 0, block: { type: 'text' } },
      { type: 'text_delta', index: 0, text: 'Checking ' },
      { type: 'text_delta', index: 0, text: 'the weather.' },
      { type: 'block_start', index: 1, block: { type: 'tool_call', id: 'call_1', name: 'get_weather' } },
      { type: 'tool_args_delta', index: 1, json: '{"city":' },
      { type: 'tool_args_delta', index: 1, json: '"Oslo"}' },
      { type: 'block_start', index: 2, block: { type: 'tool_call', id: 'call_2', name: 'get_weather' } },
      { type: 'tool_args_delta', index: 2, json: '{"city":"Bergen"}' },
      { type: 'finish', stopReason: 'tool_use', usage: { inputTokens: 40, outputTokens: 22, cachedInputTokens: 16, reasoningTokens: 0 } }
    ]
    setForTest(t, serve, 'answer', { status: 200, contentType: 'text/event-stream', body: encodeEvents(events) })
    const message = await client.messages.stream({ ...ask('weather'), tools: TOOLS }).finalMessage()
    assert.equal(message.id, 'chatcmpl-abc')
    assert.equal(message.model, 'gpt-4o-mini')
    assert.equal(message.stop_reason, 'tool_use')
    assert.deepEqual(message.content.map(b => b.type === 'tool_use' ? [b.id, b.input] : b.type === 'text' ? b.text : b.type),
      ['Checking the weather.', ['call_1', { city: 'Oslo' }], ['call_2', { city: 'Bergen' }]])
    assert.deepEqual({ ...message.usage }, { input_tokens: 24, output_tokens: 22, cache_creation_input_tokens: 0, cache_read_input_tokens: 16, output_tokens_details: { thinking_tokens: 0 } })
  })

  test('the stream encoder: a provider error mid-stream reaches the SDK as a typed APIError', async t => {
    const events = neutralEvents('hostile-cut-mid-tool-call')
    setForTest(t, serve, 'answer', { status: 200, contentType: 'text/event-stream', body: encodeEvents(events) })
    await assert.rejects(client.messages.stream(ask('x')).finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err))
      assert.equal((err.error as { error?: { type?: string } }).error?.type, 'api_error')
      return true
    })
  })

  test('encodeAnthropicModelList: a neutral model list (as from OpenAI) is a page models.list reads', async t => {
    setForTest(t, serve, 'answer', { status: 200, contentType: 'application/json', body: JSON.stringify(encodeAnthropicModelList([{ id: 'gpt-4o-mini', created: 1721172741 }, { id: 'o3', displayName: 'o3' }])) })
    const models = []
    for await (const m of client.models.list()) models.push(m)
    assert.deepEqual(models.map(m => [m.id, m.display_name, m.created_at]), [['gpt-4o-mini', 'gpt-4o-mini', '2024-07-16T23:32:21Z'], ['o3', 'o3', '1970-01-01T00:00:00Z']])
    assert.deepEqual(decodeAnthropicModelList(JSON.parse(serve.answer.body)), [{ id: 'gpt-4o-mini', created: 1721172741, displayName: 'gpt-4o-mini' }, { id: 'o3', created: 0, displayName: 'o3' }])
  })

  test('encodeError: each neutral error is the SDK\'s typed error for its status', async t => {
    const cases: Array<[TranslationError, new (...args: any[]) => APIError, string]> = [
      [translationError(400, 'invalid_request', 'messages[0].content[0].type: "document" blocks are not supported', 'messages[0].content[0].type'), Anthropic.BadRequestError, 'invalid_request_error'],
      [translationError(401, 'authentication', 'bad key'), Anthropic.AuthenticationError, 'authentication_error'],
      [translationError(403, 'permission', 'no'), Anthropic.PermissionDeniedError, 'permission_error'],
      [translationError(404, 'not_found', 'no model'), Anthropic.NotFoundError, 'not_found_error'],
      [translationError(413, 'invalid_request', 'too big'), Anthropic.ContentTooLargeError, 'request_too_large'],
      [translationError(429, 'rate_limit', 'slow down'), Anthropic.RateLimitError, 'rate_limit_error'],
      [translationError(500, 'api_error', 'oops'), Anthropic.InternalServerError, 'api_error'],
      [translationError(504, 'timeout', 'late'), Anthropic.GatewayTimeoutError, 'timeout_error'],
      [translationError(529, 'overloaded', 'busy'), Anthropic.OverloadedError, 'overloaded_error']
    ]
    for (const [error, type, errorType] of cases) {
      setForTest(t, serve, 'answer', { status: error.status, contentType: 'application/json', body: JSON.stringify(format.encodeError(error)) })
      await assert.rejects(client.messages.create(ask('x')), (err: unknown) => {
        assert.ok(err instanceof type, `${errorType}: ${String(err)}`)
        assert.equal(err.status, error.status)
        assert.equal((err.error as { error?: { type?: string } }).error?.type, errorType)
        assert.match(err.message, new RegExp(error.message.slice(0, 10).replace(/[[\]"().]/g, '.')))
        return true
      })
    }
  })
})
