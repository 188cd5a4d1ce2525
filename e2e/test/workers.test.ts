/**
 * config.workers > 1 against the real binary (WORKERS=2: two serving event loops, the
 * primary and one data-plane worker thread): what must hold across the loops. The primary
 * serves its share, and there is one worker thread; rate limits admit exactly the configured
 * count whichever loop a request lands on; a reload under load fails no request and every
 * loop ends on the new version; a refused reload changes nothing; a terminated worker fails
 * only its own requests and is restarted (readiness says so meanwhile); a trace tap is taken
 * once, by whichever loop gets the request; /metrics sums the loops (promtool-clean); an MCP
 * session with a stdio target works over many connections with one stdio server, and an MCP
 * request the primary accepts is served there, not handed over; the log level reaches every
 * loop; spans and OTLP access-log records leave through the primary's export threads;
 * SIGTERM drains them all.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http from 'node:http'
import net from 'node:net'
import http2 from 'node:http2'
import { Agent, request } from 'undici'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { h2Status } from '@portico/testkit/client'
import { deferred, sleep, waitUntil, withTimeout } from '@portico/testkit/wait'
import { openTrace } from '@portico/testkit/trace'
import { requireTool } from '@portico/testkit/tools'
import { selfSignedCert } from '@portico/testkit/test-ca'
import { connectClient, everythingTarget, EVERYTHING_SCRIPT, processesUnder, textOf } from '../lib/mcp.ts'

/**
 * Tests that depend on how workers get their connections (spread, ports on reload, a worker
 * ending, drains) run in both modes: SO_REUSEPORT, and the primary accepting and handing
 * connections over (WORKER_ACCEPT=primary, the default where SO_REUSEPORT does not balance).
 */
const ACCEPT_MODES = ['reuseport', 'primary'] as const

/** Each request on a connection of its own, so the kernel spreads them over the workers. */
async function get (url: string, headers: Record<string, string> = {}): Promise<{ status: number, body: string, headers: Record<string, unknown> }> {
  const res = await request(url, { headers: { connection: 'close', ...headers }, reset: true })
  return { status: res.statusCode, body: await res.body.text(), headers: res.headers }
}

/**
 * Which serving loops wrote access-log lines for paths starting with `prefix`: a worker's
 * lines carry `worker: N`, the primary's none (as with one event loop), here 'primary'.
 */
function loopsServing (p: PorticoProcess, prefix: string): Set<unknown> {
  return new Set(p.logs().filter(l => l.msg === 'request' && String(l.path).startsWith(prefix)).map(l => l.worker ?? 'primary'))
}

/** Names of the process's threads (Linux: a worker thread is `portico worker N`). */
function threadNames (pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map(t => readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim())
}

for (const accept of ACCEPT_MODES) describe(`data-plane workers (WORKERS=2, WORKER_ACCEPT=${accept})`, () => {
  const WORKERS = { WORKERS: '2', WORKER_ACCEPT: accept }
  /** A test whose subject does not depend on the accept mode: run once, with SO_REUSEPORT. */
  const once: typeof test = ((...args: Parameters<typeof test>) => accept === 'reuseport' ? test(...args) : undefined) as typeof test
  /** A test of the primary's own round robin (WORKER_ACCEPT=primary), which a test can follow connection by connection. */
  const dealt: typeof test = ((...args: Parameters<typeof test>) => accept === 'primary' ? test(...args) : undefined) as typeof test
  let backend: Backend
  const slowSeen = new Map<string, () => void>()
  const cleanups: Array<() => Promise<unknown>> = []

  before(async () => {
    backend = await startBackend((req, res) => {
      req.resume()
      if (req.url!.startsWith('/slow')) {
        slowSeen.get(req.url!)?.()
        const timer = setTimeout(() => res.end('slow done'), 1500)
        res.on('close', () => clearTimeout(timer))
        return
      }
      res.end('ok')
    })
  })
  after(async () => {
    for (const c of cleanups.reverse()) await c()
    await backend.close()
  })

  async function start (config: (port: number) => unknown, env: Record<string, string> = {}): Promise<PorticoProcess> {
    const p = await startPortico({ env: { ...WORKERS, ...env }, config: config as never })
    cleanups.push(() => p.stop())
    return p
  }

  test('the primary serves its share: two loops serve, one worker thread runs', { timeout: 30_000 }, async () => {
    const adminPort = await freePort()
    const p = await start(port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] }), { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
    for (let i = 0; i < 60 && loopsServing(p, '/share/').size < 2; i += 6) {
      await Promise.all(Array.from({ length: 6 }, (_, j) => get(`${p.url}/share/${i + j}`)))
      await sleep(50)
    }
    await waitUntil(() => loopsServing(p, '/share/').size === 2, 5_000, () => `both loops to serve: ${JSON.stringify([...loopsServing(p, '/share/')])}`)
    assert.deepEqual([...loopsServing(p, '/share/')].sort(), [1, 'primary'], 'the primary and worker 1, nothing else')
    // WORKERS=2 is two isolates: the main thread and one data-plane worker thread.
    if (existsSync(`/proc/${p.child.pid}/task`)) {
      const names = threadNames(p.child.pid!)
      // (comm holds 15 characters: `portico worker ` without its number.)
      assert.equal(names.filter(n => n.startsWith('portico worker')).length, 1, names.join(', '))
    }
    const workers = JSON.parse((await get(`http://127.0.0.1:${adminPort}/debug/workers`)).body) as { workers: number, threads: Array<{ worker: number }> }
    assert.equal(workers.workers, 2, 'config.workers counts serving loops')
    assert.deepEqual(workers.threads.map(t => t.worker), [1], 'one worker thread')
  })

  test('localRateLimit admits exactly maxTokens across both loops', { timeout: 30_000 }, async () => {
    const p = await start(port => ({
      gateways: { default: gateway(port, { policies: { localRateLimit: [{ maxTokens: 60, tokensPerFill: 1, fillInterval: '1h' }] } }) },
      routes: [{ name: 'all', backends: [{ host: backend.host }] }]
    }))
    const results = await Promise.all(Array.from({ length: 240 }, (_, i) => get(`${p.url}/rl/${i}`)))
    const statuses = results.map(r => r.status)
    assert.equal(statuses.filter(s => s === 200).length, 60, 'exactly maxTokens admitted')
    assert.equal(statuses.filter(s => s === 429).length, 180)
    await waitUntil(() => loopsServing(p, '/rl/').size === 2, 5_000, 'both loops (the primary and the worker) to have served requests')
  })

  once('passive health is shared: a failing endpoint is ejected after consecutiveFailures in total, whichever worker saw them', { timeout: 30_000 }, async () => {
    const deadPort = await freePort()
    const adminPort = await freePort()
    const p = await start(port => ({
      gateways: { default: gateway(port) },
      routes: [{ name: 'all', backends: [{ endpoints: [backend.host, `127.0.0.1:${deadPort}`], policies: { health: { consecutiveFailures: 3, ejectionDuration: '1m' } } }] }]
    }), { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
    const results = []
    for (let i = 0; i < 30; i++) results.push(await get(`${p.url}/h/${i}`))
    // Per-loop state would need 3 failures on each loop (6 in all) before both stop sending.
    assert.equal(results.filter(r => r.status !== 200).length, 3, 'exactly consecutiveFailures requests failed')
    await waitUntil(() => loopsServing(p, '/h/').size === 2, 5_000, 'both loops to have served')
    const dump = JSON.parse((await get(`http://127.0.0.1:${adminPort}/config_dump`)).body) as { backends: Array<{ stats: { requests: number, endpoints?: { ejected: string[] } } }> }
    assert.deepEqual(dump.backends[0]!.stats.endpoints?.ejected, [`http://127.0.0.1:${deadPort}`])
    assert.equal(dump.backends[0]!.stats.requests, 30, 'backend stats count every worker\'s calls')
  })

  test('a reload under load fails no request; every worker ends on the new version; a refused reload changes nothing', { timeout: 60_000 }, async () => {
    const config = (version: string, extra: Record<string, unknown> = {}) => (port: number) => ({
      gateways: { default: gateway(port), ...extra },
      routes: [{ name: 'all', policies: { responseHeaderModifier: { set: { 'x-version': version } } }, backends: [{ host: backend.host }] }]
    })
    const adminPort = await freePort()
    const p = await start(config('v0'), { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
    let running = true
    const failures: string[] = []
    let sent = 0
    const loops = Array.from({ length: 8 }, async () => {
      const agent = new Agent({ connections: 1 })
      while (running) {
        try {
          const res = await request(`${p.url}/load`, { dispatcher: agent })
          await res.body.text()
          sent++
          if (res.statusCode !== 200) failures.push(`status ${res.statusCode}`)
        } catch (err) {
          failures.push((err as Error).message)
        }
      }
      await agent.close()
    })
    // Each reload is made under load: once the loops have sent some more requests since the last step.
    const underLoad = async (): Promise<void> => {
      const from = sent
      await waitUntil(() => sent >= from + 16, 10_000, () => `the load to go on (${sent} sent)`)
    }
    for (const v of ['v1', 'v2', 'v3']) {
      await underLoad()
      const before = p.stdout.length
      p.writeConfig(config(v)(p.port))
      await p.waitForOutput('config reloaded', { fromStdout: before, timeoutMs: 10_000 })
    }
    // A config that cannot be put in force (a port taken by another process) is refused everywhere.
    const blocker = await startBackend((_req, res) => res.end())
    cleanups.push(() => blocker.close())
    const before = p.stdout.length
    p.writeConfig(config('v4', { other: gateway(blocker.port) })(p.port))
    await p.waitForOutput('config reload failed', { fromStdout: before, timeoutMs: 10_000 })
    await underLoad()
    running = false
    await Promise.all(loops)
    assert.deepEqual(failures, [], `no request may fail during reloads (${sent} sent)`)
    assert.ok(sent > 50, `load ran (${sent} requests)`)
    // Every worker serves v3, on fresh connections.
    const versions = new Set((await Promise.all(Array.from({ length: 20 }, () => get(`${p.url}/after`)))).map(r => r.headers['x-version']))
    assert.deepEqual([...versions], ['v3'])
    await waitUntil(() => loopsServing(p, '/after').size === 2, 5_000, 'both loops to serve after the reloads')
    const dump = JSON.parse((await get(`http://127.0.0.1:${adminPort}/config_dump`)).body) as { version: { configVersion: string }, binds: unknown[] }
    assert.equal(dump.binds.length, 1, 'the refused config opened nothing')
    const workers = JSON.parse((await get(`http://127.0.0.1:${adminPort}/debug/workers`)).body) as { threads: Array<{ configGeneration: number }> }
    assert.equal(new Set(workers.threads.map(t => t.configGeneration)).size, 1, 'one config generation on every worker')
  })

  test('a terminated worker: only its in-flight requests fail, it is restarted, readiness says so meanwhile', { timeout: 60_000 }, async () => {
    const adminPort = await freePort()
    const readyPort = await freePort()
    const p = await start(port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] }), { ADMIN_ADDR: `127.0.0.1:${adminPort}`, READINESS_ADDR: `127.0.0.1:${readyPort}` })
    const admin = `http://127.0.0.1:${adminPort}`
    // Slow requests on connections of their own until both loops (the primary, 0, and worker 1) hold some.
    const inFlight: Array<{ path: string, result: Promise<number | string> }> = []
    let onWorker = new Map<string, number>()
    for (let i = 0; i < 40; i++) {
      const path = `/slow/${i}`
      const seen = deferred()
      slowSeen.set(path, seen.resolve)
      inFlight.push({ path, result: get(`${p.url}${path}`).then(r => r.status, err => (err as Error).message) })
      await withTimeout(seen.promise, 5_000, `${path} to reach the backend`)
      const tasks = JSON.parse((await get(`${admin}/debug/tasks`)).body) as { requests: Array<{ worker: number, path: string }> }
      onWorker = new Map(tasks.requests.filter(r => r.path.startsWith('/slow/')).map(r => [r.path, r.worker]))
      if (new Set(onWorker.values()).size === 2 && i >= 5) break
    }
    assert.equal(new Set(onWorker.values()).size, 2, `slow requests on both loops: ${JSON.stringify([...onWorker])}`)
    assert.equal((await request(`${admin}/debug/workers/terminate?worker=1`, { method: 'POST' })).statusCode, 200)
    const ready = await request(`http://127.0.0.1:${readyPort}/healthz/ready`)
    const readyBody = await ready.body.text()
    assert.equal(ready.statusCode, 503, readyBody)
    assert.match(readyBody, /workers/)
    const outcomes = await Promise.all(inFlight.map(async r => ({ path: r.path, worker: onWorker.get(r.path), result: await r.result })))
    for (const o of outcomes) {
      if (o.worker === 0) assert.equal(o.result, 200, `${o.path} on the primary must not fail`)
      if (o.worker === 1) assert.notEqual(o.result, 200, `${o.path} on the terminated worker cannot complete`)
    }
    await p.waitForOutput('worker 1 restarted', { timeoutMs: 20_000 })
    await waitUntil(async () => (await request(`http://127.0.0.1:${readyPort}/healthz/ready`).then(async r => { await r.body.text(); return r.statusCode })) === 200, 10_000, 'ready again')
    const after = await Promise.all(Array.from({ length: 20 }, (_, i) => get(`${p.url}/again/${i}`)))
    assert.deepEqual(new Set(after.map(r => r.status)), new Set([200]))
    await waitUntil(() => loopsServing(p, '/again/').size === 2, 5_000, 'the restarted worker to serve too')
    assert.deepEqual([...loopsServing(p, '/again/')].sort(), [1, 'primary'])
  })

  once('a trace is taken once, by whichever loop gets the request; /metrics sums the loops; the log level reaches every loop', { timeout: 60_000 }, async t => {
    const adminPort = await freePort()
    const statsPort = await freePort()
    const p = await start(port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] }), { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}` })
    const admin = `http://127.0.0.1:${adminPort}`
    const tracedBy = new Set<unknown>()
    // Several matching requests at once, over separate connections: only one is traced.
    {
      const trace = await openTrace(admin, 'path=/traced/many/*')
      await trace.ready
      await Promise.all(Array.from({ length: 4 }, (_, i) => get(`${p.url}/traced/many/${i}`)))
      const events = await withTimeout(trace.done, 5_000, 'the trace to end')
      assert.equal(events.filter(e => e.message.type === 'requestStarted').length, 1, 'one request per tap')
    }
    // One request per tap on a fresh connection, which the kernel gives either loop (the
    // primary or the worker): over the rounds, both take taps.
    for (let round = 0; round < 16 && tracedBy.size < 2; round++) {
      const trace = await openTrace(admin, `path=/traced/${round}`)
      await trace.ready
      await get(`${p.url}/traced/${round}`)
      const events = await withTimeout(trace.done, 5_000, 'the trace to end')
      assert.equal(events.filter(e => e.message.type === 'requestStarted').length, 1)
      const path = `/traced/${round}`
      await waitUntil(() => p.logs().some(l => l.msg === 'request' && l.path === path), 5_000, 'the traced request\'s log line')
      tracedBy.add(p.logs().find(l => l.msg === 'request' && l.path === path)!.worker ?? 'primary')
    }
    assert.equal(tracedBy.size, 2, 'taps taken on both loops over the rounds')

    const total = 30
    await Promise.all(Array.from({ length: total }, (_, i) => get(`${p.url}/counted/${i}`)))
    const metrics = (await get(`http://127.0.0.1:${statsPort}/metrics`)).body
    const lines = metrics.split('\n').filter(l => l.startsWith('portico_requests_total{'))
    const sum = lines.reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
    await waitUntil(() => p.logs().filter(l => l.msg === 'request').length >= sum, 5_000, 'every access-log line')
    assert.equal(sum, p.logs().filter(l => l.msg === 'request').length, 'the requests counter sums every loop, each once')
    assert.deepEqual([...loopsServing(p, '/counted/')].sort(), [1, 'primary'], 'both loops counted')
    assert.equal(metrics.split('\n').filter(l => l.startsWith('# TYPE portico_requests_total')).length, 1, 'one series family')
    assert.match(metrics, /^portico_workers 2$/m)
    assert.match(metrics, /^portico_process_cpu_seconds_total \d/m)
    const promtool = requireTool(t, 'PROMTOOL', 'promtool')
    if (promtool !== null) {
      const out = spawnSync(promtool, ['check', 'metrics'], { input: metrics, encoding: 'utf8' })
      assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`)
    }

    assert.equal((await request(`${admin}/logging?level=warn`, { method: 'POST' })).statusCode, 200)
    const before = p.logs().filter(l => l.msg === 'request').length
    await Promise.all(Array.from({ length: 20 }, (_, i) => get(`${p.url}/quiet/${i}`)))
    // What is checked is that no line comes: a fixed time for a worker's line to reach us, as
    // there is no event for its absence.
    await sleep(600)
    assert.equal(p.logs().filter(l => l.msg === 'request').length, before, 'no access-log lines from any loop at warn')
  })

  once('an MCP session with a stdio target works over many connections; one stdio server for the gateway', { timeout: 60_000 }, async () => {
    const adminPort = await freePort()
    const p = await start(port => ({
      gateways: { default: gateway(port) },
      routes: [
        { name: 'mcp', matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [everythingTarget('everything')] } }] },
        { name: 'http', backends: [{ host: backend.host }] }
      ]
    }), { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
    // The stdio target runs once per gateway, on the primary: one warm spare before any session
    // — the workers hand MCP over and start none (they used to: 3 processes for 2 workers).
    const everything = () => processesUnder(p.child.pid!, EVERYTHING_SCRIPT)
    // A fixed time on purpose: what is checked is that no more than one starts (workers that
    // started their own would do so in this time), which no event shows.
    await sleep(1000)
    assert.equal(everything().length, 1, `one stdio process (the primary's spare): ${everything().join(' ')}`)
    // One client per connection: each fresh client's requests land on either worker.
    const { client, transport } = await connectClient(`${p.url}/mcp`)
    const sessionId = (transport as { sessionId?: string }).sessionId
    assert.ok(sessionId !== undefined)
    for (let i = 0; i < 10; i++) {
      const r: Awaited<ReturnType<typeof request>> = await request(`${p.url}/mcp`, {
        method: 'POST',
        reset: true,
        headers: { connection: 'close', accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 100 + i, method: 'tools/call', params: { name: 'echo', arguments: { message: `m${i}` } } })
      })
      const text = await r.body.text()
      assert.equal(r.statusCode, 200, text)
      assert.match(text, new RegExp(`Echo: m${i}`))
    }
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'sdk' } })), 'Echo: sdk')
    await client.close()
    const tasks = JSON.parse((await get(`http://127.0.0.1:${adminPort}/debug/tasks`)).body) as { children: Array<{ purpose: string }> }
    // One stdio server for the session, and at most one warm spare for the next — per
    // gateway, as with one event loop, not per worker.
    const stdio = tasks.children.filter(c => c.purpose.startsWith('mcp stdio target'))
    assert.equal(stdio.filter(c => !c.purpose.includes('(spare)')).length, 1, `one stdio server for the session: ${JSON.stringify(stdio)}`)
    assert.ok(stdio.filter(c => c.purpose.includes('(spare)')).length <= 1, `at most one spare: ${JSON.stringify(stdio)}`)
    // The same counted from /proc: the session's process and the spare that replaced it,
    // nothing else. A process /debug/tasks no longer lists may still be exiting: wait for the
    // two to agree (if they never do, the asserts below say what is left).
    const listed = stdio.map(c => (c as { pid?: number }).pid).sort()
    await waitUntil(() => JSON.stringify(everything().sort()) === JSON.stringify(listed), 5_000, 'the processes to match /debug/tasks', 100).catch(() => {})
    assert.deepEqual(everything().sort(), stdio.map(c => (c as { pid?: number }).pid).sort(), 'the processes that run are those /debug/tasks lists')
    assert.equal(everything().length, 2, `the session's process and one spare: ${everything().join(' ')}`)
    // The plain route next to it is served by both loops, each on its own.
    await Promise.all(Array.from({ length: 10 }, (_, i) => get(`${p.url}/plain/${i}`)))
    await waitUntil(() => loopsServing(p, '/plain/').size === 2, 5_000, 'both loops to serve the plain route')
    assert.ok(p.logs().filter(l => l.msg === 'request' && String(l.path).startsWith('/mcp')).every(l => l.worker === undefined), 'MCP requests are logged by the primary')

    // The hand-over is not a door: a client's copy of the internal headers is dropped (the
    // primary sees the real peer), and the internal socket refuses requests without the token.
    const spoofed = await request(`${p.url}/mcp`, {
      method: 'POST',
      reset: true,
      headers: { connection: 'close', accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'x-portico-client': JSON.stringify({ bind: 'x', remoteAddress: '10.9.9.9', remotePort: 1, localAddress: '10.9.9.9', localPort: 1 }), 'x-portico-handoff': 'guess' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'spoof', version: '1' } } })
    })
    assert.equal(spoofed.statusCode, 200, await spoofed.body.text())
    await waitUntil(() => p.logs().some(l => l.msg === 'request' && l['mcp.method'] === 'initialize' && l.src === '127.0.0.1'), 5_000, 'the initialize logged with the real peer')
    assert.ok(!p.logs().some(l => l.src === '10.9.9.9'), 'the spoofed peer is never believed')
    const name = readFileSync('/proc/net/unix', 'utf8').split('\n').map(l => l.trim().split(/\s+/).at(-1) ?? '').find(n => n.startsWith(`@portico-${p.child.pid}-`))
    assert.ok(name !== undefined, 'the hand-over socket (abstract, Linux)')
    {
      for (const token of [undefined, 'wrong']) {
        const r: Awaited<ReturnType<typeof request>> = await request('http://internal/mcp', {
          method: 'POST',
          dispatcher: new Agent({ connect: { socketPath: '\0' + name.slice(1) } }),
          headers: { 'content-type': 'application/json', 'x-portico-client': JSON.stringify({ bind: p.url.slice(7), remoteAddress: '10.9.9.9', remotePort: 1, localAddress: '127.0.0.1', localPort: 1 }), ...(token !== undefined ? { 'x-portico-handoff': token } : {}) },
          body: '{}'
        })
        await r.body.text()
        assert.equal(r.statusCode, 403, `internal socket with token ${String(token)}`)
      }
    }
  })

  dealt('an MCP request the primary accepts is served there; a worker\'s is handed to it', { timeout: 60_000 }, async () => {
    const p = await start(port => ({
      gateways: { default: gateway(port) },
      routes: [
        { name: 'mcp', matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [everythingTarget('everything')] } }] },
        { name: 'http', backends: [{ host: backend.host }] }
      ]
    }))
    // Connections to the primary's MCP hand-over socket: its listening socket, and one more per
    // connection a worker opened to hand requests over (/proc/net/unix names both ends it accepted).
    const handoffSockets = (): number => readFileSync('/proc/net/unix', 'utf8').split('\n').filter(l => (l.trim().split(/\s+/).at(-1) ?? '').startsWith(`@portico-${p.child.pid}-mcp-`)).length
    const initialize = async (name: string): Promise<void> => {
      const r = await request(`${p.url}/mcp`, {
        method: 'POST',
        reset: true,
        headers: { connection: 'close', accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name, version: '1' } } })
      })
      assert.equal(r.statusCode, 200, await r.body.text())
    }
    assert.equal(handoffSockets(), 1, 'the hand-over socket listens')
    // The primary deals connections round robin over itself and the worker: once a connection
    // went to the worker, the next one is the primary's.
    for (let i = 0; i < 4; i++) {
      await get(`${p.url}/turn/${i}`)
      await waitUntil(() => p.logs().some(l => l.msg === 'request' && l.path === `/turn/${i}`), 5_000, 'the access-log line')
      if (p.logs().find(l => l.msg === 'request' && l.path === `/turn/${i}`)!.worker === 1) break
    }
    assert.ok(p.logs().some(l => l.msg === 'request' && String(l.path).startsWith('/turn/') && l.worker === 1), 'a connection dealt to the worker')
    await initialize('at-primary')
    assert.equal(handoffSockets(), 1, 'the primary served it itself: no hand-over connection')
    // The next connection is the worker's: it hands the request over (the test sees it can tell).
    await initialize('at-worker')
    await waitUntil(() => handoffSockets() >= 2, 5_000, 'the worker\'s hand-over connection')
    const initializes = () => p.logs().filter(l => l.msg === 'request' && l['mcp.method'] === 'initialize')
    await waitUntil(() => initializes().length === 2, 5_000, 'both initializes logged')
    assert.ok(initializes().every(l => l.worker === undefined && l.status === 200), `both logged by the primary: ${JSON.stringify(initializes())}`)
  })

  test('clients keep their addresses; HTTPS (HTTP/1.1 and h2) and TCP binds are served by both loops', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'portico-workers-tls-'))
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
    selfSignedCert(dir, 'localhost', { files: { cert: 'cert.pem', key: 'key.pem' } })
    const echo = net.createServer({ allowHalfOpen: true }, s => s.pipe(s))
    await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise(resolve => echo.close(resolve)))
    const tlsPort = await freePort()
    const tcpPort = await freePort()
    const p = await startPortico({
      dir,
      env: WORKERS,
      config: (port: number) => ({
        gateways: {
          default: gateway(port),
          secure: { port: tlsPort, address: '127.0.0.1', protocol: 'HTTPS', tls: { cert: 'cert.pem', key: 'key.pem' } },
          tcp: { port: tcpPort, address: '127.0.0.1', protocol: 'TCP' }
        },
        routes: [{ name: 'all', gateways: ['default', 'secure'], backends: [{ host: backend.host }] }],
        tcpRoutes: [{ name: 'echo', gateways: 'tcp', backends: [{ host: `127.0.0.1:${(echo.address() as net.AddressInfo).port}` }] }]
      }) as never
    })
    cleanups.push(() => p.stop())
    // New connections until both loops have served each kind (the kernel's spread is a
    // hash of the client's port: a handful of connections may all land on one loop).
    const untilBoth = async (prefix: string, send: (i: number) => Promise<void>): Promise<void> => {
      for (let i = 0; i < 60; i++) {
        await send(i)
        if (i % 6 === 5 && loopsServing(p, prefix).size === 2) return
      }
    }
    await untilBoth('/addr/', async i => assert.equal((await get(`${p.url}/addr/${i}`)).status, 200))
    await untilBoth('/tls1/', async i => {
      // A client of its own each time: a new TLS connection.
      const insecure = new Agent({ connect: { rejectUnauthorized: false } })
      const r = await request(`https://127.0.0.1:${tlsPort}/tls1/${i}`, { dispatcher: insecure })
      assert.equal(r.statusCode, 200, await r.body.text())
      await insecure.close()
    })
    await untilBoth('/h2/', async i => {
      const session = http2.connect(`https://127.0.0.1:${tlsPort}`, { rejectUnauthorized: false })
      try {
        assert.equal(await h2Status(session, `/h2/${i}`), 200)
      } finally {
        session.close()
      }
    })
    for (let i = 0; i < 4; i++) {
      const echoed = await new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = []
        const c = net.connect(tcpPort, '127.0.0.1', () => c.end(`tcp ${i}`))
        c.on('data', d => chunks.push(d))
        c.on('end', () => resolve(Buffer.concat(chunks).toString()))
        c.on('error', reject)
      })
      assert.equal(echoed, `tcp ${i}`)
    }
    for (const prefix of ['/addr/', '/tls1/', '/h2/']) {
      await waitUntil(() => loopsServing(p, prefix).size === 2, 5_000, `both loops to serve ${prefix}: ${JSON.stringify(p.logs().filter(l => String(l.path).startsWith(prefix)).map(l => [l.worker, l.msg, l.status]))}`)
      const lines = p.logs().filter(l => l.msg === 'request' && String(l.path).startsWith(prefix))
      assert.ok(lines.every(l => l.src === '127.0.0.1'), `the client's address on every ${prefix} line: ${JSON.stringify(lines.map(l => l.src))}`)
    }
    if (accept === 'primary') {
      // The workers' intake sockets take nothing without the process's token first.
      const intakes = readFileSync('/proc/net/unix', 'utf8').split('\n').map(l => l.trim().split(/\s+/).at(-1) ?? '').filter((n, i, all) => n.startsWith(`@portico-${p.child.pid}-worker-`) && all.indexOf(n) === i)
      assert.equal(intakes.length, 1, 'an intake socket per worker thread (abstract, Linux); the primary takes its share without one')
      for (const forged of [`${'0'.repeat(64)}{"bind":"127.0.0.1:${p.port}","remoteAddress":"10.9.9.9","remotePort":1,"remoteFamily":"IPv4","localAddress":"127.0.0.1","localPort":1}\nGET /forged HTTP/1.1\r\nhost: x\r\n\r\n`, 'GET /forged HTTP/1.1\r\nhost: x\r\n\r\n']) {
        const answer = await new Promise<string>(resolve => {
          const chunks: Buffer[] = []
          const c = net.connect({ path: '\0' + intakes[0]!.slice(1) }, () => c.write(forged))
          c.on('data', d => chunks.push(d))
          c.on('close', () => resolve(Buffer.concat(chunks).toString()))
          c.on('error', () => {})
        })
        assert.equal(answer, '', 'cut without an answer')
      }
      assert.ok(!p.logs().some(l => l.src === '10.9.9.9' || l.path === '/forged'), 'nothing forged is served')
    }
  })

  once('OpenTelemetry: the workers\' spans and OTLP access-log records leave through the primary\'s export threads, none of their own; /metrics counts them; SIGTERM sends what waits', { timeout: 60_000 }, async () => {
    // An OTLP/HTTP endpoint that takes every export and counts the calls by path.
    const calls = new Map<string, number>()
    const sink = http.createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        calls.set(req.url!, (calls.get(req.url!) ?? 0) + 1)
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
      })
    })
    await new Promise<void>(resolve => sink.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise(resolve => sink.close(resolve)))
    const endpoint = `http://127.0.0.1:${(sink.address() as net.AddressInfo).port}`
    const statsPort = await freePort()
    const p = await start(port => ({
      config: { tracing: { otlpEndpoint: endpoint, otlpProtocol: 'http', randomSampling: true }, accessLog: { otlp: { otlpEndpoint: endpoint, otlpProtocol: 'http' } } },
      gateways: { default: gateway(port) },
      routes: [{ name: 'all', backends: [{ host: backend.host }] }]
    }), { STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info', OTEL_BSP_SCHEDULE_DELAY: '2000', OTEL_BLRP_SCHEDULE_DELAY: '2000' })
    for (let i = 0; i < 20; i++) await get(`${p.url}/otel/${i}`)
    await waitUntil(() => loopsServing(p, '/otel/').size === 2, 5_000, 'both loops to serve')
    const exported = async () => Number(/^portico_tracing_spans_total\{result="exported"\} (\d+)$/m.exec((await get(`http://127.0.0.1:${statsPort}/metrics`)).body)?.[1] ?? 0)
    // Each request's server span and its backend call's span.
    await waitUntil(async () => await exported() === 40, 15_000, 'the 40 spans to be exported and counted once')
    // The access-log records take the same way out on a thread of their own, so they may
    // leave a little after the spans.
    await waitUntil(() => (calls.get('/v1/logs') ?? 0) > 0, 15_000, 'access-log records exported')
    // The export threads are the primary's: one for spans, one for access-log records, and
    // none in a data-plane worker (each started its own two before). Linux names a
    // worker thread `WorkerThread`, and Portico's data-plane workers `portico worker N`.
    if (existsSync(`/proc/${p.child.pid}/task`)) {
      const names = threadNames(p.child.pid!)
      assert.equal(names.filter(n => n.startsWith('portico worker')).length, 1, names.join(', '))
      assert.equal(names.filter(n => n === 'WorkerThread').length, 2, `two export threads: ${names.join(', ')}`)
    }
    // Spans waiting in the workers when SIGTERM comes (they wait up to 2 s for a full batch,
    // OTEL_BSP_SCHEDULE_DELAY) still leave, through the primary.
    const before = calls.get('/v1/traces') ?? 0
    await Promise.all(Array.from({ length: 6 }, (_, i) => get(`${p.url}/otel/late-${i}`)))
    p.signal('SIGTERM')
    assert.equal((await p.waitForExit(15_000)).code, 0, p.output)
    assert.ok((calls.get('/v1/traces') ?? 0) > before, 'the spans of the last requests were exported on the way out')
  })

  test('SIGTERM drains every loop: requests in flight on both finish, exit 0', { timeout: 30_000 }, async () => {
    const adminPort = await freePort()
    const p = await start(port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] }), { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
    const inFlight: Array<Promise<number>> = []
    let workers = new Set<number>()
    for (let i = 0; i < 30 && workers.size < 2; i++) {
      const path = `/slow/drain-${i}`
      const seen = deferred()
      slowSeen.set(path, seen.resolve)
      inFlight.push(get(`${p.url}${path}`).then(r => r.status))
      await withTimeout(seen.promise, 5_000, `${path} to reach the backend`)
      const tasks = JSON.parse((await get(`http://127.0.0.1:${adminPort}/debug/tasks`)).body) as { requests: Array<{ worker: number }> }
      workers = new Set(tasks.requests.map(r => r.worker).filter(w => w !== undefined))
    }
    assert.equal(workers.size, 2, 'requests in flight on both loops (the primary, 0, and worker 1)')
    p.signal('SIGTERM')
    assert.deepEqual(new Set(await Promise.all(inFlight)), new Set([200]))
    const exit = await p.waitForExit(15_000)
    assert.equal(exit.code, 0, p.output)
    assert.equal(p.logs().filter(l => l.msg === 'shutdown complete').length, 2, 'the primary and the worker drained')
  })
})
