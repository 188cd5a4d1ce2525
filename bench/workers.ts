/**
 * Data-plane workers (config.workers): requests/s and CPU per request of Portico at 1, 2 and
 * N workers (N = the CPUs available), next to the backend reached directly and to
 * @fastify/http-proxy run as the same number of processes under Node's cluster module. All
 * from one run, measured in interleaved rounds (medians), keep-alive GETs of a 12-byte
 * answer from one loopback backend.
 *
 * Two placements: `pinned` — the load generator (this process, autocannon) on the last CPU,
 * the backend and the proxies on the others (taskset), so the workers never share a core
 * with the client; `shared` — nothing pinned. Target (issue 20): 2 workers ≥ 1.7× one
 * worker's requests/s when the client does not share their cores, and no more CPU per
 * request. On a machine with fewer than 3 CPUs the pinned placement leaves the proxies one
 * CPU (two workers on one core cannot go faster than one): the ratio it shows is the cost of
 * the workers, not their gain, and the shared placement is bounded by the client and the
 * backend taking the same cores.
 *
 * Run: `node bench/workers.ts` (`--help` for the knobs). Tables and a JSON line to stdout.
 */

import { execFileSync } from 'node:child_process'
import { availableParallelism, loadavg } from 'node:os'
import { measureThroughput, type LoadResult } from './lib/load.ts'
import { readOptions } from './lib/options.ts'
import { fmt, median, ratio, rounded, table } from './lib/report.ts'
import { singleRouteConfig, startBackend, startFastifyCluster, startPortico, type Server } from './lib/servers.ts'
import { hasTaskset, pinSelf, treeCpuSeconds, treeRssBytes } from './lib/children.ts'
import { availableCpus } from '@portico/proxy/cpus'

const TARGET_SCALING = 1.7

const opts = readOptions({
  duration: { flag: 'duration', default: 5, help: 'seconds per measured run' },
  warmup: { flag: 'warmup', default: 2, help: 'seconds of warm-up before each run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections' },
  rounds: { flag: 'rounds', default: 3, help: 'interleaved rounds (the median is reported)' }
})

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)
const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim()

interface Target {
  name: string
  server: Server
  /** Proxy processes or workers (0: the backend itself). */
  width: number
  kind: 'direct' | 'portico' | 'fastify'
  rssIdle: number
  results: LoadResult[]
  rssLoaded: number[]
}

const PRIMARY_ACCEPTS = 'portico workers=2 (primary accepts)'

async function measurePlacement (placement: 'pinned' | 'shared', widths: number[], cpuCount: number): Promise<Target[]> {
  const last = cpuCount - 1
  const serverCpus = placement === 'pinned' ? (last === 1 ? '0' : `0-${last - 1}`) : undefined
  pinSelf(placement === 'pinned' ? String(last) : `0-${last}`)
  progress(`${placement}: client on CPU ${placement === 'pinned' ? last : `0-${last}`}, servers on CPU ${serverCpus ?? `0-${last}`}`)
  const backend = await startBackend(serverCpus)
  const targets: Target[] = [{ name: 'direct', server: backend, width: 0, kind: 'direct', rssIdle: 0, results: [], rssLoaded: [] }]
  for (const w of widths) {
    const server = await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', env: { WORKERS: String(w) }, ...(serverCpus !== undefined ? { cpus: serverCpus } : {}) })
    targets.push({ name: `portico workers=${w}`, server, width: w, kind: 'portico', rssIdle: 0, results: [], rssLoaded: [] })
  }
  if (widths.includes(2)) {
    // The fallback where SO_REUSEPORT does not balance (macOS, Windows): the primary accepts and copies.
    const server = await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', env: { WORKERS: '2', WORKER_ACCEPT: 'primary' }, ...(serverCpus !== undefined ? { cpus: serverCpus } : {}) })
    targets.push({ name: PRIMARY_ACCEPTS, server, width: 2, kind: 'portico', rssIdle: 0, results: [], rssLoaded: [] })
  }
  for (const w of widths) {
    const server = await startFastifyCluster(backend.url, w, serverCpus)
    targets.push({ name: `fastify cluster x${w}`, server, width: w, kind: 'fastify', rssIdle: 0, results: [], rssLoaded: [] })
  }
  for (const t of targets) t.rssIdle = treeRssBytes(t.server.child.proc.pid)
  try {
    for (let round = 1; round <= opts.rounds; round++) {
      for (const t of targets) {
        progress(`${placement} round ${round}/${opts.rounds}: ${t.name}`)
        const pid = t.server.child.proc.pid
        const r = await measureThroughput(t.server.url, { connections: opts.connections, seconds: opts.duration, warmupSeconds: opts.warmup, cpu: () => treeCpuSeconds(pid) })
        t.results.push(r)
        t.rssLoaded.push(treeRssBytes(pid))
      }
    }
  } finally {
    for (const t of targets.reverse()) await t.server.child.stop()
    targets.reverse()
  }
  return targets
}

function summary (t: Target): { rps: number, cpuUs: number, failures: number, rssIdleMb: number, rssLoadedMb: number } {
  return {
    rps: median(t.results.map(r => r.rps)),
    cpuUs: median(t.results.map(r => r.cpuUsPerRequest)),
    failures: t.results.reduce((n, r) => n + r.failures, 0),
    rssIdleMb: t.rssIdle / 2 ** 20,
    rssLoadedMb: Math.max(...t.rssLoaded) / 2 ** 20
  }
}

async function main (): Promise<void> {
  const cpuCount = availableParallelism()
  const n = availableCpus()
  const widths = [...new Set([1, 2, n])].sort((a, b) => a - b)
  const placements: Array<'pinned' | 'shared'> = hasTaskset() && cpuCount >= 2 ? ['pinned', 'shared'] : ['shared']
  const loadBefore = uptime()
  progress(`CPUs: ${cpuCount} (available to this process: ${n}); workers ${widths.join(', ')}; ${loadBefore}`)
  const report: Record<string, unknown> = { cpus: cpuCount, availableCpus: n, widths, options: opts, loadBefore }
  for (const placement of placements) {
    const targets = await measurePlacement(placement, widths, cpuCount)
    const s = new Map(targets.map(t => [t.name, summary(t)]))
    const one = s.get('portico workers=1')!
    const rows = targets.map(t => {
      const x = s.get(t.name)!
      const peer = t.kind === 'portico' ? s.get(`fastify cluster x${t.width}`) : undefined
      return [
        t.name,
        fmt(x.rps, 0),
        t.kind === 'portico' ? `${fmt(ratio(x.rps, one.rps))}x` : '',
        peer !== undefined ? `${fmt(ratio(x.rps, peer.rps))}x` : '',
        t.kind === 'direct' ? '' : fmt(x.cpuUs, 1),
        t.kind === 'direct' ? '' : `${fmt(x.rssIdleMb, 0)} / ${fmt(x.rssLoadedMb, 0)}`,
        String(x.failures)
      ]
    })
    process.stdout.write(`\n${placement === 'pinned' ? `pinned: client on CPU ${cpuCount - 1}, backend and proxies on the other CPU(s)` : 'shared: nothing pinned'} (${opts.rounds} rounds, ${opts.duration} s each, ${opts.connections} connections; medians)\n`)
    process.stdout.write(table(['target', 'req/s', 'vs 1 worker', 'vs fastify same width', 'CPU µs/req (proxy)', 'RSS MB idle / loaded', 'failures'], rows) + '\n')
    const two = s.get('portico workers=2')
    const handed = s.get(PRIMARY_ACCEPTS)
    if (two !== undefined && handed !== undefined) {
      process.stdout.write(`2 workers, primary accepts / SO_REUSEPORT: ${fmt(ratio(handed.rps, two.rps))}x req/s, CPU/req ${fmt(ratio(handed.cpuUs, two.cpuUs))}x (WORKER_ACCEPT=primary copies every byte through the main thread)\n`)
    }
    if (two !== undefined) {
      const scaling = ratio(two.rps, one.rps)
      // workers=1 has no threads; workers=2 is the primary and two worker threads.
      process.stdout.write(`2 workers / 1 worker: ${fmt(scaling)}x req/s (target >= ${TARGET_SCALING}x with the client on its own core), CPU/req ${fmt(ratio(two.cpuUs, one.cpuUs))}x; RSS per worker thread ~${fmt((two.rssIdleMb - one.rssIdleMb) / 2, 0)} MB idle ((workers=2 − workers=1) / 2)\n`)
    }
    report[placement] = Object.fromEntries([...s].map(([k, v]) => [k, rounded(v, 1)]))
  }
  report.loadAfter = uptime()
  report.load1 = loadavg()[0]
  process.stdout.write(`\nload: before ${loadBefore}\n      after  ${String(report.loadAfter)}\n`)
  process.stdout.write(JSON.stringify(report) + '\n')
}

await main()
process.exit(0)
