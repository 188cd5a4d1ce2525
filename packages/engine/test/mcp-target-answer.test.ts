/**
 * One request to an HTTP MCP target and its answer (mcp/upstream/http-shared.ts), against
 * real HTTP servers on loopback: a JSON body within maxMessageBytes (a Content-Length past
 * it refused before reading, a chunked body cut where it passes), the connection kept for the
 * next call, an SSE answer read event by event as it comes (the read ends once `done` says
 * so, with the rest of a held-open stream), an event past the limit, the head's and the
 * body's clocks (each its own code), the caller's abort (and the streamable transport's
 * `abandon`: the target sees its connection close), and an https target (verified
 * against the default CAs, as before with undici; one the CAs do not vouch for is refused).
 */

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import https from 'node:https'
import tls from 'node:tls'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { createTestCa, selfSignedCert } from '../../testkit/src/test-ca.ts'
import { StreamableHttpClientTransport } from '../src/mcp/upstream/streamable.ts'
import { readJsonAnswer, readSse, requestTarget, upstreamPool, httpStatusError } from '../src/mcp/upstream/http-shared.ts'
import { isPorticoError } from '../src/util/errors.ts'

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void
const routes = new Map<string, Handler>()
const server = http.createServer((req, res) => {
  const handler = routes.get(req.url ?? '')
  if (handler === undefined) {
    res.writeHead(404).end('no such route')
    return
  }
  handler(req, res)
})
await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const pool = upstreamPool(new URL(origin))
after(async () => {
  await pool.destroy()
  server.closeAllConnections()
  await new Promise(resolve => server.close(resolve))
})

const get = (path: string, extra: Partial<Parameters<typeof requestTarget>[1]> = {}) =>
  requestTarget(pool, { path, method: 'GET', headers: {}, ...extra })

test('a JSON answer is parsed within the limit, and its connection carries the next call', async () => {
  routes.set('/json', (req, res) => {
    let body = ''
    req.on('data', c => { body += String(c) })
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' }).end(JSON.stringify({ echo: JSON.parse(body) })))
  })
  for (let i = 0; i < 3; i++) {
    const res = await requestTarget(pool, { path: '/json', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) })
    assert.equal(res.statusCode, 200)
    assert.equal(res.header('mcp-session-id'), 's1')
    assert.deepEqual(await readJsonAnswer(res, 1024), { echo: { i } })
  }
  assert.equal(pool.stats.connected, 1)
})

test('a Content-Length past the limit is refused before reading; a chunked body is cut where it passes', async () => {
  routes.set('/big', (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ pad: 'x'.repeat(5000) })))
  routes.set('/big-chunked', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.write('{"pad":"' + 'x'.repeat(3000))
    setTimeout(() => res.end('x'.repeat(3000) + '"}'), 20)
  })
  for (const path of ['/big', '/big-chunked']) {
    await assert.rejects(readJsonAnswer(await get(path), 4096), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_MESSAGE_TOO_LARGE'), path)
  }
})

test('an SSE answer is read event by event as it comes; `done` ends the read with the stream still open', async () => {
  let last: http.ServerResponse | null = null
  routes.set('/sse', (_req, res) => {
    last = res
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('id: 1\nretry: 50\ndata: \n\n')
    res.write('data: {"n":1}\n\n')
    // The second event comes later, split across writes; the stream is then held open.
    setTimeout(() => res.write('event: message\nid: 2\ndata: {"n"'), 30)
    setTimeout(() => res.write(':2}\n\ndata: not json\n\n'), 60)
  })
  const seen: unknown[] = []
  const ids: string[] = []
  const bad: Error[] = []
  let retry = 0
  await readSse(await get('/sse'), {
    maxEventBytes: 1024,
    onId: id => ids.push(id),
    onRetry: ms => { retry = ms },
    onMessage: m => seen.push(m),
    onBadMessage: err => bad.push(err),
    done: () => seen.length === 2
  })
  assert.deepEqual(seen, [{ n: 1 }, { n: 2 }])
  assert.deepEqual(ids, ['1', '2'])
  assert.equal(retry, 50)
  assert.equal(bad.length, 1, 'an event that is not JSON is reported, the read goes on')
  // The held-open stream was cut (its connection is not kept).
  await new Promise(resolve => last!.once('close', resolve))
})

test('a body read late (a policy deciding on the head) comes whole: the connection stops reading meanwhile, then goes on', async () => {
  routes.set('/sse-long', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    for (let n = 0; n < 2000; n++) res.write(`data: {"n":${n},"pad":"${'z'.repeat(200)}"}\n\n`)
    res.end()
  })
  const res = await get('/sse-long')
  await new Promise(resolve => setTimeout(resolve, 100))
  const seen: number[] = []
  await readSse(res, { maxEventBytes: 1024, onMessage: m => seen.push((m as { n: number }).n), onBadMessage: () => {} })
  assert.equal(seen.length, 2000)
  assert.ok(seen.every((n, i) => n === i))
})

test('an SSE event past the limit fails the read', async () => {
  routes.set('/sse-big', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: {"n":1}\n\n')
    res.write('data: "' + 'y'.repeat(3000) + '"\n\n')
  })
  const seen: unknown[] = []
  await assert.rejects(readSse(await get('/sse-big'), { maxEventBytes: 1024, onMessage: m => seen.push(m), onBadMessage: () => {} }),
    (err: unknown) => isPorticoError(err, 'PORTICO_MCP_MESSAGE_TOO_LARGE'))
  assert.deepEqual(seen, [{ n: 1 }])
})

test('the head\'s clock and the body\'s idle clock each fail with their own code; an error status says what came', async () => {
  routes.set('/slow-head', (_req, res) => setTimeout(() => res.writeHead(200).end('late'), 300))
  routes.set('/slow-body', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.write('{')
  })
  routes.set('/fail', (_req, res) => res.writeHead(503).end('down for maintenance'))
  await assert.rejects(get('/slow-head', { headersTimeoutMs: 50 }), (err: unknown) => isPorticoError(err, 'PORTICO_UPSTREAM_HEADERS_TIMEOUT'))
  const res = await get('/slow-body', { idleTimeoutMs: 50 })
  await assert.rejects(readJsonAnswer(res, 1024), (err: unknown) => isPorticoError(err, 'PORTICO_STREAM_IDLE_TIMEOUT'))
  const failed = await get('/fail')
  assert.match((await httpStatusError(failed, new URL(origin + '/fail'))).message, /^HTTP 503 from .*: down for maintenance$/)
})

test('the caller\'s abort ends the call, before the head or in the body, with its reason', async () => {
  routes.set('/never', () => {})
  routes.set('/half', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: {"n":1}\n\n')
  })
  const reason = new Error('given up')
  const early = new AbortController()
  const pending = get('/never', { signal: early.signal })
  setTimeout(() => early.abort(reason), 30)
  await assert.rejects(pending, err => err === reason)
  const late = new AbortController()
  const res = await get('/half', { signal: late.signal })
  await assert.rejects(readSse(res, { maxEventBytes: 1024, onMessage: () => late.abort(reason), onBadMessage: () => {} }), err => err === reason)
  const already = new AbortController()
  already.abort(reason)
  await assert.rejects(get('/json', { signal: already.signal }), err => err === reason)
})

test('an https target: verified against the default CAs (its name from the URL), refused when they do not vouch for it', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-mcp-tls-'))
  const ca = createTestCa(dir, 'ca', { subject: '/CN=mcp-target-test-ca' })
  const leaf = ca.issue('target', { sans: ['DNS:localhost'] })
  const stranger = selfSignedCert(dir, 'stranger', { sans: ['DNS:localhost'] })
  const defaults = tls.getCACertificates('default')
  tls.setDefaultCACertificates([...defaults, ca.cert])
  const servers = [leaf, stranger].map(pem => https.createServer({ cert: pem.cert, key: pem.key }, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')))
  const urls: URL[] = []
  for (const s of servers) {
    await new Promise<void>(resolve => s.listen(0, '127.0.0.1', resolve))
    urls.push(new URL(`https://localhost:${(s.address() as AddressInfo).port}/mcp`))
  }
  const pools = urls.map(u => upstreamPool(u))
  t.after(async () => {
    tls.setDefaultCACertificates(defaults)
    await Promise.all(pools.map(p => p.destroy()))
    for (const s of servers) {
      s.closeAllConnections()
      s.close()
    }
    rmSync(dir, { recursive: true, force: true })
  })
  const res = await requestTarget(pools[0]!, { path: '/mcp', method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  assert.deepEqual(await readJsonAnswer(res, 1024), { ok: true })
  await assert.rejects(requestTarget(pools[1]!, { path: '/mcp', method: 'POST', headers: {}, body: '{}' }), /self-signed|unable to verify|certificate/i)
})

test('a streamable target\'s request that is abandoned before its answer: its POST fails and its connection closes', async () => {
  let closed: Promise<unknown> | null = null
  routes.set('/hang', (req, res) => {
    closed = new Promise(resolve => res.once('close', resolve))
    req.resume()
  })
  const transport = new StreamableHttpClientTransport(new URL(origin + '/hang'))
  const sent = transport.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'slow' } })
  await new Promise(resolve => setTimeout(resolve, 50))
  transport.abandon(7)
  await assert.rejects(sent, (err: Error) => err.name === 'AbortError')
  await closed
  await transport.close()
})
