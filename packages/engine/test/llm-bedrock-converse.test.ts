/**
 * Bedrock Converse / ConverseStream: golden translation cases (the files under
 * test/golden/llm/bedrock-converse/; UPDATE_GOLDEN=1 rewrites the outputs), round trips, the
 * binary event stream under any split, and hostile streams (bad CRC, oversized, cut short).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { crc32 } from 'node:zlib'
import { bedrockConverseFormat, ConverseStreamDecoder, ConverseStreamEncoder, IGNORED } from '../src/llm/formats/bedrock-converse.ts'
import { EventStreamReader, encodeEventStreamMessage } from '../src/llm/eventstream.ts'
import { bedrockProvider, withBedrockGuardrail } from '../src/llm/providers/bedrock.ts'
import { isTranslationError, type ChatRequest, type StreamEvent } from '../src/llm/canonical.ts'

const dir = path.join(import.meta.dirname, 'golden', 'llm', 'bedrock-converse')
const update = process.env.UPDATE_GOLDEN === '1'
const fmt = bedrockConverseFormat
const options = { now: 1_764_900_000, requestModel: 'anthropic.claude-sonnet-4-20250514-v1:0' }

function cases (sub: string, suffix: string): string[] {
  return fs.readdirSync(path.join(dir, sub)).filter(f => f.endsWith(suffix) && !f.endsWith('.neutral.json')).map(f => f.slice(0, -suffix.length)).sort()
}

function readJson (...parts: string[]): unknown {
  return JSON.parse(fs.readFileSync(path.join(dir, ...parts), 'utf8'))
}

/** Compares `actual` with the golden file (or writes it under UPDATE_GOLDEN=1). */
function golden (actual: unknown, ...parts: string[]): void {
  const file = path.join(dir, ...parts)
  const text = JSON.stringify(actual, null, 2) + '\n'
  if (update) fs.writeFileSync(file, text)
  else assert.deepEqual(actual, JSON.parse(fs.readFileSync(file, 'utf8')), `${parts.join('/')} (UPDATE_GOLDEN=1 to accept)`)
}

/** A stream fixture's readable source (`<case>.events.json`) as the bytes Bedrock sends. */
function frames (events: Array<{ event?: string, exception?: string, payload: unknown }>): Buffer {
  return Buffer.concat(events.map(e => encodeEventStreamMessage(
    e.exception !== undefined
      ? { ':exception-type': e.exception, ':content-type': 'application/json', ':message-type': 'exception' }
      : { ':event-type': e.event ?? '', ':content-type': 'application/json', ':message-type': 'event' },
    JSON.stringify(e.payload))))
}

function streamBytes (name: string): Buffer {
  return Buffer.from(fs.readFileSync(path.join(dir, 'streams', `${name}.b64`), 'utf8').trim(), 'base64')
}

function decodeAll (bytes: Buffer, splits: number[] = [], maxMessageBytes?: number): StreamEvent[] {
  const decoder = new ConverseStreamDecoder(maxMessageBytes)
  const out: StreamEvent[] = []
  let at = 0
  for (const cut of [...splits, bytes.length]) {
    out.push(...decoder.push(bytes.subarray(at, cut)))
    at = cut
  }
  out.push(...decoder.end())
  return out
}

/** A deterministic PRNG (mulberry32): random splits that reproduce. */
function random (seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

test('requests: Converse → neutral (golden), and back to the same Converse body', () => {
  for (const name of cases('requests', '.json')) {
    const body = readJson('requests', `${name}.json`) as Record<string, unknown>
    const decoded = fmt.decodeRequest(body)
    golden(decoded, 'requests', `${name}.neutral.json`)
    if (name.startsWith('refused-')) {
      assert.ok(isTranslationError(decoded), `${name} is refused`)
      assert.equal(decoded.status, 400)
      assert.ok(decoded.field !== undefined, `${name} names the field`)
      continue
    }
    assert.ok(!isTranslationError(decoded), `${name}: ${JSON.stringify(decoded)}`)
    assert.deepEqual(fmt.encodeRequest(decoded, 'any-model'), body, `${name} round trip`)
  }
})

test('responses: Converse → neutral (golden), and neutral → Converse → the same neutral', () => {
  for (const name of cases('responses', '.json')) {
    const decoded = fmt.decodeResponse(readJson('responses', `${name}.json`) as Record<string, unknown>)
    golden(decoded, 'responses', `${name}.neutral.json`)
    assert.ok(!isTranslationError(decoded))
    assert.deepEqual(fmt.decodeResponse(fmt.encodeResponse(decoded, options)), decoded, name)
  }
})

test('errors: status and body → neutral (golden); the client-side body is {message}', () => {
  for (const name of cases('errors', '.json')) {
    const status = Number(fs.readFileSync(path.join(dir, 'errors', `${name}.status`), 'utf8'))
    const decoded = fmt.decodeError(status, readJson('errors', `${name}.json`))
    golden(decoded, 'errors', `${name}.neutral.json`)
    assert.deepEqual(fmt.encodeError(decoded), readJson('errors', `${name}.json`))
  }
  assert.deepEqual(fmt.decodeError(424, { message: 'model failed' }), { status: 502, kind: 'api_error', message: 'model failed' })
  assert.deepEqual(fmt.decodeError(500, null), { status: 500, kind: 'api_error', message: 'Bedrock answered 500' })
})

test('streams: the .b64 fixtures are the codec\'s bytes of the readable .events.json; decoded events are golden', () => {
  for (const name of cases('streams', '.events.json')) {
    const bytes = frames(readJson('streams', `${name}.events.json`) as [])
    const b64 = path.join(dir, 'streams', `${name}.b64`)
    if (update) fs.writeFileSync(b64, bytes.toString('base64') + '\n')
    assert.deepEqual(streamBytes(name), bytes, `${name}.b64 matches ${name}.events.json`)
    golden(decodeAll(bytes), 'streams', `${name}.neutral.json`)
  }
})

test('streams: the same events whatever the split (every byte boundary, random splits)', () => {
  for (const name of cases('streams', '.events.json')) {
    const bytes = streamBytes(name)
    const whole = decodeAll(bytes)
    // One byte at a time: every message split at every byte, the prelude included.
    assert.deepEqual(decodeAll(bytes, Array.from({ length: bytes.length - 1 }, (_, i) => i + 1)), whole, `${name}: byte by byte`)
    const next = random(name.length)
    for (let round = 0; round < 50; round++) {
      const splits = Array.from({ length: 1 + Math.floor(next() * 8) }, () => Math.floor(next() * bytes.length)).sort((a, b) => a - b)
      assert.deepEqual(decodeAll(bytes, splits), whole, `${name}: split at ${splits.join(',')}`)
    }
  }
})

test('streams: neutral events → ConverseStreamEncoder → decoder gives the same events', () => {
  for (const name of ['text', 'tool-calls', 'parallel-tool-calls', 'max-tokens', 'reasoning', 'throttled']) {
    const events = decodeAll(streamBytes(name))
    const encoder = new ConverseStreamEncoder()
    const bytes = Buffer.concat([...events.map(e => encoder.encode(e)), encoder.end()])
    const again = decodeAll(bytes)
    assert.deepEqual(again, events, name)
  }
})

test('streams: an exception event mid-stream is a neutral error with the matching status', () => {
  const events = decodeAll(streamBytes('throttled'))
  const last = events.at(-1)
  assert.deepEqual(last, { type: 'error', error: { status: 429, kind: 'rate_limit', message: 'Too many tokens, please wait before trying again.' } })
})

test('hostile: a stream cut mid-tool-call, or mid-message, ends in an error event', () => {
  const events = decodeAll(streamBytes('cut-tool-call'))
  assert.equal(events.at(-1)?.type, 'error')
  assert.match(JSON.stringify(events.at(-1)), /middle of a tool call/)
  const text = streamBytes('text')
  for (const cut of [5, 12, 40, text.length - 1]) {
    const cutEvents = decodeAll(text.subarray(0, cut))
    assert.equal(cutEvents.at(-1)?.type, 'error', `cut at ${cut}`)
    assert.equal(cutEvents.filter(e => e.type === 'finish').length, 0)
  }
})

test('hostile: a corrupted message CRC or prelude CRC is an error, not garbage events', () => {
  const bytes = Buffer.from(streamBytes('text'))
  const first = bytes.readUInt32BE(0)
  // A payload byte of the second message: its message CRC no longer matches.
  const flipped = Buffer.from(bytes)
  flipped.writeUInt8(flipped.readUInt8(first + 30) ^ 0x01, first + 30)
  const events = decodeAll(flipped)
  assert.equal(events.filter(e => e.type === 'start').length, 1, 'the first message still went through')
  assert.equal(events.at(-1)?.type, 'error')
  assert.match(JSON.stringify(events.at(-1)), /malformed event stream message/)
  // The total length of the first message: the prelude CRC catches it before any wait.
  const prelude = Buffer.from(bytes)
  prelude.writeUInt8(prelude.readUInt8(1) ^ 0x40, 1)
  const reader = new EventStreamReader()
  assert.deepEqual(reader.push(prelude.subarray(0, 12)), [])
  assert.match(reader.failed ?? '', /prelude checksum/)
})

test('hostile: an oversized message is refused from its prelude, without buffering it', () => {
  // A valid prelude announcing 64 MiB: refused as soon as its 12 bytes are in.
  const prelude = Buffer.alloc(12)
  prelude.writeUInt32BE(64 * 1024 * 1024, 0)
  prelude.writeUInt32BE(0, 4)
  prelude.writeUInt32BE(crc32(prelude.subarray(0, 8)), 8)
  const events = decodeAll(prelude)
  assert.equal(events.length, 1)
  assert.match(JSON.stringify(events[0]), /exceeds the limit/)
  // A real message over a small limit.
  const big = frames([{ event: 'contentBlockDelta', payload: { contentBlockIndex: 0, delta: { text: 'x'.repeat(2000) } } }])
  const limited = decodeAll(big, [], 1024)
  assert.match(JSON.stringify(limited.at(-1)), /exceeds the limit of 1024/)
  // Garbage that is not an event stream at all.
  assert.equal(decodeAll(Buffer.from('HTTP/1.1 200 OK\r\n\r\n{"message":"hi"}')).at(-1)?.type, 'error')
})

test('hostile: events out of order, bad JSON, error messages', () => {
  const orphan = frames([{ event: 'contentBlockDelta', payload: { contentBlockIndex: 3, delta: { toolUse: { input: '{' } } } }])
  assert.match(JSON.stringify(decodeAll(orphan).at(-1)), /not a tool call/)
  const badJson = encodeEventStreamMessage({ ':event-type': 'messageStart', ':content-type': 'application/json', ':message-type': 'event' }, '{"role":')
  assert.match(JSON.stringify(decodeAll(badJson).at(-1)), /not JSON/)
  const error = encodeEventStreamMessage({ ':error-code': 'InternalFailure', ':error-message': 'boom', ':message-type': 'error' }, '')
  assert.deepEqual(decodeAll(error), [{ type: 'error', error: { status: 502, kind: 'api_error', message: 'boom' } }])
  // A stream opening blocks without end, or with a nonsense index.
  const many = frames(Array.from({ length: 300 }, (_, i) => ({ event: 'contentBlockDelta', payload: { contentBlockIndex: i, delta: { text: 'x' } } })))
  assert.match(JSON.stringify(decodeAll(many).at(-1)), /more than 256 content blocks/)
  const negative = frames([{ event: 'contentBlockStop', payload: { contentBlockIndex: -1 } }])
  assert.match(JSON.stringify(decodeAll(negative).at(-1)), /non-negative integer/)
  // Nothing after an error is decoded.
  const after = Buffer.concat([error, streamBytes('text')])
  assert.equal(decodeAll(after).length, 1)
})

test('UTF-8 split across reads: multi-byte characters arrive whole', () => {
  const bytes = streamBytes('text')
  const text = decodeAll(bytes, Array.from({ length: bytes.length - 1 }, (_, i) => i + 1))
    .flatMap(e => e.type === 'text_delta' ? [e.text] : []).join('')
  assert.equal(text, 'Bonjour, ça va ?')
})

test('neutral → Converse: what Converse cannot express is refused with the field', () => {
  const base: ChatRequest = { model: 'm', system: [], messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: false }
  const refused = (request: Partial<ChatRequest>, field: RegExp): void => {
    const out = fmt.encodeRequest({ ...base, ...request }, 'm')
    assert.ok(isTranslationError(out), JSON.stringify(request))
    assert.equal(out.status, 400)
    assert.match(out.field ?? '', field)
  }
  refused({ messages: [{ role: 'user', content: [{ type: 'image', source: { kind: 'url', url: 'https://example.com/a.png' } }] }] }, /^messages\[0\]\.content\[0\]\.source\.url$/)
  refused({ messages: [{ role: 'user', content: [{ type: 'image', source: { kind: 'base64', mediaType: 'image/bmp', data: 'AA==' } }] }] }, /mediaType/)
  refused({ responseFormat: { type: 'json_object' } }, /response_format/)
  refused({ tools: [{ name: 't', parameters: { type: 'object' } }], parallelToolCalls: false }, /parallel_tool_calls/)
  refused({ reasoning: { effort: 'minimal' } }, /effort/)
  refused({ toolChoice: { type: 'required' } }, /tool_choice/)
  refused({
    tools: [{ name: 't', parameters: { type: 'object' } }],
    toolChoice: { type: 'none' },
    messages: [{ role: 'assistant', content: [{ type: 'tool_call', id: 'a', name: 't', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', callId: 'a', content: [] }] }]
  }, /tool_choice/)
  // tool_choice none without tool history: the tools are simply not offered.
  const none = fmt.encodeRequest({ ...base, tools: [{ name: 't', parameters: { type: 'object' } }], toolChoice: { type: 'none' } }, 'm')
  assert.deepEqual(none, { messages: [{ role: 'user', content: [{ text: 'hi' }] }] })
  // Two turns of one role in a row (OpenAI tool results, then a user message) are one Converse turn.
  const merged = fmt.encodeRequest({
    ...base,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
      { role: 'assistant', content: [{ type: 'tool_call', id: 'a', name: 't', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', callId: 'a', content: [{ type: 'text', text: 'rain' }] }] },
      { role: 'user', content: [{ type: 'text', text: 'and tomorrow?' }] }
    ],
    tools: [{ name: 't', parameters: { type: 'object' } }]
  }, 'm')
  assert.deepEqual((merged as { messages: unknown[] }).messages.at(-1), { role: 'user', content: [{ toolResult: { toolUseId: 'a', content: [{ text: 'rain' }] } }, { text: 'and tomorrow?' }] })
  assert.equal((merged as { messages: unknown[] }).messages.length, 3)
  // The model is never in the body (it is in the path).
  assert.equal('modelId' in (fmt.encodeRequest(base, 'm') as object), false)
})

test('Converse → neutral: ignored fields are documented, unknown ones refused', () => {
  const ok = fmt.decodeRequest({ messages: [{ role: 'user', content: [{ text: 'hi' }, { cachePoint: { type: 'default' } }] }], requestMetadata: { team: 'a' }, performanceConfig: { latency: 'optimized' } })
  assert.ok(!isTranslationError(ok))
  assert.deepEqual(ok.messages[0]?.content, [{ type: 'text', text: 'hi' }])
  assert.ok(IGNORED.requestMetadata !== undefined && IGNORED.cachePoint !== undefined)
  const unknown = fmt.decodeRequest({ messages: [], promptVariables: { a: { text: 'b' } } })
  assert.ok(isTranslationError(unknown) && unknown.field === 'promptVariables')
  const extra = fmt.decodeRequest({ messages: [], additionalModelRequestFields: { anthropic_beta: ['x'] } })
  assert.ok(isTranslationError(extra) && extra.field === 'additionalModelRequestFields.anthropic_beta')
})

test('a Bedrock-format client stream is binary: the text encoder is refused, newBinaryStreamEncoder gives event-stream frames', () => {
  assert.throws(() => fmt.newStreamEncoder(options), (err: unknown) => isTranslationError(err) && err.status === 400)
  const encoder = fmt.newBinaryStreamEncoder!(options)
  const bytes = Buffer.concat([encoder.encode({ type: 'start', id: 'x', model: 'm' }), encoder.encode({ type: 'block_start', index: 0, block: { type: 'text' } }), encoder.encode({ type: 'text_delta', index: 0, text: 'hi' }), encoder.end()])
  const events = new ConverseStreamDecoder().push(bytes)
  assert.deepEqual(events.filter(e => e.type === 'text_delta').map(e => (e as { text: string }).text), ['hi'])
  assert.deepEqual(fmt.errorHeaders!({ status: 429, kind: 'rate_limit', message: 'slow down' }), { 'x-amzn-errortype': 'ThrottlingException' })
})

test('provider: paths with the model id escaped as the SDK does; bearer API key', async () => {
  const adapter = bedrockProvider({ region: 'us-east-1', apiKey: 'bedrock-api-key-test-portico' })
  const request = { operation: 'chat' as const, model: 'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude(1)', streaming: false, body: Buffer.from('{}'), headers: {} as Record<string, string> }
  assert.equal(adapter.path(request), '/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude%281%29/converse')
  assert.equal(adapter.path({ ...request, model: 'amazon.nova-lite-v1:0', streaming: true }), '/model/amazon.nova-lite-v1%3A0/converse-stream')
  await adapter.authorize(request, { host: 'bedrock-runtime.us-east-1.amazonaws.com', port: 443, protocol: 'https' })
  assert.equal(request.headers.authorization, 'Bearer bedrock-api-key-test-portico')
  assert.equal(adapter.format, 'bedrock-converse')
  assert.equal(adapter.system, 'aws.bedrock')
})

test('provider: SigV4 with explicit keys (session token signed too); credential failure is a 500 without secrets', async () => {
  const adapter = bedrockProvider({
    region: 'eu-west-3',
    credentials: { accessKeyId: 'AKIDPORTICOTEST', secretAccessKey: 'portico-test-secret-not-real', sessionToken: 'portico-test-session' },
    now: () => new Date('2026-12-05T09:00:00Z')
  })
  const request = { operation: 'chat' as const, model: 'm', streaming: true, body: Buffer.from('{"messages":[]}'), headers: {} as Record<string, string> }
  await adapter.authorize(request, { host: 'bedrock-runtime.eu-west-3.amazonaws.com', port: 443, protocol: 'https' })
  assert.match(request.headers.authorization ?? '', /^AWS4-HMAC-SHA256 Credential=AKIDPORTICOTEST\/20261205\/eu-west-3\/bedrock\/aws4_request, SignedHeaders=accept;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/)
  assert.equal(request.headers['x-amz-date'], '20261205T090000Z')
  assert.equal(request.headers['x-amz-security-token'], 'portico-test-session')
  assert.equal(request.headers.host, 'bedrock-runtime.eu-west-3.amazonaws.com')
  assert.equal(request.headers.accept, 'application/vnd.amazon.eventstream')
  assert.equal(JSON.stringify(request.headers).includes('portico-test-secret-not-real'), false)

  const failing = bedrockProvider({ region: 'us-east-1', credentialProvider: async () => { throw new Error('Could not load credentials from any providers') } })
  await assert.rejects(Promise.resolve(failing.authorize({ ...request, headers: {} }, { host: 'h', port: 8443, protocol: 'https' })),
    (err: unknown) => isTranslationError(err) && err.status === 500 && /Could not load credentials/.test(err.message))
})

test('the AWS modules load only at first use', async () => {
  const { execFileSync } = await import('node:child_process')
  const script = `
    const { createRequire } = await import('node:module')
    const require = createRequire(${JSON.stringify(path.join(import.meta.dirname, '..', 'package.json'))})
    await import(${JSON.stringify(path.join(import.meta.dirname, '..', 'src', 'llm', 'formats', 'bedrock-converse.ts'))})
    await import(${JSON.stringify(path.join(import.meta.dirname, '..', 'src', 'llm', 'providers', 'bedrock.ts'))})
    const loaded = Object.keys(require.cache).filter(k => /@smithy|@aws-sdk/.test(k))
    console.log(loaded.length)
  `
  assert.equal(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }).trim(), '0')
})

test('provider: a backend guardrail is added to the encoded body as guardrailConfig', () => {
  assert.deepEqual(withBedrockGuardrail({ messages: [] }, { identifier: 'gr-abc123', version: 'DRAFT' }),
    { messages: [], guardrailConfig: { guardrailIdentifier: 'gr-abc123', guardrailVersion: 'DRAFT' } })
})
