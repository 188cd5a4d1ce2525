/**
 * MCP session life: stateless mode, the legacy HTTP+SSE transport, a session resumed by a
 * second replica from its id alone, idle expiry, MCP fields in traces/metrics/access logs,
 * and stdio servers reaped on reload and shutdown.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { request } from 'undici'
import { freePort, type PorticoProcess, processAlive, startPortico } from '@portico/testkit/portico'
import { sleep, waitUntil } from '@portico/testkit/wait'
import { openTrace, type TraceRecord } from '@portico/testkit/trace'
import { connectClient, EVERYTHING_SCRIPT, everythingTarget, processesUnder, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'

let sdk: SdkServer
const started: PorticoProcess[] = []

before(async () => {
  sdk = await startSdkServer('sdk')
})

after(async () => {
  for (const p of started) await p.stop()
  await sdk?.close()
})

async function gateway (mcpBackend: Record<string, unknown>, env: Record<string, string> = {}): Promise<PorticoProcess> {
  const p = await startPortico({
    env,
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'mcp', backends: [{ mcp: mcpBackend as never }] }]
    })
  })
  started.push(p)
  return p
}

const ACCEPT = 'application/json, text/event-stream'

async function rawPost (url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(url, { method: 'POST', headers: { accept: ACCEPT, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, json: text === '' ? null : JSON.parse(text) }
}

test('stateless mode: no session id, every POST stands alone, GET and DELETE are 405', async () => {
  const p = await gateway({ targets: [{ name: 'sdk', mcp: { host: sdk.url } }], statefulMode: 'stateless' })
  const url = `${p.url}/mcp`
  const init = await rawPost(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } })
  assert.equal(init.status, 200)
  assert.equal(init.headers['mcp-session-id'], undefined)
  const calls = await Promise.all(Array.from({ length: 5 }, (_, i) => rawPost(url, { jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'add', arguments: { a: i, b: 1 } } })))
  assert.deepEqual(calls.map(c => c.json.result.content[0].text), ['1', '2', '3', '4', '5'])
  for (const method of ['GET', 'DELETE'] as const) {
    const r = await request(url, { method, headers: { accept: 'text/event-stream' } })
    assert.equal(r.statusCode, 405)
    await r.body.text()
  }
  // The official client works too (it simply never gets a session id).
  const { client } = await connectClient(url)
  assert.equal(textOf(await client.callTool({ name: 'add', arguments: { a: 40, b: 2 } })), '42')
  await client.close()
})

test('legacy HTTP+SSE transport: the SDK\'s SSE client works through /sse', async () => {
  const p = await gateway({ targets: [everythingTarget('everything'), { name: 'sdk', mcp: { host: sdk.url } }] })
  const { client } = await connectClient(`${p.url}/sse`, { transport: 'sse' })
  const { tools } = await client.listTools()
  assert.ok(tools.some(t => t.name === 'sdk_add') && tools.some(t => t.name === 'everything_echo'))
  assert.equal(textOf(await client.callTool({ name: 'sdk_sample', arguments: { prompt: 'legacy' } })), 'sampled: LEGACY')
  assert.equal(textOf(await client.callTool({ name: 'everything_echo', arguments: { message: 'old' } })), 'Echo: old')
  await client.close()
})

test('a session id minted by one replica is resumed by another with the same key', async () => {
  const key = randomBytes(32).toString('hex')
  const backend = { targets: [everythingTarget('everything'), { name: 'sdk', mcp: { host: sdk.url } }] }
  const a = await gateway(backend, { SESSION_KEY: key })
  const b = await gateway(backend, { SESSION_KEY: key })
  const c = await gateway(backend, { SESSION_KEY: randomBytes(32).toString('hex') })
  const { client, transport } = await connectClient(`${a.url}/mcp`)
  const sid = (transport as { sessionId?: string }).sessionId!
  const upstreamSessions = sdk.sessions.size

  const onB = await rawPost(`${b.url}/mcp`, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'sdk_add', arguments: { a: 5, b: 6 } } }, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' })
  assert.equal(onB.status, 200, JSON.stringify(onB.json))
  assert.equal(onB.json.result.content[0].text, '11')
  assert.equal(sdk.sessions.size, upstreamSessions, 'B reused the upstream HTTP session instead of opening one')
  const echoB = await rawPost(`${b.url}/mcp`, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'everything_echo', arguments: { message: 'on b' } } }, { 'mcp-session-id': sid })
  assert.equal(echoB.json.result.content[0].text, 'Echo: on b', 'the stdio target was started and initialized on B')

  const onC = await rawPost(`${c.url}/mcp`, { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': sid })
  assert.equal(onC.status, 404, 'a replica with another key cannot read the id')
  await client.close()
})

test('idle sessions expire (404 afterwards)', async () => {
  const p = await gateway({ targets: [{ name: 'sdk', mcp: { host: sdk.url } }] }, { MCP_SESSION_TTL: '1s' })
  const url = `${p.url}/mcp`
  const init = await rawPost(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } })
  const sid = init.headers['mcp-session-id'] as string
  assert.equal((await rawPost(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': sid })).status, 200)
  // The reaper logs the expiry (it runs every second with a 1 s TTL): wait for that instead
  // of a fixed 2.6 s; a request before it would count as activity and keep the session.
  await p.waitForOutput('mcp session expired after being idle', { timeoutMs: 10_000 })
  assert.equal((await rawPost(url, { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': sid })).status, 404)
})

test('the MCP method, target and tool appear in the trace, the access log and metrics', async () => {
  const [adminPort, statsPort] = [await freePort(), await freePort()]
  const p = await gateway({ targets: [everythingTarget('everything'), { name: 'sdk', mcp: { host: sdk.url } }] }, { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}` })
  const { client } = await connectClient(`${p.url}/mcp`)
  // POST only: the client's GET stream may still be on its way (it never ends, so a tap it took would never close).
  // Two taps: a notification the client sends after connecting (answered 202) can still be on
  // its way and take the first (seen with two serving loops, 1 run in 3); the tools/call takes
  // the other. Each tap takes one request; the one that got no request is closed.
  const finalState = (events: TraceRecord[]) => events.find(e => e.message.type === 'requestSnapshot' && e.message.stage === 'final request')?.message.requestState as Record<string, any> | undefined
  const taps = [await openTrace(`http://127.0.0.1:${adminPort}`, 'route=mcp&method=POST'), await openTrace(`http://127.0.0.1:${adminPort}`, 'route=mcp&method=POST')]
  await Promise.all(taps.map(t => t.ready))
  assert.equal(textOf(await client.callTool({ name: 'sdk_add', arguments: { a: 1, b: 2 } })), '3')
  const events = await Promise.any(taps.map(async t => {
    const got = await t.done
    if (finalState(got)?.mcp?.method !== 'tools/call') throw new Error('another request')
    return got
  }))
  for (const t of taps) t.close()
  const state = finalState(events)!
  assert.deepEqual(state.mcp, { method: 'tools/call', target: 'sdk', name: 'sdk_add', kind: 'tool', protocolVersion: '2025-11-25', targetProtocolVersion: '2025-11-25' })
  assert.deepEqual(state.backend, { name: 'mcp', type: 'mcp', protocol: 'mcp' })
  assert.equal(events.find(e => e.message.type === 'backendCallStart')!.message.target, 'sdk')
  assert.equal(events.at(-1)!.message.type, 'requestFinished')

  const metrics = await (await request(`http://127.0.0.1:${statsPort}/metrics`)).body.text()
  assert.match(metrics, /portico_mcp_requests_total\{method="tools\/call",target="sdk",tool="sdk_add",protocol_version="2025-11-25",target_protocol_version="2025-11-25"\} 1/)
  assert.match(metrics, /portico_mcp_requests_total\{method="initialize",target="everything,sdk",tool="",protocol_version="2025-11-25",target_protocol_version=""\} 1/)
  await p.waitForOutput('"mcp.method":"tools/call"') // access logs are written in batches
  const line = p.logs().find(l => l['mcp.method'] === 'tools/call')
  assert.ok(line !== undefined, 'an access-log line for the call')
  assert.equal(line['mcp.target'], 'sdk')
  assert.equal(line['mcp.protocol.version'], '2025-11-25')
  assert.equal(line['mcp.target.protocol.version'], '2025-11-25')
  assert.equal(line['mcp.tool'], 'sdk_add')
  await client.close()
})

test('stdio servers are reaped: when a reload changes the backend, and at shutdown', async () => {
  const p = await gateway({ targets: [everythingTarget('everything')] })
  const { client } = await connectClient(`${p.url}/mcp`)
  await client.callTool({ name: 'echo', arguments: { message: 'x' } })
  const before = descendants(p.child.pid!)
  assert.ok(before.length >= 1, 'a stdio server runs')

  // A reload that changes the target's arguments ends the sessions on the old definition.
  p.writeConfig({
    gateways: { default: { port: p.port, address: '127.0.0.1' } },
    routes: [{ name: 'mcp', backends: [{ mcp: { targets: [{ name: 'everything', stdio: { cmd: process.execPath, args: [everythingTarget().stdio.args[0]!, 'stdio', '--changed'] } }] } }] }]
  })
  await p.waitForOutput('config reloaded')
  await waitUntil(() => before.every(pid => !processAlive(pid)), 8000, () => `old stdio servers ${before.join(',')} still running`, 100)

  // A new session starts a new server; shutdown ends it.
  const again = await connectClient(`${p.url}/mcp`)
  await again.client.listTools()
  const during = descendants(p.child.pid!)
  assert.ok(during.length >= 1)
  const exit = await p.stop(15_000)
  assert.equal(exit.code, 0)
  await waitUntil(() => during.every(pid => !processAlive(pid)), 8000, () => `stdio servers ${during.join(',')} outlived portico`, 100)
  await client.close().catch(() => {})
  await again.client.close().catch(() => {})
})

test('42 quick sessions left without DELETE hold at most maxProcesses stdio processes (8); /debug/tasks lists only the live ones', { timeout: 120_000 }, async () => {
  const adminPort = await freePort()
  const p = await gateway({ targets: [everythingTarget('everything')] }, { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
  const url = `${p.url}/mcp`
  const everything = () => processesUnder(p.child.pid!, EVERYTHING_SCRIPT)
  let most = 0
  let detail = ''
  const watch = setInterval(() => {
    const now = everything()
    if (now.length > most) {
      most = now.length
      if (most > 8) detail = execFileSync('ps', ['-o', 'pid,ppid,pgid,stat,etimes,args', '-p', now.join(',')], { encoding: 'utf8' }) + JSON.stringify(p.logs().filter(l => String(l.msg).startsWith('mcp')).slice(-20).map(l => l.msg))
    }
  }, 20)
  const ids: string[] = []
  try {
    // Clients that initialize, call once and leave (no GET stream, no DELETE), a few at a time.
    for (let i = 0; i < 42; i += 6) {
      await Promise.all(Array.from({ length: Math.min(6, 42 - i) }, async (_, j) => {
        const init = await rawPost(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: `quick-${i + j}`, version: '1' } } })
        // At the cap with every other session still starting, a newcomer may be refused (503): it is a quick client, it tries again.
        if (init.status === 503) {
          assert.equal(init.json.error.code, -32000)
          return
        }
        assert.equal(init.status, 200, JSON.stringify(init.json))
        const sid = init.headers['mcp-session-id'] as string
        ids.push(sid)
        const call = await rawPost(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } }, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' })
        // A session may already have been replaced by a newer one (404): the client would initialize again.
        assert.ok(call.status === 200 || call.status === 404, JSON.stringify(call.json))
      }))
    }
    assert.ok(ids.length >= 36, `most sessions were served (${ids.length} of 42)`)
    await sleep(500)
  } finally {
    clearInterval(watch)
  }
  assert.ok(most <= 8, `at most maxProcesses (8) stdio processes at any time, the spare included; saw ${most}\n${detail}`)
  const listed = async () => ((await (await request(`http://127.0.0.1:${adminPort}/debug/tasks`)).body.json()) as { children: Array<{ pid: number, purpose: string }> }).children.filter(c => c.purpose.startsWith('mcp stdio target')).map(c => c.pid).sort()
  assert.deepEqual(await listed(), everything().sort(), '/debug/tasks lists exactly the stdio processes running')
  // Ending the sessions that are left: the list shrinks to the spare, and so do the processes.
  for (const sid of ids) await request(url, { method: 'DELETE', headers: { 'mcp-session-id': sid } }).then(r => r.body.dump())
  await waitUntil(() => everything().length === 1, 10_000, () => `only the spare left: ${everything().join(' ')}`, 100)
  assert.deepEqual(await listed(), everything(), 'the ended sessions left /debug/tasks')
  assert.equal((await listed()).length, 1)
})

function descendants (pid: number): number[] {
  const rows = execFileSync('ps', ['-eo', 'pid,ppid'], { encoding: 'utf8' }).trim().split('\n').slice(1).map(l => l.trim().split(/\s+/).map(Number))
  const out: number[] = []
  const walk = (parent: number) => {
    for (const [child, ppid] of rows) {
      if (ppid === parent) {
        out.push(child!)
        walk(child!)
      }
    }
  }
  walk(pid)
  return out
}
