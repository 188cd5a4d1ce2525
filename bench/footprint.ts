/**
 * Footprint: how long a server takes from exec to answering its first request, how much
 * memory it holds once idle, and what it loaded to get there. Portico on the quick-start
 * config (examples/quickstart.yaml, with the admin, stats and readiness servers on as the
 * quick start runs them), against a minimal node:http server and @fastify/http-proxy; and
 * `portico --version`. Usage: node bench/footprint.ts [--runs 5] [--idle 3]
 */

import { spawn, spawnSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, scratchDir } from './lib/children.ts'
import { readOptions } from './lib/options.ts'
import { fmt, median, rounded, table } from './lib/report.ts'
import type { ModuleTally } from './lib/module-probe.ts'

const opts = readOptions({
  runs: { flag: 'runs', default: 5, help: 'runs per target (the medians are reported)' },
  idle: { flag: 'idle', default: 3, help: 'seconds idle after ready before reading VmRSS' },
  top: { flag: 'top', default: 15, help: 'packages listed in the module table' }
})

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))
const ROOT = here('..')
const PORTICO = here('../packages/proxy/bin/portico.ts')
const BACKEND = here('servers/backend.ts')
const FASTIFY_PROXY = here('servers/fastify-proxy.ts')
const PROBE = here('lib/module-probe.ts')

interface Target {
  name: string
  /** Arguments after the node binary. */
  args: () => Promise<{ args: string[], env: Record<string, string>, url: string, logLine?: string, adminUrl?: string }>
}

interface RunResult {
  /** exec → the first request answered with a 2xx, ms. */
  readyMs: number
  /** exec → the log line (Portico's "portico started"), ms; NaN when the target has none. */
  logLineMs: number
  /** VmRSS after `--idle` seconds, MiB. */
  rssMiB: number
  /** RssAnon at the same moment: VmRSS without file-backed pages (the node binary's text, ~60 MiB here). */
  anonMiB: number
  /** process.memoryUsage() etc. from Portico's admin /memory at the same moment. */
  memory?: Record<string, unknown>
}

/** The quick-start config with its port and the MCP server's relative path made free-standing. */
async function quickstart (): Promise<{ path: string, port: number }> {
  const port = await freePort()
  const text = readFileSync(join(ROOT, 'examples/quickstart.yaml'), 'utf8')
    .replace('port: 3000', `port: ${port}`)
    .replace('cmd: ../node_modules/', `cmd: ${join(ROOT, 'node_modules')}/`)
  const path = join(scratchDir('quickstart'), 'quickstart.yaml')
  writeFileSync(path, text)
  return { path, port }
}

async function addr (): Promise<string> {
  return `127.0.0.1:${await freePort()}`
}

const backend = { port: 0, stop: () => {} }

const targets: Target[] = [
  {
    name: 'portico (quickstart.yaml)',
    args: async () => {
      const { path, port } = await quickstart()
      const admin = await addr()
      return {
        args: [PORTICO, '-f', path],
        env: { ADMIN_ADDR: admin, STATS_ADDR: await addr(), READINESS_ADDR: await addr(), LOG_FORMAT: 'json' },
        url: `http://127.0.0.1:${port}/hello`,
        logLine: 'portico started',
        adminUrl: `http://${admin}/memory`
      }
    }
  },
  {
    name: 'node:http (minimal)',
    args: async () => {
      const port = await freePort()
      return { args: [BACKEND, String(port)], env: {}, url: `http://127.0.0.1:${port}/` }
    }
  },
  {
    name: '@fastify/http-proxy',
    args: async () => {
      const port = await freePort()
      return { args: [FASTIFY_PROXY, String(port), `http://127.0.0.1:${backend.port}`], env: {}, url: `http://127.0.0.1:${port}/` }
    }
  }
]

async function answers (url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
    await res.arrayBuffer()
    return res.ok
  } catch {
    return false
  }
}

/** A `kB` field of /proc/PID/status, in MiB. */
function statusMiB (pid: number, field: 'VmRSS' | 'RssAnon'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = new RegExp(`${field}:\\s+(\\d+)`).exec(status)
  return kb === null ? NaN : Number(kb[1]) / 1024
}

/** One start: spawn, poll the URL every 5 ms until it answers, idle, read RSS, stop. */
async function runOnce (target: Target, extra: { nodeArgs?: string[], env?: Record<string, string> } = {}): Promise<RunResult> {
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
  try {
    const deadline = start + 30_000
    while (performance.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`${target.name} exited (${proc.exitCode}):\n${readFileSync(logPath, 'utf8').slice(-2000)}`)
      if (spec.logLine !== undefined && Number.isNaN(logLineMs) && readFileSync(logPath, 'utf8').includes(spec.logLine)) logLineMs = performance.now() - start
      if (await answers(spec.url)) {
        readyMs = performance.now() - start
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
    const rssMiB = statusMiB(proc.pid!, 'VmRSS')
    const anonMiB = statusMiB(proc.pid!, 'RssAnon')
    let memory: Record<string, unknown> | undefined
    if (spec.adminUrl !== undefined) {
      memory = await (await fetch(spec.adminUrl)).json() as Record<string, unknown>
    }
    return { readyMs, logLineMs, rssMiB, anonMiB, ...(memory !== undefined ? { memory } : {}) }
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
    const r = spawnSync(process.execPath, [PORTICO, '--version'], { encoding: 'utf8' })
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

const MiB = 1024 * 1024

async function main (): Promise<void> {
  const log = (s: string) => process.stderr.write(s + '\n')
  // The proxy's upstream: not measured, only answered through.
  const backendPort = await freePort()
  const bproc = spawn(process.execPath, [BACKEND, String(backendPort)], { stdio: 'ignore' })
  backend.port = backendPort
  while (!(await answers(`http://127.0.0.1:${backendPort}/`))) await sleep(20)

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
  spawnSync(process.execPath, ['--import', PROBE, PORTICO, '--version'], { env: { ...process.env, FOOTPRINT_MODULES_OUT: probeOut } })
  const versionModules = tallyOf(probeOut)
  log('portico with the module probe')
  await runOnce(targets[0]!, { nodeArgs: ['--import', PROBE], env: { FOOTPRINT_MODULES_OUT: probeOut } })
  const serveModules = tallyOf(probeOut)
  bproc.kill('SIGTERM')

  const summary = Object.fromEntries(Object.entries(results).map(([name, runs]) => [name, {
    readyMs: median(runs.map(r => r.readyMs)),
    logLineMs: median(runs.map(r => r.logLineMs)),
    rssMiB: median(runs.map(r => r.rssMiB)),
    anonMiB: median(runs.map(r => r.anonMiB)),
    rssMinMiB: Math.min(...runs.map(r => r.rssMiB)),
    rssMaxMiB: Math.max(...runs.map(r => r.rssMiB))
  }]))

  process.stdout.write(`exec → ready: first 2xx answer, polled every 5 ms (for Portico: GET /hello); the "portico started" log line for comparison. Idle RSS: VmRSS ${opts.idle} s after ready (anon: RssAnon, without the node binary's file-backed pages). Medians of ${opts.runs} runs.\n\n`)
  process.stdout.write(table(['target', 'exec→ready ms', 'exec→log line ms', 'idle RSS MiB', 'min', 'max', 'anon MiB'],
    Object.entries(summary).map(([name, s]) => [name, fmt(s.readyMs, 0), fmt(s.logLineMs, 0), fmt(s.rssMiB, 1), fmt(s.rssMinMiB, 1), fmt(s.rssMaxMiB, 1), fmt(s.anonMiB, 1)])) + '\n\n')
  process.stdout.write(`portico --version: ${fmt(median(version), 0)} ms (median of ${opts.runs}), ${versionModules.modules} modules loaded (${fmt(versionModules.bytes / MiB, 1)} MiB of source)\n\n`)

  const porticoRuns = results[targets[0]!.name]!
  const mem = porticoRuns[porticoRuns.length - 1]!.memory as { process: NodeJS.MemoryUsage, heapCode: Record<string, number>, heapSpaces: Array<{ space_name: string, space_size: number, space_used_size: number }> } | undefined
  if (mem !== undefined) {
    const p = mem.process
    process.stdout.write(`portico at idle (last run, admin /memory): rss ${fmt(p.rss / MiB, 1)} MiB, V8 heap ${fmt(p.heapUsed / MiB, 1)} used of ${fmt(p.heapTotal / MiB, 1)} MiB, external ${fmt(p.external / MiB, 1)} MiB (array buffers ${fmt(p.arrayBuffers / MiB, 1)}), script source ${fmt((mem.heapCode.external_script_source_size ?? 0) / MiB, 1)} MiB, bytecode ${fmt((mem.heapCode.bytecode_and_metadata_size ?? 0) / MiB, 1)} MiB\n`)
    process.stdout.write(table(['heap space', 'used MiB', 'size MiB'], mem.heapSpaces.filter(s => s.space_size > 0).map(s => [s.space_name, fmt(s.space_used_size / MiB, 1), fmt(s.space_size / MiB, 1)])) + '\n\n')
  }
  process.stdout.write(`portico serving quickstart.yaml loaded ${serveModules.modules} modules (${fmt(serveModules.bytes / MiB, 1)} MiB of source); the largest packages:\n`)
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
