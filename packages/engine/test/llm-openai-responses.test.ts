/**
 * The OpenAI Responses API wire format (llm/formats/openai-responses.ts) against golden files
 * (test/golden/llm/openai-responses/): every request, answer, stream and error fixture is
 * decoded and compared with its `<case>.neutral.json`, and re-encoded and compared with its
 * `<case>.encoded.*` (what Portico would send to OpenAI / answer a Responses client). Streams
 * are fed in random splits (events, lines and UTF-8 characters cut) and must decode the same.
 * `UPDATE_GOLDEN=1` rewrites the outputs. Then round trips and hostile input.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { openaiResponsesFormat as format, RESPONSES_STREAM_MAX_ACCUMULATED } from '../src/llm/formats/openai-responses.ts'
import { isTranslationError, type ChatRequest, type StreamEvent } from '../src/llm/canonical.ts'
import { SseReader, SSE_MAX_EVENT_BYTES } from '../src/llm/sse.ts'

const DIR = join(import.meta.dirname, 'golden/llm/openai-responses')
const UPDATE = process.env.UPDATE_GOLDEN === '1'
const OPTIONS = { now: 1767225600, requestModel: 'gpt-4.1' }

function golden (path: string, actual: string): void {
  if (UPDATE || !existsSync(path)) {
    if (!UPDATE) assert.fail(`missing golden file ${path} (run with UPDATE_GOLDEN=1)`)
    writeFileSync(path, actual)
    return
  }
  assert.equal(actual, readFileSync(path, 'utf8'), path)
}

const json = (value: unknown): string => JSON.stringify(value, null, 2) + '\n'
const cases = (sub: string, ext: string): string[] =>
  readdirSync(join(DIR, sub)).filter((f) => f.endsWith(ext) && !f.includes('.neutral.') && !f.includes('.encoded.')).map((f) => f.slice(0, -ext.length)).sort()

/** A deterministic pseudo-random generator, so a failing split can be reproduced. */
function random (seed: number): () => number {
  let state = seed
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    return state / 0x7fffffff
  }
}

/** Decodes `bytes` pushed in pieces cut at random points (mid-line, mid-character). */
function decodeSplit (bytes: Buffer, seed: number, maxPiece = 40): StreamEvent[] {
  const next = random(seed)
  const decoder = format.newStreamDecoder()
  const events: StreamEvent[] = []
  for (let i = 0; i < bytes.length;) {
    const size = 1 + Math.floor(next() * maxPiece)
    events.push(...decoder.push(bytes.subarray(i, i + size)))
    i += size
  }
  events.push(...decoder.end())
  return events
}

function encodeStream (events: StreamEvent[]): string {
  const encoder = format.newStreamEncoder(OPTIONS)
  return events.map((e) => encoder.encode(e)).join('') + encoder.end()
}

test('golden requests: decode to neutral, encode to what OpenAI is sent', () => {
  for (const name of cases('requests', '.json')) {
    const body = JSON.parse(readFileSync(join(DIR, 'requests', `${name}.json`), 'utf8'))
    const decoded = format.decodeRequest(body)
    golden(join(DIR, 'requests', `${name}.neutral.json`), json(decoded))
    if (name.startsWith('refused-')) {
      assert.ok(isTranslationError(decoded), `${name} is refused`)
      assert.equal(decoded.status, 400)
      assert.ok(decoded.field !== undefined, `${name} names the field`)
      continue
    }
    assert.ok(!isTranslationError(decoded), `${name}: ${JSON.stringify(decoded)}`)
    const encoded = format.encodeRequest(decoded, decoded.model)
    assert.ok(!isTranslationError(encoded), name)
    golden(join(DIR, 'requests', `${name}.encoded.json`), json(encoded))
  }
})

test('golden requests: refusals name the field (stateful fields, hosted tools)', () => {
  const field = (name: string): string | undefined => {
    const decoded = format.decodeRequest(JSON.parse(readFileSync(join(DIR, 'requests', `${name}.json`), 'utf8')))
    assert.ok(isTranslationError(decoded))
    return decoded.field
  }
  assert.equal(field('refused-previous-response-id'), 'previous_response_id')
  assert.equal(field('refused-conversation'), 'conversation')
  assert.equal(field('refused-store'), 'store')
  assert.equal(field('refused-background'), 'background')
  assert.equal(field('refused-web-search'), 'tools[0].type')
  assert.equal(field('refused-file-search'), 'tools[0].type')
  assert.equal(field('refused-code-interpreter'), 'tools[0].type')
  assert.equal(field('refused-file-id'), 'input[0].content[1].file_id')
  assert.equal(field('refused-item-reference'), 'input[0].type')
  assert.equal(field('refused-tool-choice-hosted'), 'tool_choice')
  assert.equal(field('refused-unknown-field'), 'frobnicate')
})

test('round trip: decode → encode → decode gives the same neutral request', () => {
  for (const name of cases('requests', '.json')) {
    if (name.startsWith('refused-')) continue
    const first = format.decodeRequest(JSON.parse(readFileSync(join(DIR, 'requests', `${name}.json`), 'utf8'))) as ChatRequest
    const encoded = format.encodeRequest(first, first.model)
    assert.ok(!isTranslationError(encoded))
    const second = format.decodeRequest(encoded)
    assert.ok(!isTranslationError(second), `${name}: ${JSON.stringify(second)}`)
    // Documented normalisations: system texts join into one `instructions`; reasoning items
    // the client sent back are not sent to OpenAI (they need the id of OpenAI's own item).
    const normal = (r: ChatRequest): ChatRequest => ({
      ...r,
      system: r.system.length > 0 ? [r.system.join('\n\n')] : [],
      messages: r.messages.map((m) => ({ ...m, content: m.content.filter((p) => p.type !== 'reasoning') })).filter((m) => m.content.length > 0)
    })
    assert.deepEqual(second, normal(first), name)
  }
})

test('golden answers: decode to neutral and encode back for a Responses client', () => {
  for (const name of cases('responses', '.json')) {
    const body = JSON.parse(readFileSync(join(DIR, 'responses', `${name}.json`), 'utf8'))
    const decoded = format.decodeResponse(body)
    golden(join(DIR, 'responses', `${name}.neutral.json`), json(decoded))
    assert.ok(!isTranslationError(decoded), name)
    const encoded = format.encodeResponse(decoded, OPTIONS)
    golden(join(DIR, 'responses', `${name}.encoded.json`), json(encoded))
    // Encoded answers decode to the same neutral answer (ids renamed aside).
    const again = format.decodeResponse(encoded)
    assert.ok(!isTranslationError(again))
    assert.deepEqual({ ...again, id: decoded.id }, decoded, name)
    assert.equal(encoded.status, body.status, name)
    assert.deepEqual(encoded.usage, body.usage, name)
    assert.deepEqual(encoded.incomplete_details, body.incomplete_details, name)
  }
  const stop = (name: string): string => {
    const decoded = format.decodeResponse(JSON.parse(readFileSync(join(DIR, 'responses', `${name}.json`), 'utf8')))
    assert.ok(!isTranslationError(decoded))
    return decoded.stopReason
  }
  assert.equal(stop('text'), 'end_turn')
  assert.equal(stop('tool-calls'), 'tool_use')
  assert.equal(stop('max-tokens'), 'max_tokens')
  assert.equal(stop('content-filter'), 'content_filter')
})

test('golden streams: any split decodes alike; re-encoded for a Responses client', () => {
  for (const name of cases('streams', '.sse')) {
    const bytes = readFileSync(join(DIR, 'streams', `${name}.sse`))
    const whole = decodeSplit(bytes, 1, bytes.length)
    golden(join(DIR, 'streams', `${name}.neutral.json`), json(whole))
    for (let seed = 1; seed <= 40; seed++) {
      assert.deepEqual(decodeSplit(bytes, seed, 1 + (seed % 7) * 13), whole, `${name} split with seed ${seed}`)
    }
    golden(join(DIR, 'streams', `${name}.encoded.sse`), encodeStream(whole))
  }
})

test('golden streams: what the neutral events say', () => {
  const events = (name: string): StreamEvent[] => decodeSplit(readFileSync(join(DIR, 'streams', `${name}.sse`)), 3)
  const text = events('text')
  assert.equal(text.filter((e) => e.type === 'text_delta').map((e) => e.type === 'text_delta' ? e.text : '').join(''), 'Hi there! Héllo wörld ✓ — how can I help today? 🦄')
  assert.deepEqual(text.at(-1), { type: 'finish', stopReason: 'end_turn', usage: { inputTokens: 37, outputTokens: 11 } })
  assert.deepEqual(events('max-tokens').at(-1), { type: 'finish', stopReason: 'max_tokens', usage: { inputTokens: 20, outputTokens: 5 } })
  const parallel = events('parallel-tool-calls')
  assert.deepEqual(parallel.filter((e) => e.type === 'block_start').map((e) => e.type === 'block_start' ? e.block : null), [
    { type: 'text' }, { type: 'tool_call', id: 'call_a1', name: 'get_weather' }, { type: 'tool_call', id: 'call_b2', name: 'get_time' }])
  assert.deepEqual(parallel.at(-1), { type: 'finish', stopReason: 'tool_use', usage: { inputTokens: 310, outputTokens: 61, cachedInputTokens: 256 } })
  assert.deepEqual(events('failed').at(-1), { type: 'error', error: { status: 502, kind: 'api_error', message: 'The model produced invalid content.' } })
  assert.deepEqual(events('error-event').at(-1), { type: 'error', error: { status: 429, kind: 'rate_limit', message: 'Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 120.' } })
})

test('golden errors: status and body to neutral, neutral back to OpenAI\'s error body', () => {
  for (const name of cases('errors', '.json')) {
    const body = JSON.parse(readFileSync(join(DIR, 'errors', `${name}.json`), 'utf8'))
    const status = Number(readFileSync(join(DIR, 'errors', `${name}.status`), 'utf8').trim())
    const decoded = format.decodeError(status, body)
    golden(join(DIR, 'errors', `${name}.neutral.json`), json(decoded))
    assert.equal(decoded.status, status)
    const encoded = format.encodeError(decoded) as { error: Record<string, unknown> }
    assert.equal(encoded.error.message, body.error.message)
    assert.deepEqual(Object.keys(encoded.error).sort(), ['code', 'message', 'param', 'type'])
  }
  assert.equal(format.decodeError(429, null).kind, 'rate_limit')
  assert.equal(format.decodeError(503, 'not json').kind, 'overloaded')
  assert.equal(format.decodeError(500, { error: 'x' }).message, 'the provider answered 500')
})

// ------------------------------------------------------------------------------------ hostile

function decodeAll (text: string | Buffer): StreamEvent[] {
  const decoder = format.newStreamDecoder()
  return [...decoder.push(Buffer.from(text)), ...decoder.end()]
}

const CREATED = 'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"model":"m","status":"in_progress","output":[]}}\n\n'

test('hostile streams: each is one clean error event, never an exception', () => {
  const lastError = (events: StreamEvent[]): string => {
    const last = events.at(-1)
    assert.equal(last?.type, 'error', JSON.stringify(events))
    return last.type === 'error' ? last.error.message : ''
  }
  assert.match(lastError(decodeAll(CREATED + 'data: {not json\n\n')), /not JSON/)
  assert.match(lastError(decodeAll('data: {"type":"response.output_text.delta","delta":"x"}\n\n')), /began with/)
  assert.match(lastError(decodeAll(CREATED + 'data: [1,2]\n\n')), /without a type/)
  // Cut mid tool call: the call is never finished, the response never completed.
  const cut = decodeAll(CREATED +
    'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"f"}}\n\n' +
    'data: {"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\\"a\\":"}\n\n')
  assert.match(lastError(cut), /ended before response.completed/)
  // An endless event (no blank line) is bounded by the SSE reader.
  const decoder = format.newStreamDecoder()
  const events: StreamEvent[] = [...decoder.push(Buffer.from(CREATED))]
  const piece = Buffer.alloc(1024 * 1024, 'a')
  for (let i = 0; i < 6 && events.at(-1)?.type !== 'error'; i++) events.push(...decoder.push(Buffer.concat([Buffer.from(i === 0 ? 'data: ' : ''), piece])))
  assert.match(lastError(events), new RegExp(`larger than ${SSE_MAX_EVENT_BYTES}`))
  assert.deepEqual(decoder.push(Buffer.from('data: {}\n\n')), [], 'nothing after the error')
  // A hosted tool item the gateway never asked for.
  assert.match(lastError(decodeAll(CREATED + 'data: {"type":"response.output_item.added","output_index":0,"item":{"type":"web_search_call","id":"ws_1","status":"in_progress"}}\n\n')), /web_search_call/)
  // Deltas for items that were never added.
  assert.match(lastError(decodeAll(CREATED + 'data: {"type":"response.function_call_arguments.delta","output_index":4,"item_id":"x","delta":"{"}\n\n')), /not added/)
})

test('hostile streams: bad UTF-8 and characters split across reads', () => {
  const text = CREATED +
    'data: {"type":"response.output_item.added","output_index":0,"item":{"id":"m","type":"message","status":"in_progress","role":"assistant","content":[]}}\n\n' +
    'data: {"type":"response.content_part.added","output_index":0,"content_index":0,"item_id":"m","part":{"type":"output_text","text":"","annotations":[]}}\n\n' +
    'data: {"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"é🦄"}\n\n'
  const bytes = Buffer.concat([Buffer.from(text), Buffer.from([0xff, 0xfe]), Buffer.from('\n\ndata: {"type":"response.completed","response":{"usage":null}}\n\n')])
  for (let size = 1; size < 9; size++) {
    const decoder = format.newStreamDecoder()
    const events: StreamEvent[] = []
    for (let i = 0; i < bytes.length; i += size) events.push(...decoder.push(bytes.subarray(i, i + size)))
    events.push(...decoder.end())
    assert.deepEqual(events.filter((e) => e.type === 'text_delta'), [{ type: 'text_delta', index: 0, text: 'é🦄' }])
    assert.equal(events.at(-1)?.type, 'finish')
  }
})

test('hostile answers: a 200 with an error body, a failed response, broken items', () => {
  const err = format.decodeResponse({ error: { message: 'boom', type: 'server_error', param: null, code: null } })
  assert.ok(isTranslationError(err))
  assert.equal(err.status, 502)
  assert.equal(err.message, 'boom')
  const failed = format.decodeResponse({ id: 'resp_1', object: 'response', status: 'failed', output: [], error: { code: 'rate_limit_exceeded', message: 'slow down' } })
  assert.ok(isTranslationError(failed))
  assert.equal(failed.status, 429)
  const badArgs = format.decodeResponse({ id: 'resp_1', object: 'response', status: 'completed', output: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{"a":' }] })
  assert.ok(isTranslationError(badArgs))
  assert.match(badArgs.message, /not a JSON object/)
  const hosted = format.decodeResponse({ id: 'resp_1', object: 'response', status: 'completed', output: [{ type: 'file_search_call', id: 'fs', status: 'completed', queries: [] }] })
  assert.ok(isTranslationError(hosted))
  const queued = format.decodeResponse({ id: 'resp_1', object: 'response', status: 'queued', output: [] })
  assert.ok(isTranslationError(queued))
})

test('hostile requests: clean 400s naming the field; giant arguments pass through untouched', () => {
  const field = (body: Record<string, unknown>): string | undefined => {
    const decoded = format.decodeRequest(body)
    assert.ok(isTranslationError(decoded), JSON.stringify(decoded))
    assert.equal(decoded.status, 400)
    return decoded.field
  }
  assert.equal(field({ input: 'hi' }), 'model')
  assert.equal(field({ model: 'm' }), 'input')
  assert.equal(field({ model: 'm', input: 42 }), 'input')
  assert.equal(field({ model: 'm', input: [42] }), 'input[0]')
  assert.equal(field({ model: 'm', input: [{ role: 'tool', content: 'x' }] }), 'input[0].role')
  assert.equal(field({ model: 'm', input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '[1]' }] }), 'input[0].arguments')
  assert.equal(field({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] }), 'input[0].content[0].type')
  assert.equal(field({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'ftp://x' }] }] }), 'input[0].content[0].image_url')
  assert.equal(field({ model: 'm', input: [{ role: 'assistant', content: [{ type: 'input_image', image_url: 'https://x' }] }] }), 'input[0].content[0].type')
  assert.equal(field({ model: 'm', input: [{ role: 'assistant', content: [{ type: 'input_text', text: 'x' }] }] }), 'input[0].content[0].type')
  assert.equal(field({ model: 'm', input: [{ role: 'user', content: [{ type: 'output_text', text: 'x' }] }] }), 'input[0].content[0].type')
  assert.equal(field({ model: 'm', input: [{ type: 'computer_call_output', call_id: 'c', output: {} }] }), 'input[0].type')
  assert.equal(field({ model: 'm', input: 'x', temperature: 3 }), 'temperature')
  assert.equal(field({ model: 'm', input: 'x', max_output_tokens: 1.5 }), 'max_output_tokens')
  assert.equal(field({ model: 'm', input: 'x', reasoning: { effort: 'xhigh' } }), 'reasoning.effort')
  assert.equal(field({ model: 'm', input: 'x', text: { format: { type: 'grammar' } } }), 'text.format.type')
  assert.equal(field({ model: 'm', input: 'x', tools: [{ type: 'function', name: 'f', parameters: {}, defer_loading: true }] }), 'tools[0].defer_loading')
  assert.equal(field({ model: 'm', input: 'x', tools: [{ type: 'mcp', server_label: 's' }] }), 'tools[0].type')
  assert.equal(field({ model: 'm', input: 'x', top_logprobs: 3 }), 'top_logprobs')
  // Only system text: nothing for a model to answer.
  assert.equal(field({ model: 'm', input: [{ role: 'system', content: 'be nice' }] }), 'input')
  // Harmless OpenAI-only fields, explicit nulls and `store: false` / `background: false` are accepted.
  assert.ok(!isTranslationError(format.decodeRequest({ model: 'm', input: 'x', store: false, background: false, previous_response_id: null, user: 'u', include: [], prompt_cache_key: 'k', safety_identifier: 's' })))
  const big = 'x'.repeat(5 * 1024 * 1024)
  const decoded = format.decodeRequest({ model: 'm', input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: JSON.stringify({ big }) }, { type: 'function_call_output', call_id: 'c', output: 'ok' }] })
  assert.ok(!isTranslationError(decoded))
  assert.deepEqual(decoded.messages[0]?.content[0], { type: 'tool_call', id: 'c', name: 'f', input: { big } })
})

test('encodeRequest: what the Responses API cannot express is refused, not dropped', () => {
  const base: ChatRequest = { model: 'm', system: [], messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: false }
  const refused = (extra: Partial<ChatRequest>): string | undefined => {
    const encoded = format.encodeRequest({ ...base, ...extra }, 'gpt-4.1')
    assert.ok(isTranslationError(encoded))
    return encoded.field
  }
  assert.equal(refused({ stop: ['END'] }), 'stop')
  assert.equal(refused({ topK: 40 }), 'top_k')
  assert.equal(refused({ reasoning: { budgetTokens: 2048 } }), 'reasoning.budget_tokens')
  const ok = format.encodeRequest({ ...base, stop: [], reasoning: { effort: 'low', budgetTokens: 1024 } }, 'gpt-4.1')
  assert.ok(!isTranslationError(ok))
  assert.deepEqual(ok.reasoning, { effort: 'low' })
  assert.equal(ok.store, false)
  // A tool result with an image goes as a list of parts; is_error has no Responses field (documented).
  const withImage = format.encodeRequest({ ...base, messages: [{ role: 'user', content: [{ type: 'tool_result', callId: 'c', isError: true, content: [{ type: 'text', text: 'see' }, { type: 'image', source: { kind: 'url', url: 'https://x/y.png' } }] }] }] }, 'gpt-4.1')
  assert.ok(!isTranslationError(withImage))
  assert.deepEqual(withImage.input, [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_text', text: 'see' }, { type: 'input_image', image_url: 'https://x/y.png', detail: 'auto' }] }])
})

test('stream encoder: sequence numbers, one item per call, text parts share a message; a giant answer is cut with an error', () => {
  const events: StreamEvent[] = [
    { type: 'start', id: 'msg_01', model: 'claude-x' },
    { type: 'block_start', index: 0, block: { type: 'text' } },
    { type: 'text_delta', index: 0, text: 'a' },
    { type: 'block_stop', index: 0 },
    { type: 'block_start', index: 1, block: { type: 'text' } },
    { type: 'text_delta', index: 1, text: 'b' },
    { type: 'block_stop', index: 1 },
    { type: 'block_start', index: 2, block: { type: 'tool_call', id: 'toolu_1', name: 'f' } },
    { type: 'tool_args_delta', index: 2, json: '{"x":1}' },
    { type: 'block_stop', index: 2 },
    { type: 'finish', stopReason: 'tool_use', usage: { inputTokens: 3, outputTokens: 4 } }
  ]
  const reader = new SseReader()
  const out = reader.push(encodeStream(events))
  const parsed = out.map((e) => ({ event: e.event, data: JSON.parse(e.data) as Record<string, unknown> }))
  assert.deepEqual(parsed.map((e) => e.data.sequence_number), parsed.map((_, i) => i))
  for (const e of parsed) assert.equal(e.event, e.data.type)
  assert.deepEqual(parsed.map((e) => e.data.type), [
    'response.created', 'response.in_progress',
    'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
    'response.content_part.added', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
    'response.output_item.done',
    'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done',
    'response.completed'])
  const completed = parsed.at(-1)!.data.response as Record<string, unknown>
  assert.equal(completed.id, 'resp_msg_01')
  assert.equal(completed.status, 'completed')
  assert.deepEqual(completed.usage, { input_tokens: 3, input_tokens_details: { cached_tokens: 0 }, output_tokens: 4, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 7 })

  const encoder = format.newStreamEncoder(OPTIONS)
  let wire = encoder.encode({ type: 'start', id: 'r', model: 'm' }) + encoder.encode({ type: 'block_start', index: 0, block: { type: 'text' } })
  const chunk = 'y'.repeat(1024 * 1024)
  for (let i = 0; i * chunk.length <= RESPONSES_STREAM_MAX_ACCUMULATED + chunk.length; i++) {
    const piece = encoder.encode({ type: 'text_delta', index: 0, text: chunk })
    if (piece.startsWith('event: error')) {
      wire = piece
      break
    }
  }
  assert.match(wire, /^event: error\ndata: \{"type":"error".*larger than/)
  assert.equal(encoder.encode({ type: 'text_delta', index: 0, text: 'z' }), '', 'nothing after the error')
})

test('stream decoder: a server that sends only output_text.done still delivers its text, once', () => {
  const head = CREATED +
    'data: {"type":"response.output_item.added","output_index":0,"item":{"id":"m","type":"message","status":"in_progress","role":"assistant","content":[]}}\n\n' +
    'data: {"type":"response.content_part.added","output_index":0,"content_index":0,"item_id":"m","part":{"type":"output_text","text":"","annotations":[]}}\n\n'
  const tail = 'data: {"type":"response.output_text.done","output_index":0,"content_index":0,"item_id":"m","text":"whole"}\n\n' +
    'data: {"type":"response.completed","response":{"status":"completed","usage":null}}\n\n'
  const deltas = (text: string): string[] => decodeAll(text).flatMap((e) => e.type === 'text_delta' ? [e.text] : [])
  assert.deepEqual(deltas(head + tail), ['whole'])
  assert.deepEqual(deltas(head + 'data: {"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"whole"}\n\n' + tail), ['whole'])
})

test('stream round trip: what the encoder writes, the decoder reads back as the same events', () => {
  for (const name of cases('streams', '.sse')) {
    const events = decodeSplit(readFileSync(join(DIR, 'streams', `${name}.sse`)), 5)
    const again = decodeSplit(Buffer.from(encodeStream(events)), 9)
    const start = events[0]
    assert.ok(start?.type === 'start')
    // Ids get the `resp_` prefix (already there for OpenAI's own); everything else is the same.
    assert.deepEqual(again, events.map((e) => e.type === 'start' ? { ...e, id: start.id.startsWith('resp_') ? start.id : `resp_${start.id}` } : e), name)
  }
})
