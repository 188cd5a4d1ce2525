/**
 * Two targets behind one endpoint: server-everything over stdio and a streamable-HTTP server
 * built with the SDK. Prefixed names, routing to the owner, mapped resource URIs, merged
 * capabilities, pagination across targets, sampling/elicitation/roots/progress/logging and
 * cancellation through the right session, and a target killed mid-session.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { connectClient, everythingTarget, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'

let portico: PorticoProcess
let sdk: SdkServer
let client: Client
let url: string

before(async () => {
  sdk = await startSdkServer('sdk')
  portico = await startPortico({
    env: { LOG_LEVEL: 'info,mcp=debug' },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'mux', backends: [{ mcp: { targets: [everythingTarget('everything'), { name: 'sdk', mcp: { host: sdk.url } }] } }] }]
    })
  })
  url = `${portico.url}/mcp`
  client = (await connectClient(url)).client
})

after(async () => {
  await client?.close().catch(() => {})
  await portico?.stop()
  await sdk?.close()
})

test('initialize merges capabilities and names the gateway as the server', async () => {
  assert.equal(client.getServerVersion()?.name, 'portico')
  const caps = client.getServerCapabilities()!
  assert.equal(caps.resources?.subscribe, true)
  assert.equal(caps.tools?.listChanged, true)
  assert.ok(caps.logging && caps.prompts && caps.completions, JSON.stringify(caps))
  assert.match(client.getInstructions() ?? '', /\[sdk\] The sdk test server\./)
})

test('capabilities only advertise what the gateway serves across targets (everything offers tasks)', async () => {
  const caps = client.getServerCapabilities()! as Record<string, unknown>
  assert.equal(caps.tasks, undefined, JSON.stringify(caps))
  assert.equal(caps.experimental, undefined)
})

test('resource links and embedded resources in tool results get the target prefix and read back', async () => {
  const links = await client.callTool({ name: 'everything_get-resource-links', arguments: { count: 2 } })
  const linkUris = (links.content as Array<{ type: string, uri?: string }>).filter(c => c.type === 'resource_link').map(c => c.uri!)
  assert.equal(linkUris.length, 2, JSON.stringify(links.content))
  for (const uri of linkUris) {
    assert.match(uri, /^everything\+/)
    const read = await client.readResource({ uri })
    assert.equal(read.contents[0]?.uri, uri, 'read back through the gateway, by the prefixed URI')
  }
  const ref = await client.callTool({ name: 'everything_get-resource-reference', arguments: { resourceType: 'Text', resourceId: 1 } })
  const embedded = (ref.content as Array<{ type: string, resource?: { uri: string } }>).find(c => c.type === 'resource')
  assert.match(embedded?.resource?.uri ?? '', /^everything\+/, JSON.stringify(ref.content))
  assert.equal((await client.readResource({ uri: embedded!.resource!.uri })).contents[0]?.uri, embedded!.resource!.uri)
})

test('tools of both targets are listed with <target>_ prefixes, across every page', async () => {
  const names: string[] = []
  let cursor: string | undefined
  let pages = 0
  do {
    const page = await client.listTools(cursor !== undefined ? { cursor } : undefined)
    names.push(...page.tools.map(t => t.name))
    cursor = page.nextCursor
    pages++
  } while (cursor !== undefined && pages < 10)
  assert.ok(pages >= 4, `the SDK server pages its 36 tools by 10 (got ${pages} pages)`)
  assert.ok(names.includes('everything_echo') && names.includes('sdk_add') && names.includes('sdk_item-29'))
  assert.equal(names.filter(n => n.startsWith('sdk_')).length, 36)
  assert.equal(new Set(names).size, names.length, 'no duplicates across pages')
  assert.ok(names.every(n => n.startsWith('everything_') || n.startsWith('sdk_')))
})

test('calls reach the owning target with the prefix stripped', async () => {
  assert.equal(textOf(await client.callTool({ name: 'sdk_add', arguments: { a: 20, b: 22 } })), '42')
  assert.equal(textOf(await client.callTool({ name: 'everything_echo', arguments: { message: 'mux' } })), 'Echo: mux')
  const unknown = await client.callTool({ name: 'nobody_echo', arguments: {} }).catch((err: Error) => err)
  assert.ok(unknown instanceof Error)
  assert.match(unknown.message, /Unknown tool: nobody_echo/)
})

test('prompts and resources: prefixed names, <target>+ URIs, read and subscribe find their target', async () => {
  const { prompts } = await client.listPrompts()
  assert.ok(prompts.some(p => p.name === 'sdk_greet') && prompts.some(p => p.name === 'everything_simple-prompt'))
  const greet = await client.getPrompt({ name: 'sdk_greet', arguments: { who: 'Ada' } })
  assert.match(JSON.stringify(greet.messages), /Hello Ada from sdk/)

  const { resources } = await client.listResources()
  assert.ok(resources.some(r => r.uri === 'sdk+memo://one'))
  assert.ok(resources.some(r => r.uri.startsWith('everything+demo://')))
  const read = await client.readResource({ uri: 'sdk+memo://two' })
  assert.equal(read.contents[0]!.uri, 'sdk+memo://two')
  assert.equal((read.contents[0] as { text: string }).text, 'content of memo://two')
  const templates = await client.listResourceTemplates()
  assert.ok(templates.resourceTemplates.some(t => t.uriTemplate.startsWith('everything+demo://resource/dynamic/')))

  const updated = new Promise<string>(resolve => client.setNotificationHandler(ResourceUpdatedNotificationSchema, n => resolve(n.params.uri)))
  await client.subscribeResource({ uri: 'sdk+memo://one' })
  assert.equal(await updated, 'sdk+memo://one', 'the update names the resource as the client knows it')
})

test('sampling, elicitation and roots requests from an HTTP target come back through the gateway', async () => {
  assert.equal(textOf(await client.callTool({ name: 'sdk_sample', arguments: { prompt: 'ping' } })), 'sampled: PING')
  assert.equal(textOf(await client.callTool({ name: 'sdk_elicit', arguments: {} })), 'elicited: accept {"name":"Ada"}')
  assert.equal(textOf(await client.callTool({ name: 'sdk_roots', arguments: {} })), 'roots: file:///work')
})

test('progress and logging notifications reach the client during the call', async () => {
  const progress: number[] = []
  const result = await client.callTool({ name: 'sdk_slow', arguments: { steps: 3, delayMs: 30 } }, undefined, { onprogress: p => progress.push(p.progress) })
  assert.equal(textOf(result), 'done after 3 steps')
  assert.deepEqual(progress, [1, 2, 3])
  // Other log messages may come first (the everything server logs the roots the test before
  // sent it, whenever it gets to them): wait for this call's own.
  const seen: unknown[] = []
  const logged = new Promise<void>(resolve => client.setNotificationHandler(LoggingMessageNotificationSchema, n => {
    seen.push(n.params.data)
    if (n.params.data === 'through the gateway') resolve()
  }))
  await client.callTool({ name: 'sdk_log', arguments: { text: 'through the gateway' } })
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no such log message within 5 s; got ${JSON.stringify(seen)}`)), 5000) })
  await Promise.race([logged, late]).finally(() => clearTimeout(timer))
})

test('cancellation reaches the target', async () => {
  const controller = new AbortController()
  const call = client.callTool({ name: 'sdk_slow', arguments: { steps: 20, delayMs: 50 } }, undefined, { signal: controller.signal })
  setTimeout(() => controller.abort('enough'), 150)
  await assert.rejects(call)
  const deadline = Date.now() + 3000
  while (sdk.cancelled.length === 0 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 50))
  assert.equal(sdk.cancelled.length, 1, 'the SDK server saw notifications/cancelled')
  assert.equal(textOf(await client.callTool({ name: 'sdk_add', arguments: { a: 1, b: 1 } })), '2')
})

test('a target killed mid-session: calls to it fail naming it, the other keeps working, it comes back', async () => {
  const pids = stdioPids()
  assert.ok(pids.length >= 1, 'the stdio target runs as a child of portico')
  for (const pid of pids) process.kill(pid, 'SIGKILL')
  // Right after the kill, a call to the dead target fails with an error naming it (or, if the
  // restart already happened, succeeds); the other target is unaffected either way.
  const during = await client.callTool({ name: 'everything_echo', arguments: { message: 'x' } }).then(r => textOf(r), (err: Error) => err.message)
  assert.ok(during === 'Echo: x' || /everything/.test(during), during)
  assert.equal(textOf(await client.callTool({ name: 'sdk_add', arguments: { a: 2, b: 2 } })), '4')
  // Restarted with backoff and re-initialized: it answers again.
  let text = ''
  const deadline = Date.now() + 15_000
  while (Date.now() < deadline) {
    text = await client.callTool({ name: 'everything_echo', arguments: { message: 'back' } }).then(r => textOf(r), (err: Error) => err.message)
    if (text === 'Echo: back') break
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  assert.equal(text, 'Echo: back')
  await portico.waitForOutput('mcp target down; restarting')
})

/** PIDs of the stdio servers portico started (its child process groups). */
function stdioPids (): number[] {
  const out = execFileSync('ps', ['-eo', 'pid,ppid,args'], { encoding: 'utf8' })
  return out.split('\n').flatMap(line => {
    const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line)
    return m !== null && Number(m[2]) === portico.child.pid && m[3]!.includes('server-everything') ? [Number(m[1])] : []
  })
}
