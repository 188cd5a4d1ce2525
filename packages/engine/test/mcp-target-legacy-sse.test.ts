/**
 * The legacy HTTP+SSE transport to a target (revision 2024-11-05; mcp/upstream/sse.ts), on
 * Portico's HTTP/1.1 pool, against hand-written servers on loopback that behave — or do not:
 * start() waits for the `endpoint` event (resolved against the target's URL), a POST is
 * acknowledged and its answer comes on the stream, close ends the stream; an answer past
 * maxMessageSize and an event with no end drop the connection as the target's fault; an
 * endpoint on another origin is refused (at start and later); a target that never names its
 * endpoint fails the start at its requestTimeout; an error status or a stream that is not
 * SSE fails it at once; a stream the target ends closes the transport; what is not JSON-RPC
 * is reported and skipped; a POST's error status fails its send, `abandon` cuts an
 * unacknowledged one; an https target is verified against the default CAs.
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
import { createTestCa } from '../../testkit/src/test-ca.ts'
import { SseClientTransport } from '../src/mcp/upstream/sse.ts'
import { isPorticoError } from '../src/util/errors.ts'

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void
const routes = new Map<string, Handler>()
/** Every request the server saw: method, URL and headers. */
const seen: Array<{ method: string, url: string, headers: http.IncomingHttpHeaders }> = []
const handle: Handler = (req, res) => {
  seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers })
  const handler = routes.get(`${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`)
  if (handler === undefined) return void res.writeHead(404).end('no such route')
  handler(req, res)
}
const server = http.createServer(handle)
/** Another origin (same host, another port): a target must not send the gateway's POSTs here. */
let foreignHits = 0
const foreign = http.createServer((_req, res) => {
  foreignHits++
  res.writeHead(202).end()
})
for (const s of [server, foreign]) await new Promise<void>(resolve => s.listen(0, '127.0.0.1', resolve))
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const foreignOrigin = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}`
after(async () => {
  for (const s of [server, foreign]) {
    s.closeAllConnections()
    await new Promise(resolve => s.close(resolve))
  }
})

/** A transport and what it reported. */
function open (path: string, options: ConstructorParameters<typeof SseClientTransport>[1] = {}) {
  const transport = new SseClientTransport(new URL(origin + path), options)
  const messages: unknown[] = []
  const errors: Error[] = []
  let closes = 0
  let onClosed!: () => void
  const closed = new Promise<void>(resolve => { onClosed = resolve })
  transport.onmessage = m => messages.push(m)
  transport.onerror = err => errors.push(err)
  transport.onclose = () => {
    closes++
    onClosed()
  }
  return { transport, messages, errors, closed, closes: () => closes }
}

/** Resolves with `p`, or rejects after `ms` (a limit that does not hold would wait forever). */
function within<T> (p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([p, new Promise<T>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms) })]).finally(() => clearTimeout(timer))
}

const readBody = (req: http.IncomingMessage) => new Promise<string>(resolve => {
  let body = ''
  req.on('data', c => { body += String(c) })
  req.on('end', () => resolve(body))
})

/** A well-behaved legacy target under `/<name>`: endpoint after `delayMs`, every request answered on the stream by `answer`. */
function legacyTarget (name: string, answer: (m: { id: number, method: string }) => string, delayMs = 0) {
  const streams = new Map<string, http.ServerResponse>()
  let closedStreams = 0
  routes.set(`GET /${name}/sse`, (_req, res) => {
    const session = String(streams.size + 1)
    streams.set(session, res)
    res.once('close', () => closedStreams++)
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    setTimeout(() => res.write(`event: endpoint\ndata: message?session=${session}\n\n`), delayMs)
  })
  routes.set(`POST /${name}/message`, (req, res) => {
    const stream = streams.get(new URL(req.url ?? '/', 'http://x').searchParams.get('session') ?? '')
    void readBody(req).then(body => {
      if (stream === undefined) return void res.writeHead(404).end('unknown session')
      res.writeHead(202).end('Accepted')
      const m = JSON.parse(body) as { id?: number, method: string }
      if (m.id !== undefined) stream.write(answer(m as { id: number, method: string }))
    })
  })
  return { streams, closedStreams: () => closedStreams }
}

test('start waits for the endpoint (resolved against the target\'s URL); a request is acknowledged and answered on the stream; close ends the stream', async () => {
  const target = legacyTarget('ok', m => `event: message\ndata: {"jsonrpc":"2.0","id":${m.id},"result":{"method":"${m.method}"}}\n\n`, 50)
  const { transport, messages, errors, closed, closes } = open('/ok/sse?tenant=a')
  const started = performance.now()
  await transport.start()
  assert.ok(performance.now() - started >= 40, 'start resolved only once the endpoint came')
  const get = seen.find(r => r.url === '/ok/sse?tenant=a')!
  assert.equal(get.headers.accept, 'text/event-stream')

  for (let id = 1; id <= 3; id++) await transport.send({ jsonrpc: '2.0', id, method: 'tools/list' })
  await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
  const post = seen.find(r => r.method === 'POST' && r.url.startsWith('/ok/'))!
  assert.equal(post.url, '/ok/message?session=1', 'the endpoint resolved against the target URL, its query kept')
  assert.equal(post.headers['content-type'], 'application/json')
  while (messages.length < 3) await new Promise(resolve => setTimeout(resolve, 5))
  assert.deepEqual(messages, [1, 2, 3].map(id => ({ jsonrpc: '2.0', id, result: { method: 'tools/list' } })))

  await transport.close()
  await closed
  await transport.close()
  assert.equal(closes(), 1, 'onclose once')
  assert.equal(transport.fault, null)
  assert.deepEqual(errors, [])
  while (target.closedStreams() < 1) await new Promise(resolve => setTimeout(resolve, 5))
  await assert.rejects(transport.send({ jsonrpc: '2.0', id: 9, method: 'ping' }), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_TRANSPORT_CLOSED'))
})

test('an answer past maxMessageSize drops the connection as the target\'s fault; the stream is closed', async () => {
  const target = legacyTarget('big', m => `event: message\ndata: {"jsonrpc":"2.0","id":${m.id},"result":{"pad":"${'x'.repeat(10_000)}"}}\n\n`)
  const { transport, messages, errors, closed } = open('/big/sse', { maxMessageBytes: 4096 })
  await transport.start()
  await transport.send({ jsonrpc: '2.0', id: 1, method: 'tools/call' })
  await within(closed, 5000, 'the transport closed')
  assert.equal(transport.fault, 'an event of more than 4096 bytes (maxMessageSize)')
  assert.ok(errors.some(e => isPorticoError(e, 'PORTICO_MCP_MESSAGE_TOO_LARGE')), 'onerror was told why')
  assert.deepEqual(messages, [], 'the oversized answer was not delivered')
  while (target.closedStreams() < 1) await new Promise(resolve => setTimeout(resolve, 5))
})

test('an event with no end is cut where it passes maxMessageSize', async () => {
  let written = 0
  let timer: NodeJS.Timeout | undefined
  routes.set('GET /endless/sse', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('event: endpoint\ndata: /endless/message\n\n')
    res.write('event: message\ndata: "')
    timer = setInterval(() => {
      res.write('y'.repeat(512))
      written += 512
    }, 2)
    res.once('close', () => clearInterval(timer))
  })
  const { transport, messages, closed } = open('/endless/sse', { maxMessageBytes: 16 * 1024 })
  try {
    await transport.start()
    await within(closed, 5000, 'the transport closed')
  } finally {
    clearInterval(timer)
  }
  assert.equal(transport.fault, 'an event of more than 16384 bytes (maxMessageSize)')
  assert.deepEqual(messages, [])
  assert.ok(written < 1024 * 1024, `cut early (${written} bytes written)`)
})

test('an endpoint on another origin is refused: at start (it fails, nothing is POSTed there) and later (the transport closes)', async () => {
  routes.set('GET /steal/sse', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write(`event: endpoint\ndata: ${foreignOrigin}/message\n\n`)
  })
  const first = open('/steal/sse')
  await assert.rejects(within(first.transport.start(), 5000, 'start'), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_PROTOCOL') && (err as Error).message.includes(`another origin (${foreignOrigin})`))
  await assert.rejects(first.transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }), /not connected/)
  await first.transport.close()
  assert.equal(first.closes(), 1)

  let stream: http.ServerResponse | undefined
  routes.set('GET /moves/sse', (_req, res) => {
    stream = res
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('event: endpoint\ndata: /moves/message\n\n')
  })
  const later = open('/moves/sse')
  await later.transport.start()
  stream!.write(`event: endpoint\ndata: ${foreignOrigin}/message\n\n`)
  await within(later.closed, 5000, 'the transport closed')
  assert.match(later.transport.fault ?? '', /another origin/)
  await assert.rejects(later.transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_TRANSPORT_CLOSED'))
  assert.equal(foreignHits, 0, 'nothing reached the other origin')
})

test('a target that never names its endpoint fails the start at its requestTimeout; an error status or a stream that is not SSE fails it at once', async () => {
  let held: http.ServerResponse | undefined
  routes.set('GET /silent/sse', (_req, res) => {
    held = res
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write(': keep-alive\n\n')
  })
  routes.set('GET /json/sse', (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'))
  routes.set('GET /down/sse', (_req, res) => res.writeHead(503).end('down for maintenance'))
  const silent = open('/silent/sse', { requestTimeoutMs: 200 })
  const started = performance.now()
  await assert.rejects(within(silent.transport.start(), 5000, 'start'), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_TIMEOUT') && /no endpoint .* within 200 ms/.test((err as Error).message))
  assert.ok(performance.now() - started >= 190)
  await new Promise<void>(resolve => held!.once('close', () => resolve()))
  assert.equal(silent.closes(), 0, 'a failed start leaves the close to the caller')
  await silent.transport.close()
  assert.equal(silent.closes(), 1)
  assert.deepEqual(silent.errors, [], 'the start\'s rejection is the only report')

  const json = open('/json/sse')
  await assert.rejects(json.transport.start(), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_PROTOCOL') && /application\/json/.test((err as Error).message))
  await json.transport.close()
  const down = open('/down/sse')
  await assert.rejects(down.transport.start(), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_UPSTREAM_HTTP') && /^HTTP 503 from .*: down for maintenance$/.test((err as Error).message))
  await down.transport.close()
})

test('a stream the target ends closes the transport (not a fault); events that are not JSON-RPC are reported and skipped', async () => {
  let stream: http.ServerResponse | undefined
  routes.set('GET /ends/sse', (_req, res) => {
    stream = res
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('event: endpoint\ndata: /ends/message\n\n')
  })
  const { transport, messages, errors, closed } = open('/ends/sse')
  await transport.start()
  stream!.end('data: not json\n\ndata: 5\n\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n')
  await within(closed, 5000, 'the transport closed')
  assert.deepEqual(messages, [{ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }])
  assert.ok(errors[0] instanceof SyntaxError, String(errors[0]))
  assert.ok(isPorticoError(errors[1], 'PORTICO_MCP_PROTOCOL'), String(errors[1]))
  assert.ok(isPorticoError(errors[2], 'PORTICO_MCP_UPSTREAM_STREAM'), String(errors[2]))
  assert.equal(transport.fault, null, 'a stream that ends is a disconnection, not a fault')
})

test('a POST answered with an error status fails its send; an unacknowledged request is given up with abandon', async () => {
  let hung: http.ServerResponse | undefined
  routes.set('GET /posts/sse', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('event: endpoint\ndata: /posts/message\n\n')
  })
  routes.set('POST /posts/message', (req, res) => {
    void readBody(req).then(body => {
      if ((JSON.parse(body) as { id: number }).id === 1) return void res.writeHead(500).end('boom')
      hung = res
    })
  })
  const { transport, errors } = open('/posts/sse')
  await transport.start()
  await assert.rejects(transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }), (err: unknown) => isPorticoError(err, 'PORTICO_MCP_UPSTREAM_HTTP') && /^HTTP 500 from .*\/posts\/message: boom$/.test((err as Error).message))
  assert.equal(errors.length, 1, 'onerror told of the failed POST')
  const sent = transport.send({ jsonrpc: '2.0', id: 2, method: 'tools/call' })
  while (hung === undefined) await new Promise(resolve => setTimeout(resolve, 5))
  const cut = new Promise(resolve => hung!.once('close', resolve))
  transport.abandon(2)
  await assert.rejects(sent, (err: unknown) => isPorticoError(err, 'PORTICO_MCP_ABORTED'))
  await cut
  assert.equal(errors.length, 1, 'an abandoned request is nobody\'s error')
  await transport.close()
})

test('an https legacy target is verified against the default CAs', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-mcp-sse-tls-'))
  const ca = createTestCa(dir, 'ca', { subject: '/CN=mcp-legacy-sse-test-ca' })
  const leaf = ca.issue('target', { sans: ['DNS:localhost'] })
  const defaults = tls.getCACertificates('default')
  const secure = https.createServer({ cert: leaf.cert, key: leaf.key }, handle)
  await new Promise<void>(resolve => secure.listen(0, '127.0.0.1', resolve))
  const url = `https://localhost:${(secure.address() as AddressInfo).port}/ok/sse`
  t.after(() => {
    tls.setDefaultCACertificates(defaults)
    secure.closeAllConnections()
    secure.close()
    rmSync(dir, { recursive: true, force: true })
  })
  legacyTarget('ok', m => `data: {"jsonrpc":"2.0","id":${m.id},"result":{}}\n\n`)
  const untrusted = new SseClientTransport(new URL(url))
  await assert.rejects(untrusted.start(), /self-signed|unable to verify|certificate/i)
  await untrusted.close()

  tls.setDefaultCACertificates([...defaults, ca.cert])
  const transport = new SseClientTransport(new URL(url))
  const messages: unknown[] = []
  transport.onmessage = m => messages.push(m)
  await transport.start()
  await transport.send({ jsonrpc: '2.0', id: 4, method: 'ping' })
  while (messages.length < 1) await new Promise(resolve => setTimeout(resolve, 5))
  assert.deepEqual(messages, [{ jsonrpc: '2.0', id: 4, result: {} }])
  await transport.close()
})
