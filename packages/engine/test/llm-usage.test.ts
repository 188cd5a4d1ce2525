import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { LlmUsageTap, LLM_RESPONSE_LIMIT, SSE_TAIL_BYTES } from '../src/llm/usage.ts'

/** Feeds `text` to a tap in pieces of `size` bytes (splitting lines and UTF-8 sequences). */
function feed (tap: LlmUsageTap, text: string, size: number): void {
  const bytes = Buffer.from(text)
  for (let i = 0; i < bytes.length; i += size) tap.push(bytes.subarray(i, i + size))
}

const chunk = (extra: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm-1', choices: [], ...extra })}\n\n`

test('SSE: the usage of the last chunk, whatever the chunking (lines and UTF-8 split)', () => {
  const stream = chunk({ choices: [{ delta: { content: 'héllo — wörld ✓' } }], usage: null }) +
    chunk({ usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 } }) + 'data: [DONE]\n\n'
  for (const size of [1, 2, 3, 7, 64, stream.length]) {
    const tap = new LlmUsageTap('text/event-stream; charset=utf-8')
    feed(tap, stream, size)
    assert.deepEqual(tap.finish(), { inputTokens: 7, outputTokens: 5, totalTokens: 12, responseModel: 'm-1' }, `pieces of ${size}`)
  }
})

test('SSE: CRLF lines, and input/output names under response (Responses API events)', () => {
  const tap = new LlmUsageTap('text/event-stream')
  feed(tap, 'event: response.completed\r\ndata: {"type":"response.completed","response":{"model":"m-2","usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}}\r\n\r\n', 5)
  assert.deepEqual(tap.finish(), { inputTokens: 3, outputTokens: 4, totalTokens: 7, responseModel: 'm-2' })
})

test('SSE: the last event with a usage object is the tally; only the stream\'s tail is kept', () => {
  const tap = new LlmUsageTap('text/event-stream')
  feed(tap, 'data: {"message":{"model":"m-3","usage":{"input_tokens":10}}}\n\ndata: {"usage":{"output_tokens":2}}\n\ndata: {"usage": {"input_tokens":10, "output_tokens":9}}\n\ndata: {"usage":null}\n\n', 4)
  assert.deepEqual(tap.finish(), { inputTokens: 10, outputTokens: 9, totalTokens: 19, responseModel: null })

  // A long stream: the usage at the end is found, one at the start is out of the tail.
  const filler = chunk({ choices: [{ delta: { content: 'x'.repeat(200) } }], usage: null }).repeat(Math.ceil(2 * SSE_TAIL_BYTES / 300))
  const late = new LlmUsageTap('text/event-stream')
  feed(late, filler + chunk({ usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }) + 'data: [DONE]\n\n', 1500)
  assert.equal(late.finish()?.totalTokens, 2)
  const early = new LlmUsageTap('text/event-stream')
  feed(early, chunk({ usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }) + filler, 1500)
  assert.equal(early.finish(), null)
})

test('SSE: a last event without its newline (stream cut) is still read', () => {
  const tap = new LlmUsageTap('text/event-stream')
  feed(tap, 'data: {"usage":{"total_tokens":5}}', 3)
  assert.equal(tap.finish()?.totalTokens, 5)
})

test('JSON: read at the end; no usage, bad JSON and answers over the limit give null with a reason', () => {
  const ok = new LlmUsageTap('application/json')
  feed(ok, JSON.stringify({ model: 'm', usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }), 3)
  assert.deepEqual(ok.finish(), { inputTokens: 1, outputTokens: 2, totalTokens: 3, responseModel: 'm' })

  const none = new LlmUsageTap('application/json')
  feed(none, '{"error":{"message":"bad"}}', 100)
  assert.equal(none.finish(), null)
  assert.equal(none.problem, 'the answer carried no usage')

  const broken = new LlmUsageTap('application/json')
  feed(broken, '{"usage": {', 100)
  assert.equal(broken.finish(), null)
  assert.equal(broken.problem, 'the answer is not JSON: usage not read')

  const big = new LlmUsageTap(undefined)
  big.push(Buffer.alloc(LLM_RESPONSE_LIMIT + 1, 32))
  big.push(Buffer.from('{"usage":{"total_tokens":1}}'))
  assert.equal(big.finish(), null)
  assert.match(big.problem!, /larger than/)
})

test('negative, fractional or non-numeric counts are ignored', () => {
  const tap = new LlmUsageTap('application/json')
  feed(tap, '{"usage":{"prompt_tokens":-1,"completion_tokens":2.5,"total_tokens":"9"}}', 100)
  assert.equal(tap.finish(), null)
})

test('an Anthropic stream passed through: input from message_start at its head, output from the last message_delta', () => {
  const sse = readFileSync(new URL('./golden/llm/anthropic-messages/streams/text.sse', import.meta.url), 'utf8')
  for (const size of [1, 7, 64, 100_000]) {
    const tap = new LlmUsageTap('text/event-stream')
    const bytes = Buffer.from(sse)
    for (let i = 0; i < bytes.length; i += size) tap.push(bytes.subarray(i, i + size))
    // input_tokens 25 + cache_read_input_tokens 10: the input count includes the cache, as decoded for translation (text.neutral.json).
    assert.deepEqual(tap.finish(), { inputTokens: 35, outputTokens: 15, totalTokens: 50, responseModel: 'claude-sonnet-4-6', cachedInputTokens: 10 }, `split every ${size} bytes`)
  }
  // A long stream: message_start is long gone from the tail, still read from the head.
  const [start, ...rest] = sse.split(/(?<=\n\n)/)
  const ping = 'event: ping\ndata: {"type": "ping"}\n\n'
  const tap = new LlmUsageTap('text/event-stream')
  tap.push(Buffer.from(start!))
  for (let i = 0; i < 5000; i++) tap.push(Buffer.from(ping))
  tap.push(Buffer.from(rest.join('')))
  assert.equal(tap.finish()?.inputTokens, 35)
})
