/**
 * Footprint: how long a server takes from exec to answering its first request, how much
 * memory it holds idle and under 50 keep-alive connections, and what it loaded to get there.
 * Portico on the quick-start config (examples/quickstart.yaml, with the admin, stats and
 * readiness servers on as the quick start runs them) with WORKERS=1 and WORKERS=2 (the
 * primary and one worker thread), against a minimal node:http server and @fastify/http-proxy; and `portico --version`. Memory is read
 * three ways: VmRSS, private pages (/proc/PID/smaps_rollup Private_Clean + Private_Dirty: what
 * this process alone holds, the Node binary's shared text excluded) and anonymous pages, for
 * the portico process (its primary and worker threads share one address space) and for the
 * process with its child processes (the quick start's warm stdio MCP server). The issue 54
 * targets are printed beside the figures.
 * FOOTPRINT_BEFORE=/path/to/another/checkout measures that tree's portico too, interleaved run
 * by run, for a before/after from one run.
 * Usage: node bench/footprint.ts [--runs 5] [--idle 3] [--load 5] [--connections 50]
 */

import { spawn, spawnSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, scratchDir, urlAnswers as answers } from './lib/children.ts'
import { checkoutBin } from './lib/servers.ts'
import { MEMORY_PHASE_OPTIONS, readOptions } from './lib/options.ts'
import { fmt, median, rounded, table } from './lib/report.ts'
import type { ModuleTally } from './lib/module-probe.ts'

const opts = readOptions({
  runs: { flag: 'runs', default: 5, help: 'runs per target (the medians are reported)' },
  ...MEMORY_PHASE_OPTIONS,
  top: { flag: 'top', default: 15, help: 'packages listed in the module table' },
  withoutMcp: { flag: 'without-mcp', default: 0, help: '1: the quick start without its MCP route (a config of plain routes: no MCP or LLM code loads)' }
})

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))
const ROOT = here('..')
const BEFORE = process.env.FOOTPRINT_BEFORE === undefined || process.env.FOOTPRINT_BEFORE === '' ? undefined : process.env.FOOTPRINT_BEFORE
const BACKEND = here('servers/backend.ts')
const FASTIFY_PROXY = here('servers/fastify-proxy.ts')
const PROBE = here('lib/module-probe.ts')
/** The package's `portico` (bin/portico.mjs), or bin/portico.ts in a checkout from before it (FOOTPRINT_BEFORE). */
const porticoBin = checkoutBin

/** Issue 54's targets (MiB; the issue writes MB): idle private ≤ 40 + 15 per extra worker, ready ≤ 0.3 s / 0.6 s, loaded private ≤ 80 per worker. */
const TARGETS = {
  idlePrivateMiB: (workers: number) => 40 + 15 * (workers - 1),
  readyMs: (workers: number) => workers === 1 ? 300 : 600,
  loadedPrivateMiB: (workers: number) => 80 * workers
}

interface Target {
  name: string
  /** Portico's WORKERS, for the targets; undefined for the references. */
  workers?: number
  /** Arguments after the node binary. */
  args: () => Promise<{ args: string[], env: Record<string, string>, url: string, loadUrl: string, logLine?: string, adminUrl?: string }>
}

/** Memory of a process, or of a process and its child processes, MiB. */
interface Memory {
  /** VmRSS (smaps_rollup Rss). */
  rss: number
  /** Private_Clean + Private_Dirty: pages no other process maps. */
  private: number
  /** Anonymous: heap, stacks, V8's spaces (what RssAnon counts). */
  anon: number
}

interface RunResult {
  /** exec → the first request answered with a 2xx, ms (listening and answering). */
  readyMs: number
  /** exec → the log line (Portico's "portico started"), ms; NaN when the target has none. */
  logLineMs: number
  /**
   * The process's CPU time (user + system, every thread; Portico's both starts, as execve
   * keeps the process) when it first answered, ms: steadier than `readyMs` on a loaded machine.
   */
  cpuMs: number
  /** `--idle` seconds after ready: the process alone, and with its child processes. */
  idle: Memory
  idleTree: Memory
  /** At the end of `--load` seconds of requests over `--connections` keep-alive connections, still open. */
  loaded?: Memory
  loadedTree?: Memory
  /** Requests/s of the load phase (a Node client on the same cores: a load, not a throughput figure). */
  loadRps?: number
  /** process.memoryUsage() etc. from Portico's admin /memory at idle. */
  memory?: Record<string, unknown>
}

/** The quick-start config with its ports free, the MCP server's relative path made free-standing, and the app route to the bench backend. */
async function quickstart (backendPort: number): Promise<{ path: string, port: number }> {
  const port = await freePort()
  const text = readFileSync(join(ROOT, 'examples/quickstart.yaml'), 'utf8')
    .replace('port: 3000', `port: ${port}`)
    .replace('cmd: ../node_modules/', `cmd: ${join(ROOT, 'node_modules')}/`)
    .replace('host: 127.0.0.1:8080', `host: 127.0.0.1:${backendPort}`)
    // --without-mcp 1: the MCP route goes (it runs up to the next route), and with it the MCP code and the stdio server.
    .replace(opts.withoutMcp === 1 ? /\n  - name: mcp\n[\s\S]*?(?=\n  - name: )/ : /(?!)/, '')
  const path = join(scratchDir('quickstart'), 'quickstart.yaml')
  writeFileSync(path, text)
  return { path, port }
}

async function addr (): Promise<string> {
  return `127.0.0.1:${await freePort()}`
}

const backend = { port: 0 }

function porticoTarget (root: string, label: string, workers: number): Target {
  return {
    name: `portico${label} WORKERS=${workers}`,
    workers,
    args: async () => {
      const { path, port } = await quickstart(backend.port)
      const admin = await addr()
      return {
        args: [porticoBin(root), '-f', path],
        env: { WORKERS: String(workers), ADMIN_ADDR: admin, STATS_ADDR: await addr(), READINESS_ADDR: await addr(), LOG_FORMAT: 'json' },
        url: `http://127.0.0.1:${port}/hello`,
        loadUrl: `http://127.0.0.1:${port}/anything`,
        logLine: 'portico started',
        adminUrl: `http://${admin}/memory`
      }
    }
  }
}

const targets: Target[] = [
  ...(BEFORE === undefined ? [] : [porticoTarget(BEFORE, ' (before)', 1), porticoTarget(BEFORE, ' (before)', 2)]),
  porticoTarget(ROOT, '', 1),
  porticoTarget(ROOT, '', 2),
  {
    name: 'node:http (minimal)',
    args: async () => {
      const port = await freePort()
      return { args: [BACKEND, String(port)], env: {}, url: `http://127.0.0.1:${port}/`, loadUrl: `http://127.0.0.1:${port}/` }
    }
  },
  {
    name: '@fastify/http-proxy',
    args: async () => {
      const port = await freePort()
      return { args: [FASTIFY_PROXY, String(port), `http://127.0.0.1:${backend.port}`], env: {}, url: `http://127.0.0.1:${port}/`, loadUrl: `http://127.0.0.1:${port}/` }
    }
  }
]

const MiB = 1024 * 1024

/** utime + stime of a process from /proc/PID/stat, ms (clock ticks of 10 ms: Linux's USER_HZ of 100). */
function processCpuMs (pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // After the command name's closing parenthesis: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return NaN
  }
}

/** smaps_rollup of one process, MiB; zeros when it is gone. */
function processMemory (pid: number): Memory {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  } catch {
    return { rss: 0, private: 0, anon: 0 }
  }
  const kb = (field: string) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)
    return m === null ? 0 : Number(m[1]) / 1024
  }
  return { rss: kb('Rss'), private: kb('Private_Clean') + kb('Private_Dirty'), anon: kb('Anonymous') }
}

function descendants (pid: number): number[] {
  let children: number[]
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(x => x !== '').map(Number)
  } catch {
    return []
  }
  return children.flatMap(c => [c, ...descendants(c)])
}

/** The process and every process under it, summed (private pages are private to each, so they add up; RSS double-counts shared ones). */
function treeMemory (pid: number): Memory {
  return [pid, ...descendants(pid)].map(processMemory).reduce((a, b) => ({ rss: a.rss + b.rss, private: a.private + b.private, anon: a.anon + b.anon }))
}

/**
 * Requests over `connections` keep-alive connections (each a closed loop) for `seconds`; calls
 * `atEnd` while the connections are still open, then closes them.
 */
async function keepAliveLoad<T> (url: string, connections: number, seconds: number, atEnd: () => T): Promise<{ rps: number, result: T }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  const deadline = performance.now() + seconds * 1000
  let done = 0
  let failed = 0
  const one = () => new Promise<void>(resolve => {
    const req = http.get(url, { agent }, res => {
      res.resume()
      res.on('end', () => { if (res.statusCode !== undefined && res.statusCode < 300) done++; else failed++; resolve() })
      res.on('error', () => { failed++; resolve() })
    })
    req.on('error', () => { failed++; resolve() })
  })
  const started = performance.now()
  await Promise.all(Array.from({ length: connections }, async () => {
    while (performance.now() < deadline) await one()
  }))
  const elapsed = (performance.now() - started) / 1000
  const result = atEnd()
  agent.destroy()
  if (done === 0) throw new Error(`${url}: no request answered under load (${failed} failed)`)
  return { rps: done / elapsed, result }
}

/** One start: spawn, poll the URL every 5 ms until it answers, idle, read memory, load, read memory, stop. */
async function runOnce (target: Target, extra: { nodeArgs?: string[], env?: Record<string, string>, load?: boolean } = {}): Promise<RunResult> {
  const spec = await target.args()
  const logPath = join(scratchDir('footprint-log'), 'output.log')
  writeFileSync(logPath, '')
  const fd = openSync(logPath, 'a')
  const start = performance.now()
  const proc = spawn(process.execPath, [...(extra.nodeArgs ?? []), ...spec.args], {
    env: { ...process.env, ...spec.env, ...extra.env },
    stdio: ['ignore', fd, fd]
  })
  closeSync(fd)
  let logLineMs = NaN
  let readyMs = NaN
  let cpuMs = NaN
  try {
    const deadline = start + 30_000
    while (performance.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`${target.name} exited (${proc.exitCode}):\n${readFileSync(logPath, 'utf8').slice(-2000)}`)
      if (spec.logLine !== undefined && Number.isNaN(logLineMs) && readFileSync(logPath, 'utf8').includes(spec.logLine)) logLineMs = performance.now() - start
      if (await answers(spec.url)) {
        readyMs = performance.now() - start
        cpuMs = processCpuMs(proc.pid!)
        break
      }
      await sleep(5)
    }
    if (Number.isNaN(readyMs)) throw new Error(`${target.name}: not ready in 30 s`)
    while (spec.logLine !== undefined && Number.isNaN(logLineMs) && performance.now() < deadline) {
      if (readFileSync(logPath, 'utf8').includes(spec.logLine)) logLineMs = performance.now() - start
      else await sleep(5)
    }
    await sleep(opts.idle * 1000)
    const pid = proc.pid!
    const idle = processMemory(pid)
    const idleTree = treeMemory(pid)
    let memory: Record<string, unknown> | undefined
    if (spec.adminUrl !== undefined) {
      memory = await (await fetch(spec.adminUrl)).json() as Record<string, unknown>
    }
    const out: RunResult = { readyMs, logLineMs, cpuMs, idle, idleTree, ...(memory !== undefined ? { memory } : {}) }
    if (extra.load !== false && opts.load > 0) {
      const { rps, result } = await keepAliveLoad(spec.loadUrl, opts.connections, opts.load, () => ({ loaded: processMemory(pid), loadedTree: treeMemory(pid) }))
      Object.assign(out, result, { loadRps: rps })
    }
    return out
  } finally {
    await new Promise<void>(resolve => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve()
      const kill = setTimeout(() => proc.kill('SIGKILL'), 5000)
      proc.once('exit', () => { clearTimeout(kill); resolve() })
      proc.kill('SIGTERM')
    })
  }
}

function versionTimes (runs: number): number[] {
  const out: number[] = []
  for (let i = 0; i < runs; i++) {
    const start = performance.now()
    const r = spawnSync(process.execPath, [porticoBin(ROOT), '--version'], { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`portico --version: ${r.stderr}`)
    out.push(performance.now() - start)
  }
  return out
}

function tallyOf (path: string): ModuleTally {
  return JSON.parse(readFileSync(path, 'utf8')) as ModuleTally
}

function topGroups (t: ModuleTally, n: number): string[][] {
  return Object.entries(t.groups)
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .slice(0, n)
    .map(([name, g]) => [name, String(g.modules), fmt(g.bytes / 1024, 0)])
}

const MiB_BYTES = 1024 * 1024
const mark = (met: boolean) => met ? 'met' : 'NOT met'

interface Summary {
  workers?: number
  readyMs: number
  logLineMs: number
  cpuMs: number
  readyMinMs: number
  readyMaxMs: number
  idle: Memory
  idleTree: Memory
  loaded?: Memory
  loadedTree?: Memory
  loadRps?: number
}

function medianMemory (list: Memory[]): Memory {
  return { rss: median(list.map(m => m.rss)), private: median(list.map(m => m.private)), anon: median(list.map(m => m.anon)) }
}

function summarize (target: Target, runs: RunResult[]): Summary {
  const loaded = runs.filter(r => r.loaded !== undefined)
  return {
    ...(target.workers !== undefined ? { workers: target.workers } : {}),
    readyMs: median(runs.map(r => r.readyMs)),
    logLineMs: median(runs.map(r => r.logLineMs)),
    cpuMs: median(runs.map(r => r.cpuMs)),
    readyMinMs: Math.min(...runs.map(r => r.readyMs)),
    readyMaxMs: Math.max(...runs.map(r => r.readyMs)),
    idle: medianMemory(runs.map(r => r.idle)),
    idleTree: medianMemory(runs.map(r => r.idleTree)),
    ...(loaded.length > 0
      ? { loaded: medianMemory(loaded.map(r => r.loaded!)), loadedTree: medianMemory(loaded.map(r => r.loadedTree!)), loadRps: median(loaded.map(r => r.loadRps!)) }
      : {})
  }
}

const memCells = (m: Memory | undefined) => m === undefined ? ['', '', ''] : [fmt(m.rss, 1), fmt(m.private, 1), fmt(m.anon, 1)]

async function main (): Promise<void> {
  const log = (s: string) => process.stderr.write(s + '\n')
  // The proxy's upstream (the quick start's app route): not measured, only answered through.
  const backendPort = await freePort()
  const bproc = spawn(process.execPath, [BACKEND, String(backendPort)], { stdio: 'ignore' })
  backend.port = backendPort
  while (!(await answers(`http://127.0.0.1:${backendPort}/`))) await sleep(20)

  // One start of each Portico tree first, not measured: the first start after a change to the
  // sources fills the compile cache (and loads Node's TypeScript compiler to do it).
  for (const t of targets.filter(t => t.workers === 1)) {
    log(`${t.name}: warming the compile cache`)
    await runOnce(t, { load: false })
  }
  const results: Record<string, RunResult[]> = {}
  // Targets interleaved run by run, so a change in the machine's load hits them all.
  for (let i = 0; i < opts.runs; i++) {
    for (const t of targets) {
      log(`${t.name}: run ${i + 1}/${opts.runs}`)
      ;(results[t.name] ??= []).push(await runOnce(t))
    }
  }
  log('portico --version')
  const version = versionTimes(opts.runs)

  // What is loaded: one more run of each Portico case with the module probe preloaded.
  const probeOut = join(scratchDir('probe'), 'modules.json')
  spawnSync(process.execPath, ['--import', PROBE, porticoBin(ROOT), '--version'], { env: { ...process.env, FOOTPRINT_MODULES_OUT: probeOut } })
  const versionModules = tallyOf(probeOut)
  log('portico with the module probe')
  const porticoOne = targets.find(t => t.workers === 1 && !t.name.includes('before'))!
  await runOnce(porticoOne, { nodeArgs: ['--import', PROBE], env: { FOOTPRINT_MODULES_OUT: probeOut }, load: false })
  const serveModules = tallyOf(probeOut)
  bproc.kill('SIGTERM')

  const summary = Object.fromEntries(targets.map(t => [t.name, summarize(t, results[t.name]!)]))
  const w = (o: 'before' | 'after') => Object.entries(summary).filter(([name, s]) => s.workers !== undefined && name.includes('(before)') === (o === 'before'))

  const load = opts.load > 0 ? `; under load: after ${opts.load} s of GETs (Portico: proxied to a node:http backend) over ${opts.connections} keep-alive connections, read while they are open` : ''
  process.stdout.write(`exec → ready: the first 2xx answer (listening and answering), polled every 5 ms (Portico: GET /hello); CPU ms: the process's user + system time then (every thread, both of Portico's starts). Memory (MiB) from /proc/PID/smaps_rollup: rss, private (Private_Clean + Private_Dirty), anon (Anonymous); idle ${opts.idle} s after ready${load}. "process" is the server process (Portico: primary and worker threads), "+children" adds its child processes (the quick start's warm stdio MCP server). Medians of ${opts.runs} runs.\n\n`)
  process.stdout.write(table(['target', 'ready ms', 'min–max', 'CPU ms', 'log line ms', 'idle rss', 'private', 'anon', 'loaded rss', 'private', 'anon', 'load req/s'],
    Object.entries(summary).map(([name, s]) => [name, fmt(s.readyMs, 0), `${fmt(s.readyMinMs, 0)}–${fmt(s.readyMaxMs, 0)}`, fmt(s.cpuMs, 0), fmt(s.logLineMs, 0), ...memCells(s.idle), ...memCells(s.loaded), s.loadRps === undefined ? '' : fmt(s.loadRps, 0)])) + '\n\n')
  process.stdout.write('+children (process and its child processes):\n')
  process.stdout.write(table(['target', 'idle rss', 'private', 'anon', 'loaded rss', 'private', 'anon'],
    Object.entries(summary).map(([name, s]) => [name, ...memCells(s.idleTree), ...memCells(s.loadedTree)])) + '\n\n')

  // Issue 54's targets, beside Portico's figures (the process; its stdio MCP children are servers it runs, not Portico).
  const targetRows = [...w('before'), ...w('after')].flatMap(([name, s]) => {
    const n = s.workers!
    return [
      [name, 'private idle', `${fmt(s.idle.private, 1)} MiB`, `≤ ${TARGETS.idlePrivateMiB(n)}`, mark(s.idle.private <= TARGETS.idlePrivateMiB(n))],
      [name, 'ready', `${fmt(s.readyMs, 0)} ms`, `≤ ${TARGETS.readyMs(n)} (idle machine)`, mark(s.readyMs <= TARGETS.readyMs(n))],
      ...(s.loaded === undefined
        ? []
        : [[name, `private, ${opts.connections} keep-alive`, `${fmt(s.loaded.private, 1)} MiB`, `≤ ${TARGETS.loadedPrivateMiB(n)}`, mark(s.loaded.private <= TARGETS.loadedPrivateMiB(n))]])
    ]
  })
  const extra = (o: 'before' | 'after') => {
    const rows = w(o)
    const one = rows.find(([, s]) => s.workers === 1)?.[1]
    const two = rows.find(([, s]) => s.workers === 2)?.[1]
    if (one === undefined || two === undefined) return []
    const d = two.idle.private - one.idle.private
    return [[`portico${o === 'before' ? ' (before)' : ''}`, 'private idle, WORKERS=2 − WORKERS=1', `${fmt(d, 1)} MiB`, '≤ 15', mark(d <= 15)]]
  }
  process.stdout.write('Issue 54 targets (MiB for the issue\'s MB):\n')
  process.stdout.write(table(['target', 'figure', 'value', 'target', ''], [...targetRows, ...extra('before'), ...extra('after')]) + '\n\n')
  process.stdout.write(`portico --version: ${fmt(median(version), 0)} ms (median of ${opts.runs}), ${versionModules.modules} modules loaded (${fmt(versionModules.bytes / MiB_BYTES, 1)} MiB of source)\n\n`)

  const porticoRuns = results[porticoOne.name]!
  const mem = porticoRuns[porticoRuns.length - 1]!.memory as { process: NodeJS.MemoryUsage, heapCode: Record<string, number>, heapSpaces: Array<{ space_name: string, space_size: number, space_used_size: number }> } | undefined
  if (mem !== undefined) {
    const p = mem.process
    process.stdout.write(`${porticoOne.name} at idle (last run, admin /memory): rss ${fmt(p.rss / MiB_BYTES, 1)} MiB, V8 heap ${fmt(p.heapUsed / MiB_BYTES, 1)} used of ${fmt(p.heapTotal / MiB_BYTES, 1)} MiB, external ${fmt(p.external / MiB_BYTES, 1)} MiB (array buffers ${fmt(p.arrayBuffers / MiB_BYTES, 1)}), script source ${fmt((mem.heapCode.external_script_source_size ?? 0) / MiB_BYTES, 1)} MiB, bytecode ${fmt((mem.heapCode.bytecode_and_metadata_size ?? 0) / MiB_BYTES, 1)} MiB\n`)
    process.stdout.write(table(['heap space', 'used MiB', 'size MiB'], mem.heapSpaces.filter(s => s.space_size > 0).map(s => [s.space_name, fmt(s.space_used_size / MiB_BYTES, 1), fmt(s.space_size / MiB_BYTES, 1)])) + '\n\n')
  }
  process.stdout.write(`${porticoOne.name} serving quickstart.yaml loaded ${serveModules.modules} modules (${fmt(serveModules.bytes / MiB_BYTES, 1)} MiB of source); the largest packages:\n`)
  process.stdout.write(table(['package', 'modules', 'KiB'], topGroups(serveModules, opts.top)) + '\n\n')
  process.stdout.write(`portico --version loaded:\n${table(['package', 'modules', 'KiB'], topGroups(versionModules, opts.top))}\n\n`)
  process.stdout.write(JSON.stringify(rounded({
    targets: summary,
    versionMs: median(version),
    modules: { serve: serveModules.modules, version: versionModules.modules },
    porticoMemory: mem?.process
  })) + '\n')
}

await main()
