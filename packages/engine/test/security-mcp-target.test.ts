/**
 * The pieces that keep one MCP target's faults its own (issue 14, item 7), unit by unit:
 * the stdio line splitter (linear, capped, resynchronising), the SSE event meter, and the
 * per-target config (maxMessageSize, requestTimeout). The HTTP answers read within the
 * limit are in mcp-target-answer.test.ts, the legacy SSE transport's limits in
 * mcp-target-legacy-sse.test.ts, the end-to-end behaviour in
 * e2e/test/security-mcp-target.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'
import { LineSplitter } from '../src/mcp/upstream/line-splitter.ts'
import { SseEventMeter } from '../src/mcp/protocol/message-limits.ts'

function split (chunks: string[], maxLineBytes: number): { lines: string[], overflows: number[] } {
  const lines: string[] = []
  const overflows: number[] = []
  const splitter = new LineSplitter({ maxLineBytes, onLine: l => lines.push(l.toString('utf8')), onOverflow: n => overflows.push(n) })
  for (const c of chunks) splitter.push(Buffer.from(c))
  return { lines, overflows }
}

test('lines split at LF across any chunk boundary; a CR stays for the caller to trim', () => {
  assert.deepEqual(split(['{"a":1}\n{"b"', ':2}\r\n', '', '{"c"', ':', '3}\n{"d"'], 100), { lines: ['{"a":1}', '{"b":2}\r', '{"c":3}'], overflows: [] })
  assert.deepEqual(split(['x'.repeat(10) + '\n'], 10).lines, ['x'.repeat(10)], 'a line of exactly the limit passes')
})

test('a line past the limit is dropped up to its newline, then reading resumes', () => {
  const out = split(['aaaa', 'aaaa', 'aaaa', 'aa\nok\n', 'bbbbbbbbbbbbbbbb', 'bbb', '\nfine\n'], 10)
  assert.deepEqual(out.lines, ['ok', 'fine'])
  assert.equal(out.overflows.length, 2, 'one report per oversized line')
  assert.deepEqual(split(['x'.repeat(11) + '\nafter\n'], 10), { lines: ['after'], overflows: [11] }, 'overflow inside one chunk')
})

test('the splitter holds no more than the limit and scans each byte once (linear time)', () => {
  // 64 KiB chunks of a 32 MiB line with no newline: a quadratic splitter (concatenate and
  // search from the start on every chunk) copies ~8 GB here; this one must stay near linear.
  const chunk = Buffer.alloc(64 * 1024, 'x')
  const time = (bytes: number) => {
    let overflowed = 0
    const splitter = new LineSplitter({ maxLineBytes: 1 << 30, onLine: () => {}, onOverflow: () => { overflowed++ } })
    const start = performance.now()
    for (let sent = 0; sent < bytes; sent += chunk.length) splitter.push(chunk)
    const ms = performance.now() - start
    assert.equal(splitter.pending, bytes)
    assert.equal(overflowed, 0)
    return ms
  }
  time(1 << 20) // warm-up
  const small = Math.max(time(4 << 20), 1)
  const large = time(32 << 20)
  // 8× the bytes: linear is ~8× the time; quadratic would be ~64×. The bound is generous.
  assert.ok(large < small * 30, `32 MiB took ${large.toFixed(1)} ms, 4 MiB ${small.toFixed(1)} ms`)

  let held = 0
  const capped = new LineSplitter({ maxLineBytes: 1 << 20, onLine: () => {}, onOverflow: () => {} })
  for (let sent = 0; sent < 8 << 20; sent += chunk.length) {
    capped.push(chunk)
    held = Math.max(held, capped.pending)
  }
  assert.ok(held <= 1 << 20, `held ${held} bytes with a 1 MiB cap`)
})

test('the SSE meter counts one event at a time, whatever the line endings and chunking', () => {
  const fits = (limit: number, ...chunks: string[]) => {
    const meter = new SseEventMeter(limit)
    return chunks.every(c => meter.feed(Buffer.from(c)))
  }
  // Many events, each under the limit, together far over it.
  assert.equal(fits(30, ...Array.from({ length: 100 }, (_, i) => `data: {"n":${i}}\n\n`)), true)
  assert.equal(fits(30, 'data: 0123456789\r\n\r\ndata: 0123456789\r\r', 'data: 0123456789\r', '\n\r\n'), true, 'CRLF and CR endings end events too')
  assert.equal(fits(30, 'data: 0123456789\n', 'data: 0123456789\n', 'data: 0123456789\n\n'), false, 'several data lines of one event add up')
  assert.equal(fits(30, 'data: ', 'x'.repeat(10), 'x'.repeat(10), 'x'.repeat(10)), false, 'an event with no end')
})

function mcpConfig (target: string): string {
  return `gateways: {default: {port: 3000}}\nroutes:\n  - backends:\n      - mcp:\n          targets:\n            - ${target}\n`
}

test('maxMessageSize and requestTimeout of a target reach the IR; defaults 4 MiB and 60 s', () => {
  const load = (target: string) => {
    const result = loadConfigText(mcpConfig(target), { baseDir: '/cfg' })
    assert.ok(result.ok, result.ok ? '' : JSON.stringify(result.diagnostics))
    return result.config.ir.backends.find(b => b.kind === 'mcp')!.mcp!.targets[0]!
  }
  const defaults = load('{name: a, stdio: {cmd: srv}}')
  assert.equal(defaults.maxMessageBytes, 4 * 1024 * 1024)
  assert.equal(defaults.requestTimeoutMs, 60_000)
  const set = load('{name: a, mcp: {host: "http://127.0.0.1:1/mcp"}, maxMessageSize: 65536, requestTimeout: 1m30s}')
  assert.equal(set.maxMessageBytes, 65536)
  assert.equal(set.requestTimeoutMs, 90_000)
})

test('limits that cannot work are config errors naming the field', () => {
  const errors = (target: string) => {
    const result = loadConfigText(mcpConfig(target), { baseDir: '/cfg' })
    assert.equal(result.ok, false)
    return result.ok ? [] : result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
  }
  assert.match(errors('{name: a, stdio: {cmd: srv}, maxMessageSize: 10}').join('\n'), /c\.yaml:6:\d+: routes\[0\]\.backends\[0\]\.mcp\.targets\[0\]\.maxMessageSize: must be >= 1024/)
  assert.match(errors('{name: a, stdio: {cmd: srv}, requestTimeout: 0s}').join('\n'), /routes\[0\]\.backends\[0\]\.mcp\.targets\[0\]\.requestTimeout: must be between 1ms and 596h/)
  assert.match(errors('{name: a, stdio: {cmd: srv}, requestTimeout: 1000h}').join('\n'), /targets\[0\]\.requestTimeout: must be between 1ms and 596h/)
  assert.match(errors('{name: a, stdio: {cmd: srv}, requestTimeout: soon}').join('\n'), /targets\[0\]\.requestTimeout/)
})
