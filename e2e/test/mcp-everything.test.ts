/**
 * One stdio target: the reference server `server-everything`, launched by Portico, reached
 * with the official SDK client over streamable HTTP. Every list/call/read/get operation,
 * notifications both ways, sampling, elicitation and roots round trips.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { connectClient, everythingTarget, textOf } from '../lib/mcp.ts'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

let portico: PorticoProcess
let client: Client
let transport: StreamableHTTPClientTransport
let url: string

before(async () => {
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'mcp', backends: [{ mcp: { targets: [everythingTarget()] } }] }]
    })
  })
  url = `${portico.url}/mcp`
  const connected = await connectClient(url)
  client = connected.client
  transport = connected.transport as StreamableHTTPClientTransport
})

after(async () => {
  await client?.close().catch(() => {})
  await portico?.stop()
})

test('initialize: the single target\'s server info and capabilities come through, with a session id', async () => {
  assert.equal(client.getServerVersion()?.name, 'mcp-servers/everything')
  const caps = client.getServerCapabilities()!
  assert.ok(caps.tools && caps.prompts && caps.resources && caps.logging)
  assert.equal(caps.resources?.subscribe, true)
  assert.match(String(transport.sessionId), /^p1\./)
})

test('tools: listed without a prefix (one target), called, with structured and image content', async () => {
  const { tools } = await client.listTools()
  const names = tools.map(t => t.name)
  for (const n of ['echo', 'get-sum', 'get-tiny-image', 'trigger-sampling-request', 'trigger-elicitation-request', 'get-roots-list']) assert.ok(names.includes(n), `missing ${n} in ${names.join(',')}`)
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'hello' } })), 'Echo: hello')
  assert.match(textOf(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } })), /5/)
  const image = await client.callTool({ name: 'get-tiny-image', arguments: {} }) as { content: Array<{ type: string }> }
  assert.ok(image.content.some(c => c.type === 'image'))
  const structured = await client.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } }) as { structuredContent?: unknown }
  assert.ok(structured.structuredContent !== undefined)
})

test('an unknown tool is an error from the server, and the session keeps working', async () => {
  const result = await client.callTool({ name: 'no-such-tool', arguments: {} }).catch((err: Error) => err)
  if (result instanceof Error) assert.match(result.message, /no-such-tool|not found|Unknown/i)
  else assert.equal((result as { isError?: boolean }).isError, true)
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'still' } })), 'Echo: still')
})

test('prompts: list and get, with arguments', async () => {
  const { prompts } = await client.listPrompts()
  assert.deepEqual(prompts.map(p => p.name).sort(), ['args-prompt', 'completable-prompt', 'resource-prompt', 'simple-prompt'])
  const simple = await client.getPrompt({ name: 'simple-prompt' })
  assert.ok(simple.messages.length > 0)
  const withArgs = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris' } })
  assert.match(JSON.stringify(withArgs.messages), /Paris/)
})

test('resources: list, templates, read (static and templated), subscribe and the update notification', async () => {
  const { resources } = await client.listResources()
  assert.ok(resources.length >= 5)
  const first = resources[0]!
  const read = await client.readResource({ uri: first.uri })
  assert.equal(read.contents[0]!.uri, first.uri)
  const { resourceTemplates } = await client.listResourceTemplates()
  assert.ok(resourceTemplates.some(t => t.uriTemplate.startsWith('demo://resource/dynamic/text/')))
  const dynamic = await client.readResource({ uri: 'demo://resource/dynamic/text/1' })
  assert.ok(dynamic.contents.length === 1)

  const updated = new Promise<string>(resolve => client.setNotificationHandler(ResourceUpdatedNotificationSchema, n => resolve(n.params.uri)))
  await client.subscribeResource({ uri: first.uri })
  await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} })
  assert.equal(await withTimeout(updated, 15_000, 'resource update'), first.uri)
  await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} })
  await client.unsubscribeResource({ uri: first.uri })
})

test('completion: argument values are completed by the owning target', async () => {
  const result = await client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } })
  assert.ok(result.completion.values.includes('Engineering'), JSON.stringify(result))
})

test('logging: setLevel reaches the server; its log notifications reach the client', async () => {
  await client.setLoggingLevel('debug')
  const logged = new Promise<unknown>(resolve => client.setNotificationHandler(LoggingMessageNotificationSchema, n => resolve(n.params)))
  await client.callTool({ name: 'toggle-simulated-logging', arguments: {} })
  const message = await withTimeout(logged, 15_000, 'a logging notification')
  assert.ok(message !== undefined)
  await client.callTool({ name: 'toggle-simulated-logging', arguments: {} })
})

test('progress notifications of a long-running call arrive before its result', async () => {
  const progress: number[] = []
  const result = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, {
    onprogress: p => progress.push(p.progress)
  })
  assert.deepEqual(progress, [1, 2, 3])
  assert.match(textOf(result), /completed/i)
})

test('sampling, elicitation and roots: server-to-client requests round-trip through the gateway', async () => {
  const sampled = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello gateway', maxTokens: 5 } })
  assert.match(JSON.stringify(sampled), /HELLO GATEWAY/)
  const elicited = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} })
  assert.match(JSON.stringify(elicited), /Ada/)
  const roots = await client.callTool({ name: 'get-roots-list', arguments: {} })
  assert.match(JSON.stringify(roots), /file:\/\/\/work/)
})

test('ping is answered', async () => {
  assert.deepEqual(await client.ping(), {})
})

test('list_changed notifications reach the client on the session stream', async () => {
  // server-everything announces tool list changes when roots change; send roots/list_changed.
  const changed = new Promise<void>(resolve => client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()))
  await client.sendRootsListChanged()
  // Not every server answers a roots change with a tool change; accept either within the window.
  await Promise.race([changed, new Promise(resolve => setTimeout(resolve, 1000))])
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'after roots' } })), 'Echo: after roots')
})

async function withTimeout<T> (p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms) })
  try {
    return await Promise.race([p, timeout])
  } finally {
    clearTimeout(timer)
  }
}
