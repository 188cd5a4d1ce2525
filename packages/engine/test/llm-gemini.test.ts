/**
 * The Gemini wire format (llm/formats/gemini.ts) against golden files
 * (test/golden/llm/gemini/): every fixture decodes to its `.neutral.json` (rewritten with
 * UPDATE_GOLDEN=1), requests and answers survive decode → encode → decode, streams decode the
 * same whatever the split of their bytes, and hostile input ends in one clean error.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { geminiFormat, GEMINI_DUMMY_THOUGHT_SIGNATURE } from '../src/llm/formats/gemini.ts'
import { isTranslationError, type ChatRequest, type ChatResponse, type StreamEvent } from '../src/llm/canonical.ts'

const DIR = fileURLToPath(new URL('./golden/llm/gemini/', import.meta.url))
const UPDATE = process.env.UPDATE_GOLDEN === '1'
const OPTIONS = { now: 1767225600, requestModel: 'gemini-2.0-flash' }

function golden (file: string, actual: unknown): void {
  const path = join(DIR, file)
  const text = JSON.stringify(actual, null, 2) + '\n'
  if (UPDATE || !existsSync(path)) { writeFileSync(path, text); return }
  assert.deepEqual(actual, JSON.parse(readFileSync(path, 'utf8')), `${file} (UPDATE_GOLDEN=1 rewrites it)`)
}

const cases = (sub: string, ext: string): string[] => readdirSync(join(DIR, sub)).filter(f => f.endsWith(ext) && !f.includes('.neutral.') && !f.includes('.encoded.')).map(f => f.slice(0, -ext.length))
const readJson = (path: string): Record<string, unknown> => JSON.parse(readFileSync(join(DIR, path), 'utf8')) as Record<string, unknown>


/** A deterministic pseudo-random split of `bytes` into pieces of 1..max bytes. */
function split (bytes: Buffer, seed: number, max: number): Buffer[] {
  let s = seed
  const next = (): number => { s = (s * 1103515245 + 12345) & 0x7fffffff; return s }
  const out: Buffer[] = []
  for (let i = 0; i < bytes.length;) {
    const n = 1 + (next() % max)
    out.push(bytes.subarray(i, i + n))
    i += n
  }
  return out
}

function decodeStream (pieces: Buffer[]): StreamEvent[] {
  const decoder = geminiFormat.newStreamDecoder()
  const events: StreamEvent[] = []
  for (const piece of pieces) events.push(...decoder.push(piece))
  events.push(...decoder.end())
  return events
}

for (const name of cases('requests', '.json')) {
  test(`request ${name}: decodes to its golden neutral; decode → encode → decode is stable`, () => {
    const body = readJson(`requests/${name}.json`)
    const neutral = geminiFormat.decodeRequest(body)
    golden(`requests/${name}.neutral.json`, neutral)
    if (name.startsWith('refused-')) {
      assert.ok(isTranslationError(neutral), 'a refused- case is refused')
      assert.equal(neutral.status, 400)
      assert.ok(neutral.field !== undefined, 'the refusal names the field')
      return
    }
    assert.ok(!isTranslationError(neutral), JSON.stringify(neutral))
    const encoded = geminiFormat.encodeRequest(neutral, 'gemini-2.0-flash')
    assert.ok(!isTranslationError(encoded), JSON.stringify(encoded))
    golden(`requests/${name}.encoded.json`, encoded)
    const again = geminiFormat.decodeRequest(encoded)
    assert.ok(!isTranslationError(again), JSON.stringify(again))
    // The dummy signature the encoder adds to a model turn's first call decodes to nothing.
    assert.deepEqual(again, { ...neutral, model: '' })
  })
}

for (const name of cases('responses', '.json')) {
  test(`response ${name}: decodes to its golden neutral; encode → decode gives it back`, () => {
    const neutral = geminiFormat.decodeResponse(readJson(`responses/${name}.json`))
    golden(`responses/${name}.neutral.json`, neutral)
    assert.ok(!isTranslationError(neutral), JSON.stringify(neutral))
    const encoded = geminiFormat.encodeResponse(neutral, OPTIONS)
    const again = geminiFormat.decodeResponse(encoded) as ChatResponse
    // stop_sequence and tool_use both travel as STOP; the rest is exact.
    assert.deepEqual(again, { ...neutral, model: neutral.model === '' ? OPTIONS.requestModel : neutral.model })
  })
}

for (const name of cases('streams', '.sse')) {
  test(`stream ${name}: golden events, the same for any split of the bytes, and through the encoder and back`, () => {
    const bytes = readFileSync(join(DIR, `streams/${name}.sse`))
    const whole = decodeStream([bytes])
    golden(`streams/${name}.neutral.json`, whole)
    assert.equal(whole.at(-1)?.type, 'finish')
    for (let seed = 1; seed <= 40; seed++) assert.deepEqual(decodeStream(split(bytes, seed, 1 + seed % 17)), whole, `split seed ${seed}`)
    assert.deepEqual(decodeStream(split(bytes, 7, 1)), whole, 'one byte at a time')

    // Neutral → Gemini SSE (the encoder) → neutral again.
    const encoder = geminiFormat.newStreamEncoder(OPTIONS)
    const sse = whole.map(e => encoder.encode(e)).join('') + encoder.end()
    assert.deepEqual(normalizeBlocks(decodeStream([Buffer.from(sse)])), normalizeBlocks(whole))
  })
}

/** Text deltas merged per block: the encoder may send the same text in other pieces. */
function normalizeBlocks (events: StreamEvent[]): unknown[] {
  const out: unknown[] = []
  for (const e of events) {
    const last = out.at(-1) as StreamEvent | undefined
    if (e.type === 'text_delta' && last?.type === 'text_delta' && last.index === e.index) { last.text += e.text; continue }
    out.push(structuredClone(e))
  }
  return out
}

for (const name of cases('errors', '.json')) {
  test(`error ${name}: decodes to its golden neutral; encodes back to Google's shape`, () => {
    const status = Number(readFileSync(join(DIR, `errors/${name}.status`), 'utf8').trim())
    const body = readJson(`errors/${name}.json`)
    const neutral = geminiFormat.decodeError(status, body)
    golden(`errors/${name}.neutral.json`, neutral)
    const encoded = geminiFormat.encodeError(neutral) as { error: { code: number, message: string, status: string } }
    assert.equal(encoded.error.code, neutral.status)
    assert.equal(encoded.error.message, (body.error as { message: string }).message)
    // Decoding our own encoding gives the same error.
    assert.deepEqual(geminiFormat.decodeError(neutral.status, encoded), neutral)
  })
}

test('error mapping: statuses and kinds', () => {
  const kind = (status: number, body: unknown) => geminiFormat.decodeError(status, body)
  assert.deepEqual(kind(429, { error: { code: 429, message: 'q', status: 'RESOURCE_EXHAUSTED' } }), { status: 429, kind: 'rate_limit', message: 'q' })
  assert.deepEqual(kind(502, null), { status: 502, kind: 'api_error', message: 'Gemini answered with status 502' })
  assert.deepEqual(kind(503, '<html>busy</html>'), { status: 503, kind: 'overloaded', message: 'Gemini answered with status 503' })
  assert.equal(kind(400, { error: { code: 400, message: 'x', status: 'FAILED_PRECONDITION' } }).kind, 'invalid_request')
  assert.equal(kind(504, { error: { code: 504, message: 'x', status: 'DEADLINE_EXCEEDED' } }).kind, 'timeout')
  assert.equal(kind(403, { error: { code: 403, message: 'x', status: 'PERMISSION_DENIED' } }).kind, 'permission')
  for (const k of ['invalid_request', 'authentication', 'permission', 'not_found', 'rate_limit', 'api_error', 'overloaded', 'timeout'] as const) {
    const e = geminiFormat.encodeError({ status: 418, kind: k, message: 'm' }) as { error: { status: string } }
    assert.equal(geminiFormat.decodeError(418, e).kind, k, k)
  }
})

test('a 200 whose body is an error decodes as that error', () => {
  const result = geminiFormat.decodeResponse({ error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } })
  assert.deepEqual(result, { status: 429, kind: 'rate_limit', message: 'Resource has been exhausted (e.g. check quota).' })
})

test('answers that break Google\'s own API are 502s, not crashes', () => {
  const cases: Array<Record<string, unknown>> = [
    {},
    { candidates: 'x' },
    { candidates: [1] },
    { candidates: [{ content: { parts: 'x' } }] },
    { candidates: [{ content: { parts: [null] } }] },
    { candidates: [{ content: { parts: [{ functionCall: { args: {} } }] } }] },
    { candidates: [{ content: { parts: [{ functionCall: { name: 'f', args: [1] } }] } }] },
    { candidates: [{ content: { parts: [{ executableCode: { code: 'print(1)' } }] } }] },
    { candidates: [{ content: { parts: [] } }, { content: { parts: [] } }] }
  ]
  for (const body of cases) {
    const result = geminiFormat.decodeResponse(body)
    assert.ok(isTranslationError(result), JSON.stringify(body))
    assert.equal(result.status, 502)
    assert.equal(result.kind, 'api_error')
  }
})

test('calls without an id get stable ids: from the responseId, else from a hash of the answer', () => {
  const body = { candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'a', args: {} } }, { functionCall: { name: 'b' } }] }, finishReason: 'STOP' }] }
  const first = geminiFormat.decodeResponse(body) as ChatResponse
  const second = geminiFormat.decodeResponse(structuredClone(body)) as ChatResponse
  assert.deepEqual(first, second)
  const ids = first.content.map(p => p.type === 'tool_call' ? p.id : '')
  assert.match(ids[0] as string, /^call_[A-Za-z0-9_-]{16}_0$/)
  assert.notEqual(ids[0], ids[1])
  assert.equal(first.stopReason, 'tool_use')
  const withId = geminiFormat.decodeResponse({ ...body, responseId: 'r/1+x' }) as ChatResponse
  assert.deepEqual(withId.content.map(p => p.type === 'tool_call' ? p.id : ''), ['call_r1x_0', 'call_r1x_1'])
})

test('finish reasons and usage', () => {
  const answer = (finishReason: string) => (geminiFormat.decodeResponse({ candidates: [{ content: { parts: [{ text: 'x' }] }, finishReason }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 4, toolUsePromptTokenCount: 2, thoughtsTokenCount: 5, cachedContentTokenCount: 1 } }) as ChatResponse)
  assert.equal(answer('MAX_TOKENS').stopReason, 'max_tokens')
  assert.equal(answer('SAFETY').stopReason, 'content_filter')
  assert.equal(answer('RECITATION').stopReason, 'content_filter')
  assert.equal(answer('PROHIBITED_CONTENT').stopReason, 'content_filter')
  assert.equal(answer('MALFORMED_FUNCTION_CALL').stopReason, 'error')
  assert.equal(answer('SOMETHING_NEW').stopReason, 'error')
  assert.deepEqual(answer('STOP').usage, { inputTokens: 5, outputTokens: 9, cachedInputTokens: 1, reasoningTokens: 5 })
})

test('encodeRequest: tool results find their function\'s name; unknown ones are refused', () => {
  const base: ChatRequest = { model: 'm', system: ['Be brief.'], stream: false, messages: [] }
  const ok = geminiFormat.encodeRequest({
    ...base,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'checking' }, { type: 'tool_call', id: 'toolu_01', name: 'weather', input: { city: 'Oslo' } }, { type: 'tool_call', id: 'toolu_02', name: 'time', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', callId: 'toolu_02', content: [{ type: 'text', text: '12:00' }] }] },
      { role: 'user', content: [{ type: 'tool_result', callId: 'toolu_01', content: [{ type: 'text', text: 'rain' }, { type: 'text', text: '4 C' }], isError: false }, { type: 'text', text: 'thanks' }] }
    ]
  }, 'm')
  assert.deepEqual(ok, {
    systemInstruction: { parts: [{ text: 'Be brief.' }] },
    contents: [
      { role: 'user', parts: [{ text: 'weather?' }] },
      { role: 'model', parts: [{ text: 'checking' }, { functionCall: { id: 'toolu_01', name: 'weather', args: { city: 'Oslo' } }, thoughtSignature: GEMINI_DUMMY_THOUGHT_SIGNATURE }, { functionCall: { id: 'toolu_02', name: 'time', args: {} } }] },
      // Two user messages in a row are one Content.
      { role: 'user', parts: [{ functionResponse: { id: 'toolu_02', name: 'time', response: { output: '12:00' } } }, { functionResponse: { id: 'toolu_01', name: 'weather', response: { output: 'rain\n4 C' } } }, { text: 'thanks' }] }
    ]
  })
  const unknown = geminiFormat.encodeRequest({ ...base, messages: [{ role: 'user', content: [{ type: 'tool_result', callId: 'nope', content: [] }] }] }, 'm')
  assert.ok(isTranslationError(unknown))
  assert.equal(unknown.field, 'messages[0].content[0].callId')
  const serial = geminiFormat.encodeRequest({ ...base, parallelToolCalls: false, messages: [] }, 'm')
  assert.ok(isTranslationError(serial))
  assert.equal(serial.field, 'parallelToolCalls')
})

test('encodeRequest: images, structured output, tool choice, reasoning', () => {
  const base: ChatRequest = { model: 'm', system: [], stream: false, messages: [] }
  const img = (url: string, detail?: 'low' | 'high') => geminiFormat.encodeRequest({ ...base, messages: [{ role: 'user', content: [detail === undefined ? { type: 'image', source: { kind: 'url', url } } : { type: 'image', source: { kind: 'url', url }, detail }] }] }, 'm') as { contents: Array<{ parts: unknown[] }> }
  assert.deepEqual(img('https://example.com/a/cat.PNG?size=2').contents[0]?.parts, [{ fileData: { mimeType: 'image/png', fileUri: 'https://example.com/a/cat.PNG?size=2' } }])
  assert.deepEqual(img('https://example.com/image').contents[0]?.parts, [{ fileData: { fileUri: 'https://example.com/image' } }])
  assert.deepEqual(img('data:image/webp;base64,UklGRg==', 'low').contents[0]?.parts, [{ inlineData: { mimeType: 'image/webp', data: 'UklGRg==' }, mediaResolution: { level: 'MEDIA_RESOLUTION_LOW' } }])
  const ftp = geminiFormat.encodeRequest({ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { kind: 'url', url: 'ftp://x/y.png' } }] }] }, 'm')
  assert.ok(isTranslationError(ftp))

  const structured = geminiFormat.encodeRequest({ ...base, responseFormat: { type: 'json_schema', name: 'r', description: 'A recipe', schema: { type: 'object' }, strict: true }, toolChoice: { type: 'tool', name: 'f' }, reasoning: { effort: 'high' } }, 'm')
  assert.deepEqual(structured, {
    contents: [],
    toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] } },
    generationConfig: { responseMimeType: 'application/json', responseJsonSchema: { type: 'object', description: 'A recipe' }, thinkingConfig: { thinkingLevel: 'HIGH', includeThoughts: true } }
  })
  assert.deepEqual(geminiFormat.encodeRequest({ ...base, responseFormat: { type: 'json_object' }, toolChoice: { type: 'none' }, reasoning: { budgetTokens: 0 } }, 'm'), {
    contents: [], toolConfig: { functionCallingConfig: { mode: 'NONE' } }, generationConfig: { responseMimeType: 'application/json', thinkingConfig: { thinkingBudget: 0 } }
  })
})

test('decodeRequest refuses what it cannot carry, naming the field', () => {
  const refuse = (body: Record<string, unknown>, field: string) => {
    const r = geminiFormat.decodeRequest(body)
    assert.ok(isTranslationError(r), JSON.stringify(body))
    assert.equal(r.field, field)
  }
  const user = [{ role: 'user', parts: [{ text: 'hi' }] }]
  refuse({ contents: user, generationConfig: { seed: 3 } }, 'generationConfig.seed')
  refuse({ contents: user, generationConfig: { responseMimeType: 'text/x.enum' } }, 'generationConfig.responseMimeType')
  refuse({ contents: user, tools: [{ googleSearch: {} }] }, 'tools[0].googleSearch')
  refuse({ contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'audio/mp3', data: 'AA==' } }] }] }, 'contents[0].parts[0].inlineData.mimeType')
  refuse({ contents: [{ role: 'user', parts: [{ functionResponse: { name: 'f', response: {} } }] }] }, 'contents[0].parts[0].functionResponse')
  refuse({ contents: [{ role: 'user', parts: [{ functionCall: { name: 'f' } }] }] }, 'contents[0].parts[0]')
  refuse({ contents: [{ role: 'system', parts: [] }] }, 'contents[0].role')
  refuse({ contents: user, toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['a', 'b'] } } }, 'toolConfig.functionCallingConfig.allowedFunctionNames')
  refuse({ contents: 'hi' }, 'contents')
  // A functionResponse without an id answers the oldest open call of its name.
  const ok = geminiFormat.decodeRequest({ contents: [...user, { role: 'model', parts: [{ functionCall: { name: 'f' } }] }, { role: 'function', parts: [{ functionResponse: { name: 'f', response: { temperature: 3 } } }] }] })
  assert.ok(!isTranslationError(ok))
  assert.deepEqual(ok.messages[2]?.content, [{ type: 'tool_result', callId: 'call_1_0', content: [{ type: 'text', text: '{"temperature":3}' }] }])
})

test('hostile streams: each ends in one clean error event, nothing after it', () => {
  const sse = (...objects: unknown[]) => Buffer.from(objects.map(o => `data: ${typeof o === 'string' ? o : JSON.stringify(o)}\r\n\r\n`).join(''))
  const text = (t: string) => ({ candidates: [{ content: { role: 'model', parts: [{ text: t }] }, index: 0 }], responseId: 'r' })
  const lastError = (events: StreamEvent[]) => {
    const errors = events.filter(e => e.type === 'error')
    assert.equal(errors.length, 1, JSON.stringify(events))
    assert.equal(events.at(-1)?.type, 'error')
    assert.ok(!events.some(e => e.type === 'finish'))
    return (errors[0] as Extract<StreamEvent, { type: 'error' }>).error
  }
  // Cut short: no finishReason.
  assert.match(lastError(decodeStream([sse(text('a'), text('b'))])).message, /cut short/)
  // Cut mid-event (the last event has no blank line and is half a JSON object).
  assert.match(lastError(decodeStream([Buffer.concat([sse(text('a')), Buffer.from('data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "ar')])])).message, /not JSON/)
  // Not JSON; JSON but not an object.
  assert.equal(lastError(decodeStream([sse('{oops')])).status, 502)
  assert.equal(lastError(decodeStream([sse('[1,2]')])).status, 502)
  // An error in the middle of the stream (Google sends one when a stream fails after its head).
  const mid = lastError(decodeStream([sse(text('a'), { error: { code: 503, message: 'The model is overloaded.', status: 'UNAVAILABLE' } }, text('late'))]))
  assert.deepEqual(mid, { status: 503, kind: 'overloaded', message: 'The model is overloaded.' })
  // More than one candidate.
  assert.equal(lastError(decodeStream([sse({ candidates: [{ index: 0 }, { index: 1 }] })])).status, 502)
  // An endless line: bounded, one error.
  const endless = new StreamDecoderFeeder()
  for (let i = 0; i < 80; i++) endless.push(Buffer.from('data: ' + 'x'.repeat(64 * 1024)))
  lastError(endless.finish())
  // Invalid UTF-8 becomes replacement characters inside a valid JSON string, not a crash.
  const bad = Buffer.concat([Buffer.from('data: {"candidates":[{"content":{"parts":[{"text":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"}]},"finishReason":"STOP"}]}\n\n')])
  const events = decodeStream(split(bad, 3, 2))
  assert.equal(events.at(-1)?.type, 'finish')
  assert.ok(events.some(e => e.type === 'text_delta' && e.text === 'a\ufffd\ufffdb'))
})

class StreamDecoderFeeder {
  private readonly decoder = geminiFormat.newStreamDecoder()
  private readonly events: StreamEvent[] = []
  push (b: Buffer): void { this.events.push(...this.decoder.push(b)) }
  finish (): StreamEvent[] { this.events.push(...this.decoder.end()); return this.events }
}

test('a blocked prompt streams as a content_filter finish', () => {
  const events = decodeStream([Buffer.from('data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4}, "responseId": "b"}\r\n\r\n')])
  assert.deepEqual(events, [
    { type: 'start', id: 'b', model: '' },
    { type: 'finish', stopReason: 'content_filter', usage: { inputTokens: 4, outputTokens: 0 } }
  ])
})

test('stream encoder: tool calls go whole; invalid or giant arguments end the stream with an error chunk', () => {
  const run = (events: StreamEvent[]) => { const enc = geminiFormat.newStreamEncoder(OPTIONS); return events.map(e => enc.encode(e)).join('') + enc.end() }
  const out = run([
    { type: 'start', id: 'msg_1', model: 'claude-x' },
    { type: 'block_start', index: 0, block: { type: 'tool_call', id: 'toolu_1', name: 'f' } },
    { type: 'tool_args_delta', index: 0, json: '{"a":' },
    { type: 'tool_args_delta', index: 0, json: '1}' },
    { type: 'block_stop', index: 0 },
    { type: 'finish', stopReason: 'tool_use', usage: { inputTokens: 1, outputTokens: 2 } }
  ])
  assert.equal(out, 'data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"toolu_1","name":"f","args":{"a":1}}}]},"index":0}],"modelVersion":"claude-x","responseId":"msg_1"}\n\n' +
    'data: {"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3},"modelVersion":"claude-x","responseId":"msg_1"}\n\n')
  const broken = run([
    { type: 'block_start', index: 0, block: { type: 'tool_call', id: 't', name: 'f' } },
    { type: 'tool_args_delta', index: 0, json: '{"a":' },
    { type: 'block_stop', index: 0 },
    { type: 'finish', stopReason: 'tool_use', usage: null }
  ])
  assert.match(broken, /^data: \{"error":\{"code":502,"message":"the provider sent invalid JSON arguments for tool call f","status":"INTERNAL"\}\}\n\n$/)
  const giant = geminiFormat.newStreamEncoder(OPTIONS)
  giant.encode({ type: 'block_start', index: 0, block: { type: 'tool_call', id: 't', name: 'f' } })
  let wire = ''
  const piece = '"' + 'x'.repeat(1024 * 1024)
  for (let i = 0; i < 6; i++) wire += giant.encode({ type: 'tool_args_delta', index: 0, json: piece })
  assert.match(wire, /"code":502/)
  assert.equal(giant.encode({ type: 'finish', stopReason: 'end_turn', usage: null }), '')
})
