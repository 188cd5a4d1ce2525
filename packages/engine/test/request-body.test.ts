/**
 * http/request-body.ts, the one reader of a request body whole: a body under the limit ends
 * in ctx.requestBody; past it `keep` leaves the stream whole for a streamed call and `drain`
 * discards the rest; a body a policy already read is used as it is; no body is `none`.
 * In-process, against a real node:http server.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Readable } from 'node:stream'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { readRequestBody, requestHasBody, type BodyContext, type ReadBodyOptions } from '../src/http/request-body.ts'

type Probe = (ctx: BodyContext, req: http.IncomingMessage) => Promise<unknown>
let probe: Probe
let server: http.Server
let url: string

before(async () => {
  server = http.createServer((req, res) => {
    const ctx: BodyContext = { req, upgrade: null, requestBody: null }
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
  probe = async (ctx, req) => readRequestBody({ req, upgrade: {}, requestBody: null }, { maxBytes: 64, whenTooLarge: 'drain' }).then(read => ({ read }))
  assert.deepEqual(await send('x'), { read: 'none' })
})

test('requestHasBody follows RFC 9112 §6.3', () => {
  assert.equal(requestHasBody({}), false)
  assert.equal(requestHasBody({ 'content-length': '0' }), false)
  assert.equal(requestHasBody({ 'content-length': '3' }), true)
  assert.equal(requestHasBody({ 'transfer-encoding': 'chunked' }), true)
})
