/**
 * The upstream side of MCP sessions over streamable HTTP: real processes on loopback, a
 * portico and small MCP servers written by hand to behave in particular ways.
 *
 *  - SSE polling (2025-11-25 "Resumability and Redelivery"): a target answers a POST with a
 *    stream that only primes an event id and a `retry`, then closes it; the answer comes
 *    on GET with Last-Event-ID, after `retry` ms. A target that never answers the resumed
 *    stream releases the caller at its requestTimeout (-32001).
 *    The same with the SDK's own server (eventStore, retryInterval, closeSSEStream), as
 *    the conformance scenario server-sse-polling's test_reconnection tool does.
 *  - Readiness: the session is not ready (initialize not answered) before each target's GET
 *    stream is answered, so a server-initiated request the target sends right away is not
 *    dropped by a target that has no stream to send it on.
 *  - A GET stream the target refuses with 400 after a restart is not retried forever.
 *  - Upstream sessions do not outlive their clients: a client that closes its GET stream
 *    without DELETE has its upstream session closed after sessionIdleTimeout, and at most
 *    maxSessions live per backend (the least recently active goes).
 */

import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js'
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { sleep } from '@portico/testkit/wait'
import { connectClient, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'

/** What to stop after the tests: portico processes and servers, last started first. */
const started: Array<() => Promise<unknown>> = []

after(async () => {
  for (const stop of started.reverse()) await stop().catch(() => {})
})

async function gateway (mcpBackend: Record<string, unknown>): Promise<PorticoProcess> {
  const p = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'mcp', backends: [{ mcp: mcpBackend as never }] }]
    })
  })
  started.push(() => p.stop())
  return p
}

interface Message { jsonrpc: '2.0', id?: number | string, method?: string, params?: Record<string, any>, result?: unknown }

function readBody (req: http.IncomingMessage): Promise<Message> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Message)
      } catch (err) {
        reject(err as Error)
      }
    })
  })
}

function json (res: http.ServerResponse, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers }).end(text)
}

const TOOLS = ['poll', 'poll_forever', 'ask'].map(name => ({ name, description: name, inputSchema: { type: 'object' } }))

/** initialize, notifications, tools/list, DELETE: what every hand-written target answers alike. */
function common (m: Message, res: http.ServerResponse): boolean {
  if (m.id === undefined || m.method === undefined) {
    res.writeHead(202).end()
    return true
  }
  if (m.method === 'initialize') {
    json(res, { jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params?.protocolVersion ?? '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1' } } }, { 'mcp-session-id': 'raw-session' })
    return true
  }
  if (m.method === 'tools/list') {
    json(res, { jsonrpc: '2.0', id: m.id, result: { tools: TOOLS } })
    return true
  }
  return false
}

const toolResult = (id: number | string, text: string) => ({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } })

test('SSE polling: a POST stream closed after a priming event is resumed with GET and Last-Event-ID after retry', async () => {
  const resumes: Array<{ lastEventId: string | undefined, afterMs: number }> = []
  let closedAt = 0
  const pending = new Map<string, Message>()
  const server: Backend = await startBackend((req, res) => {
    if (req.method === 'DELETE') return void res.writeHead(200).end()
    if (req.method === 'GET') {
      const last = req.headers['last-event-id']
      if (typeof last !== 'string') {
        // The standalone stream: open, silent.
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.flushHeaders()
        return
      }
      resumes.push({ lastEventId: last, afterMs: Date.now() - closedAt })
      const m = pending.get(last)
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      if (m === undefined || m.params?.name === 'poll_forever') {
        // Nothing yet: prime again and close (the client keeps polling until its timeout).
        res.end(`id: ${last}\nretry: 100\ndata: \n\n`)
        return
      }
      pending.delete(last)
      res.end(`id: ${last}-done\nevent: message\ndata: ${JSON.stringify(toolResult(m.id!, 'answered after polling'))}\n\n`)
      return
    }
    void readBody(req).then(m => {
      if (common(m, res)) return
      const eventId = `poll-${String(m.id)}`
      pending.set(eventId, m)
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(`id: ${eventId}\nretry: 300\ndata: \n\n`, () => { closedAt = Date.now() })
    })
  })
  started.push(() => server.close())
  const p = await gateway({ targets: [{ name: 'poller', mcp: { host: `${server.url}/mcp` }, requestTimeout: '2s' }] })
  const { client } = await connectClient(`${p.url}/mcp`)
  try {
    const result = await client.callTool({ name: 'poll', arguments: {} }, undefined, { timeout: 10_000 })
    assert.equal(textOf(result), 'answered after polling')
    assert.equal(resumes.length, 1)
    assert.match(resumes[0]!.lastEventId!, /^poll-/)
    // The server asked for 300 ms before reconnecting.
    assert.ok(resumes[0]!.afterMs >= 250, `resumed after ${resumes[0]!.afterMs} ms, before the retry the server asked for`)

    // A target that keeps priming but never answers: the requestTimeout still bounds the call.
    const t0 = Date.now()
    await assert.rejects(client.callTool({ name: 'poll_forever', arguments: {} }, undefined, { timeout: 10_000 }), (err: unknown) => {
      assert.ok(err instanceof McpError)
      assert.equal(err.code, -32001)
      return true
    })
    const took = Date.now() - t0
    assert.ok(took >= 1800 && took < 5000, `timed out after ${took} ms (requestTimeout 2s)`)
    assert.ok(resumes.length >= 3, 'the unanswered stream was polled again')
  } finally {
    await client.close()
  }
})

test('SSE polling with the SDK\'s own server: a tool that closes its stream mid-call (as the conformance test_reconnection does) answers through the gateway', async () => {
  const sessions = new Map<string, StreamableHTTPServerTransport>()
  let closedStreams = 0
  const httpServer = http.createServer((req, res) => {
    void (async () => {
      const sid = req.headers['mcp-session-id']
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined
      if (transport === undefined) {
        if (typeof sid === 'string') return void res.writeHead(404).end()
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: new InMemoryEventStore(),
          retryInterval: 200,
          onsessioninitialized: id => { sessions.set(id, transport!) }
        })
        const server = new Server({ name: 'polling', version: '1' }, { capabilities: { tools: {} } })
        server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'test_reconnection', inputSchema: { type: 'object' as const } }] }))
        server.setRequestHandler(CallToolRequestSchema, async (_req, extra) => {
          // Closes the answer's stream after its priming event; the answer follows later.
          extra.closeSSEStream?.()
          closedStreams++
          await new Promise(resolve => setTimeout(resolve, 400))
          return { content: [{ type: 'text', text: 'Reconnection test completed successfully' }] }
        })
        await server.connect(transport)
      }
      await transport.handleRequest(req, res)
    })().catch(err => { if (!res.headersSent) res.writeHead(500).end(String(err)) })
  })
  await new Promise<void>(resolve => httpServer.listen(0, '127.0.0.1', resolve))
  started.push(() => new Promise(resolve => {
    httpServer.closeAllConnections()
    httpServer.close(resolve)
  }))
  const url = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/mcp`
  const p = await gateway({ targets: [{ name: 'sdk', mcp: { host: url }, requestTimeout: '5s' }] })
  const { client } = await connectClient(`${p.url}/mcp`)
  try {
    const result = await client.callTool({ name: 'test_reconnection', arguments: {} }, undefined, { timeout: 10_000 })
    assert.equal(textOf(result), 'Reconnection test completed successfully')
    assert.equal(closedStreams, 1)
  } finally {
    await client.close()
  }
})

test('a session is ready only once the target\'s GET stream is answered: a request the target sends at once is not lost', async () => {
  let stream: http.ServerResponse | null = null
  const answered = new Map<string, (m: Message) => void>()
  const server: Backend = await startBackend((req, res) => {
    if (req.method === 'DELETE') return void res.writeHead(200).end()
    if (req.method === 'GET') {
      // A slow stream: the server only learns of it 800 ms later.
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.flushHeaders()
        stream = res
        res.on('close', () => { if (stream === res) stream = null })
      }, 800)
      return
    }
    void readBody(req).then(m => {
      if (m.method === undefined && m.id !== undefined) {
        // The client's answer to our request.
        answered.get(String(m.id))?.(m)
        res.writeHead(202).end()
        return
      }
      if (common(m, res)) return
      // `ask`: a server-initiated request on the GET stream, as the SDK's server sends one
      // unrelated to a request; with no stream it would be dropped, as the SDK drops it.
      if (stream === null) return json(res, toolResult(m.id!, 'dropped: no stream yet'))
      const askId = `ask-${String(m.id)}`
      const timer = setTimeout(() => json(res, toolResult(m.id!, 'no answer')), 5000)
      answered.set(askId, reply => {
        clearTimeout(timer)
        json(res, toolResult(m.id!, `roots: ${JSON.stringify((reply.result as { roots: Array<{ uri: string }> }).roots.map(r => r.uri))}`))
      })
      stream.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: askId, method: 'roots/list' })}\n\n`)
    })
  })
  started.push(() => server.close())
  const p = await gateway({ targets: [{ name: 'asker', mcp: { host: `${server.url}/mcp` } }] })
  const { client } = await connectClient(`${p.url}/mcp`, { roots: ['file:///ready'] })
  try {
    // Right after initialize: the target must already have its stream.
    const result = await client.callTool({ name: 'ask', arguments: {} })
    assert.equal(textOf(result), 'roots: ["file:///ready"]')
  } finally {
    await client.close()
  }
})

test('a GET stream refused with 400 after the target restarted is not retried', async () => {
  let restarted = false
  let getsAfterRestart = 0
  let live: http.ServerResponse | null = null
  const server: Backend = await startBackend((req, res) => {
    if (req.method === 'DELETE') return void res.writeHead(200).end()
    if (req.method === 'GET') {
      if (restarted) {
        getsAfterRestart++
        // What the SDK's server says to a session it does not know after a restart.
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: Server not initialized' } }))
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.flushHeaders()
      live = res
      return
    }
    void readBody(req).then(m => {
      if (common(m, res)) return
      json(res, toolResult(m.id!, 'ok'))
    })
  })
  started.push(() => server.close())
  const p = await gateway({ targets: [{ name: 'restarting', mcp: { host: `${server.url}/mcp` } }] })
  const { client } = await connectClient(`${p.url}/mcp`)
  try {
    assert.equal(textOf(await client.callTool({ name: 'poll', arguments: {} })), 'ok')
    assert.ok(live !== null, 'the target got its GET stream')
    restarted = true
    ;(live as http.ServerResponse).destroy()
    await sleep(4000)
    // The retry loop used to knock every second, forever.
    assert.equal(getsAfterRestart, 1)
  } finally {
    await client.close()
  }
})

test('upstream sessions do not outlive their clients: closed after sessionIdleTimeout once the client\'s GET stream is gone', async () => {
  const sdk: SdkServer = await startSdkServer('idle')
  started.push(() => sdk.close())
  const p = await gateway({ targets: [{ name: 'sdk', mcp: { host: sdk.url } }], sessionIdleTimeout: '500ms' })
  const url = `${p.url}/mcp`

  // A client that goes away without DELETE: its transport closes its GET stream.
  const { client, transport } = await connectClient(url)
  assert.equal(textOf(await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })), '3')
  const sid = (transport as { sessionId?: string }).sessionId!
  assert.equal(sdk.sessions.size, 1)
  // Still alive while its stream is open, well past the grace.
  await sleep(1500)
  assert.equal(sdk.sessions.size, 1, 'a session with a connected GET stream is kept')
  await client.close()
  const deadline = Date.now() + 5000
  while (sdk.sessions.size > 0 && Date.now() < deadline) await sleep(100)
  assert.equal(sdk.sessions.size, 0, 'the upstream session was closed (DELETE) after the grace')
  const gone = await request(url, {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' })
  })
  await gone.body.text()
  assert.equal(gone.statusCode, 404, 'the closed session answers 404 (the client initializes again)')
})

test('maxSessions: sessions that never open a GET stream are bounded per backend, the least recently active go first', async () => {
  const sdk: SdkServer = await startSdkServer('bounded')
  started.push(() => sdk.close())
  const p = await gateway({ targets: [{ name: 'sdk', mcp: { host: sdk.url } }], maxSessions: 3 })
  const url = `${p.url}/mcp`
  const ids: string[] = []
  for (let i = 0; i < 5; i++) {
    const res = await request(url, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: `c${i}`, version: '1' } } })
    })
    await res.body.text()
    assert.equal(res.statusCode, 200)
    ids.push(String(res.headers['mcp-session-id']))
    await sleep(20)
  }
  const until = Date.now() + 3000
  while (sdk.sessions.size > 3 && Date.now() < until) await sleep(50)
  assert.equal(sdk.sessions.size, 3)
  const status = async (id: string) => {
    const res = await request(url, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'add', arguments: { a: 1, b: 1 } } })
    })
    await res.body.text()
    return res.statusCode
  }
  assert.deepEqual([await status(ids[0]!), await status(ids[1]!)], [404, 404])
  assert.deepEqual([await status(ids[2]!), await status(ids[3]!), await status(ids[4]!)], [200, 200, 200])
})
