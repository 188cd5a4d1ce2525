/**
 * An MCP route answers through the same finish step as every other route: its
 * `responseHeaderModifier` and `cors` apply to every MCP answer (JSON, SSE, errors, the
 * legacy transport), and a CORS preflight for the MCP endpoint is answered by the cors
 * policy — browser-based MCP clients need both. Checked with raw requests (the headers) and
 * with the official SDK client through a fetch that records every response's headers.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { everythingTarget, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'

const ORIGIN = 'https://app.example'
const INIT = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }
const ACCEPT = 'application/json, text/event-stream'

let portico: PorticoProcess
let sdk: SdkServer
let base: string

const policies = {
  cors: { allowOrigins: [ORIGIN], allowMethods: ['GET', 'POST', 'DELETE'], allowHeaders: ['content-type', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'], exposeHeaders: ['mcp-session-id'], maxAge: 600 },
  responseHeaderModifier: { set: { 'x-mcp-route': 'yes' } }
}

before(async () => {
  sdk = await startSdkServer('sdk')
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'mcp', matches: [{ path: { pathPrefix: '/mcp' } }], policies, backends: [{ mcp: { targets: [{ name: 'sdk', mcp: { host: sdk.url } }] } }] },
        { name: 'everything', matches: [{ path: { pathPrefix: '/everything' } }], policies, backends: [{ mcp: { targets: [everythingTarget()] } }] },
        { name: 'legacy', matches: [{ path: { pathPrefix: '/legacy' } }], policies, backends: [{ mcp: { targets: [{ name: 'sdk', mcp: { host: sdk.url } }] } }] }
      ]
    })
  })
  base = portico.url
})

after(async () => {
  await portico?.stop()
  await sdk?.close()
})

function assertPolicyHeaders (headers: Record<string, string | string[] | undefined>, what: string): void {
  assert.equal(headers['x-mcp-route'], 'yes', `${what}: responseHeaderModifier`)
  assert.equal(headers['access-control-allow-origin'], ORIGIN, `${what}: cors`)
  assert.match(String(headers['access-control-expose-headers']), /mcp-session-id/i, `${what}: exposed headers`)
}

async function post (path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number, headers: Record<string, string | string[] | undefined>, text: string }> {
  const res = await request(`${base}${path}`, {
    method: 'POST',
    headers: { origin: ORIGIN, accept: ACCEPT, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body)
  })
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
}

test('initialize through a route with cors and responseHeaderModifier gets both', async () => {
  const r = await post('/mcp', INIT)
  assert.equal(r.status, 200, r.text)
  assertPolicyHeaders(r.headers, 'initialize')
  assert.equal(typeof r.headers['mcp-session-id'], 'string', 'the session header stays')
  assert.equal(JSON.parse(r.text).result.serverInfo !== undefined, true)
})

test('a CORS preflight for the MCP endpoint is answered by the cors policy', async () => {
  const res = await request(`${base}/mcp`, {
    method: 'OPTIONS',
    headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, mcp-session-id' }
  })
  await res.body.text()
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['access-control-allow-origin'], ORIGIN)
  assert.match(String(res.headers['access-control-allow-methods']), /POST/)
  assert.match(String(res.headers['access-control-allow-headers']), /mcp-session-id/i)
  assert.equal(res.headers['access-control-max-age'], '600')
  assert.equal(res.headers['x-mcp-route'], 'yes')
})

test('MCP errors, notifications, SSE answers and the session stream carry the headers too', async () => {
  const missing = await post('/mcp', { jsonrpc: '2.0', id: 1, method: 'ping' })
  assert.equal(missing.status, 400)
  assertPolicyHeaders(missing.headers, '400 without a session')
  const unknown = await post('/mcp', { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-session-id': 'no-such-session' })
  assert.equal(unknown.status, 404)
  assertPolicyHeaders(unknown.headers, '404 unknown session')

  const init = await post('/mcp', INIT)
  const sid = init.headers['mcp-session-id'] as string
  const note = await post('/mcp', { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid })
  assert.equal(note.status, 202)
  assertPolicyHeaders(note.headers, '202 notification')

  // Progress before the result makes the answer an SSE stream.
  const slow = await post('/mcp', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow', arguments: { steps: 2, delayMs: 10 }, _meta: { progressToken: 'p' } } }, { 'mcp-session-id': sid })
  assert.equal(slow.status, 200)
  assert.match(String(slow.headers['content-type']), /text\/event-stream/)
  assertPolicyHeaders(slow.headers, 'SSE answer to a POST')
  assert.match(slow.text, /done after 2 steps/)

  const controller = new AbortController()
  const stream = await request(`${base}/mcp`, { method: 'GET', headers: { origin: ORIGIN, accept: 'text/event-stream', 'mcp-session-id': sid }, signal: controller.signal })
  assert.equal(stream.statusCode, 200)
  assertPolicyHeaders(stream.headers, 'GET session stream')
  controller.abort()
  await stream.body.text().catch(() => {})

  const del = await request(`${base}/mcp`, { method: 'DELETE', headers: { origin: ORIGIN, 'mcp-session-id': sid } })
  await del.body.text()
  assert.equal(del.statusCode, 200)
  assertPolicyHeaders(del.headers, 'DELETE')
})

test('the legacy HTTP+SSE transport carries the headers', async () => {
  const controller = new AbortController()
  const res = await request(`${base}/legacy/sse`, { method: 'GET', headers: { origin: ORIGIN, accept: 'text/event-stream' }, signal: controller.signal })
  assert.equal(res.statusCode, 200)
  assertPolicyHeaders(res.headers, 'legacy SSE stream')
  // Read the endpoint event without ending the stream (its end closes the legacy session).
  const chunks = res.body[Symbol.asyncIterator]()
  let text = ''
  while (!text.includes('\n\n')) text += Buffer.from((await chunks.next()).value as Uint8Array).toString('utf8')
  const endpoint = /data: (\S+)/.exec(text)![1]!
  const posted = await post(endpoint, INIT)
  assert.equal(posted.status, 202)
  assertPolicyHeaders(posted.headers, 'legacy POST')
  controller.abort()
})

test('the official SDK client works through the route and every answer has the headers', async () => {
  const seen: Array<{ method: string, status: number, headers: Headers }> = []
  const recording: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers)
    headers.set('origin', ORIGIN)
    const res = await fetch(input, { ...init, headers })
    seen.push({ method: init?.method ?? 'GET', status: res.status, headers: res.headers })
    return res
  }
  const client = new Client({ name: 'cors-client', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/everything`), { fetch: recording })
  await client.connect(transport)
  try {
    const tools = await client.listTools()
    assert.ok(tools.tools.some(t => t.name === 'echo'), 'the everything server\'s tools are listed')
    const echoed = await client.callTool({ name: 'echo', arguments: { message: 'through cors' } })
    assert.match(textOf(echoed), /through cors/)
  } finally {
    await client.close()
  }
  const posts = seen.filter(s => s.method === 'POST')
  assert.ok(posts.length >= 3, `initialize, initialized, tools/list, tools/call: ${posts.length}`)
  for (const s of posts) {
    assert.equal(s.headers.get('x-mcp-route'), 'yes', `POST answered ${s.status}: responseHeaderModifier`)
    assert.equal(s.headers.get('access-control-allow-origin'), ORIGIN, `POST answered ${s.status}: cors`)
  }
})
