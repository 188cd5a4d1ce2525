/**
 * The official TypeScript SDK at both revisions, all four pairings through Portico:
 *
 *   client ↓ / server →     SDK v1 (2025-11-25, sessions)     SDK v2 (2026-07-28 only)
 *   SDK v1 (2025-11-25)     session relayed                    Portico keeps the session, speaks 2026-07-28
 *   SDK v2 (2026-07-28)     Portico bridges (input_required)   forwarded as sent
 *
 * Each pairing covers tools, resources, prompts, completion, a subscription (resources/
 * subscribe + the GET stream for v1 clients, subscriptions/listen for v2 clients), a
 * multi-round-trip input (elicitation), progress and cancellation, and then switches
 * replica mid-conversation: the same client goes on through a second Portico process with
 * the same SESSION_KEY (its transport's fetch is pointed there).
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'
import { startModernServer, type ModernServer } from '../lib/mcp-modern.ts'

const SESSION_KEY = 'c'.repeat(64)

let v1: SdkServer
let v2: ModernServer
let replicaA: PorticoProcess
let replicaB: PorticoProcess

before(async () => {
  v1 = await startSdkServer('v1')
  v2 = await startModernServer('v2', { legacy: 'reject' })
  const config = (port: number) => ({
    gateways: { default: { port, address: '127.0.0.1' } },
    routes: [
      { name: 'v1', matches: [{ path: { pathPrefix: '/v1' } }], backends: [{ mcp: { targets: [{ name: 'v1', mcp: { host: v1.url } }] } }] },
      { name: 'v2', matches: [{ path: { pathPrefix: '/v2' } }], backends: [{ mcp: { targets: [{ name: 'v2', mcp: { host: v2.url } }] } }] }
    ]
  })
  replicaA = await startPortico({ env: { SESSION_KEY }, config })
  replicaB = await startPortico({ env: { SESSION_KEY }, config })
})

after(async () => {
  await replicaA?.stop()
  await replicaB?.stop()
  await v1?.close()
  await v2?.close()
})

/** A fetch for a client transport that sends to whichever replica is current. */
function switchable () {
  let base = replicaA.url
  const fetchVia = (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url)
    const target = new URL(url.pathname + url.search, base)
    return fetch(target, init)
  }
  return { fetch: fetchVia, use: (p: PorticoProcess) => { base = p.url } }
}

/** What a scenario needs to know of the server behind the route. */
interface ServerFixture {
  path: string
  call: { name: string, arguments: Record<string, unknown>, text: string }
  elicit: { name: string, text: (name: string) => string }
  progressTool: { name: string, arguments: Record<string, unknown> }
  slowTool: { name: string, arguments: Record<string, unknown> }
  cancelled: () => number
  prompt: RegExp
  resource: RegExp
  /** Makes the server announce an update of memo://one (the v1 server does so by itself after a subscribe). */
  update: () => void
}

const V1_SERVER: ServerFixture = {
  path: '/v1/mcp',
  call: { name: 'add', arguments: { a: 20, b: 22 }, text: '42' },
  elicit: { name: 'elicit', text: name => `elicited: accept {"name":"${name}"}` },
  progressTool: { name: 'slow', arguments: { steps: 2, delayMs: 5 } },
  slowTool: { name: 'slow', arguments: { steps: 100, delayMs: 50 } },
  cancelled: () => v1.cancelled.length,
  prompt: /Hello Ada from v1/,
  resource: /content of memo:\/\/one/,
  update: () => {}
}

const V2_SERVER: ServerFixture = {
  path: '/v2/mcp',
  call: { name: 'echo', arguments: {}, text: 'echo from v2' },
  elicit: { name: 'greet', text: name => `Hello, ${name}! (state-ok)` },
  progressTool: { name: 'progress', arguments: {} },
  slowTool: { name: 'slow', arguments: {} },
  cancelled: () => v2.cancelled.length,
  prompt: /Hello Ada from v2/,
  resource: /content of memo:\/\/one from v2/,
  update: () => v2.resourceUpdated('memo://one')
}

async function waitFor (check: () => boolean, what: string, ms = 5000): Promise<void> {
  await waitUntil(check, ms, what)
}

/** The calls both SDK clients share (their method names are the same). */
interface AnyClient {
  listTools(): Promise<{ tools: Array<{ name: string }> }>
  /** v2's signature; v1's takes a result schema before the options (adapted below). */
  callTool(params: { name: string, arguments?: Record<string, unknown> }, options?: { onprogress?: (p: { progress: number }) => void, signal?: AbortSignal }): Promise<unknown>
  readResource(params: { uri: string }): Promise<{ contents: Array<{ text?: string }> }>
  getPrompt(params: { name: string, arguments?: Record<string, string> }): Promise<{ messages: Array<{ content: unknown }> }>
  complete(params: { ref: { type: 'ref/prompt', name: string }, argument: { name: string, value: string } }): Promise<{ completion: { values: string[] } }>
}

async function conversation (client: AnyClient, server: ServerFixture, subscribe: () => Promise<void>, route: ReturnType<typeof switchable>): Promise<void> {
  const { tools } = await client.listTools()
  assert.ok(tools.some(t => t.name === server.call.name), tools.map(t => t.name).join(','))
  assert.equal(textOf(await client.callTool({ name: server.call.name, arguments: server.call.arguments })), server.call.text)
  const read = await client.readResource({ uri: 'memo://one' })
  assert.match(String(read.contents[0]?.text), server.resource)
  const prompt = await client.getPrompt({ name: 'greet', arguments: { who: 'Ada' } })
  assert.match(JSON.stringify(prompt.messages[0]?.content), server.prompt)
  const completion = await client.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'who', value: 'A' } })
  assert.deepEqual(completion.completion.values, ['Ada', 'Alan'])
  await subscribe()
  // Multi-round-trip input: the client's elicitation handler answers "Kim".
  assert.equal(textOf(await client.callTool({ name: server.elicit.name, arguments: {} })), server.elicit.text('Kim'))
  const progress: number[] = []
  await client.callTool({ name: server.progressTool.name, arguments: server.progressTool.arguments }, { onprogress: p => progress.push(p.progress) })
  assert.ok(progress.length >= 2, `progress: ${progress.join(',')}`)
  const before = server.cancelled()
  const abort = new AbortController()
  const slow = client.callTool({ name: server.slowTool.name, arguments: server.slowTool.arguments }, { signal: abort.signal })
  setTimeout(() => abort.abort(), 150)
  await assert.rejects(slow)
  await waitFor(() => server.cancelled() > before, 'the target to see the cancellation')

  // The same conversation goes on through the other replica.
  route.use(replicaB)
  assert.equal(textOf(await client.callTool({ name: server.call.name, arguments: server.call.arguments })), server.call.text)
  assert.equal(textOf(await client.callTool({ name: server.elicit.name, arguments: {} })), server.elicit.text('Kim'))
  assert.ok((await client.listTools()).tools.length > 0)
}

for (const server of [V1_SERVER, V2_SERVER]) {
  describe(`server ${server === V1_SERVER ? 'SDK v1 (2025-11-25)' : 'SDK v2 (2026-07-28 only)'}`, () => {
    test('client SDK v1 (2025-11-25)', async () => {
      const route = switchable()
      const client = new ClientV1({ name: 'pairing-v1', version: '1' }, { capabilities: { elicitation: {} } })
      client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Kim' } }))
      const updates: string[] = []
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, n => { updates.push(n.params.uri) })
      await client.connect(new TransportV1(new URL(`${replicaA.url}${server.path}`), { fetch: route.fetch }))
      try {
        const adapted = {
          listTools: () => client.listTools(),
          callTool: (params, options) => client.callTool(params, undefined, options),
          readResource: params => client.readResource(params),
          getPrompt: params => client.getPrompt(params),
          complete: params => client.complete(params)
        } as AnyClient
        await conversation(adapted, server, async () => {
          await client.subscribeResource({ uri: 'memo://one' })
          // A 2026-07-28 target's listen stream opens asynchronously: announce until it arrives.
          await waitFor(() => { if (updates.length === 0) server.update(); return updates.includes('memo://one') }, 'resources/updated on the session stream')
        }, route)
      } finally {
        await client.close()
      }
    })

    test('client SDK v2 (2026-07-28)', async () => {
      const route = switchable()
      const client = new ClientV2({ name: 'pairing-v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { form: {} } } })
      client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Kim' } }))
      await client.connect(new TransportV2(new URL(`${replicaA.url}${server.path}`), { fetch: route.fetch }))
      try {
        await conversation(client as unknown as AnyClient, server, async () => {
          // subscriptions/listen, by hand: the acknowledgment, then the update.
          const res = await route.fetch(`${replicaA.url}${server.path}`, {
            method: 'POST',
            headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
            body: JSON.stringify({ jsonrpc: '2.0', id: 'listen-1', method: 'subscriptions/listen', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} }, notifications: { resourceSubscriptions: ['memo://one'] } } })
          })
          const reader = res.body!.getReader()
          const decoder = new TextDecoder()
          let text = ''
          const deadline = Date.now() + 5000
          while (!text.includes('notifications/resources/updated') && Date.now() < deadline) {
            if (text.includes('notifications/subscriptions/acknowledged')) server.update()
            const next = await Promise.race([reader.read(), new Promise<null>(resolve => setTimeout(() => resolve(null), 100))])
            if (next !== null && !next.done) text += decoder.decode(next.value, { stream: true })
          }
          await reader.cancel()
          assert.match(text, /notifications\/subscriptions\/acknowledged/)
          assert.match(text, /"method":"notifications\/resources\/updated".*"uri":"memo:\/\/one"/)
        }, route)
      } finally {
        await client.close()
      }
    })
  })
}
