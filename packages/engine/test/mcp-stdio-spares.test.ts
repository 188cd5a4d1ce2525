/**
 * Warm spares for stdio targets (mcp/upstream/stdio-spares.ts), with real processes: a session takes
 * a process started ahead of time that has received nothing, gets what it wrote meanwhile
 * (in order), and owns it alone; a replacement is started for the next session; spares of
 * commands that left the config, and all at shutdown, are stopped; a server that exits on
 * its own is not relaunched in a loop; a stateless backend keeps none.
 */

import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfigText } from '../src/index.ts'
import { McpGateway, StdioCapacityError } from '../src/mcp/session/gateway.ts'
import type { BackendIR } from '../src/ir/types.ts'
import { StdioProcessTransport } from '../src/mcp/upstream/stdio.ts'

const dir = mkdtempSync(join(tmpdir(), 'portico-spares-'))
after(() => rmSync(dir, { recursive: true, force: true }))

// Counts its launches in a file; before any input it writes a stderr line and a log
// notification; its initialize answer says how many messages it had received by then.
const SERVER = join(dir, 'server.mjs')
writeFileSync(SERVER, `
import { appendFileSync } from 'node:fs'
appendFileSync(process.argv[2], process.pid + '\\n')
if (process.argv[3] === 'exit') process.exit(3)
process.stderr.write('early stderr ' + process.pid + '\\n')
process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'early ' + process.pid } }) + '\\n')
let seen = 0
let buf = ''
process.stdin.on('data', chunk => {
  buf += chunk
  let i
  while ((i = buf.indexOf('\\n')) >= 0) {
    const msg = JSON.parse(buf.slice(0, i)); buf = buf.slice(i + 1); seen++
    if (msg.method === 'initialize') process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'seen-' + seen, version: String(process.pid) } } }) + '\\n')
  }
})
process.stdin.on('end', () => process.exit(0))
`)

function backends (launches: string, extra: { mode?: string, args?: string[] } = {}): BackendIR[] {
  const args = JSON.stringify([SERVER, launches, ...(extra.args ?? [])])
  const yaml = `gateways: {default: {port: 3000}}\nroutes:\n  - backends:\n      - mcp:\n          ${extra.mode !== undefined ? `statefulMode: ${extra.mode}\n          ` : ''}targets:\n            - {name: t, stdio: {cmd: ${JSON.stringify(process.execPath)}, args: ${args}}}\n`
  const loaded = loadConfigText(yaml, { baseDir: dir })
  assert.ok(loaded.ok, loaded.ok ? '' : JSON.stringify(loaded.diagnostics))
  return loaded.config.ir.backends
}

const launched = (file: string) => existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(l => l !== '').map(Number) : []
const alive = (pid: number) => { try { process.kill(pid, 0); return true } catch { return false } }
async function until (check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise(resolve => setTimeout(resolve, 25))
  assert.ok(check(), what)
}
const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } }

test('a session takes a spare that has seen nothing, gets its early output in order, and a replacement starts', async () => {
  const launches = join(dir, 'a.launches')
  const stderr: string[] = []
  const gateway = new McpGateway({ logger: { debug: (f, m) => { if (m === 'mcp stdio server stderr') stderr.push(String(f.line)) }, info: () => {}, warn: () => {} } })
  try {
    const list = backends(launches)
    gateway.sync(list)
    await until(() => launched(launches).length === 1, 'a spare is launched when the config is applied')
    const spare = launched(launches)[0]!
    assert.deepEqual(gateway.children().map(c => [c.pid, c.target]), [[spare, 't (spare)']])

    const session = await gateway.createSession(list.find(b => b.kind === 'mcp')!, INIT)
    const target = session.targets.get('t')!
    assert.equal(target.pid, spare, 'the session runs on the spare')
    assert.equal(target.initResult?.serverInfo.name, 'seen-1', 'initialize was the first message the process ever got')
    assert.deepEqual(stderr, [`early stderr ${spare}`], 'what it wrote before being taken reached the session')

    await until(() => launched(launches).length === 2, 'a replacement is launched')
    const replacement = launched(launches)[1]!
    await until(() => gateway.children().some(c => c.pid === replacement && c.target === 't (spare)'), 'the replacement is listed as a spare')
    const second = await gateway.createSession(list.find(b => b.kind === 'mcp')!, INIT)
    assert.equal(second.targets.get('t')!.pid, replacement)
    assert.notEqual(replacement, spare, 'one process per session')

    // Ending a session ends its process; the spare the config wants stays until the config drops it.
    await gateway.deleteSession(session)
    await until(() => !alive(spare!), 'the first session\'s process ended with it')
    await until(() => launched(launches).length === 3, 'the spare the second session\'s take started')
    const third = launched(launches)[2]!
    gateway.sync([])
    await until(() => !alive(third), 'a config without the target stops its spare')
    assert.equal(gateway.children().filter(c => c.target.endsWith('(spare)')).length, 0)
    await gateway.deleteSession(second)
  } finally {
    await gateway.close()
  }
  for (const pid of launched(launches)) assert.equal(alive(pid), false, `process ${pid} stopped`)
})

test('shutdown stops the spares', async () => {
  const launches = join(dir, 'b.launches')
  const gateway = new McpGateway()
  gateway.sync(backends(launches))
  await until(() => launched(launches).length === 1 && gateway.children().length === 1, 'a spare')
  await gateway.close()
  await until(() => !alive(launched(launches)[0]!), 'the spare stopped at shutdown')
})

test('a server that exits on its own is not relaunched in a loop; the session launches its own and reports it', async () => {
  const launches = join(dir, 'c.launches')
  const warnings: string[] = []
  const gateway = new McpGateway({ logger: { debug: () => {}, info: () => {}, warn: (_f, m) => warnings.push(m) } })
  try {
    const list = backends(launches, { args: ['exit'] })
    gateway.sync(list)
    await until(() => launched(launches).length === 1, 'a spare')
    await new Promise(resolve => setTimeout(resolve, 500))
    assert.equal(launched(launches).length, 1, 'not relaunched after it exited')
    assert.equal(gateway.children().length, 0)
    await assert.rejects(gateway.createSession(list.find(b => b.kind === 'mcp')!, INIT), /target "t" failed to start/)
  } finally {
    await gateway.close()
  }
})

test('a stateless backend keeps no spare', async () => {
  const launches = join(dir, 'd.launches')
  const gateway = new McpGateway()
  try {
    gateway.sync(backends(launches, { mode: 'stateless' }))
    await new Promise(resolve => setTimeout(resolve, 300))
    assert.deepEqual(launched(launches), [])
  } finally {
    await gateway.close()
  }
})

test('the transport keeps what a spare writes before anyone listens, and hands it over before anything newer', async () => {
  const launches = join(dir, 'e.launches')
  const transport = new StdioProcessTransport({ cmd: process.execPath, args: [SERVER, launches], env: {}, maxLineBytes: 1 << 20 })
  try {
    await transport.start()
    await until(() => launched(launches).length === 1, 'launched')
    // Both early lines (stdout and stderr) are held by the transport, no one listening yet.
    await until(() => (transport as unknown as { early: unknown[] }).early.length === 2, 'the early lines held')
    const got: string[] = []
    transport.onmessage = m => got.push('method' in m ? m.method : `answer ${String((m as { id: unknown }).id)}`)
    transport.onstderr = line => got.push(`stderr: ${line.split(' ')[0]}`)
    await transport.start()
    // Handed over at once (stdout and stderr are two pipes: no order between them).
    assert.deepEqual([...got].sort(), ['notifications/message', 'stderr: early'])
    await transport.send({ jsonrpc: '2.0', id: 7, method: 'initialize', params: INIT })
    await until(() => got.length === 3, 'the answer')
    assert.equal(got[2], 'answer 7')
  } finally {
    await transport.close()
  }
})

test('a gateway that serves no sessions (a data-plane worker: spares: false) starts no spare', async () => {
  const launches = join(dir, 'f.launches')
  const gateway = new McpGateway({ spares: false })
  try {
    gateway.sync(backends(launches))
    await new Promise(resolve => setTimeout(resolve, 300))
    assert.deepEqual(launched(launches), [])
    assert.deepEqual(gateway.children(), [])
  } finally {
    await gateway.close()
  }
})

test('children lists only stdio servers still running: an ended session\'s process leaves the list', async () => {
  const launches = join(dir, 'g.launches')
  const gateway = new McpGateway()
  try {
    const list = backends(launches)
    gateway.sync(list)
    const backend = list.find(b => b.kind === 'mcp')!
    const a = await gateway.createSession(backend, INIT)
    const b = await gateway.createSession(backend, INIT)
    const [pa, pb] = [a.targets.get('t')!.pid!, b.targets.get('t')!.pid!]
    const sessionPids = () => gateway.children().filter(c => c.target === 't').map(c => c.pid).sort()
    assert.deepEqual(sessionPids(), [pa, pb].sort())
    await gateway.deleteSession(a)
    await until(() => !alive(pa), 'the ended session\'s process exited')
    assert.deepEqual(sessionPids(), [pb], 'the exited process is no longer listed')
    await gateway.deleteSession(b)
    await until(() => !alive(pb), 'exited')
    assert.deepEqual(sessionPids(), [])
  } finally {
    await gateway.close()
  }
})

test('a pid the kernel reuses is never shown as a stdio server, and a late exit report removes only its own process', () => {
  const gateway = new McpGateway({ spares: false })
  try {
    // Fake transports: the gateway knows a process by its transport, whose pid is gone once it exited.
    const hooks = (gateway as unknown as { hooks (b: BackendIR): { onProcess (t: string, p: StdioProcessTransport, running: boolean): void } }).hooks(backends(join(dir, 'h.launches')).find(b => b.kind === 'mcp')!)
    const first = { pid: 4242 as number | undefined } as StdioProcessTransport
    hooks.onProcess('t', first, true)
    assert.deepEqual(gateway.children().map(c => c.pid), [4242])
    // It exits; the kernel hands 4242 to some other process before (or without) the exit being reported.
    ;(first as { pid: number | undefined }).pid = undefined
    assert.deepEqual(gateway.children(), [], 'an exited server is not listed, whoever has its pid now')
    // Another session's server gets the same pid; the first one's exit is reported after that.
    const second = { pid: 4242 as number | undefined } as StdioProcessTransport
    hooks.onProcess('t', second, true)
    hooks.onProcess('t', first, false)
    assert.deepEqual(gateway.children().map(c => c.pid), [4242], 'the late report of the first exit leaves the second server listed')
    hooks.onProcess('t', second, false)
    assert.deepEqual(gateway.children(), [])
  } finally {
    void gateway.close()
  }
})

test('maxProcesses bounds a target\'s processes, the spare included: an abandoned-looking session makes room, connected ones are never cut (503 instead); idle ones go after stdioSessionIdleTimeout', async () => {
  const launches = join(dir, 'i.launches')
  const yaml = `gateways: {default: {port: 3000}}\nroutes:\n  - backends:\n      - mcp:\n          stdioSessionIdleTimeout: 1500ms\n          targets:\n            - {name: t, stdio: {cmd: ${JSON.stringify(process.execPath)}, args: ${JSON.stringify([SERVER, launches])}, maxProcesses: 3}}\n`
  const loaded = loadConfigText(yaml, { baseDir: dir })
  assert.ok(loaded.ok, loaded.ok ? '' : JSON.stringify(loaded.diagnostics))
  const list = loaded.config.ir.backends
  const backend = list.find(b => b.kind === 'mcp')!
  const running = () => launched(launches).filter(alive)
  const gateway = new McpGateway()
  let most = 0
  const watch = setInterval(() => { most = Math.max(most, running().length) }, 5)
  try {
    gateway.sync(list)
    const sessions = []
    // Clients that initialize and leave without DELETE (no GET stream): each new one past the cap replaces the oldest.
    for (let i = 0; i < 6; i++) sessions.push(await gateway.createSession(backend, INIT))
    await until(() => running().length === 3, 'three processes')
    assert.equal(gateway.sessionCount, 3, 'three sessions live')
    assert.ok(most <= 3, `at most maxProcesses processes at any time, spare included (saw ${most})`)
    // The three live ones get a connected GET stream: clients in use. A new session finds no one to replace.
    const live = sessions.slice(3)
    for (const s of live) s.stream.connect({ open: true, event: () => {}, end: () => {} } as never)
    await assert.rejects(gateway.createSession(backend, INIT), StdioCapacityError)
    assert.equal(gateway.sessionCount, 3, 'no connected session was cut')
    // Their clients go away (GET streams close): past stdioSessionIdleTimeout they are closed, well before the TTL.
    for (const s of live) s.stream.disconnect((s.stream as unknown as { writer: never }).writer)
    await until(() => gateway.sessionCount === 0, 'idle sessions with stdio processes closed')
    await until(() => running().length === 1, 'only the spare is left running')
    assert.ok(most <= 3, `never more than maxProcesses (saw ${most})`)
  } finally {
    clearInterval(watch)
    await gateway.close()
  }
})
