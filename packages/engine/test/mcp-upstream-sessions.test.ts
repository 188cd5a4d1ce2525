/**
 * The upstream side of MCP sessions, without a proxy: the new backend fields reach the IR
 * (sessionIdleTimeout, maxSessions), and the streamable HTTP client transport resumes an
 * answer's stream (SSE polling), says when its GET stream is answered, and stops knocking
 * when the server refuses that stream. The e2e test mcp-upstream-lifecycle covers them
 * through a running portico.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { loadConfigText, formatDiagnostic, validateIR } from '../src/index.ts'
import { StreamableHttpClientTransport } from '../src/mcp/upstream/streamable.ts'
import { TargetConnection } from '../src/mcp/upstream/target.ts'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { waitUntil } from '../../testkit/src/wait.ts'

function mcpConfig (backendExtra: string): string {
  return `gateways: {default: {port: 3000}}\nroutes:\n  - backends:\n      - mcp:\n          targets:\n            - {name: a, stdio: {cmd: srv}}\n${backendExtra}`
}

test('sessionIdleTimeout and maxSessions reach the IR; defaults 60 s and 1000; bad values are errors naming the field', () => {
  const load = (extra: string) => {
    const result = loadConfigText(mcpConfig(extra), { baseDir: '/cfg' })
    assert.ok(result.ok, result.ok ? '' : JSON.stringify(result.diagnostics))
    return result.config.ir.backends.find(b => b.kind === 'mcp')!.mcp!
  }
  const defaults = load('')
  assert.equal(defaults.sessionIdleTimeoutMs, 60_000)
  assert.equal(defaults.maxSessions, 1000)
  const set = load('          sessionIdleTimeout: 1m30s\n          maxSessions: 10\n')
  assert.equal(set.sessionIdleTimeoutMs, 90_000)
  assert.equal(set.maxSessions, 10)
  const errors = (extra: string) => {
    const result = loadConfigText(mcpConfig(extra), { baseDir: '/cfg' })
    assert.equal(result.ok, false)
    return result.ok ? '' : result.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n')
  }
  assert.match(errors('          sessionIdleTimeout: 0s\n'), /mcp\.sessionIdleTimeout: must be between 1ms and 596h/)
  assert.match(errors('          maxSessions: 0\n'), /mcp\.maxSessions/)

  // The IR from elsewhere (xDS) is checked too.
  const ir = loadConfigText(mcpConfig(''), { baseDir: '/cfg' })
  assert.ok(ir.ok)
  const mcp = ir.config.ir.backends.find(b => b.kind === 'mcp')!.mcp!
  mcp.sessionIdleTimeoutMs = 0
  mcp.maxSessions = 1.5
  const problems = validateIR(ir.config.ir).map(d => d.path.join('.'))
  assert.ok(problems.some(p => p.endsWith('mcp.sessionIdleTimeoutMs')), problems.join(', '))
  assert.ok(problems.some(p => p.endsWith('mcp.maxSessions')), problems.join(', '))
})

async function listen (handler: http.RequestListener): Promise<{ url: URL, close: () => Promise<void> }> {
  const server = http.createServer(handler)
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    close: () => new Promise(resolve => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
}

test('an answer whose POST stream closes after a priming event comes on GET with Last-Event-ID, after retry', async () => {
  const gets: Array<{ lastEventId: unknown, session: unknown, waitedMs: number }> = []
  let closedAt = 0
  const server = await listen((req, res) => {
    if (req.method === 'GET') {
      gets.push({ lastEventId: req.headers['last-event-id'], session: req.headers['mcp-session-id'], waitedMs: Date.now() - closedAt })
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(`id: e2\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 7, result: { ok: true } })}\n\n`)
      return
    }
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 's1' })
      res.end('id: e1\nretry: 200\ndata: \n\n', () => { closedAt = Date.now() })
    })
  })
  const transport = new StreamableHttpClientTransport(server.url)
  const got: JSONRPCMessage[] = []
  const failed: unknown[] = []
  transport.onmessage = m => got.push(m)
  transport.onrequestfailed = (_id, err) => failed.push(err)
  try {
    await transport.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'x' } })
    const until = Date.now() + 3000
    while (got.length === 0 && failed.length === 0 && Date.now() < until) await new Promise(resolve => setTimeout(resolve, 20))
    assert.deepEqual(failed, [])
    assert.deepEqual(got, [{ jsonrpc: '2.0', id: 7, result: { ok: true } }])
    assert.equal(gets.length, 1)
    assert.equal(gets[0]!.lastEventId, 'e1')
    assert.equal(gets[0]!.session, 's1')
    assert.ok(gets[0]!.waitedMs >= 150, `resumed after ${gets[0]!.waitedMs} ms; the server asked for 200`)
  } finally {
    await transport.close()
    await server.close()
  }
})

test('a stream that ends before the answer with no event id fails its request at once; abandon stops a resume', async () => {
  const server = await listen((req, res) => {
    if (req.method === 'GET') {
      // Resumed: prime again and close, forever.
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(`id: ${String(req.headers['last-event-id'])}\ndata: \n\n`)
      return
    }
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString() })
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(JSON.parse(body).id === 1 ? ': nothing\n\n' : 'id: p\ndata: \n\n')
    })
  })
  const transport = new StreamableHttpClientTransport(server.url)
  const failed: Array<[unknown, string]> = []
  transport.onrequestfailed = (id, err) => failed.push([id, err.message])
  try {
    await transport.send({ jsonrpc: '2.0', id: 1, method: 'tools/call' })
    await transport.send({ jsonrpc: '2.0', id: 2, method: 'tools/call' })
    await waitUntil(() => failed.length > 0, 5_000, 'request 1 to fail')
    assert.equal(failed.length, 1)
    assert.equal(failed[0]![0], 1)
    assert.match(failed[0]![1], /no event id to resume from/)
    // Request 2 keeps polling until its caller gives up on it (the requestTimeout).
    transport.abandon(2)
    // What is checked is that nothing more is reported: a fixed time, no event shows it.
    await new Promise(resolve => setTimeout(resolve, 100))
    assert.equal(failed.length, 1, 'an abandoned request is not reported again')
  } finally {
    await transport.close()
    await server.close()
  }
})

test('streamReady waits for the GET stream\'s answer; 400 stops the stream for good', async () => {
  let gets = 0
  const server = await listen((req, res) => {
    if (req.method === 'GET') {
      gets++
      setTimeout(() => res.writeHead(400).end('no'), 300)
      return
    }
    req.resume()
    req.on('end', () => res.writeHead(202).end())
  })
  const transport = new StreamableHttpClientTransport(server.url, { sessionId: 's' })
  try {
    const t0 = Date.now()
    await transport.start()
    await transport.streamReady(5000)
    assert.ok(Date.now() - t0 >= 250, 'ready before the GET stream was answered')
    await new Promise(resolve => setTimeout(resolve, 1500))
    assert.equal(gets, 1)
    assert.equal(transport.streamGone, true)
  } finally {
    await transport.close()
    await server.close()
  }
})

test('a resumed stream the server holds open is let go once the answer is in; an answer on the standalone stream stops a resume', { timeout: 10_000 }, async () => {
  let resumedClosed = false
  let resumes = 0
  let standalone: http.ServerResponse | null = null
  const server = await listen((req, res) => {
    if (req.method === 'GET' && req.headers['last-event-id'] === undefined) {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.flushHeaders()
      standalone = res
      return
    }
    if (req.method === 'GET') {
      resumes++
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.on('close', () => { resumedClosed = true })
      // Request 1 is answered here, and the stream kept open (as the conformance test server does).
      if (req.headers['last-event-id'] === 'p1') res.write(`id: r1\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} })}\n\n`)
      else res.write('id: p2\nretry: 50\ndata: \n\n')
      return
    }
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString() })
    req.on('end', () => {
      const m = JSON.parse(body) as { id?: number }
      if (m.id === undefined) return void res.writeHead(202).end()
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 's' })
      res.end(`id: p${m.id}\nretry: 50\ndata: \n\n`)
    })
  })
  const transport = new StreamableHttpClientTransport(server.url)
  const got: JSONRPCMessage[] = []
  transport.onmessage = m => got.push(m)
  try {
    await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
    await transport.streamReady(2000)
    await transport.send({ jsonrpc: '2.0', id: 1, method: 'tools/call' })
    const wait = async (check: () => boolean) => {
      const until = Date.now() + 3000
      while (!check() && Date.now() < until) await new Promise(resolve => setTimeout(resolve, 20))
    }
    await wait(() => got.length === 1 && resumedClosed)
    assert.deepEqual(got, [{ jsonrpc: '2.0', id: 1, result: {} }])
    assert.equal(resumedClosed, true, 'the resumed GET is still open')

    // Request 2: its resumed stream only primes; the answer comes on the standalone stream.
    resumedClosed = false
    await transport.send({ jsonrpc: '2.0', id: 2, method: 'tools/call' })
    await wait(() => resumes >= 2)
    ;(standalone as http.ServerResponse | null)!.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 2, result: { via: 'get' } })}\n\n`)
    await wait(() => got.length === 2 && resumedClosed)
    assert.deepEqual(got[1], { jsonrpc: '2.0', id: 2, result: { via: 'get' } })
    assert.equal(resumedClosed, true, 'the resume of an answered request goes on')
  } finally {
    await transport.close()
    await server.close()
  }
})

test('a resumed upstream session opens its GET stream with the protocol version, and is ready once it is answered', async () => {
  const gets: Array<Record<string, unknown>> = []
  const server = await listen((req, res) => {
    if (req.method === 'GET') {
      gets.push({ version: req.headers['mcp-protocol-version'], session: req.headers['mcp-session-id'] })
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.flushHeaders()
      }, 300)
      return
    }
    req.resume()
    req.on('end', () => res.writeHead(202).end())
  })
  const conn = new TargetConnection({ name: 't', kind: 'mcp', url: server.url.href, maxMessageBytes: 1 << 20, requestTimeoutMs: 5000 }, { onMessage: () => {} })
  try {
    const t0 = Date.now()
    await conn.start({ protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } }, {
      session: 'up-1',
      result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: {} }
    })
    assert.equal(conn.state, 'ready')
    assert.ok(Date.now() - t0 >= 250, 'ready before the GET stream was answered')
    assert.deepEqual(gets, [{ version: '2025-06-18', session: 'up-1' }])
  } finally {
    await conn.detach()
    await server.close()
  }
})
