/**
 * The backend client's response parser (src/http/h1-response-parser.ts) against llhttp, Node's
 * own parser (test/lib/h1-differential.ts): generated responses from a fixed seed, and the
 * fixed cases earlier runs found, each with the side RFC 9112 says is right. A longer run with
 * any seed: scripts/h1-differential.ts.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { RawServer, random, runDifferential, tally, verdict, viaPortico, type Case } from './lib/h1-differential.ts'

const SEED = 49
const COUNT = 600

test(`${COUNT} generated responses (seed ${SEED}): Portico and llhttp agree, or differ only where Portico is stricter on purpose`, async () => {
  const findings = await runDifferential(SEED, COUNT)
  const disagreements = findings.filter(f => f.verdict.startsWith('disagree'))
  assert.deepEqual(disagreements.map(f => `case ${f.n} [${f.c.mutations.join(', ')}]: ${f.verdict} ${JSON.stringify(f.c.bytes.toString('latin1').slice(0, 200))}`), [])
  const counts = tally(findings)
  // The generator still makes both kinds: responses both read the same, and ones both refuse.
  assert.ok((counts.agree ?? 0) > COUNT / 5, JSON.stringify(counts))
  assert.ok((counts['both failed'] ?? 0) > COUNT / 5, JSON.stringify(counts))
})

const CHUNKED = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'

/**
 * Inputs the two parsers once disagreed on, or where they differ on purpose, with the verdict
 * that must hold now. `agree`/`both failed`: Portico was wrong and was fixed (or agreed
 * already and stays so); `stricter`/`laxer`: an expected difference (see STRICTER/LAXER in
 * lib/h1-differential.ts for why each is right).
 */
const FIXED: Array<{ name: string, mutation?: string, text: string, method?: 'GET' | 'HEAD', verdict: string }> = [
  // Found by the differential run: Portico took these, llhttp refused them; now both refuse.
  { name: 'two equal Content-Length fields (llhttp refuses any repeat)', text: 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok', verdict: 'both failed' },
  { name: 'two equal Content-Length fields on a 304', text: 'HTTP/1.1 304 OK\r\ncontent-length: 4\r\ncontent-length: 4\r\n\r\n', verdict: 'both failed' },
  { name: 'a space after the chunk size', text: `${CHUNKED}2 \r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'a space after the last chunk\'s size', text: `${CHUNKED}2\r\nok\r\n0 \r\n\r\n`, verdict: 'both failed' },
  { name: 'whitespace between the chunk size and its extension', text: `${CHUNKED}2 ;a\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'a tab between the chunk size and its extension', text: `${CHUNKED}2\t;a\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'a chunk extension without a name', text: `${CHUNKED}2;\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'a chunk extension value with a space', text: `${CHUNKED}2;a=b c\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'whitespace around a chunk extension\'s =', text: `${CHUNKED}2;a = b\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'a quoted chunk extension value followed by more', text: `${CHUNKED}2;a="x"y\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'an empty Transfer-Encoding', text: 'HTTP/1.1 200 OK\r\ntransfer-encoding: \r\n\r\nuntil the end', verdict: 'both failed' },
  { name: 'an empty Transfer-Encoding after chunked', text: `${CHUNKED.slice(0, -2)}transfer-encoding:\r\n\r\n2\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  // Found by the differential run: Portico refused a size with leading zeros as an overflow.
  { name: 'a last chunk written with 17 zeros', text: `${CHUNKED}2\r\nok\r\n00000000000000000\r\n\r\n`, verdict: 'agree' },
  // Well-formed extensions and sizes both take.
  { name: 'chunk extensions: tokens, a quoted string with an escaped quote', text: `${CHUNKED}2;a=b;c;d="x \\" y"\r\nok\r\n0\r\n\r\n`, verdict: 'agree' },
  { name: 'an upper-case chunk size with leading zeros', text: `${CHUNKED}000A\r\n0123456789\r\n0\r\n\r\n`, verdict: 'agree' },
  { name: 'a chunk size over 2^53', text: `${CHUNKED}20000000000000\r\nok\r\n0\r\n\r\n`, verdict: 'both failed' },
  { name: 'a 100 Continue before the answer', text: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok', verdict: 'agree' },
  { name: 'trailers', text: `${CHUNKED}2\r\nok\r\n0\r\nx-t: 1\r\nx-u:  2 \r\n\r\n`, verdict: 'agree' },
  { name: 'obs-text in a field value', text: 'HTTP/1.1 200 OK\r\nx: caf\xe9\r\ncontent-length: 2\r\n\r\nok', verdict: 'agree' },
  { name: 'a HEAD answer announcing a body', method: 'HEAD', text: 'HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\n', verdict: 'agree' },
  { name: 'a 204 with a Content-Length', text: 'HTTP/1.1 204 No Content\r\ncontent-length: 20\r\n\r\n', verdict: 'agree' },
  { name: 'a body delimited by the connection\'s end', text: 'HTTP/1.1 200 OK\r\n\r\nuntil the end', verdict: 'agree' },
  { name: 'obs-fold', text: 'HTTP/1.1 200 OK\r\nx: 1\r\n 2\r\ncontent-length: 2\r\n\r\nok', verdict: 'both failed' },
  { name: 'a bare LF', text: 'HTTP/1.1 200 OK\r\nx: 1\ncontent-length: 2\r\n\r\nok', verdict: 'both failed' },
  { name: 'a bare CR', text: 'HTTP/1.1 200 OK\r\nx: 1\rcontent-length: 2\r\n\r\nok', verdict: 'both failed' },
  { name: 'a space before the colon', text: 'HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok', verdict: 'both failed' },
  { name: 'Content-Length with Transfer-Encoding', text: 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', verdict: 'both failed' },
  { name: 'a Content-Length list', text: 'HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok', verdict: 'both failed' },
  // Where Portico is stricter on purpose.
  { name: 'status 099', mutation: 'status-code', text: 'HTTP/1.1 099 Odd\r\ncontent-length: 2\r\n\r\nok', verdict: 'stricter: status-code' },
  { name: 'status 600', mutation: 'status-code', text: 'HTTP/1.1 600 Beyond\r\ncontent-length: 2\r\n\r\nok', verdict: 'stricter: status-code' },
  { name: 'HTTP/2.0 in an HTTP/1.1 status line', mutation: 'version', text: 'HTTP/2.0 200 OK\r\ncontent-length: 2\r\n\r\nok', verdict: 'stricter: version' },
  { name: 'a control character in the reason phrase', mutation: 'reason', text: 'HTTP/1.1 200 O\x01K\r\ncontent-length: 2\r\n\r\nok', verdict: 'stricter: reason' },
  { name: 'a 101 to a request that asked for no upgrade', mutation: 'switching-protocols', text: 'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n', verdict: 'stricter: switching-protocols' },
  { name: 'chunked before another coding', mutation: 'transfer-encoding', text: 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\nokok', verdict: 'stricter: transfer-encoding' },
  // Found by the differential run: llhttp reads `chunked,` as a body to the connection's end
  // (an empty element taken for a coding), where RFC 9110 §5.6.1 would have it chunked.
  { name: 'chunked followed by an empty list element', mutation: 'transfer-encoding', text: 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked,\r\n\r\n2\r\nok\r\n0\r\n\r\n', verdict: 'stricter: transfer-encoding' },
  { name: 'an empty list element before chunked', mutation: 'transfer-encoding', text: 'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, , chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', verdict: 'stricter: transfer-encoding' },
  { name: 'an empty line before the status line', mutation: 'leading-bytes', text: '\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok', verdict: 'stricter: leading-bytes' },
  { name: 'a Transfer-Encoding of empty list elements only', mutation: 'empty-framing-value', text: 'HTTP/1.1 200 OK\r\ntransfer-encoding: ,\r\n\r\nuntil the end', verdict: 'stricter: empty-framing-value' },
  { name: 'a chunk extension with an empty name', mutation: 'chunk-extension', text: `${CHUNKED}2;=b\r\nok\r\n0\r\n\r\n`, verdict: 'stricter: chunk-extension' },
  { name: 'a chunk extension with an empty value', mutation: 'chunk-extension', text: `${CHUNKED}2;a=\r\nok\r\n0\r\n\r\n`, verdict: 'stricter: chunk-extension' },
  // Where Portico takes what llhttp refuses, on purpose: it drops the field before the client.
  { name: 'a Content-Length trailer', mutation: 'trailers', text: `${CHUNKED}2\r\nok\r\n0\r\ncontent-length: 5\r\n\r\n`, verdict: 'laxer: trailers' }
]

describe('fixed cases: Portico and llhttp on inputs that matter', () => {
  const server = new RawServer()
  const cases: Case[] = FIXED.map(f => ({ mutations: f.mutation === undefined ? [] : [f.mutation], method: f.method ?? 'GET', bytes: Buffer.from(f.text, 'latin1') }))
  before(async () => { await server.start() })
  after(async () => { await server.close() })

  FIXED.forEach((f, n) => {
    test(`${f.name}: ${f.verdict}`, async () => {
      const c = cases[n]!
      // Fed in 64-byte pieces and byte by byte: where the socket's chunks end must not matter.
      const whole = viaPortico(c, () => 0.999)
      const bytewise = viaPortico(c, () => 0)
      if (whole.kind === 'complete') assert.deepEqual(bytewise, whole)
      else assert.equal(bytewise.kind, whole.kind, `${bytewise.kind === 'complete' ? '' : bytewise.why} / ${whole.why}`)
      const llhttp = await server.viaLlhttp(cases, n)
      assert.equal(verdict(c, whole, llhttp), f.verdict, `Portico ${JSON.stringify(whole)}, llhttp ${JSON.stringify(llhttp)}`)
    })
  })
})

test('a bare CR in a head not complete yet is refused at once, not when the head would end', () => {
  const c: Case = { mutations: [], method: 'GET', bytes: Buffer.from('HTTP/1.1 200 OK\r\nx: 1\rmore', 'latin1') }
  const outcome = viaPortico(c, random(1))
  assert.equal(outcome.kind, 'refused')
})
