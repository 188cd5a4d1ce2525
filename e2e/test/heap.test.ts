/**
 * The data plane's V8 start flags (packages/proxy/src/v8-flags.ts): a gateway started without
 * a semi-space size runs with Portico's (bin/portico.ts starts Node again with it, same pid);
 * one given by the user (NODE_OPTIONS) is left alone. V8's memory reducer stays on unless the
 * user turns it off on Node's command line, which the second start keeps. glibc's malloc settings (src/malloc-tunables.ts) come
 * with that start, unless the user set GLIBC_TUNABLES. And what start-up let go (the config
 * validator) is collected before the gateway idles (src/startup-gc.ts).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PORTICO_BIN, QUIET_ENV, freePort, gateway, runPortico, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { startBackend } from '@portico/testkit/backends'
import { SEMI_SPACE_FLAG, compilationCacheGiven, heapGrowingGiven, inliningGiven, semiSpaceGiven } from '@portico/proxy/v8-flags'
import { MALLOC_TUNABLES, withMallocTunables } from '@portico/proxy/malloc-tunables'
import { MALLOC_TRIM_ADDON_PATH } from '@portico/proxy/malloc-trim'

const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
/** The environment the process was (last) started with: after bin/portico.ts starts Node again, the new one's. */
const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')

test('semiSpaceGiven: the flag in either spelling, in execArgv or NODE_OPTIONS', () => {
  assert.equal(semiSpaceGiven([], undefined), false)
  assert.equal(semiSpaceGiven(['--max-semi-space-size=8'], undefined), true)
  assert.equal(semiSpaceGiven([], '--max_semi_space_size=2 --trace-warnings'), true)
  assert.equal(semiSpaceGiven(['--max-old-space-size=512'], '--max-semi-space-sizes'), false)
})

test('inliningGiven: the user\'s own inlining budget (execArgv or NODE_OPTIONS) is left alone', () => {
  assert.equal(inliningGiven([], undefined), false)
  assert.equal(inliningGiven(['--max-inlined-bytecode-size-cumulative=500'], undefined), true)
  assert.equal(inliningGiven([], '--max_inlined_bytecode_size_cumulative=2000'), true)
  assert.equal(inliningGiven(['--max-inlined-bytecode-size=460'], undefined), false, 'the per-function limit is another flag')
})

test('a gateway started without a semi-space size runs with Portico\'s; the user\'s own wins', async () => {
  const plain = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    assert.ok(argv(plain.child.pid!).includes(SEMI_SPACE_FLAG), argv(plain.child.pid!).join(' '))
  } finally {
    await plain.stop()
  }
  const own = await startPortico({ env: { NODE_OPTIONS: '--max-semi-space-size=2' }, config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    assert.ok(!argv(own.child.pid!).includes(SEMI_SPACE_FLAG), argv(own.child.pid!).join(' '))
  } finally {
    await own.stop()
  }
})

test('V8\'s memory reducer stays on (nothing turns it off); a --no-memory-reducer of the user\'s survives the second start', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-heap-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), `gateways:\n  default: { port: ${port}, protocol: HTTP, address: 127.0.0.1 }\nroutes: []\n`)
  /** The gateway's V8 flags as it runs (from /proc, once it answers), started with `nodeFlags` before the binary. */
  const runningArgv = async (nodeFlags: string[]): Promise<string[]> => {
    const child = spawn(process.execPath, [...nodeFlags, PORTICO_BIN, '-f', join(dir, 'config.yaml')], { env: { ...process.env, ...QUIET_ENV, WORKERS: '1' }, stdio: 'ignore' })
    const exited = new Promise(resolve => child.once('exit', resolve))
    try {
      await waitUntil(() => new Promise<boolean>(resolve => {
        http.get({ port, host: '127.0.0.1', path: '/' }, res => { res.resume(); resolve(true) }).on('error', () => resolve(false))
      }), 20_000, () => 'the gateway answering', 20)
      return argv(child.pid!)
    } finally {
      child.kill('SIGKILL')
      await exited
    }
  }
  // Started bare: Node starts again with the semi-space flag and nothing about the reducer
  // (it ran with --no-memory-reducer until the tick object's maps were held: src/v8-flags.ts).
  const bare = await runningArgv([])
  assert.ok(bare.includes(SEMI_SPACE_FLAG), bare.join(' '))
  assert.ok(!bare.some(a => /^--(no-)?memory[-_]reducer$/.test(a)), `no reducer flag: ${bare.join(' ')}`)
  // The user's own, on Node's command line (NODE_OPTIONS refuses it), is passed on.
  const own = await runningArgv(['--no-memory-reducer'])
  assert.ok(own.includes(SEMI_SPACE_FLAG) && own.includes('--no-memory-reducer'), own.join(' '))
})

test('withMallocTunables: Portico\'s GLIBC_TUNABLES unless the environment has its own', () => {
  assert.equal(withMallocTunables({ PATH: '/bin' }).GLIBC_TUNABLES, MALLOC_TUNABLES)
  assert.equal(withMallocTunables({ GLIBC_TUNABLES: '' }).GLIBC_TUNABLES, MALLOC_TUNABLES)
  assert.equal(withMallocTunables({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }).GLIBC_TUNABLES, 'glibc.malloc.arena_max=2')
  assert.equal(MALLOC_TUNABLES, 'glibc.malloc.mmap_threshold=131072')
})

test('a gateway started bare runs with Portico\'s GLIBC_TUNABLES (set as Node starts again); the user\'s own wins', async () => {
  const plain = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    assert.ok(environ(plain.child.pid!).includes(`GLIBC_TUNABLES=${MALLOC_TUNABLES}`), environ(plain.child.pid!).filter(e => e.startsWith('GLIBC')).join(' '))
  } finally {
    await plain.stop()
  }
  const own = await startPortico({ env: { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }, config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    assert.deepEqual(environ(own.child.pid!).filter(e => e.startsWith('GLIBC_TUNABLES=')), ['GLIBC_TUNABLES=glibc.malloc.arena_max=2'])
  } finally {
    await own.stop()
  }
})

test('compilationCacheGiven: the user\'s own setting either way (execArgv or NODE_OPTIONS) is left alone', () => {
  assert.equal(compilationCacheGiven([], undefined), false)
  assert.equal(compilationCacheGiven(['--compilation-cache'], undefined), true)
  assert.equal(compilationCacheGiven([], '--no_compilation_cache'), true)
  assert.equal(compilationCacheGiven(['--compilation-cache-foo'], undefined), false, 'another flag')
})

test('a gateway lets the config validator go once started: its bytecode (3 MB, in V8\'s large-object space) is collected while it idles', async () => {
  // A warm compile cache first: a module stripped from TypeScript leaves Node's compiler loaded, large objects and all.
  const warm = await runPortico(['--warm-cache'], { timeoutMs: 60_000 })
  assert.equal(warm.code, 0, warm.stdout + warm.stderr)
  const admin = await freePort()
  const plain = await startPortico({ env: { ADMIN_ADDR: `127.0.0.1:${admin}` }, config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    type Space = { space_name: string, space_size: number }
    let spaces: Space[] = []
    const largest = () => Math.max(...spaces.filter(s => /large_object_space$/.test(s.space_name)).map(s => s.space_size))
    // Before the change it stayed: the compilation cache (and Ajv's module tree) held it, and an idle proxy runs no full GC.
    await waitUntil(async () => {
      spaces = ((await (await fetch(`http://127.0.0.1:${admin}/memory`)).json()) as { heapSpaces: Space[] }).heapSpaces
      return largest() < 1024 * 1024
    }, 10_000, () => `large-object spaces under 1 MiB (${spaces.filter(s => /large_object_space$/.test(s.space_name)).map(s => `${s.space_name} ${s.space_size}`).join(', ')})`, 200)
  } finally {
    await plain.stop()
  }
})

test('start-up\'s collection reduces memory: the young generation shrunk and the old compacted, in the primary and in each data-plane worker', async () => {
  // Read from each thread's debug line `start-up collection` (startup-gc.ts), not from the
  // admin server: a first admin request in that second loads the admin app, and a busy
  // second gets the regular collection (by design: the next test).
  const proxy = await startPortico({ env: { WORKERS: '2', LOG_LEVEL: 'debug' }, config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    type Report = { msg: string, worker?: number, collection: string, heapCommittedMiB: number, heapUsedMiB: number, youngGenerationMiB: number, mallocTrim: string }
    const reports = (): Report[] => proxy.stdout.split('\n').filter(l => l.includes('"start-up collection"')).map(l => JSON.parse(l) as Report)
    // WORKERS=2: two serving loops, the primary and one data-plane worker thread.
    await waitUntil(() => reports().length === 2, 15_000, () => `two start-up collection lines (the primary and its worker), got ${reports().length}`, 100)
    const primary = reports().find(r => r.worker === undefined)
    const workers = reports().filter(r => r.worker !== undefined)
    assert.ok(primary !== undefined && workers.length === 1, JSON.stringify(reports()))
    // Before the memory-reducing flavor: the primary's young generation stayed at 8 MiB (two
    // 4 MB semi-spaces), each worker's heap 11 MiB larger than it used; now 1 MiB, and about 1.5.
    for (const r of [primary, ...workers]) {
      assert.equal(r.collection, 'reducing', JSON.stringify(r))
      assert.ok(r.heapCommittedMiB - r.heapUsedMiB < 4, `under 4 MiB of the heap unused: ${JSON.stringify(r)}`)
    }
    assert.ok(primary.youngGenerationMiB <= 1, `the primary's young generation at its smallest: ${JSON.stringify(primary)}`)
    // Then glibc's malloc_trim in each (src/malloc-trim.ts; scripts/setup builds it where there is
    // a C compiler): one process, so whichever thread trims first gives back what both freed.
    if (existsSync(MALLOC_TRIM_ADDON_PATH)) {
      assert.ok([primary, ...workers].every(r => r.mallocTrim === 'released' || r.mallocTrim === 'nothing'), JSON.stringify(reports()))
      assert.ok([primary, ...workers].some(r => r.mallocTrim === 'released'), JSON.stringify(reports()))
    }
  } finally {
    await proxy.stop()
  }
})

test('under load from the moment it answers, start-up\'s collection is not the memory-reducing one (it would cost mark-compacts under load)', async t => {
  const backend = await startBackend((_req, res) => res.end('ok'))
  t.after(() => backend.close())
  const dir = mkdtempSync(join(tmpdir(), 'portico-heap-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), `gateways:\n  default: { port: ${port}, protocol: HTTP, address: 127.0.0.1 }\nroutes:\n  - name: r\n    backends:\n      - host: ${backend.host}\n`)
  // --trace-gc (which NODE_OPTIONS refuses; bin/portico.ts keeps it as Node starts again)
  // names V8's memory-reducing mark-compacts `Mark-Compact (reduce)`. Without the memory
  // reducer, whose own reducing GCs come some seconds into an idle, not under load: only
  // start-up's collection is looked at here.
  const child = spawn(process.execPath, ['--trace-gc', '--no-memory-reducer', PORTICO_BIN, '-f', join(dir, 'config.yaml')], { env: { ...process.env, ...QUIET_ENV, WORKERS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => { output += d })
  child.stderr.setEncoding('utf8').on('data', (d: string) => { output += d })
  const exited = new Promise(resolve => child.once('exit', resolve))
  t.after(async () => { child.kill('SIGKILL'); await exited })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 10 })
  t.after(() => agent.destroy())
  const get = () => new Promise<boolean>(resolve => {
    http.get({ port, host: '127.0.0.1', agent, path: '/' }, res => { res.resume(); res.on('end', () => resolve(res.statusCode === 200)) }).on('error', () => resolve(false))
  })
  await waitUntil(get, 20_000, () => `the gateway answering (${output.slice(-1000)})`, 5)
  // Load from the moment it answers, past the collection a second later.
  const until = Date.now() + 3000
  let answered = 0
  await Promise.all(Array.from({ length: 10 }, async () => { while (Date.now() < until) if (await get()) answered++ }))
  assert.ok(answered > 1000, `${answered} requests in 3 s`)
  assert.doesNotMatch(output, /Mark-Compact \(reduce\)/, 'no memory-reducing collection under load')
  assert.match(output, /Mark-Compact/, 'the regular collection ran: ' + output.slice(-2000))
})

test('heapGrowingGiven: the user\'s own heap growing setting on Node\'s command line is left alone', () => {
  assert.equal(heapGrowingGiven([]), false)
  assert.equal(heapGrowingGiven(['--heap-growing-percent=50']), true)
  assert.equal(heapGrowingGiven(['--heap_growing_percent=0']), true)
  assert.equal(heapGrowingGiven(['--heap-growing-percents']), false, 'another flag')
})
