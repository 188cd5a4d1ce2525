/**
 * Anthropic Messages wire format: golden cases (fixtures in test/golden/llm/anthropic-messages/,
 * outputs `<case>.neutral.json` next to them, rewritten with UPDATE_GOLDEN=1), round trips,
 * streams split at every kind of byte boundary, and hostile streams.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { anthropicMessagesFormat as format, ANTHROPIC_DEFAULT_MAX_TOKENS } from '../src/llm/formats/anthropic-messages.ts'
import { isTranslationError, type ChatRequest, type StreamEvent } from '../src/llm/canonical.ts'
import { anthropicProvider } from '../src/llm/providers/anthropic.ts'

const DIR = join(import.meta.dirname, 'golden/llm/anthropic-messages')
const UPDATE = process.env.UPDATE_GOLDEN === '1'
const OPTIONS = { now: 1_760_000_000, requestModel: 'claude-sonnet-4-6' }

function cases (sub: string, ext: string): string[] {
  return readdirSync(join(DIR, sub)).filter(f => f.endsWith(ext) && !f.endsWith('.neutral.json')).sort()
}

function golden (path: string, actual: unknown): void {
  const text = JSON.stringify(actual, null, 2) + '\n'
  if (UPDATE || !existsSync(path)) {
    writeFileSync(path, text)
    return
  }
  assert.deepEqual(JSON.parse(text), JSON.parse(readFileSync(path, 'utf8')), `golden ${path} (UPDATE_GOLDEN=1 rewrites it)`)
}

const readJson = (path: string): Record<string, unknown> => JSON.parse(readFileSync(path, 'utf8'))

function decodeStream (bytes: Buffer, pieces: number[]): StreamEvent[] {
  const decoder = format.newStreamDecoder()
  const out: StreamEvent[] = []
  let at = 0
  for (const size of pieces) {
    if (at >= bytes.length) break
    out.push(...decoder.push(bytes.subarray(at, at + size)))
    at += size
  }
  if (at < bytes.length) out.push(...decoder.push(bytes.subarray(at)))
  out.push(...decoder.end())
  return out
}

/** A deterministic PRNG (mulberry32), so a failing split can be replayed. */
function random (seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6D2B79F5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * What the encoder gives back for a request fixture, by the documented normalisations:
 * string content becomes a text block, `cache_control` and the IGNORED fields go, one system
 * text becomes a string, `redacted_thinking` is dropped, `stream: false` is left out.
 */
function normaliseRequest (body: Record<string, any>): Record<string, any> {
  const out: Record<string, any> = structuredClone(body)
  delete out.metadata
  if (out.stream !== true) delete out.stream
  const blocks = (content: any): any[] => typeof content === 'string'
    ? [{ type: 'text', text: content }]
    : content.filter((b: any) => b.type !== 'redacted_thinking').map((b: any) => {
      const { cache_control: _, ...rest } = b
      if (rest.type === 'tool_result' && typeof rest.content === 'string') rest.content = [{ type: 'text', text: rest.content }]
      return rest
    })
  if (Array.isArray(out.system)) out.system = out.system.length === 1 ? out.system[0].text : out.system.map((b: any) => ({ type: 'text', text: b.text }))
  out.messages = out.messages.map((m: any) => ({ role: m.role, content: blocks(m.content) }))
  return out
}

test('requests: decode to neutral (golden), refusals name the field, encode gives the request back', () => {
  for (const file of cases('requests', '.json')) {
    const name = file.replace(/\.json$/, '')
    const body = readJson(join(DIR, 'requests', file))
    const neutral = format.decodeRequest(body)
    golden(join(DIR, 'requests', `${name}.neutral.json`), neutral)
    if (name.startsWith('refused-')) {
      assert.ok(isTranslationError(neutral), `${name} is refused`)
      assert.equal(neutral.status, 400, name)
      assert.ok(neutral.field !== undefined && neutral.message.startsWith(neutral.field), `${name}: the message names the field (${neutral.message})`)
      continue
    }
    assert.ok(!isTranslationError(neutral), `${name}: ${JSON.stringify(neutral)}`)
    const encoded = format.encodeRequest(neutral, body.model as string)
    assert.ok(!isTranslationError(encoded), `${name}: ${JSON.stringify(encoded)}`)
    assert.deepEqual(encoded, normaliseRequest(body), `${name}: decode → encode is the request, normalised`)
    // And neutral → Anthropic → neutral is the identity.
    assert.deepEqual(format.decodeRequest(encoded), neutral, `${name}: neutral round trip`)
  }
})

test('encodeRequest: max_tokens default, OpenAI-shaped neutral input, refusals', () => {
  const base: ChatRequest = { model: 'gpt-x', system: [], messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: false }
  assert.deepEqual(format.encodeRequest(base, 'claude-haiku-4-5'), {
    model: 'claude-haiku-4-5', max_tokens: ANTHROPIC_DEFAULT_MAX_TOKENS, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]
  })
  const rich = format.encodeRequest({
    ...base,
    system: ['a', 'b'],
    messages: [
      { role: 'user', content: [{ type: 'image', source: { kind: 'url', url: 'data:image/jpeg;base64,/9j/4AAQ' }, detail: 'high' }] },
      { role: 'assistant', content: [{ type: 'reasoning', text: 'unsigned thoughts' }, { type: 'tool_call', id: 'call_1', name: 'f', input: {} }] }
    ],
    tools: [{ name: 'f', parameters: { properties: {} } }],
    parallelToolCalls: false,
    reasoning: { effort: 'minimal' },
    responseFormat: { type: 'json_schema', name: 'x', schema: { type: 'object' }, strict: false }
  }, 'm')
  assert.deepEqual(rich, {
    model: 'm',
    max_tokens: ANTHROPIC_DEFAULT_MAX_TOKENS,
    system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }],
    messages: [
      { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'f', input: {} }] }
    ],
    tools: [{ name: 'f', input_schema: { type: 'object', properties: {} } }],
    tool_choice: { type: 'auto', disable_parallel_tool_use: true },
    output_config: { format: { type: 'json_schema', schema: { type: 'object' } }, effort: 'low' }
  })
  const jsonObject = format.encodeRequest({ ...base, responseFormat: { type: 'json_object' } }, 'm')
  assert.ok(isTranslationError(jsonObject) && jsonObject.status === 400 && jsonObject.field === 'response_format')
  const tiff = format.encodeRequest({ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { kind: 'base64', mediaType: 'image/tiff', data: 'AA' } }] }] }, 'm')
  assert.ok(isTranslationError(tiff) && tiff.status === 400 && /image\/tiff/.test(tiff.message))
  const adaptive = format.encodeRequest({ ...base, reasoning: {} }, 'm')
  assert.deepEqual((adaptive as Record<string, unknown>).thinking, { type: 'adaptive' })
})

test('decodeRequest: hostile and malformed bodies are 400s naming the field', () => {
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ model: 'm', max_tokens: 1 }, 'messages'],
    [{ model: 'm', messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role'],
    [{ model: 'm', messages: [{ role: 'user', content: [{ type: 'tool_use', id: 'a', name: 'b', input: {} }] }] }, 'messages[0].content[0].type'],
    [{ model: 'm', messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'b', input: 'not an object' }] }] }, 'messages[0].content[0].input'],
    [{ model: 'm', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] }, 'messages[0].content[0].source.type'],
    [{ model: 'm', messages: [{ role: 'user', content: 'a' }, { role: 'system', content: 'late' }] }, 'messages[1].role'],
    [{ model: 'm', messages: [], max_tokens: 'many' }, 'max_tokens'],
    [{ model: 'm', messages: [], thinking: { type: 'between_tools' } }, 'thinking.type'],
    [{ model: 'm', messages: [], tool_choice: { type: 'maybe' } }, 'tool_choice.type'],
    [{ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'x', citations: [{ type: 'char_location' }] }] }] }, 'messages[0].content[0].citations']
  ]
  for (const [body, field] of bad) {
    const out = format.decodeRequest(body)
    assert.ok(isTranslationError(out), JSON.stringify(body))
    assert.equal(out.field, field, JSON.stringify(body))
    assert.equal(out.status, 400)
  }
  // An answer passed back as is (caller, null and empty fields) is accepted.
  const passedBack = format.decodeRequest({
    model: 'm',
    messages: [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: [{ type: 'text', text: 'a', citations: [] }, { type: 'text', text: 'b', citations: null }, { type: 'tool_use', id: 't', name: 'f', input: {}, caller: { type: 'direct' }, toolset_name: null }] }
    ]
  })
  assert.ok(!isTranslationError(passedBack), JSON.stringify(passedBack))
  assert.equal(passedBack.messages[1]!.content.length, 3)
  // A leading system turn is the system prompt.
  const ok = format.decodeRequest({ model: 'm', max_tokens: 5, system: 'a', messages: [{ role: 'system', content: [{ type: 'text', text: 'b' }] }, { role: 'user', content: 'c' }] })
  assert.ok(!isTranslationError(ok))
  assert.deepEqual(ok.system, ['a', 'b'])
})

test('responses: decode to neutral (golden), encode gives the answer back', () => {
  for (const file of cases('responses', '.json')) {
    const name = file.replace(/\.json$/, '')
    const body = readJson(join(DIR, 'responses', file))
    const neutral = format.decodeResponse(body)
    golden(join(DIR, 'responses', `${name}.neutral.json`), neutral)
    assert.ok(!isTranslationError(neutral), name)
    const back = format.encodeResponse(neutral, OPTIONS) as Record<string, any>
    const expected = structuredClone(body) as Record<string, any>
    expected.content = expected.content.filter((b: any) => b.type !== 'redacted_thinking')
    assert.deepEqual(back, expected, `${name}: decode → encode`)
  }
  // Cache tokens are part of the neutral input count.
  const text = format.decodeResponse(readJson(join(DIR, 'responses/text.json')))
  assert.ok(!isTranslationError(text))
  assert.deepEqual(text.usage, { inputTokens: 2095 + 1800 + 120, outputTokens: 503, cachedInputTokens: 1800, cacheCreationInputTokens: 120 })
})

test('decodeResponse: an error body with a 200 is that error; unknown blocks or stop reasons are a 502', () => {
  assert.deepEqual(format.decodeResponse({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }), { status: 529, kind: 'overloaded', message: 'Overloaded' })
  assert.deepEqual(format.decodeResponse({ type: 'error', error: { message: 'strange' } }), { status: 502, kind: 'api_error', message: 'strange' })
  for (const body of [
    { id: 'm', content: [{ type: 'server_tool_use', id: 'x', name: 'web_search', input: {} }], stop_reason: 'end_turn' },
    { id: 'm', content: [], stop_reason: 'bored' },
    { id: 'm', content: 'text' }
  ]) {
    const out = format.decodeResponse(body)
    assert.ok(isTranslationError(out) && out.status === 502 && out.kind === 'api_error', JSON.stringify(body))
  }
})

test('errors: decode (golden) and encode back; status and type agree both ways', () => {
  for (const file of cases('errors', '.json')) {
    const [name, status] = file.replace(/\.json$/, '').split('.') as [string, string]
    const body = readJson(join(DIR, 'errors', file))
    const neutral = format.decodeError(Number(status), body)
    golden(join(DIR, 'errors', `${name}.${status}.neutral.json`), neutral)
    const { request_id: _, ...expected } = body
    assert.deepEqual(format.encodeError(neutral), expected, name)
  }
  assert.deepEqual(format.decodeError(502, null), { status: 502, kind: 'api_error', message: 'Anthropic answered 502' })
  assert.equal(format.decodeError(429, '<html>').kind, 'rate_limit')
})

test('streams: decode (golden); any split of the bytes, mid-UTF-8 included, gives the same events', () => {
  for (const file of cases('streams', '.sse')) {
    const name = file.replace(/\.sse$/, '')
    const bytes = readFileSync(join(DIR, 'streams', file))
    const whole = decodeStream(bytes, [bytes.length])
    golden(join(DIR, 'streams', `${name}.neutral.json`), whole)
    for (const size of [1, 2, 3, 5, 7, 13]) {
      assert.deepEqual(decodeStream(bytes, Array(bytes.length).fill(size)), whole, `${name}: pieces of ${size}`)
    }
    const next = random(name.length * 7919)
    for (let run = 0; run < 20; run++) {
      const pieces: number[] = []
      for (let n = 0; n < bytes.length; n += pieces.at(-1)!) pieces.push(1 + Math.floor(next() * 40))
      assert.deepEqual(decodeStream(bytes, pieces), whole, `${name}: random split ${run} ${JSON.stringify(pieces)}`)
    }
    const errors = whole.filter(e => e.type === 'error')
    if (name.startsWith('hostile-')) {
      assert.equal(errors.length, 1, `${name}: exactly one error event`)
      assert.equal(whole.at(-1)!.type, 'error', `${name}: the error is the last event`)
    } else {
      assert.equal(errors.length, 0, name)
      assert.equal(whole.at(-1)!.type, 'finish', name)
    }
  }
})

test('streams: neutral events → Anthropic SSE → neutral is the identity (indices renumbered from 0)', () => {
  for (const file of cases('streams', '.sse')) {
    const name = file.replace(/\.sse$/, '')
    const events = decodeStream(readFileSync(join(DIR, 'streams', file)), [1 << 30])
    const encoder = format.newStreamEncoder(OPTIONS)
    const wire = events.map(e => encoder.encode(e)).join('') + encoder.end()
    const again = decodeStream(Buffer.from(wire), [1 << 30])
    // Renumber the original's block indices as the encoder does: in order of appearance.
    const map = new Map<number, number>()
    const renumbered = events.map(e => {
      if (!('index' in e)) return e
      if (!map.has(e.index)) map.set(e.index, map.size)
      return { ...e, index: map.get(e.index)! }
    })
    if (name.startsWith('hostile-')) {
      // The error travels as Anthropic's error event; what came before it is the same.
      assert.deepEqual(again.slice(0, -1), renumbered.slice(0, -1), name)
      const last = again.at(-1)!
      assert.equal(last.type, 'error', name)
    } else {
      assert.deepEqual(again, renumbered, name)
    }
  }
})

test('stream encoder: blocks that interleave are made sequential; tool args outside their block end the stream', () => {
  const enc = format.newStreamEncoder(OPTIONS)
  const out = [
    enc.encode({ type: 'start', id: 'chatcmpl-1', model: '' }),
    enc.encode({ type: 'block_start', index: 0, block: { type: 'text' } }),
    enc.encode({ type: 'text_delta', index: 0, text: 'a' }),
    enc.encode({ type: 'block_start', index: 1, block: { type: 'tool_call', id: 'c1', name: 'f' } }),
    enc.encode({ type: 'text_delta', index: 0, text: 'b' }), // text after the tool call began: a new text block
    enc.encode({ type: 'tool_args_delta', index: 1, json: '{}' }) // the call is no longer open: cannot be expressed
  ].join('')
  const events = decodeStream(Buffer.from(out), [1 << 30])
  assert.deepEqual(events.map(e => e.type), ['start', 'block_start', 'text_delta', 'block_stop', 'block_start', 'block_stop', 'block_start', 'text_delta', 'error'])
  assert.match(out, /"model":"claude-sonnet-4-6"/, 'the request model stands in for an unknown one')
  assert.equal(enc.encode({ type: 'finish', stopReason: 'end_turn', usage: null }), '', 'nothing after the error')
})

test('stream decoder: giant tool arguments pass fragment by fragment, nothing accumulated', () => {
  const decoder = format.newStreamDecoder()
  const fragment = JSON.stringify('x'.repeat(4096))
  const event = (data: unknown, name: string): Buffer => Buffer.from(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`)
  let args = 0
  const count = (events: StreamEvent[]): void => { for (const e of events) if (e.type === 'tool_args_delta') args += e.json.length; else assert.notEqual(e.type, 'error') }
  count(decoder.push(event({ type: 'message_start', message: { id: 'm', model: 'x', usage: { input_tokens: 1, output_tokens: 1 } } }, 'message_start')))
  count(decoder.push(event({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 't', name: 'f', input: {} } }, 'content_block_start')))
  count(decoder.push(event({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"a":[' } }, 'content_block_delta')))
  for (let i = 0; i < 4096; i++) count(decoder.push(event({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: fragment + ',' } }, 'content_block_delta')))
  count(decoder.push(event({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '0]}' } }, 'content_block_delta')))
  count(decoder.push(event({ type: 'content_block_stop', index: 0 }, 'content_block_stop')))
  count(decoder.push(event({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } }, 'message_delta')))
  count(decoder.end())
  assert.ok(args > 16 * 1024 * 1024, `${args} bytes of arguments`)
})

test('stream decoder: an endless event is an error, not memory', () => {
  const decoder = format.newStreamDecoder()
  const line = Buffer.from('data: ' + 'x'.repeat(1 << 20))
  const out: StreamEvent[] = []
  for (let i = 0; i < 6; i++) out.push(...decoder.push(line))
  out.push(...decoder.end())
  assert.equal(out.length, 1)
  assert.equal(out[0]!.type, 'error')
})

test('provider: paths, credentials left as the header policy set them, anthropic-version', () => {
  const provider = anthropicProvider()
  const request = (headers: Record<string, string>, operation: 'chat' | 'models' = 'chat') => ({ operation, model: 'm', streaming: false, body: Buffer.alloc(0), headers })
  assert.equal(provider.format, 'anthropic-messages')
  assert.equal(provider.system, 'anthropic')
  assert.equal(provider.path(request({})), '/v1/messages')
  assert.equal(provider.path(request({}, 'models')), '/v1/models')
  assert.throws(() => provider.path({ ...request({}), operation: 'embeddings' }), (e: unknown) => isTranslationError(e) && e.status === 404)
  const origin = { host: 'api.anthropic.com', port: 443, protocol: 'https' as const }
  const a = request({ authorization: 'Bearer sk-ant-test-portico', 'x-api-key': 'client-key' })
  void provider.authorize(a, origin)
  assert.deepEqual(a.headers, { authorization: 'Bearer sk-ant-test-portico', 'x-api-key': 'client-key', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' })
  const b = request({ 'x-api-key': 'client-key', 'anthropic-version': '2099-01-01' })
  void provider.authorize(b, origin)
  assert.deepEqual(b.headers, { 'x-api-key': 'client-key', 'anthropic-version': '2099-01-01', 'content-type': 'application/json' })
})
