/**
 * The OpenAI Responses wire format (packages/engine/src/llm/formats/openai-responses.ts)
 * checked by the official `openai` SDK, which parses Responses strictly (its stream helper
 * checks event order, output indexes and item identity):
 * - ENCODER: a loopback node:http server answers `POST /v1/responses` with what the format
 *   encodes from neutral answers and neutral stream events (text, a tool call, parallel tool
 *   calls, reasoning, max tokens, an error mid-stream, error statuses); the SDK's
 *   `responses.create` (plain and `stream: true`) and `responses.stream()` must accept them
 *   and see the same content, ids, statuses and usage.
 * - DECODER: the same server replays the recorded transcripts the format's golden tests
 *   decode (test/golden/llm/openai-responses/streams/*.sse, responses/*.json) to the SDK, so
 *   the fixtures are what the SDK accepts, and the SDK's view matches the decoder's.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import { openaiResponsesFormat as format } from '@portico/engine/llm/formats/openai-responses'
import { isTranslationError, type ChatResponse, type StreamEvent } from '@portico/engine/llm/canonical'

const GOLDEN = join(import.meta.dirname, '../../packages/engine/test/golden/llm/openai-responses')
const KEY = 'sk-test-portico'
const OPTIONS = { now: 1767225600, requestModel: 'gpt-4.1' }

const USAGE = { inputTokens: 25, outputTokens: 9, cachedInputTokens: 5, reasoningTokens: 2 }

/** Neutral answers and streams, as another provider's decoder would produce them. */
const WHOLE: Record<string, ChatResponse> = {
  text: { id: 'msg_01XFDUDYJgAACzvnptvVoYEL', model: 'claude-sonnet-4-5', content: [{ type: 'text', text: 'Hello, wörld ✓' }], stopReason: 'end_turn', usage: USAGE },
  tools: {
    id: 'msg_01Aq9w938a90dw8q',
    model: 'claude-sonnet-4-5',
    content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_call', id: 'toolu_01A', name: 'get_weather', input: { city: 'Paris' } }, { type: 'tool_call', id: 'toolu_01B', name: 'get_time', input: { city: 'Tokyo' } }],
    stopReason: 'tool_use',
    usage: USAGE
  },
  max: { id: 'gen-1', model: 'gemini-2.5-flash', content: [{ type: 'text', text: 'Once upon' }], stopReason: 'max_tokens', usage: { inputTokens: 4, outputTokens: 2 } },
  reasoning: { id: 'msg_r', model: 'claude-sonnet-4-5', content: [{ type: 'reasoning', text: 'Three r.', signature: 'EqQBCgIYAhIM' }, { type: 'text', text: '3' }], stopReason: 'end_turn', usage: USAGE },
  json: { id: 'msg_json', model: 'claude-sonnet-4-5', content: [{ type: 'text', text: '{"name":"science fair","participants":["Alice","Bob"]}' }], stopReason: 'end_turn', usage: USAGE },
  nousage: { id: 'x', model: '', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn', usage: null }
}

function textEvents (index: number, pieces: string[]): StreamEvent[] {
  return [{ type: 'block_start', index, block: { type: 'text' } }, ...pieces.map((text): StreamEvent => ({ type: 'text_delta', index, text })), { type: 'block_stop', index }]
}
function callEvents (index: number, id: string, name: string, pieces: string[]): StreamEvent[] {
  return [{ type: 'block_start', index, block: { type: 'tool_call', id, name } }, ...pieces.map((json): StreamEvent => ({ type: 'tool_args_delta', index, json })), { type: 'block_stop', index }]
}
const START: StreamEvent = { type: 'start', id: 'msg_01Stream', model: 'claude-sonnet-4-5' }
const STREAMS: Record<string, StreamEvent[]> = {
  text: [START, ...textEvents(0, ['Hel', 'lo, ', 'wörld ✓']), { type: 'finish', stopReason: 'end_turn', usage: USAGE }],
  tool: [START, ...callEvents(0, 'toolu_01A', 'get_weather', ['{"ci', 'ty": "Par', 'is"}']), { type: 'finish', stopReason: 'tool_use', usage: USAGE }],
  parallel: [START, ...textEvents(0, ['Checking ', 'both.']), ...callEvents(1, 'toolu_01A', 'get_weather', ['{"city":"Paris"}']), ...callEvents(2, 'toolu_01B', 'get_time', ['{"city":', '"Tokyo"}']), { type: 'finish', stopReason: 'tool_use', usage: USAGE }],
  json: [START, ...textEvents(0, ['{"name":"science', ' fair","participants":["Alice"', ',"Bob"]}']), { type: 'finish', stopReason: 'end_turn', usage: USAGE }],
  twoTexts: [START, ...textEvents(0, ['a']), ...textEvents(1, ['b']), { type: 'finish', stopReason: 'end_turn', usage: USAGE }],
  reasoning: [START, { type: 'block_start', index: 0, block: { type: 'reasoning' } }, { type: 'reasoning_delta', index: 0, text: 'Three ' }, { type: 'reasoning_delta', index: 0, text: 'r.' }, { type: 'reasoning_delta', index: 0, text: '', signature: 'EqQBCgIYAhIM' }, { type: 'block_stop', index: 0 }, ...textEvents(1, ['3']), { type: 'finish', stopReason: 'end_turn', usage: USAGE }],
  // Max tokens hit mid-sentence (the provider never closed the block) and mid tool call.
  max: [START, { type: 'block_start', index: 0, block: { type: 'text' } }, { type: 'text_delta', index: 0, text: 'Once upon' }, { type: 'finish', stopReason: 'max_tokens', usage: { inputTokens: 4, outputTokens: 2 } }],
  maxTool: [START, { type: 'block_start', index: 0, block: { type: 'tool_call', id: 'toolu_1', name: 'f' } }, { type: 'tool_args_delta', index: 0, json: '{"a":' }, { type: 'finish', stopReason: 'max_tokens', usage: { inputTokens: 4, outputTokens: 2 } }],
  error: [START, ...textEvents(0, ['partial']).slice(0, 2), { type: 'error', error: { status: 529, kind: 'overloaded', message: 'Overloaded' } }]
}

interface Exchange { body: Record<string, unknown>, headers: Record<string, string | string[] | undefined> }

describe('OpenAI Responses wire format, checked by the official openai SDK', () => {
  let server: Server
  let client: OpenAI
  const seen: Exchange[] = []

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
        seen.push({ body, headers: req.headers })
        if (req.method !== 'POST' || req.url !== '/v1/responses') {
          res.writeHead(404).end()
          return
        }
        if (req.headers.authorization !== `Bearer ${KEY}`) {
          res.writeHead(401, { 'content-type': 'application/json' })
          res.end(JSON.stringify(format.encodeError({ status: 401, kind: 'authentication', message: 'Incorrect API key provided' })))
          return
        }
        const [kind, name] = String(body.model).split(':') as [string, string]
        if (kind === 'error') {
          const status = Number(name)
          const error = format.decodeError(status, { error: { message: `status ${status}`, param: status === 400 ? 'input' : null } })
          res.writeHead(status, { 'content-type': 'application/json' })
          res.end(JSON.stringify(format.encodeError(error)))
        } else if (kind === 'whole') {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end(JSON.stringify(format.encodeResponse(WHOLE[name]!, OPTIONS)))
        } else if (kind === 'stream') {
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          const encoder = format.newStreamEncoder(OPTIONS)
          // One write per event, as a translator forwards them.
          for (const event of STREAMS[name]!) res.write(encoder.encode(event))
          res.end(encoder.end())
        } else if (kind === 'fixture-stream') {
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          res.end(readFileSync(join(GOLDEN, 'streams', `${name}.sse`)))
        } else if (kind === 'fixture') {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end(readFileSync(join(GOLDEN, 'responses', `${name}.json`)))
        } else {
          res.writeHead(400).end()
        }
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    client = new OpenAI({ apiKey: KEY, baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, maxRetries: 0 })
  })

  after(async () => {
    await new Promise((resolve) => server.close(resolve))
  })

  const usage = { input_tokens: 25, input_tokens_details: { cached_tokens: 5 }, output_tokens: 9, output_tokens_details: { reasoning_tokens: 2 }, total_tokens: 34 }

  test('encodeResponse: text, tool calls, reasoning, max tokens parse with responses.create', async () => {
    const text = await client.responses.create({ model: 'whole:text', input: 'hi' })
    assert.equal(text.object, 'response')
    assert.equal(text.status, 'completed')
    assert.equal(text.output_text, 'Hello, wörld ✓')
    assert.equal(text.id, 'resp_msg_01XFDUDYJgAACzvnptvVoYEL')
    assert.equal(text.model, 'claude-sonnet-4-5')
    assert.deepEqual(text.usage, usage)

    const tools = await client.responses.create({ model: 'whole:tools', input: 'weather?' })
    const calls = tools.output.filter((item) => item.type === 'function_call')
    assert.deepEqual(calls.map((c) => [c.call_id, c.name, JSON.parse(c.arguments)]), [['toolu_01A', 'get_weather', { city: 'Paris' }], ['toolu_01B', 'get_time', { city: 'Tokyo' }]])
    assert.equal(tools.output_text, 'Let me look.')
    assert.equal(new Set(tools.output.map((i) => i.id)).size, 3, 'distinct item ids')

    const max = await client.responses.create({ model: 'whole:max', input: 'story' })
    assert.equal(max.status, 'incomplete')
    assert.deepEqual(max.incomplete_details, { reason: 'max_output_tokens' })
    assert.equal(max.output_text, 'Once upon')

    const reasoning = await client.responses.create({ model: 'whole:reasoning', input: 'r?' })
    const item = reasoning.output[0]
    assert.ok(item?.type === 'reasoning')
    assert.deepEqual(item.summary, [{ type: 'summary_text', text: 'Three r.' }])
    assert.equal(item.encrypted_content, 'EqQBCgIYAhIM')
    assert.equal(reasoning.output_text, '3')

    const noUsage = await client.responses.create({ model: 'whole:nousage', input: 'x' })
    assert.equal(noUsage.model, 'gpt-4.1', 'the requested model when the provider names none')
    assert.equal(noUsage.created_at, OPTIONS.now)
  })

  test('structured output: responses.parse() parses the encoded answer, whole and streamed', async () => {
    const text = { format: { type: 'json_schema' as const, name: 'event', strict: true, schema: { type: 'object', properties: { name: { type: 'string' }, participants: { type: 'array', items: { type: 'string' } } }, required: ['name', 'participants'], additionalProperties: false } } }
    const parsed = await client.responses.parse({ model: 'whole:json', input: 'x', text })
    assert.deepEqual(parsed.output_parsed, { name: 'science fair', participants: ['Alice', 'Bob'] })
    const stream = client.responses.stream({ model: 'stream:json', input: 'x', text })
    for await (const _ of stream) { /* drain */ }
    assert.deepEqual((await stream.finalResponse()).output_parsed, { name: 'science fair', participants: ['Alice', 'Bob'] })
  })

  test('stream encoder: responses.stream() accumulates the same final response', async () => {
    const run = async (name: string): Promise<{ events: string[], final: OpenAI.Responses.Response, deltas: string }> => {
      const stream = client.responses.stream({ model: `stream:${name}`, input: 'x' })
      const events: string[] = []
      let deltas = ''
      for await (const event of stream) {
        events.push(event.type)
        if (event.type === 'response.output_text.delta') deltas += event.delta
      }
      return { events, final: await stream.finalResponse(), deltas }
    }
    const text = await run('text')
    assert.equal(text.deltas, 'Hello, wörld ✓')
    assert.equal(text.final.output_text, 'Hello, wörld ✓')
    assert.equal(text.final.status, 'completed')
    assert.deepEqual(text.final.usage, usage)
    assert.equal(text.events[0], 'response.created')
    assert.equal(text.events.at(-1), 'response.completed')

    const tool = await run('tool')
    const call = tool.final.output[0]
    assert.ok(call?.type === 'function_call')
    assert.equal(call.call_id, 'toolu_01A')
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' })
    assert.equal(call.status, 'completed')

    const parallel = await run('parallel')
    assert.deepEqual(parallel.final.output.map((i) => i.type), ['message', 'function_call', 'function_call'])
    assert.deepEqual(parallel.final.output.flatMap((i) => i.type === 'function_call' ? [[i.call_id, i.name, JSON.parse(i.arguments)]] : []),
      [['toolu_01A', 'get_weather', { city: 'Paris' }], ['toolu_01B', 'get_time', { city: 'Tokyo' }]])
    assert.equal(parallel.final.output_text, 'Checking both.')

    const two = await run('twoTexts')
    const message = two.final.output[0]
    assert.ok(message?.type === 'message')
    assert.deepEqual(message.content.map((p) => p.type === 'output_text' ? p.text : ''), ['a', 'b'])

    const reasoning = await run('reasoning')
    const item = reasoning.final.output[0]
    assert.ok(item?.type === 'reasoning')
    assert.deepEqual(item.summary, [{ type: 'summary_text', text: 'Three r.' }])
    assert.equal(item.encrypted_content, 'EqQBCgIYAhIM')
    assert.ok(reasoning.events.includes('response.reasoning_summary_text.delta'))

    const max = await run('max')
    assert.equal(max.final.status, 'incomplete')
    assert.deepEqual(max.final.incomplete_details, { reason: 'max_output_tokens' })
    assert.equal(max.final.output_text, 'Once upon')
    assert.equal(max.events.at(-1), 'response.incomplete')

    const maxTool = await run('maxTool')
    const cut = maxTool.final.output[0]
    assert.ok(cut?.type === 'function_call')
    assert.equal(cut.status, 'incomplete')
    assert.equal(cut.arguments, '{"a":')
  })

  test('stream encoder: responses.create({ stream: true }) sees every event in order', async () => {
    const stream = await client.responses.create({ model: 'stream:parallel', input: 'x', stream: true })
    const sequence: number[] = []
    const types: string[] = []
    const added: Array<[number, string]> = []
    for await (const event of stream) {
      sequence.push(event.sequence_number)
      types.push(event.type)
      if (event.type === 'response.output_item.added') added.push([event.output_index, event.item.type])
    }
    assert.deepEqual(sequence, sequence.map((_, i) => i))
    assert.deepEqual(added, [[0, 'message'], [1, 'function_call'], [2, 'function_call']])
    assert.equal(types.filter((t) => t === 'response.output_item.added').length, 3)
    assert.equal(types.filter((t) => t === 'response.output_item.done').length, 3)
  })

  test('stream encoder: an error mid-stream is the SDK\'s APIError', async () => {
    const stream = client.responses.stream({ model: 'stream:error', input: 'x' })
    let deltas = ''
    await assert.rejects(async () => {
      for await (const event of stream) if (event.type === 'response.output_text.delta') deltas += event.delta
    }, (error: unknown) => {
      assert.ok(error instanceof OpenAI.APIError, String(error))
      assert.match(error.message, /Overloaded/)
      assert.equal(error.code, 'server_error')
      return true
    })
    assert.equal(deltas, 'partial', 'what came before the error was delivered')
  })

  test('encodeError: the SDK raises its typed errors with message, type, param and code', async () => {
    const cases: Array<[number, new (...args: never[]) => Error, string, string | null]> = [
      [400, OpenAI.BadRequestError, 'invalid_request_error', null],
      [401, OpenAI.AuthenticationError, 'invalid_request_error', 'invalid_api_key'],
      [403, OpenAI.PermissionDeniedError, 'invalid_request_error', null],
      [404, OpenAI.NotFoundError, 'invalid_request_error', null],
      [429, OpenAI.RateLimitError, 'requests', 'rate_limit_exceeded'],
      [500, OpenAI.InternalServerError, 'server_error', null],
      [503, OpenAI.InternalServerError, 'server_error', null]
    ]
    for (const [status, type, errorType, code] of cases) {
      await assert.rejects(client.responses.create({ model: `error:${status}`, input: 'x' }), (error: unknown) => {
        assert.ok(error instanceof type, `${status}: ${String(error)}`)
        assert.ok(error instanceof OpenAI.APIError)
        assert.equal(error.status, status)
        assert.equal(error.type, errorType)
        assert.equal(error.code, code)
        assert.equal(error.param, status === 400 ? 'input' : null)
        assert.match(error.message, new RegExp(`status ${status}`))
        return true
      })
    }
    const wrongKey = new OpenAI({ apiKey: 'sk-test-wrong', baseURL: client.baseURL, maxRetries: 0 })
    await assert.rejects(wrongKey.responses.create({ model: 'whole:text', input: 'x' }), OpenAI.AuthenticationError)
  })

  test('decoder fixtures: the SDK accepts every recorded stream and sees what the decoder sees', async () => {
    const names = readdirSync(join(GOLDEN, 'streams')).filter((f) => f.endsWith('.sse') && !f.includes('.encoded.')).map((f) => f.slice(0, -4))
    assert.ok(names.length >= 6)
    for (const name of names) {
      const neutral = JSON.parse(readFileSync(join(GOLDEN, 'streams', `${name}.neutral.json`), 'utf8')) as StreamEvent[]
      const last = neutral.at(-1)!
      const stream = client.responses.stream({ model: `fixture-stream:${name}`, input: 'x' })
      if (last.type === 'error') {
        // A failed response / error event: the SDK ends in an error too (or a failed status).
        let failed = false
        try {
          for await (const event of stream) if (event.type === 'response.failed') failed = true
        } catch (error) {
          assert.ok(error instanceof OpenAI.OpenAIError, `${name}: ${String(error)}`)
          failed = true
        }
        assert.ok(failed, name)
        continue
      }
      for await (const _ of stream) { /* drain */ }
      const final = await stream.finalResponse()
      const text = neutral.flatMap((e) => e.type === 'text_delta' ? [e.text] : []).join('')
      assert.equal(final.output_text, text, name)
      const calls = neutral.flatMap((e) => e.type === 'block_start' && e.block.type === 'tool_call' ? [[e.block.id, e.block.name]] : [])
      assert.deepEqual(final.output.flatMap((i) => i.type === 'function_call' ? [[i.call_id, i.name]] : []), calls, name)
      assert.ok(last.type === 'finish')
      assert.equal(final.usage?.input_tokens, last.usage?.inputTokens, name)
      assert.equal(final.usage?.output_tokens, last.usage?.outputTokens, name)
      assert.equal(final.status, last.stopReason === 'max_tokens' ? 'incomplete' : 'completed', name)
    }
  })

  test('decoder fixtures: the SDK accepts every recorded answer and sees what the decoder sees', async () => {
    const names = readdirSync(join(GOLDEN, 'responses')).filter((f) => f.endsWith('.json') && !f.includes('.neutral.') && !f.includes('.encoded.')).map((f) => f.slice(0, -5))
    for (const name of names) {
      const response = await client.responses.create({ model: `fixture:${name}`, input: 'x' })
      const decoded = format.decodeResponse(JSON.parse(readFileSync(join(GOLDEN, 'responses', `${name}.json`), 'utf8')))
      assert.ok(!isTranslationError(decoded))
      assert.equal(response.output_text, decoded.content.flatMap((p) => p.type === 'text' ? [p.text] : []).join(''), name)
      assert.equal(response.usage?.input_tokens, decoded.usage?.inputTokens, name)
    }
  })

  test('the SDK\'s own requests decode, and what encodeRequest sends is a request the SDK could have built', async () => {
    seen.length = 0
    await client.responses.create({
      model: 'whole:text',
      instructions: 'Be brief.',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'weather?' }, { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'low' }] }],
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }, strict: true }],
      tool_choice: { type: 'function', name: 'get_weather' },
      text: { format: { type: 'json_schema', name: 'w', schema: { type: 'object', properties: {}, additionalProperties: false }, strict: true } },
      max_output_tokens: 100,
      temperature: 0.5,
      store: false
    })
    const decoded = format.decodeRequest(seen[0]!.body)
    assert.ok(!isTranslationError(decoded), JSON.stringify(decoded))
    assert.deepEqual(decoded.system, ['Be brief.'])
    assert.deepEqual(decoded.toolChoice, { type: 'tool', name: 'get_weather' })
    assert.equal(decoded.maxTokens, 100)
    const encoded = format.encodeRequest(decoded, 'whole:text')
    assert.ok(!isTranslationError(encoded))
    // Send the encoded request through the SDK unchanged: it is a valid ResponseCreateParams.
    seen.length = 0
    await client.responses.create(encoded as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    assert.deepEqual(seen[0]!.body, encoded)
  })
})
