/**
 * 2026-07-28 targets behind Portico (the official SDK v2 server).
 *
 * 2026-07-28 clients in front of one: Portico forwards
 * each request as sent and keeps no state, so a multi-round-trip call may go to one replica
 * and its retry to another; the target's own requestState comes back untouched. On the way
 * the route still applies: authorization hides a tool from lists and refuses calling it
 * (the target never sees the call), Mcp-Name that disagrees with the body is a 400 before
 * the target, an answer past maxMessageBytes is not relayed, and a dead target answers as
 * the gateway's error. The official SDK v2 client runs a whole elicitation round trip.
 *
 * Initialize-era clients (the official SDK v1 client, 2025-11-25) in front of a target that
 * speaks only 2026-07-28: Portico keeps the session they expect and speaks 2026-07-28 to the
 * target — initialize answered from server/discover, each request sent with the client's
 * capabilities in `_meta`, an input_required answer turned into the elicitation request
 * the old client knows, its response sent back as inputResponses with the target's
 * requestState; progress and a dead target as for any target.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { request } from 'undici'
import { createParser } from 'eventsource-parser'
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client'
import { startModernServer, type ModernServer } from '../lib/mcp-modern.ts'
import { connectClient, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'

const V = '2026-07-28'
const META = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
  'io.modelcontextprotocol/clientInfo': { name: 'raw-2026', version: '1.0.0' }
}

let target: ModernServer
let strict: ModernServer
let legacy: SdkServer
let replicaA: PorticoProcess
let replicaB: PorticoProcess
let deadPort: number

function config (port: number) {
  const modern = (host: string, extra: Record<string, unknown> = {}) => [{ mcp: { targets: [{ name: 'modern', mcp: { host }, ...extra }] } }]
  return {
    gateways: { default: { port, address: '127.0.0.1' } },
    routes: [
      { name: 'open', matches: [{ path: { pathPrefix: '/open' } }], backends: modern(target.url) },
      {
        name: 'guarded',
        matches: [{ path: { pathPrefix: '/guarded' } }],
        backends: modern(target.url),
        policies: { authorization: { rules: [{ deny: 'mcp.tool.name == "secret"' }] } }
      },
      { name: 'small', matches: [{ path: { pathPrefix: '/small' } }], backends: modern(target.url, { maxMessageSize: 64 * 1024 }) },
      { name: 'dead', matches: [{ path: { pathPrefix: '/dead' } }], backends: modern(`http://127.0.0.1:${deadPort}/mcp`) },
      { name: 'strict', matches: [{ path: { pathPrefix: '/strict' } }], backends: modern(strict.url) },
      // Mixed revisions behind one route: the 2026-only server and the SDK v1 server (2025-11-25).
      { name: 'mixed', matches: [{ path: { pathPrefix: '/mixed' } }], backends: [{ mcp: { targets: [{ name: 'new', mcp: { host: strict.url } }, { name: 'old', mcp: { host: legacy.url } }] } }] },
      // Routing on Mcp-Method without reading the body: tools/call goes to another route.
      { name: 'calls', matches: [{ path: { pathPrefix: '/split' }, headers: [{ name: 'mcp-method', value: { exact: 'tools/call' } }] }], backends: modern(strict.url) },
      { name: 'rest', matches: [{ path: { pathPrefix: '/split' } }], backends: modern(target.url) },
      { name: 'old', matches: [{ path: { pathPrefix: '/old' } }], backends: [{ mcp: { targets: [{ name: 'old', mcp: { host: legacy.url } }] } }] }
    ]
  }
}

before(async () => {
  target = await startModernServer()
  strict = await startModernServer('strict', { legacy: 'reject' })
  legacy = await startSdkServer('old')
  deadPort = await freePort()
  // One SESSION_KEY: a requestState sealed by one replica opens on the other.
  replicaA = await startPortico({ env: { SESSION_KEY: 'd'.repeat(64) }, config })
  replicaB = await startPortico({ env: { SESSION_KEY: 'd'.repeat(64) }, config })
})

after(async () => {
  await replicaA?.stop()
  await replicaB?.stop()
  await target?.close()
  await strict?.close()
  await legacy?.close()
})

interface Reply { status: number, headers: Record<string, string | string[] | undefined>, json: any }

/** One 2026-07-28 POST with the standard headers; an SSE answer is reduced to its response. */
async function call (base: string, path: string, method: string, params: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Reply> {
  const name = typeof params.name === 'string' ? params.name : undefined
  const res = await request(`${base}${path}`, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': V,
      'mcp-method': method,
      ...(name !== undefined ? { 'mcp-name': name } : {}),
      ...headers
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: { ...META, ...(params._meta as Record<string, unknown> | undefined) } } })
  })
  const text = await res.body.text()
  let json: any = null
  if (String(res.headers['content-type']).startsWith('text/event-stream')) {
    const parser = createParser({ onEvent: e => { const m = JSON.parse(e.data); if ('id' in m) json = m } })
    parser.feed(text)
  } else if (text !== '') {
    json = JSON.parse(text)
  }
  return { status: res.statusCode, headers: res.headers, json }
}

const sinceNow = () => {
  const start = target.received.length
  return () => target.received.slice(start).map(r => r.method)
}

test('server/discover is the target\'s own answer; no session is minted', async () => {
  const r = await call(replicaA.url, '/open', 'server/discover')
  assert.equal(r.status, 200)
  assert.equal(r.headers['mcp-session-id'], undefined)
  assert.equal(r.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'modern')
  assert.ok(r.json.result.supportedVersions.includes(V))
})

test('a multi-round-trip call: input_required from replica A, the retry with inputResponses on replica B, the target\'s requestState untouched', async () => {
  const first = await call(replicaA.url, '/open', 'tools/call', { name: 'greet', arguments: {} })
  assert.equal(first.json.result.resultType, 'input_required')
  assert.equal(first.json.result.inputRequests.user_name.method, 'elicitation/create')
  const state = first.json.result.requestState
  assert.equal(typeof state, 'string')
  assert.match(state, /^greet:/, 'the state is the target\'s, not a gateway wrapper')

  const second = await call(replicaB.url, '/open', 'tools/call', {
    name: 'greet',
    arguments: {},
    inputResponses: { user_name: { action: 'accept', content: { name: 'Ada' } } },
    requestState: state
  })
  assert.equal(second.json.result.resultType, 'complete')
  assert.equal(second.json.result.content[0].text, 'Hello, Ada! (state-ok)')
})

test('authorization over a 2026-07-28 target: the hidden tool leaves tools/list and calling it never reaches the target', async () => {
  const list = await call(replicaA.url, '/guarded', 'tools/list')
  const names = list.json.result.tools.map((t: { name: string }) => t.name)
  assert.ok(names.includes('echo'))
  assert.ok(!names.includes('secret'))
  assert.equal(list.json.result.cacheScope, 'private', 'a filtered list is this caller\'s only')

  const seen = sinceNow()
  const denied = await call(replicaA.url, '/guarded', 'tools/call', { name: 'secret', arguments: {} })
  assert.equal(denied.json.error.code, -32602)
  assert.match(denied.json.error.message, /Unknown tool: secret/)
  assert.deepEqual(seen(), [])

  const open = await call(replicaA.url, '/open', 'tools/call', { name: 'secret', arguments: {} })
  assert.equal(open.json.result.content[0].text, 'the secret')
})

test('Mcp-Name that disagrees with the body is refused by Portico (400, -32020) before the target', async () => {
  const seen = sinceNow()
  const r = await call(replicaA.url, '/open', 'tools/call', { name: 'echo', arguments: {} }, { 'mcp-name': 'secret' })
  assert.equal(r.status, 400)
  assert.equal(r.json.error.code, -32020)
  assert.deepEqual(seen(), [])
})

test('the protocol headers reach the target; other client headers do not', async () => {
  const seen = target.received.length
  await call(replicaA.url, '/open', 'tools/call', { name: 'echo', arguments: {} }, { 'x-client-secret': 'nope', 'mcp-param-region': 'eu' })
  const got = target.received.slice(seen).find(r => r.method === 'tools/call')!
  assert.equal(got.headers['mcp-method'], 'tools/call')
  assert.equal(got.headers['mcp-name'], 'echo')
  assert.equal(got.headers['mcp-protocol-version'], V)
  assert.equal(got.headers['mcp-param-region'], 'eu')
  assert.equal(got.headers['x-client-secret'], undefined)
})

test('an answer past maxMessageBytes is not relayed; a dead target is the gateway\'s -32000', async () => {
  const big = await call(replicaA.url, '/small', 'tools/call', { name: 'big', arguments: {} })
  assert.equal(big.json.error.code, -32000)
  assert.equal(big.json.error.data.source, 'portico')

  const dead = await call(replicaA.url, '/dead', 'tools/list')
  assert.equal(dead.status, 200)
  assert.equal(dead.json.error.data.reason, 'target-unavailable')
})

test('the official SDK v2 client, pinned to 2026-07-28, runs an elicitation round trip through Portico', async () => {
  const client = new ClientV2({ name: 'sdk-v2', version: '2.4.0' }, { versionNegotiation: { mode: { pin: V } }, capabilities: { elicitation: { form: {} } } })
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Grace' } }))
  await client.connect(new TransportV2(new URL(`${replicaA.url}/open`)))
  try {
    assert.equal(client.getServerVersion()?.name, 'modern')
    const result = await client.callTool({ name: 'greet', arguments: {} })
    assert.equal(textOf(result), 'Hello, Grace! (state-ok)')
  } finally {
    await client.close()
  }
})

test('an initialize-era client (SDK v1) in front of a 2026-07-28-only target: session, list, call, elicitation as a request, progress', async () => {
  const progress: number[] = []
  const { client } = await connectClient(`${replicaA.url}/strict`, { elicit: () => ({ action: 'accept', content: { name: 'Lin' } }) })
  try {
    assert.equal(client.getServerVersion()?.name, 'strict')
    const { tools } = await client.listTools()
    assert.ok(tools.some(t => t.name === 'greet'))
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: {} })), 'echo from strict')
    // input_required from the target, asked of this client as an elicitation request, answered, retried with the target's state.
    assert.equal(textOf(await client.callTool({ name: 'greet', arguments: {} })), 'Hello, Lin! (state-ok)')
    const withProgress = await client.callTool({ name: 'progress', arguments: {} }, undefined, { onprogress: p => progress.push(p.progress) })
    assert.equal(textOf(withProgress), 'progressed')
    assert.deepEqual(progress, [1, 2])
  } finally {
    await client.close()
  }
  // The target saw 2026-07-28 requests only (its legacy leg refuses anything else).
  const methods = strict.received.map(r => r.method)
  assert.ok(methods.includes('server/discover'))
  assert.ok(!methods.includes('initialize') || strict.received.filter(r => r.method === 'initialize').length === 1, 'one refused initialize, then 2026-07-28 only')
  assert.ok(strict.received.filter(r => r.method !== 'initialize').every(r => r.headers['mcp-protocol-version'] === V))
})

test('access logs name the revision of each side: 2026-07-28 forwarded, and an initialize-era client bridged to a 2026-07-28 target', async () => {
  // Access logs are written in batches: wait for both kinds of line, whichever batch each is in.
  const calls = () => replicaA.logs().filter(l => l['mcp.method'] === 'tools/call')
  const forwarded = () => calls().some(l => l['mcp.protocol.version'] === V && l['mcp.target.protocol.version'] === V)
  const bridged = () => calls().some(l => l['mcp.protocol.version'] === '2025-11-25' && l['mcp.target.protocol.version'] === V)
  await waitUntil(() => forwarded() && bridged(), 10_000, 'the access-log lines of both calls')
  assert.ok(forwarded(), 'a forwarded 2026-07-28 call')
  assert.ok(bridged(), 'an SDK v1 call bridged to the 2026-only target')
})

test('mixed revisions behind one route: a 2026-07-28-only target and a 2025-11-25 one, prefixed, for clients of both revisions', async () => {
  const { client } = await connectClient(`${replicaA.url}/mixed`, { elicit: () => ({ action: 'accept', content: { name: 'Old' } }) })
  try {
    const names = (await client.listTools()).tools.map(t => t.name)
    assert.ok(names.includes('new_echo') && names.includes('old_add'), names.join(','))
    assert.equal(textOf(await client.callTool({ name: 'new_echo', arguments: {} })), 'echo from strict')
    assert.equal(textOf(await client.callTool({ name: 'old_add', arguments: { a: 1, b: 2 } })), '3')
    assert.equal(textOf(await client.callTool({ name: 'new_greet', arguments: {} })), 'Hello, Old! (state-ok)')
  } finally {
    await client.close()
  }
  const list = await call(replicaA.url, '/mixed', 'tools/list')
  const names = list.json.result.tools.map((t: { name: string }) => t.name)
  assert.ok(names.includes('new_echo') && names.includes('old_add'), names.join(','))
  const echoed = await call(replicaA.url, '/mixed', 'tools/call', { name: 'new_echo', arguments: {} })
  assert.equal(echoed.json.result.content[0].text, 'echo from strict')
  const added = await call(replicaA.url, '/mixed', 'tools/call', { name: 'old_add', arguments: { a: 2, b: 3 } })
  assert.equal(added.json.result.content[0].text, '5')
})

test('a route may match on Mcp-Method without reading the body; the header is still checked against it', async () => {
  const viaCall = await call(replicaA.url, '/split', 'tools/call', { name: 'echo', arguments: {} })
  assert.equal(viaCall.json.result.content[0].text, 'echo from strict')
  const viaList = await call(replicaA.url, '/split', 'tools/list')
  assert.equal(viaList.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'modern')
  // A client that lies in the header to reach the other route is refused there.
  const lying = await call(replicaA.url, '/split', 'tools/list', {}, { 'mcp-method': 'tools/call' })
  assert.equal(lying.status, 400)
  assert.equal(lying.json.error.code, -32020)
})

test('a bridged multi-round-trip call whose retry reaches another replica: run again there with the answers so far', async () => {
  const meta = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } }
  const first = await call(replicaA.url, '/old', 'tools/call', { name: 'elicit', arguments: {}, _meta: meta })
  assert.equal(first.json.result.resultType, 'input_required', JSON.stringify(first.json))
  const [key] = Object.keys(first.json.result.inputRequests)
  const second = await call(replicaB.url, '/old', 'tools/call', {
    name: 'elicit',
    arguments: {},
    _meta: meta,
    inputResponses: { [key!]: { action: 'accept', content: { name: 'Ada' } } },
    requestState: first.json.result.requestState
  })
  assert.equal(second.json.result?.resultType, 'complete', JSON.stringify(second.json))
  assert.equal(second.json.result.content[0].text, 'elicited: accept {"name":"Ada"}')
})
