/**
 * What one data-plane worker thread costs in private memory, and where it goes (issue 54:
 * ≤ +15 MB private per extra worker). From one run:
 *
 * 1. Bare Node processes with 0, 1 and 2 worker threads that load only `node:http` and
 *    `node:net` and then run the same memory-reducing collection as Portico's workers: what a
 *    worker thread costs before it runs any of Portico.
 * 2. Portico on a config of plain routes (the quick start without its MCP route) with WORKERS=1
 *    (one event loop) and WORKERS=2 (two loops: the primary and one worker thread), idle and under
 *    `--connections` keep-alive connections: private memory (/proc/PID/smaps_rollup
 *    Private_Clean + Private_Dirty), and the private pages of /proc/PID/smaps by kind of
 *    mapping — glibc's main `[heap]`, the threads' malloc arenas (64 MiB reservations),
 *    thread stacks (a mapping after a guard page), V8's pages and the rest — so the part a worker
 *    adds is named by kind.
 * 3. Inside each worker (bench/lib/worker-probe.ts, preloaded): V8's heap spaces just before and
 *    after its start-up collection, and a heap snapshot of the idle worker summed by what holds
 *    memory (bench/lib/heap-snapshot.ts).
 *
 * Usage: node bench/worker-memory.ts [--runs 3] [--idle 3] [--load 5] [--connections 50] [--snapshot 1] [--after-idle 0]
 */

import { spawn } from 'node:child_process'
import { closeSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, scratchDir, urlAnswers as answers } from './lib/children.ts'
import { checkoutBin } from './lib/servers.ts'
import { MEMORY_PHASE_OPTIONS, readOptions } from './lib/options.ts'
import { fmt, median, table } from './lib/report.ts'
import { heapComposition } from './lib/heap-snapshot.ts'
import type { ProbeReport } from './lib/worker-probe.ts'

const opts = readOptions({
  runs: { flag: 'runs', default: 3, help: 'starts per configuration (medians are reported)' },
  ...MEMORY_PHASE_OPTIONS,
  snapshot: { flag: 'snapshot', default: 1, help: '1: one more WORKERS=2 start that writes a heap snapshot of each idle worker and sums it' },
  afterIdle: { flag: 'after-idle', default: 0, help: 'seconds idle after the load before reading memory again (V8\'s memory reducer, the idle malloc trim: 25 covers both; 0: not read)' }
})

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))
const ROOT = here('..')
const BIN = checkoutBin(ROOT)
const BACKEND = here('servers/backend.ts')
const PROBE = here('lib/worker-probe.ts')
const KiB = 1024
const MiB = 1024 * 1024

/** Private pages of a process's mappings, by kind, KiB. */
type Kinds = Record<string, number>

/**
 * /proc/PID/smaps summed by kind of mapping (private pages, KiB). A glibc arena of a thread is
 * a 64 MiB-aligned reservation of 64 MiB (its used part read-write, the rest `---p`); a thread
 * stack is a read-write mapping right after a `---p` guard page; V8 takes its pages with mmap
 * at 256 KiB (regular pages) or more (large objects, code); anything else anonymous is "other".
 */
function mappings (pid: number): Kinds {
  const text = readFileSync(`/proc/${pid}/smaps`, 'utf8')
  const out: Kinds = {}
  const add = (kind: string, kb: number) => { out[kind] = (out[kind] ?? 0) + kb }
  let prev: { end: bigint, perms: string, size: bigint } | null = null
  let arenaEnd = -1n
  for (const block of text.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+[ \t]*(.*)$/m.exec(block)
    if (head === null) continue
    const start = BigInt('0x' + head[1]!)
    const end = BigInt('0x' + head[2]!)
    const perms = head[3]!
    const path = head[4]!.trim()
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(block)?.[1] ?? 0)
    const priv = kb('Private_Clean') + kb('Private_Dirty')
    const size = end - start
    const ARENA = 64n * BigInt(MiB)
    let kind: string
    if (path === '[heap]') kind = 'glibc main heap ([heap])'
    else if (path === '[stack]') kind = 'main thread stack'
    else if (path.startsWith('/')) kind = path.includes('/node') && !path.endsWith('.so') && !path.includes('.so.') ? 'node binary (file)' : 'other files'
    else if (path !== '') kind = `other ${path}`
    else if (start % ARENA === 0n && perms.startsWith('rw')) { kind = 'thread malloc arenas'; arenaEnd = start + ARENA }
    else if (start < arenaEnd) kind = 'thread malloc arenas'
    else if (perms.startsWith('rw') && prev !== null && prev.end === start && prev.perms.startsWith('---') && prev.size <= 64n * BigInt(KiB) && size >= BigInt(MiB) && size <= 16n * BigInt(MiB)) kind = 'thread stacks'
    else if (perms.includes('x')) kind = 'anonymous executable (V8 code)'
    else kind = 'anonymous (V8 pages, other)'
    add(kind, priv)
    prev = { end, perms, size }
  }
  return out
}

function privateMiB (pid: number): number {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  const kb = (f: string) => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0)
  return (kb('Private_Clean') + kb('Private_Dirty')) / KiB
}

async function stop (proc: ReturnType<typeof spawn>): Promise<void> {
  await new Promise<void>(resolve => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve()
    const kill = setTimeout(() => proc.kill('SIGKILL'), 5000)
    proc.once('exit', () => { clearTimeout(kill); resolve() })
    proc.kill('SIGTERM')
  })
}

/** A bare Node process with `n` worker threads loading node:http and node:net, then collecting as Portico's workers do. */
const BARE = `
const { Worker } = require('node:worker_threads')
const n = Number(process.argv[1])
const body = "require('node:http'); require('node:net'); setTimeout(() => { const w = process.emitWarning; process.emitWarning = () => {}; require('node:v8').queryObjects(class X {}, { format: 'count' }); process.emitWarning = w; const h = require('node:v8').getHeapStatistics(); require('node:worker_threads').parentPort.postMessage({ committed: h.total_heap_size, used: h.used_heap_size }) }, 300); setInterval(() => {}, 1e6)"
require('node:http'); require('node:net')
let left = n
const heaps = []
const done = heap => { if (heap !== undefined) heaps.push(heap); if (--left <= 0) process.stdout.write('ready ' + JSON.stringify(heaps) + '\\n') }
if (n === 0) done(undefined)
for (let i = 0; i < n; i++) new Worker(body, { eval: true, resourceLimits: { maxYoungGenerationSizeMb: 12 } }).on('message', done)
setInterval(() => {}, 1e6)
`

interface BareRun { private: number, kinds: Kinds, heaps: Array<{ committed: number, used: number }> }

async function bare (threads: number): Promise<BareRun> {
  const proc = spawn(process.execPath, ['--max-semi-space-size=4', '--no-memory-reducer', '-e', BARE, String(threads)], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    let heaps: BareRun['heaps'] = []
    await new Promise<void>((resolve, reject) => {
      proc.stdout!.on('data', (d: Buffer) => {
        const m = /ready (.*)/.exec(d.toString())
        if (m !== null) { heaps = JSON.parse(m[1]!) as BareRun['heaps']; resolve() }
      })
      proc.once('exit', code => reject(new Error(`bare node exited (${code})`)))
    })
    await sleep(1000)
    return { private: privateMiB(proc.pid!), kinds: mappings(proc.pid!), heaps }
  } finally {
    await stop(proc)
  }
}

function config (backendPort: number, port: number): string {
  const text = readFileSync(join(ROOT, 'examples/quickstart.yaml'), 'utf8')
    .replace('port: 3000', `port: ${port}`)
    .replace('host: 127.0.0.1:8080', `host: 127.0.0.1:${backendPort}`)
    .replace(/\n  - name: mcp\n[\s\S]*?(?=\n  - name: )/, '')
  const path = join(scratchDir('worker-memory'), 'plain.yaml')
  writeFileSync(path, text)
  return path
}

async function keepAliveLoad (url: string, connections: number, seconds: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  const deadline = performance.now() + seconds * 1000
  const one = () => new Promise<void>(resolve => {
    const req = http.get(url, { agent }, res => { res.resume(); res.on('end', resolve); res.on('error', () => resolve()) })
    req.on('error', () => resolve())
  })
  await Promise.all(Array.from({ length: connections }, async () => { while (performance.now() < deadline) await one() }))
}

interface PorticoRun { idle: number, idleKinds: Kinds, loaded: number, loadedKinds: Kinds, afterIdle: number, afterIdleKinds: Kinds, probes: ProbeReport[] }

async function portico (workers: number, backendPort: number, snapshot: boolean): Promise<PorticoRun> {
  const port = await freePort()
  const probeDir = scratchDir('probe')
  const logPath = join(scratchDir('log'), 'out.log')
  writeFileSync(logPath, '')
  const fd = openSync(logPath, 'a')
  const admin = `127.0.0.1:${await freePort()}`
  const proc = spawn(process.execPath, ['--import', PROBE, BIN, '-f', config(backendPort, port)], {
    env: { ...process.env, WORKERS: String(workers), ADMIN_ADDR: admin, STATS_ADDR: `127.0.0.1:${await freePort()}`, READINESS_ADDR: `127.0.0.1:${await freePort()}`, LOG_FORMAT: 'json', WORKER_PROBE_DIR: probeDir, WORKER_PROBE_SNAPSHOT: snapshot ? '1' : '0' },
    stdio: ['ignore', fd, fd]
  })
  closeSync(fd)
  try {
    const deadline = performance.now() + 30_000
    while (!(await answers(`http://127.0.0.1:${port}/hello`))) {
      if (proc.exitCode !== null || performance.now() > deadline) throw new Error(`portico WORKERS=${workers} did not start:\n${readFileSync(logPath, 'utf8').slice(-2000)}`)
      await sleep(10)
    }
    await sleep(opts.idle * 1000)
    // WORKERS=N serves on N loops: the primary and N − 1 worker threads, each with a probe.
    const expected = workers - 1
    while (readdirSync(probeDir).filter(f => f.endsWith('.json')).length < expected || (snapshot && readdirSync(probeDir).filter(f => f.endsWith('.json')).some(f => (JSON.parse(readFileSync(join(probeDir, f), 'utf8')) as ProbeReport).snapshot === null))) {
      if (performance.now() > deadline + 30_000) throw new Error('the worker probes wrote nothing')
      await sleep(100)
    }
    const pid = proc.pid!
    const idle = privateMiB(pid)
    const idleKinds = mappings(pid)
    let loaded = NaN
    let loadedKinds: Kinds = {}
    if (opts.load > 0 && !snapshot) {
      await keepAliveLoad(`http://127.0.0.1:${port}/anything`, opts.connections, opts.load)
      loaded = privateMiB(pid)
      loadedKinds = mappings(pid)
    }
    let afterIdle = NaN
    let afterIdleKinds: Kinds = {}
    if (opts.load > 0 && !snapshot && opts.afterIdle > 0) {
      await sleep(opts.afterIdle * 1000)
      afterIdle = privateMiB(pid)
      afterIdleKinds = mappings(pid)
    }
    const probes = readdirSync(probeDir).filter(f => f.endsWith('.json')).map(f => JSON.parse(readFileSync(join(probeDir, f), 'utf8')) as ProbeReport)
    return { idle, idleKinds, loaded, loadedKinds, afterIdle, afterIdleKinds, probes }
  } finally {
    await stop(proc)
  }
}

const mib = (kb: number) => fmt(kb / KiB, 1)
const medianKinds = (runs: Kinds[]): Kinds => {
  const keys = new Set(runs.flatMap(r => Object.keys(r)))
  return Object.fromEntries([...keys].map(k => [k, median(runs.map(r => r[k] ?? 0))]))
}

async function main (): Promise<void> {
  const backendPort = await freePort()
  const backend = spawn(process.execPath, [BACKEND, String(backendPort)], { stdio: 'ignore' })
  try {
    while (!(await answers(`http://127.0.0.1:${backendPort}/`))) await sleep(20)

    const bares: BareRun[][] = [[], [], []]
    const one: PorticoRun[] = []
    const two: PorticoRun[] = []
    for (let r = 0; r < opts.runs; r++) {
      for (const n of [0, 1, 2]) bares[n]!.push(await bare(n))
      one.push(await portico(1, backendPort, false))
      two.push(await portico(2, backendPort, false))
    }
    const b = bares.map(runs => median(runs.map(x => x.private)))
    const idle1 = median(one.map(r => r.idle))
    const idle2 = median(two.map(r => r.idle))
    const loaded1 = median(one.map(r => r.loaded))
    const loaded2 = median(two.map(r => r.loaded))
    process.stdout.write(`\nPrivate memory (smaps_rollup Private_*), MiB, medians of ${opts.runs} starts; idle ${opts.idle} s after ready; loaded after ${opts.load} s of ${opts.connections} keep-alive connections\n\n`)
    process.stdout.write(table(['process', 'idle', 'per worker thread (idle)', 'loaded', 'per worker (loaded)'], [
      ['bare node, 0 workers', fmt(b[0]!, 1), '', '', ''],
      ['bare node, 1 worker (node:http, node:net)', fmt(b[1]!, 1), fmt(b[1]! - b[0]!, 1), '', ''],
      ['bare node, 2 workers', fmt(b[2]!, 1), fmt((b[2]! - b[0]!) / 2, 1), '', ''],
      ['portico WORKERS=1 (one event loop)', fmt(idle1, 1), '', fmt(loaded1, 1), ''],
      ['portico WORKERS=2 (primary + 1 worker)', fmt(idle2, 1), fmt(idle2 - idle1, 1), fmt(loaded2, 1), fmt(loaded2 - loaded1, 1)]
    ]) + '\n')
    if (opts.afterIdle > 0 && opts.load > 0) {
      process.stdout.write(`\nAfter the load and ${opts.afterIdle} s idle (V8's memory reducer, the idle malloc trim): WORKERS=1 ${fmt(median(one.map(r => r.afterIdle)), 1)} MiB, WORKERS=2 ${fmt(median(two.map(r => r.afterIdle)), 1)} MiB\n\n`)
      const l1 = medianKinds(one.map(r => r.loadedKinds))
      const l2 = medianKinds(two.map(r => r.loadedKinds))
      const a1 = medianKinds(one.map(r => r.afterIdleKinds))
      const a2 = medianKinds(two.map(r => r.afterIdleKinds))
      const names = [...new Set([...Object.keys(a1), ...Object.keys(a2)])].filter(k => Math.max(l1[k] ?? 0, l2[k] ?? 0) >= 512).sort()
      process.stdout.write(table(['mapping, MiB', 'WORKERS=1 loaded', 'after idle', 'WORKERS=2 loaded', 'after idle'], names.map(k => [k, mib(l1[k] ?? 0), mib(a1[k] ?? 0), mib(l2[k] ?? 0), mib(a2[k] ?? 0)])) + '\n')
    }

    const k1 = medianKinds(one.map(r => r.idleKinds))
    const k2 = medianKinds(two.map(r => r.idleKinds))
    const kb0 = medianKinds(bares[0]!.map(r => r.kinds))
    const kb2 = medianKinds(bares[2]!.map(r => r.kinds))
    const kinds = [...new Set([...Object.keys(k1), ...Object.keys(k2)])].sort()
    process.stdout.write('\nPrivate pages by kind of mapping (/proc/PID/smaps), idle, MiB; "per worker" = WORKERS=2 − WORKERS=1, bare = (2 bare workers − 0) / 2\n\n')
    process.stdout.write(table(['mapping', 'WORKERS=1', 'WORKERS=2', 'per portico worker', 'per bare worker'], kinds.map(k => [
      k, mib(k1[k] ?? 0), mib(k2[k] ?? 0), mib((k2[k] ?? 0) - (k1[k] ?? 0)), mib(((kb2[k] ?? 0) - (kb0[k] ?? 0)) / 2)
    ])) + '\n')

    const all = two.flatMap(r => r.probes)
    const probes = all.filter(p => p.after !== null)
    process.stdout.write(`\n${probes.length} of ${all.length} workers ran their start-up collection (the others' loops were busy through startup-gc.ts's WORKER_IDLE_SECONDS)\n`)
    if (probes.length > 0) {
      const spacesOf = (p: ProbeReport, when: 'before' | 'after') => p[when] ?? {}
      const names = Object.keys(probes[0]!.after ?? {})
      process.stdout.write('\nEach worker\'s V8 heap spaces, committed (used) MiB, just before and after its start-up collection (medians over the workers of every WORKERS=2 start)\n\n')
      process.stdout.write(table(['space', 'before', 'after'], [...names, 'total'].map(n => {
        const pick = (when: 'before' | 'after', f: 'committed' | 'used') => median(probes.map(p => n === 'total' ? Object.values(spacesOf(p, when)).reduce((a, s) => a + s[f], 0) : spacesOf(p, when)[n]?.[f] ?? 0)) / MiB
        return [n, `${fmt(pick('before', 'committed'), 2)} (${fmt(pick('before', 'used'), 2)})`, `${fmt(pick('after', 'committed'), 2)} (${fmt(pick('after', 'used'), 2)})`]
      })) + '\n')
      const bareHeaps = bares[1]!.flatMap(r => r.heaps)
      process.stdout.write(`\nA bare worker thread's V8 heap after the same collection: ${fmt(median(bareHeaps.map(x => x.committed)) / MiB, 2)} MiB committed (${fmt(median(bareHeaps.map(x => x.used)) / MiB, 2)} used)\n`)
      const h = (f: keyof ProbeReport['heap']) => fmt(median(probes.map(p => p.heap[f])) / MiB, 2)
      process.stdout.write(`\nafter: malloced by V8 ${h('malloced')} MiB, external ${h('external')} MiB; code and metadata ${h('code')} MiB, bytecode and metadata ${h('bytecode')} MiB\n`)
    }

    if (opts.snapshot === 1) {
      const run = await portico(2, backendPort, true)
      const p = run.probes[0]!
      const c = heapComposition(p.snapshot!)
      const top = (o: Record<string, number>, n: number) => Object.entries(o).sort((a, b) => b[1] - a[1]).slice(0, n)
      process.stdout.write(`\nHeap snapshot of one idle worker (thread ${p.threadId}): ${fmt(c.total / MiB, 2)} MiB of objects, of which ${fmt(c.externalStrings / MiB, 2)} MiB external strings (outside V8's heap: Node's own modules' sources, in the binary)\n\n`)
      process.stdout.write(table(['scripts\' source strings', 'scripts', 'MiB'], Object.entries(c.scriptSources).map(([k, v]) => [k, String(v.count), fmt(v.bytes / MiB, 2)])) + '\n\n')
      process.stdout.write(table(['node type', 'MiB'], top(c.byType, 20).map(([k, v]) => [k, fmt(v / MiB, 2)])) + '\n\n')
      process.stdout.write(table(['system object / array / shape', 'MiB'], top(c.bySystemName, 20).map(([k, v]) => [k, fmt(v / MiB, 2)])) + '\n\n')
      process.stdout.write(table(['objects and closures by name', 'MiB'], top(c.byName, 15).map(([k, v]) => [k, fmt(v / MiB, 2)])) + '\n')
    }
  } finally {
    backend.kill()
  }
}

await main()
