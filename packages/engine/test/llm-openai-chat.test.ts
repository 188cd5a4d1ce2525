/**
 * OpenAI chat completions wire format (llm/formats/openai-chat.ts), pinned by golden files
 * under golden/llm/openai-chat/: every request, answer, stream and error fixture decoded into
 * the neutral shape (`<case>.neutral.json`) and encoded back (`<case>.encoded.*`), with a
 * round-trip property (decode → encode → decode gives the same neutral value). Regenerate
 * with UPDATE_GOLDEN=1 and review the diff. Then the hostile cases: streams cut, malformed,
 * split anywhere.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { openaiChatFormat as f } from '../src/llm/formats/openai-chat.ts'
import { isTranslationError, type ChatRequest, type StreamEvent } from '../src/llm/canonical.ts'
import { clientEndpoint } from '../src/llm/formats/index.ts'

const DIR = new URL('./golden/llm/openai-chat/', import.meta.url).pathname
const OPTIONS = { now: 1750000000, requestModel: 'gpt-4o-mini' }

function golden (file: string, actual: string): void {
  const path = join(DIR, file)
  if (process.env.UPDATE_GOLDEN === '1' || !existsSync(path)) writeFileSync(path, actual)
  assert.equal(actual, readFileSync(path, 'utf8'), `${file} differs (UPDATE_GOLDEN=1 to accept)`)
}

const json = (v: unknown): string => JSON.stringify(v, null, 2) + '\n'
const cases = (sub: string, ext: string): string[] => readdirSync(join(DIR, sub)).filter(n => n.endsWith(ext) && !n.includes('.neutral.') && !n.includes('.encoded.')).sort()

for (const file of cases('requests', '.json')) {
  const name = file.slice(0, -5)
  test(`request ${name}: decoded, encoded back, round trip`, () => {
    const body = JSON.parse(readFileSync(join(DIR, 'requests', file), 'utf8')) as Record<string, unknown>
    const neutral = f.decodeRequest(structuredClone(body))
    golden(`requests/${name}.neutral.json`, json(neutral))
    if (name.startsWith('refused-')) {
      assert.ok(isTranslationError(neutral), 'refused')
      assert.equal(neutral.status, 400)
      assert.ok(neutral.field !== undefined && neutral.message.includes(neutral.field), 'the 400 names the field')
      return
    }
    assert.ok(!isTranslationError(neutral), JSON.stringify(neutral))
    const encoded = f.encodeRequest(neutral, body.model as string)
    assert.ok(!isTranslationError(encoded), JSON.stringify(encoded))
    golden(`requests/${name}.encoded.json`, json(encoded))
    assert.deepEqual(f.decodeRequest(structuredClone(encoded)), neutral, 'decode → encode → decode is stable')
  })
}

for (const file of cases('responses', '.json')) {
  const name = file.slice(0, -5)
  test(`answer ${name}: decoded, encoded back, round trip`, () => {
    const body = JSON.parse(readFileSync(join(DIR, 'responses', file), 'utf8')) as Record<string, unknown>
    const neutral = f.decodeResponse(body)
    assert.ok(!isTranslationError(neutral), JSON.stringify(neutral))
    golden(`responses/${name}.neutral.json`, json(neutral))
    const encoded = f.encodeResponse(neutral, OPTIONS)
    golden(`responses/${name}.encoded.json`, json(encoded))
    assert.deepEqual(f.decodeResponse(encoded), neutral)
  })
}

function decodeAll (bytes: Buffer, split: number): StreamEvent[] {
  const d = f.newStreamDecoder()
  const out: StreamEvent[] = []
  for (let i = 0; i < bytes.length; i += split) out.push(...d.push(bytes.subarray(i, i + split)))
  out.push(...d.end())
  return out
}

function encodeAll (events: StreamEvent[]): string {
  const e = f.newStreamEncoder(OPTIONS)
  return events.map(ev => e.encode(ev)).join('') + e.end()
}

for (const file of cases('streams', '.sse')) {
  const name = file.slice(0, -4)
  test(`stream ${name}: decoded event by event whatever the chunking, encoded back`, () => {
    const bytes = readFileSync(join(DIR, 'streams', file))
    const events = decodeAll(bytes, bytes.length)
    golden(`streams/${name}.neutral.json`, json(events))
    for (const split of [1, 3, 17, 64]) assert.deepEqual(decodeAll(bytes, split), events, `split every ${split} bytes`)
    assert.equal(events.at(-1)!.type, 'finish')
    const encoded = encodeAll(events)
    golden(`streams/${name}.encoded.sse`, encoded)
    assert.deepEqual(decodeAll(Buffer.from(encoded), 5), events, 'decode → encode → decode is stable')
  })
}

for (const file of cases('errors', '.json')) {
  const [name, status] = file.slice(0, -5).split('.')
  test(`error ${name}: its status and kind, in OpenAI's error shape back`, () => {
    const body = JSON.parse(readFileSync(join(DIR, 'errors', file), 'utf8')) as unknown
    const neutral = f.decodeError(Number(status), body)
    golden(`errors/${name}.neutral.json`, json(neutral))
    assert.equal(neutral.status, Number(status))
    const encoded = f.encodeError(neutral) as { error: { message: string, type: string } }
    assert.equal(encoded.error.message, (body as { error: { message: string } }).error.message)
  })
}

test('client format and operation by path, under any prefix; other paths are chat completions', () => {
  assert.deepEqual(clientEndpoint('/v1/chat/completions'), { format: 'openai-chat', operation: 'chat' })
  assert.deepEqual(clientEndpoint('/openai/chat/completions?x=1'), { format: 'openai-chat', operation: 'chat' })
  assert.deepEqual(clientEndpoint('/team/v1/responses'), { format: 'openai-responses', operation: 'chat' })
  assert.deepEqual(clientEndpoint('/anthropic/v1/messages/'), { format: 'anthropic-messages', operation: 'chat' })
  assert.deepEqual(clientEndpoint('/v1/embeddings'), { format: 'openai-chat', operation: 'embeddings' })
  assert.deepEqual(clientEndpoint('/x/v1/models'), { format: 'openai-chat', operation: 'models' })
  assert.deepEqual(clientEndpoint('/local'), { format: 'openai-chat', operation: 'chat' })
})

test('hostile streams: cut mid-tool-call, not JSON, [DONE] too early, an error event, an endless event', () => {
  const bytes = readFileSync(join(DIR, 'streams', 'tool-calls.sse'), 'utf8')
  const cut = bytes.slice(0, bytes.indexOf('ty\\":\\"Pa') + 5)
  const cutEvents = decodeAll(Buffer.from(cut), 7)
  assert.equal(cutEvents.at(-1)!.type, 'error', 'a stream cut mid-tool-call ends in an error event')
  const encoded = encodeAll(cutEvents)
  assert.match(encoded, /data: \{"error":\{"message":"invalid answer from the provider: [^"]+","type":"server_error"/)
  assert.ok(encoded.endsWith('data: [DONE]\n\n'))

  const notJson = decodeAll(Buffer.from('data: {"id":"x","choices":[]}\n\ndata: {oops\n\ndata: {"id":"x"}\n\n'), 4)
  assert.deepEqual(notJson.map(e => e.type), ['start', 'error'], 'nothing after the first bad event')

  assert.equal(decodeAll(Buffer.from('data: [DONE]\n\n'), 100).at(-1)!.type, 'error')

  const mid = decodeAll(Buffer.from('data: {"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"error":{"message":"overloaded","type":"server_error"}}\n\n'), 100)
  assert.deepEqual(mid.at(-1), { type: 'error', error: { status: 502, kind: 'api_error', message: 'overloaded' } })

  const d = f.newStreamDecoder()
  const big = Buffer.alloc(1024 * 1024, 'a')
  let events: StreamEvent[] = d.push(Buffer.from('data: '))
  for (let i = 0; i < 5 && events.length === 0; i++) events = d.push(big)
  assert.equal(events.at(-1)?.type, 'error', 'an event past 4 MiB is an error, not memory')
})

test('tool arguments split anywhere, and a UTF-8 character split across reads', () => {
  const events = decodeAll(readFileSync(join(DIR, 'streams', 'text.sse')), 1)
  const text = events.filter(e => e.type === 'text_delta').map(e => (e as { text: string }).text).join('')
  assert.equal(text, 'Hello! How can I help — ünïcode?')
  const tools = decodeAll(readFileSync(join(DIR, 'streams', 'parallel-tool-calls.sse')), 2)
  const args = new Map<number, string>()
  for (const e of tools) if (e.type === 'tool_args_delta') args.set(e.index, (args.get(e.index) ?? '') + e.json)
  assert.deepEqual([...args.values()].map(a => JSON.parse(a)), [{ city: 'Paris' }, { city: 'Paris' }])
})

test('the output limit: max_tokens for OpenAI-compatible servers, max_completion_tokens for OpenAI reasoning models', () => {
  const request: ChatRequest = { model: 'm', system: [], messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: false, maxTokens: 10 }
  assert.equal((f.encodeRequest(request, 'llama-3') as Record<string, unknown>).max_tokens, 10)
  assert.equal((f.encodeRequest(request, 'o4-mini') as Record<string, unknown>).max_completion_tokens, 10)
  const topK = f.encodeRequest({ ...request, topK: 5 }, 'gpt-4o')
  assert.ok(isTranslationError(topK) && topK.field === 'top_k')
})
