/**
 * MCP 2026-07-28 clients (stateless: no initialize, no session, the version in each
 * request's `_meta`) on the same routes as initialize-era clients, in front of
 * initialize-era targets: the SDK test server (2025-11-25, streamable HTTP) and
 * server-everything (stdio). Raw HTTP in the 2026-07-28 shape — server/discover, tools,
 * prompts, resources, completion, UnsupportedProtocolVersionError, HeaderMismatch, GET and
 * DELETE — authorization rules applied to both eras alike, an older client beside them,
 * and the official SDK v2 client pinned to 2026-07-28.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { createParser } from 'eventsource-parser'
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { connectClient, everythingTarget, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'

const V = '2026-07-28'
const ACCEPT = 'application/json, text/event-stream'
const META = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'raw-2026', version: '1.0.0' }
}

let portico: PorticoProcess
let sdk: SdkServer

before(async () => {
  sdk = await startSdkServer('sdk')
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'sdk', matches: [{ path: { pathPrefix: '/sdk' } }], backends: [{ mcp: { targets: [{ name: 'sdk', mcp: { host: sdk.url } }] } }] },
        { name: 'everything', matches: [{ path: { pathPrefix: '/everything' } }], backends: [{ mcp: { targets: [everythingTarget()] } }] },
        { name: 'mux', matches: [{ path: { pathPrefix: '/mux' } }], backends: [{ mcp: { targets: [everythingTarget('everything'), { name: 'sdk', mcp: { host: sdk.url } }] } }] },
        {
          name: 'guarded',
          matches: [{ path: { pathPrefix: '/guarded' } }],
          backends: [{ mcp: { targets: [{ name: 'sdk', mcp: { host: sdk.url } }] } }],
          policies: { authorization: { rules: [{ deny: 'mcp.tool.name == "roots" || mcp.tool.name.startsWith("item-")' }, { deny: 'mcp.method == "prompts/get"' }] } }
        }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await sdk?.close()
})

interface Reply { status: number, headers: Record<string, string | string[] | undefined>, text: string, json: any, events: any[] }

/** One POST; an SSE answer is parsed into its events (the last one is the response). */
async function post (path: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await request(`${portico.url}${path}`, {
    method: 'POST',
    headers: { accept: ACCEPT, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body)
  })
  const text = await res.body.text()
  const type = String(res.headers['content-type'] ?? '')
  const events: any[] = []
  let json: any = null
  if (type.startsWith('application/json') && text !== '') json = JSON.parse(text)
  if (type.startsWith('text/event-stream')) {
    const parser = createParser({ onEvent: e => events.push(JSON.parse(e.data)) })
    parser.feed(text)
    json = events.at(-1) ?? null
  }
  return { status: res.statusCode, headers: res.headers, text, json, events }
}

let nextId = 1
/** A 2026-07-28 request with its headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name). */
function modern (path: string, method: string, params: Record<string, unknown> = {}, extra: { headers?: Record<string, string>, meta?: Record<string, unknown> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { 'mcp-protocol-version': V, 'mcp-method': method }
  const name = method === 'resources/read' ? params.uri : (method === 'tools/call' || method === 'prompts/get') ? params.name : undefined
  if (typeof name === 'string') headers['mcp-name'] = /^[\x20-\x7e]*$/.test(name) ? name : `=?base64?${Buffer.from(name).toString('base64')}?=`
  return post(path, { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: { ...META, ...extra.meta } } }, { ...headers, ...extra.headers })
}

test('server/discover (SDK target, 2025-11-25): versions, capabilities, serverInfo and instructions in the 2026-07-28 shape, no session', async () => {
  const r = await modern('/sdk', 'server/discover')
  assert.equal(r.status, 200, r.text)
  assert.equal(r.headers['mcp-session-id'], undefined, 'no session id is minted')
  const result = r.json.result
  assert.equal(result.resultType, 'complete')
  assert.equal(result.supportedVersions[0], V)
  assert.ok(result.supportedVersions.includes('2025-11-25'))
  assert.deepEqual(result._meta['io.modelcontextprotocol/serverInfo'], { name: 'sdk-server', version: '1.0.0' })
  assert.equal(result.instructions, 'The sdk test server.')
  assert.equal(result.ttlMs, 0)
  assert.equal(result.cacheScope, 'private')
  assert.ok(result.capabilities.tools && result.capabilities.prompts && result.capabilities.resources, JSON.stringify(result.capabilities))
  // Kept: their notifications reach 2026-07-28 clients over subscriptions/listen.
  assert.equal(result.capabilities.tools.listChanged, true)
  assert.equal(result.capabilities.resources.subscribe, true)
})

test('tools/list and tools/call through to the SDK target: resultType, cache hints, serverInfo; no session', async () => {
  const list = await modern('/sdk', 'tools/list')
  assert.equal(list.status, 200, list.text)
  assert.equal(list.headers['mcp-session-id'], undefined)
  assert.equal(list.json.result.resultType, 'complete')
  assert.equal(list.json.result.ttlMs, 0)
  assert.equal(list.json.result.cacheScope, 'private')
  assert.equal(list.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'sdk-server')
  assert.ok(list.json.result.tools.some((t: { name: string }) => t.name === 'add'))
  assert.equal(typeof list.json.result.nextCursor, 'string', 'paginated as the target pages')
  const page2 = await modern('/sdk', 'tools/list', { cursor: list.json.result.nextCursor })
  assert.equal(page2.json.result.tools[0].name, 'item-4')

  const call = await modern('/sdk', 'tools/call', { name: 'add', arguments: { a: 2, b: 40 } })
  assert.equal(call.status, 200, call.text)
  assert.equal(call.json.id, nextId - 1, 'the client\'s own id comes back')
  assert.equal(call.json.result.resultType, 'complete')
  assert.equal(textOf(call.json.result), '42')
  assert.equal(call.json.result.ttlMs, undefined, 'tools/call is not a cacheable result')
})

test('progress on the request\'s own stream, with the client\'s token; logging only with _meta logLevel', async () => {
  const slow = await modern('/sdk', 'tools/call', { name: 'slow', arguments: { steps: 2, delayMs: 10 } }, { meta: { progressToken: 'tok-1' } })
  assert.equal(slow.status, 200, slow.text)
  const progress = slow.events.filter(e => e.method === 'notifications/progress')
  assert.equal(progress.length, 2, slow.text)
  assert.ok(progress.every(p => p.params.progressToken === 'tok-1'))
  assert.equal(textOf(slow.json.result), 'done after 2 steps')

  const quiet = await modern('/sdk', 'tools/call', { name: 'log', arguments: { text: 'hi' } })
  assert.equal(textOf(quiet.json.result), 'logged')
  assert.equal(quiet.events.filter(e => e.method === 'notifications/message').length, 0, 'no notifications/message without a logLevel')
  const loud = await modern('/sdk', 'tools/call', { name: 'log', arguments: { text: 'hi' } }, { meta: { 'io.modelcontextprotocol/logLevel': 'debug' } })
  assert.equal(loud.events.filter(e => e.method === 'notifications/message').length, 1, loud.text)
})

test('closing the response stream cancels the request at the target', async () => {
  const before = sdk.cancelled.length
  const abort = new AbortController()
  const pending = request(`${portico.url}/sdk`, {
    method: 'POST',
    signal: abort.signal,
    headers: { accept: ACCEPT, 'content-type': 'application/json', 'mcp-protocol-version': V, 'mcp-method': 'tools/call', 'mcp-name': 'slow' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'c1', method: 'tools/call', params: { name: 'slow', arguments: { steps: 40, delayMs: 25 }, _meta: { ...META, progressToken: 'c' } } })
  }).then(async res => { for await (const _ of res.body) { /* reading until aborted */ } })
  setTimeout(() => abort.abort(), 200)
  await assert.rejects(pending)
  const deadline = Date.now() + 3000
  while (sdk.cancelled.length === before && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 25))
  assert.equal(sdk.cancelled.length, before + 1, 'the target saw notifications/cancelled')
})

test('a target\'s input request is refused towards the target when the 2026-07-28 client did not declare the capability', async () => {
  const r = await modern('/sdk', 'tools/call', { name: 'sample', arguments: { prompt: 'x' } })
  assert.equal(r.status, 200, r.text)
  assert.ok(r.events.every(e => !('method' in e && 'id' in e)), 'no JSON-RPC request on the response stream')
  assert.ok('error' in r.json || r.json.result.isError === true, r.text)
})

const WITH_INPUT = { ...META, 'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, sampling: {}, roots: {} } }

test('an initialize-era target\'s elicitation becomes input_required; the retry\'s inputResponses answer it and complete the call', async () => {
  const first = await modern('/sdk', 'tools/call', { name: 'elicit', arguments: {} }, { meta: WITH_INPUT })
  assert.equal(first.json.result.resultType, 'input_required', first.text)
  const [key, ask] = Object.entries(first.json.result.inputRequests as Record<string, any>)[0]!
  assert.equal(ask.method, 'elicitation/create')
  assert.equal(ask.params.message, 'your name?')
  assert.match(first.json.result.requestState, /^p26s\./)

  const done = await modern('/sdk', 'tools/call', {
    name: 'elicit',
    arguments: {},
    inputResponses: { [key]: { action: 'accept', content: { name: 'Ada' } }, unrelated: { ignored: true } },
    requestState: first.json.result.requestState
  }, { meta: WITH_INPUT })
  assert.equal(done.json.result.resultType, 'complete', done.text)
  assert.equal(done.json.result.content[0].text, 'elicited: accept {"name":"Ada"}')
})

test('sampling and roots are bridged too; a retry without the answer is asked again, not failed', async () => {
  const sample = await modern('/sdk', 'tools/call', { name: 'sample', arguments: { prompt: 'hi' } }, { meta: WITH_INPUT })
  const [key, ask] = Object.entries(sample.json.result.inputRequests as Record<string, any>)[0]!
  assert.equal(ask.method, 'sampling/createMessage')
  const again = await modern('/sdk', 'tools/call', { name: 'sample', arguments: { prompt: 'hi' }, inputResponses: {}, requestState: sample.json.result.requestState }, { meta: WITH_INPUT })
  assert.equal(again.json.result.resultType, 'input_required')
  assert.deepEqual(Object.keys(again.json.result.inputRequests), [key])
  const done = await modern('/sdk', 'tools/call', {
    name: 'sample',
    arguments: { prompt: 'hi' },
    inputResponses: { [key]: { role: 'assistant', content: { type: 'text', text: 'sampled text' }, model: 'test' } },
    requestState: again.json.result.requestState
  }, { meta: WITH_INPUT })
  assert.equal(done.json.result.content[0].text, 'sampled: sampled text')

  const roots = await modern('/sdk', 'tools/call', { name: 'roots', arguments: {} }, { meta: WITH_INPUT })
  const [rootsKey] = Object.keys(roots.json.result.inputRequests)
  const listed = await modern('/sdk', 'tools/call', { name: 'roots', arguments: {}, inputResponses: { [rootsKey!]: { roots: [{ uri: 'file:///work' }] } }, requestState: roots.json.result.requestState }, { meta: WITH_INPUT })
  assert.equal(listed.json.result.content[0].text, 'roots: file:///work')
})

test('a requestState that was altered, belongs to another call or is not Portico\'s is -32602; bad inputResponses too', async () => {
  const first = await modern('/sdk', 'tools/call', { name: 'elicit', arguments: {} }, { meta: WITH_INPUT })
  const state: string = first.json.result.requestState
  const altered = state.slice(0, 10) + (state[10] === 'A' ? 'B' : 'A') + state.slice(11)
  for (const [params, pattern] of [
    [{ name: 'elicit', arguments: {}, inputResponses: {}, requestState: altered }, /Invalid or expired requestState/],
    [{ name: 'elicit', arguments: {}, inputResponses: {}, requestState: 'made-up' }, /Invalid or expired requestState/],
    [{ name: 'add', arguments: { a: 1, b: 2 }, inputResponses: {}, requestState: state }, /another request/],
    [{ name: 'elicit', arguments: {}, inputResponses: 'nope', requestState: state }, /inputResponses must be an object/]
  ] as const) {
    const r = await modern('/sdk', 'tools/call', params, { meta: WITH_INPUT })
    assert.equal(r.json.error?.code, -32602, r.text)
    assert.match(r.json.error.message, pattern)
  }
  // The call is still waiting for a proper retry.
  const key = Object.keys(first.json.result.inputRequests)[0]!
  const done = await modern('/sdk', 'tools/call', { name: 'elicit', arguments: {}, inputResponses: { [key]: { action: 'decline' } }, requestState: state }, { meta: WITH_INPUT })
  assert.equal(done.json.result.content[0].text, 'elicited: decline {}')
})

test('the official SDK v2 client answers an initialize-era target\'s elicitation through Portico (multiplexed, prefixed)', async () => {
  const client = new ClientV2({ name: 'sdk-v2', version: '2.4.0' }, { versionNegotiation: { mode: { pin: V } }, capabilities: { elicitation: { form: {} } } })
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Grace' } }))
  await client.connect(new TransportV2(new URL(`${portico.url}/mux`)))
  try {
    const result = await client.callTool({ name: 'sdk_elicit', arguments: {} })
    assert.equal(textOf(result), 'elicited: accept {"name":"Grace"}')
  } finally {
    await client.close()
  }
})

test('subscriptions/listen: acknowledged with what the targets honour, then resources/updated for a subscribed URI, stamped with the subscription id', async () => {
  const res = await request(`${portico.url}/sdk`, {
    method: 'POST',
    headers: { accept: ACCEPT, 'content-type': 'application/json', 'mcp-protocol-version': V, 'mcp-method': 'subscriptions/listen' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'sub-1', method: 'subscriptions/listen', params: { _meta: META, notifications: { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['memo://one'] } } })
  })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /text\/event-stream/)
  const events: any[] = []
  const parser = createParser({ onEvent: e => events.push(JSON.parse(e.data)) })
  const decoder = new TextDecoder()
  const deadline = Date.now() + 5000
  for await (const chunk of res.body) {
    parser.feed(decoder.decode(chunk as Buffer, { stream: true }))
    if (events.some(e => e.method === 'notifications/resources/updated') || Date.now() > deadline) break
  }
  res.body.destroy()
  assert.equal(events[0].method, 'notifications/subscriptions/acknowledged')
  // The SDK target announces tools.listChanged and resources.subscribe, not prompts.listChanged.
  assert.deepEqual(events[0].params.notifications, { toolsListChanged: true, resourceSubscriptions: ['memo://one'] })
  assert.equal(events[0].params._meta['io.modelcontextprotocol/subscriptionId'], 'sub-1')
  const updated = events.find(e => e.method === 'notifications/resources/updated')
  assert.ok(updated, JSON.stringify(events))
  assert.equal(updated.params.uri, 'memo://one')
  assert.equal(updated.params._meta['io.modelcontextprotocol/subscriptionId'], 'sub-1')
})

test('prompts, resources, templates and completion in the 2026-07-28 shape', async () => {
  const prompts = await modern('/sdk', 'prompts/list')
  assert.equal(prompts.json.result.resultType, 'complete')
  assert.equal(prompts.json.result.cacheScope, 'private')
  const greet = await modern('/sdk', 'prompts/get', { name: 'greet', arguments: { who: 'Ada' } })
  assert.match(greet.json.result.messages[0].content.text, /Hello Ada/)
  assert.equal(greet.json.result.resultType, 'complete')
  const resources = await modern('/sdk', 'resources/list')
  assert.deepEqual(resources.json.result.resources.map((r: { uri: string }) => r.uri), ['memo://one', 'memo://two'])
  const read = await modern('/sdk', 'resources/read', { uri: 'memo://one' })
  assert.equal(read.json.result.contents[0].text, 'content of memo://one')
  assert.equal(read.json.result.ttlMs, 0)
  const templates = await modern('/everything', 'resources/templates/list')
  assert.equal(templates.status, 200, templates.text)
  assert.equal(templates.json.result.resultType, 'complete')
  const completion = await modern('/everything', 'completion/complete', { ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } })
  assert.equal(completion.status, 200, completion.text)
  assert.equal(completion.json.result.resultType, 'complete', completion.text)
})

test('server-everything over stdio: server/discover, tools/list, tools/call', async () => {
  const discover = await modern('/everything', 'server/discover')
  assert.equal(discover.status, 200, discover.text)
  assert.equal(discover.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'mcp-servers/everything')
  assert.equal(discover.json.result.capabilities.tasks, undefined, 'tasks (now an extension) are not advertised')
  const list = await modern('/everything', 'tools/list')
  assert.ok(list.json.result.tools.some((t: { name: string }) => t.name === 'echo'), list.text)
  const call = await modern('/everything', 'tools/call', { name: 'echo', arguments: { message: 'modern' } })
  assert.equal(textOf(call.json.result), 'Echo: modern')
  assert.equal(call.json.result.resultType, 'complete')
})

test('several targets: prefixed names, merged discover, calls routed to the owner', async () => {
  const discover = await modern('/mux', 'server/discover')
  assert.deepEqual(discover.json.result._meta['io.modelcontextprotocol/serverInfo'], { name: 'portico', version: '0.1.0' })
  assert.match(discover.json.result.instructions, /\[sdk\] The sdk test server\./)
  const list = await modern('/mux', 'tools/list')
  const names = list.json.result.tools.map((t: { name: string }) => t.name)
  assert.ok(names.includes('everything_echo') && names.includes('sdk_add'), names.join(','))
  assert.equal(textOf((await modern('/mux', 'tools/call', { name: 'sdk_add', arguments: { a: 1, b: 2 } })).json.result), '3')
  assert.equal(textOf((await modern('/mux', 'tools/call', { name: 'everything_echo', arguments: { message: 'x' } })).json.result), 'Echo: x')
  const read = await modern('/mux', 'resources/read', { uri: 'sdk+memo://two' })
  assert.equal(read.json.result.contents[0].uri, 'sdk+memo://two')
})

test('an unsupported protocol version: 400 UnsupportedProtocolVersionError (-32022) with supported and requested', async () => {
  const r = await post('/sdk', { jsonrpc: '2.0', id: 7, method: 'tools/list', params: { _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } },
    { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' })
  assert.equal(r.status, 400)
  assert.equal(r.json.id, 7)
  assert.equal(r.json.error.code, -32022)
  assert.equal(r.json.error.data.requested, '2099-01-01')
  assert.ok(r.json.error.data.supported.includes(V) && r.json.error.data.supported.includes('2025-11-25'))
  // By the header alone (no _meta), as an initialize-era client would send it.
  const byHeader = await post('/sdk', { jsonrpc: '2.0', id: 8, method: 'tools/list' }, { 'mcp-protocol-version': '1999-01-01' })
  assert.equal(byHeader.status, 400)
  assert.equal(byHeader.json.error.code, -32022)
  assert.equal(byHeader.json.error.data.requested, '1999-01-01')
})

test('Mcp-Method / Mcp-Name that disagree with the body, or are missing, or a version header that disagrees: 400 HeaderMismatch (-32020)', async () => {
  const method = await modern('/sdk', 'tools/call', { name: 'add', arguments: { a: 1, b: 1 } }, { headers: { 'mcp-method': 'tools/list' } })
  assert.equal(method.status, 400, method.text)
  assert.equal(method.json.error.code, -32020)
  const name = await modern('/sdk', 'tools/call', { name: 'add', arguments: { a: 1, b: 1 } }, { headers: { 'mcp-name': 'roots' } })
  assert.equal(name.status, 400)
  assert.match(name.json.error.message, /Mcp-Name/)
  const missing = await post('/sdk', { jsonrpc: '2.0', id: 9, method: 'tools/list', params: { _meta: META } }, { 'mcp-protocol-version': V })
  assert.equal(missing.status, 400)
  assert.match(missing.json.error.message, /Mcp-Method header is required/)
  const version = await modern('/sdk', 'tools/list', {}, { headers: { 'mcp-protocol-version': '2025-11-25' } })
  assert.equal(version.status, 400)
  assert.equal(version.json.error.code, -32020)
  // Base64-encoded Mcp-Name is decoded before the comparison.
  const encoded = await modern('/sdk', 'resources/read', { uri: 'memo://one' }, { headers: { 'mcp-name': `=?base64?${Buffer.from('memo://one').toString('base64')}?=` } })
  assert.equal(encoded.status, 200, encoded.text)
  // An initialize-era request with a disagreeing Mcp-Method is refused too (an intermediary may have trusted it).
  const legacy = await post('/sdk', { jsonrpc: '2.0', id: 10, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }, { 'mcp-method': 'tools/call' })
  assert.equal(legacy.status, 400)
  assert.equal(legacy.json.error.code, -32020)
})

test('methods 2026-07-28 dropped or Portico does not serve: 404 Method not found; GET and DELETE: 405', async () => {
  for (const m of ['ping', 'logging/setLevel', 'resources/subscribe', 'no/such']) {
    const r = await modern('/sdk', m, m === 'resources/subscribe' ? { uri: 'memo://one' } : {})
    assert.equal(r.status, 404, `${m}: ${r.text}`)
    assert.equal(r.json.error.code, -32601)
  }
  for (const method of ['GET', 'DELETE'] as const) {
    const res = await request(`${portico.url}/sdk`, { method, headers: { accept: 'text/event-stream', 'mcp-protocol-version': V } })
    await res.body.text()
    assert.equal(res.statusCode, 405, method)
    assert.equal(res.headers.allow, 'POST')
  }
})

test('authorization rules over mcp.method / mcp.tool apply to 2026-07-28 requests as to initialize-era ones', async () => {
  const list = await modern('/guarded', 'tools/list')
  const names = list.json.result.tools.map((t: { name: string }) => t.name)
  assert.ok(names.includes('add') && !names.includes('roots') && !names.some((n: string) => n.startsWith('item-')), names.join(','))
  const denied = await modern('/guarded', 'tools/call', { name: 'roots', arguments: {} })
  assert.equal(denied.json.error.code, -32602, denied.text)
  assert.match(denied.json.error.message, /Unknown tool: roots/)
  const prompt = await modern('/guarded', 'prompts/get', { name: 'greet', arguments: { who: 'x' } })
  assert.match(prompt.json.error.message, /Unknown prompt/)
  // The same rules, the same answers, for an initialize-era client.
  const { client } = await connectClient(`${portico.url}/guarded`)
  try {
    const legacyNames = (await client.listTools()).tools.map(t => t.name)
    assert.deepEqual(legacyNames, names)
    await assert.rejects(client.callTool({ name: 'roots', arguments: {} }), /Unknown tool: roots/)
  } finally {
    await client.close()
  }
})

test('an initialize-era client on the same route keeps its session, beside 2026-07-28 requests', async () => {
  const { client, transport } = await connectClient(`${portico.url}/sdk`)
  try {
    assert.match(String((transport as { sessionId?: string }).sessionId), /^p1\./)
    assert.equal(textOf(await client.callTool({ name: 'add', arguments: { a: 3, b: 4 } })), '7')
    const between = await modern('/sdk', 'tools/call', { name: 'add', arguments: { a: 5, b: 5 } })
    assert.equal(textOf(between.json.result), '10')
    assert.equal(textOf(await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })), '2')
  } finally {
    await client.close()
  }
})

test('the official SDK v2 client pinned to 2026-07-28: discover, list, call, through Portico', async () => {
  const client = new ClientV2({ name: 'sdk-v2', version: '2.4.0' }, { versionNegotiation: { mode: { pin: V } } })
  await client.connect(new TransportV2(new URL(`${portico.url}/mux`)))
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), V)
    assert.equal(client.getServerVersion()?.name, 'portico')
    const { tools } = await client.listTools()
    assert.ok(tools.some(t => t.name === 'sdk_add'))
    const result = await client.callTool({ name: 'sdk_add', arguments: { a: 20, b: 22 } })
    assert.equal(textOf(result), '42')
    const read = await client.readResource({ uri: 'sdk+memo://one' })
    assert.equal((read.contents[0] as { text?: string }).text, 'content of memo://one')
  } finally {
    await client.close()
  }
})

test('the SDK v2 client in auto mode probes with server/discover and stays on 2026-07-28', async () => {
  const client = new ClientV2({ name: 'sdk-v2-auto', version: '2.4.0' }, { versionNegotiation: { mode: 'auto' } })
  await client.connect(new TransportV2(new URL(`${portico.url}/everything`)))
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), V)
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'v2' } })), 'Echo: v2')
  } finally {
    await client.close()
  }
})
