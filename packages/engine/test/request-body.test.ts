/**
 * http/request-body.ts, the one reader of a request body whole: a body under the limit ends
 * in ctx.requestBody; past it `keep` leaves the stream whole for a streamed call and `drain`
 * discards the rest; a body a policy already read is used as it is; no body is `none`; a
 * body that goes quiet or trickles under the minimum rate fails the read (408 for the client).
 * In-process, against a real node:http server.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Readable } from 'node:stream'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { bodyReadFailure, readRequestBody, requestHasBody, type BodyContext, type ReadBodyOptions } from '../src/http/request-body.ts'

/** The body's clocks (http/body-clock.ts): off, unless a test sets them. */
let clock: BodyContext['listener'] = { frontend: { requestBodyIdleTimeoutMs: 0, requestBodyMinRate: 0 } }

type Probe = (ctx: BodyContext, req: http.IncomingMessage) => Promise<unknown>
let probe: Probe
let server: http.Server
let url: string

before(async () => {
  server = http.createServer((req, res) => {
    const ctx: BodyContext = { req, upgrade: null, requestBody: null, listener: clock, route: null, grpc: null }
    probe(ctx, req).then(
      out => res.end(JSON.stringify(out)),
      err => res.end(JSON.stringify({ thrown: String(err) }))
    )
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
})

after(() => new Promise<void>(resolve => server.close(() => resolve())))

async function send (body: string | null, options: { chunked?: boolean } = {}): Promise<any> {
  const res = await request(url, {
    method: 'POST',
    // A stream body has no length: undici sends it chunked.
    body: body === null ? null : options.chunked === true ? Readable.from([Buffer.from(body)]) : body
  })
  return await res.body.json()
}

function reading (options: ReadBodyOptions, then?: (ctx: BodyContext, req: http.IncomingMessage) => Promise<unknown>): Probe {
  return async (ctx, req) => {
    const read = await readRequestBody(ctx, options)
    const rest = then !== undefined ? await then(ctx, req) : undefined
    return { read: read instanceof Error ? `error: ${read.message}` : read, body: ctx.requestBody?.toString() ?? null, rest }
  }
}

const restOf = async (_ctx: BodyContext, req: http.IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString()
}

test('a body under the limit is read whole into ctx.requestBody (declared or chunked)', async () => {
  probe = reading({ maxBytes: 16, whenTooLarge: 'drain' })
  assert.deepEqual(await send('hello'), { read: 'buffered', body: 'hello' })
  assert.deepEqual(await send('chunked', { chunked: true }), { read: 'buffered', body: 'chunked' })
})

test('no body: none, and the request state is left alone', async () => {
  probe = reading({ maxBytes: 16, whenTooLarge: 'drain' })
  assert.deepEqual(await send(null), { read: 'none', body: null })
})

test('too large with keep: the stream is intact for a streamed call (declared length and chunked)', async () => {
  probe = reading({ maxBytes: 4, whenTooLarge: 'keep' }, restOf)
  assert.deepEqual(await send('0123456789'), { read: 'too-large', body: null, rest: '0123456789' })
  assert.deepEqual(await send('abcdefghij', { chunked: true }), { read: 'too-large', body: null, rest: 'abcdefghij' })
})

test('too large with drain: the rest is discarded and the request can still be answered', async () => {
  probe = reading({ maxBytes: 4, whenTooLarge: 'drain' })
  assert.deepEqual(await send('0123456789'), { read: 'too-large', body: null })
  assert.deepEqual(await send('abcdefghij', { chunked: true }), { read: 'too-large', body: null })
})

test('a body a policy already read is used as it is, checked against this limit', async () => {
  probe = async ctx => {
    ctx.requestBody = Buffer.from('already read')
    const small = await readRequestBody(ctx, { maxBytes: 4, whenTooLarge: 'drain' })
    const large = await readRequestBody(ctx, { maxBytes: 64, whenTooLarge: 'drain' })
    return { small, large, body: ctx.requestBody.toString() }
  }
  assert.deepEqual(await send('ignored'), { small: 'too-large', large: 'buffered', body: 'already read' })
})

test('an upgrade request has no body to read (its bytes are the tunnel\'s)', async () => {
  probe = async (ctx, req) => readRequestBody({ req, upgrade: {}, requestBody: null, listener: clock, route: null, grpc: null }, { maxBytes: 64, whenTooLarge: 'drain' }).then(read => ({ read }))
  assert.deepEqual(await send('x'), { read: 'none' })
})

test('a body that goes quiet, or trickles under the minimum rate, fails the read with the 408 answer', async () => {
  clock = { frontend: { requestBodyIdleTimeoutMs: 200, requestBodyMinRate: 240 } }
  try {
    probe = async ctx => {
      const read = await readRequestBody(ctx, { maxBytes: 1024, whenTooLarge: 'drain' })
      return { read: read instanceof Error ? read.message.replace(/\d+ bytes from the client in \d+ ms/, 'N bytes in T ms') : read, answer: read instanceof Error ? bodyReadFailure(read) : null }
    }
    const answer = { status: 408, body: 'request body timeout', reason: 'Timeout', headers: { connection: 'close' } }
    // Quiet: 2 of 100 bytes, then nothing.
    assert.deepEqual(await raw('ab', 0), { read: 'request body idle timeout: no bytes from the client for 200 ms', answer })
    // A byte every 20 ms: never quiet, 50 bytes/s (under 240: 48 bytes per 200 ms).
    assert.deepEqual(await raw('', 20), { read: 'request body too slow: N bytes in T ms, below 48 per 200 ms (requestBodyMinRate)', answer })
  } finally {
    clock = { frontend: { requestBodyIdleTimeoutMs: 0, requestBodyMinRate: 0 } }
  }
})

/** POSTs a 100-byte body: `first`, then a byte every `everyMs` (0: none) until the answer. */
async function raw (first: string, everyMs: number): Promise<any> {
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
  socket.on('error', () => {})
  let text = ''
  socket.on('data', c => { text += c.toString() })
  const closed = new Promise(resolve => socket.once('close', resolve))
  socket.write(`POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n${first}`)
  while (!text.includes('\r\n\r\n{') && !socket.destroyed) {
    await sleep(everyMs === 0 ? 20 : everyMs)
    if (everyMs > 0) socket.write('x')
  }
  socket.destroy()
  await closed
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4).replace(/^[0-9a-f]+\r\n/, '').replace(/\r\n0\r\n\r\n$/, '').replace(/\r\n$/, ''))
}

test('requestHasBody follows RFC 9112 §6.3', () => {
  assert.equal(requestHasBody({}), false)
  assert.equal(requestHasBody({ 'content-length': '0' }), false)
  assert.equal(requestHasBody({ 'content-length': '3' }), true)
  assert.equal(requestHasBody({ 'transfer-encoding': 'chunked' }), true)
})
