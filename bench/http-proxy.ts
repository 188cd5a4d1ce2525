/**
 * HTTP proxy benchmark: requests/s and latency of a tiny loopback backend reached directly,
 * through Portico (access log off and on) and through @fastify/http-proxy, then p50/p99 at a
 * fixed request rate, direct and through Portico. Targets: Portico >= 1.5x the peer's
 * requests/s; <= 1 ms added p99 at 1,000 requests/s. Each figure is the median of interleaved
 * rounds: on a shared two-core machine one 10 s window's p99 is one scheduling hiccup away
 * from doubling, and a single window made the targets flip between runs of the same build.
 *
 * Run: `pnpm run bench` (or `node bench/http-proxy.ts --help` for the knobs).
 * Progress goes to stderr; the tables and a final JSON line go to stdout.
 */

import { availableParallelism } from 'node:os'
import { measureFixedRate, measureThroughput, type LoadResult } from './lib/load.ts'
import { readOptions } from './lib/options.ts'
import { fmt, median, ratio, rotated, rounded, table } from './lib/report.ts'
import { singleRouteConfig, startBackend, startFastifyProxy, startPortico, type Server } from './lib/servers.ts'
import { hasWrk, runWrk, type WrkResult } from './lib/wrk.ts'
import { hasNginx, startNginx, type NginxBuffering } from './lib/nginx.ts'
import { processCpuSeconds } from './lib/children.ts'
import { readFileSync } from 'node:fs'
import { agentgatewayOption, agentgatewayProxyConfig, startAgentgateway } from './lib/agentgateway.ts'

const TARGET_RPS_RATIO = 1.5
const TARGET_ADDED_P99_MS = 1

const agentgateway = agentgatewayOption()
const opts = readOptions({
  duration: { flag: 'duration', default: 10, help: 'seconds per measured throughput run' },
  warmup: { flag: 'warmup', default: 3, help: 'seconds of warm-up before each throughput run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections for throughput runs' },
  rate: { flag: 'rate', default: 1000, help: 'requests/s of the fixed-rate runs' },
  rateDuration: { flag: 'rate-duration', default: 10, help: 'seconds per measured fixed-rate run' },
  rateWarmup: { flag: 'rate-warmup', default: 2, help: 'seconds of warm-up before each fixed-rate run' },
  rateConnections: { flag: 'rate-connections', default: 32, help: 'max connections of the fixed-rate client' },
  rounds: { flag: 'rounds', default: 3, help: 'interleaved rounds of the throughput and fixed-rate runs (medians are reported)' },
  bodyRounds: { flag: 'body-rounds', default: 3, help: 'interleaved rounds of the body-path runs (wrk; 0 skips them)' },
  bodyDuration: { flag: 'body-duration', default: 5, help: 'seconds per body-path run' },
  bodyOnly: { flag: 'body-only', default: 0, help: '1: the body path alone (no throughput or fixed-rate runs, no LOG_LEVEL=info Portico)' },
  nginxDefault: { flag: 'nginx-default', default: 1, help: '1: also measure nginx with its default 4 KiB proxy buffers and with proxy_buffering off, beside the reference (buffers sized for the body)' }
}, agentgateway.rest)

const LOG_LEVELS = ['warn', 'info'] as const
type LogLevel = typeof LOG_LEVELS[number]

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

async function main (): Promise<void> {
  const servers: Server[] = []
  const start = async (what: string, f: () => Promise<Server>) => {
    progress(`starting ${what}`)
    const s = await f()
    servers.push(s)
    return s
  }
  try {
    const backend = await start('backend', startBackend)
    if (opts.bodyOnly === 1) {
      const porticoWarn = await start('portico (LOG_LEVEL=warn)', () => startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn' }))
      const peer = await start('@fastify/http-proxy', () => startFastifyProxy(`http://127.0.0.1:${backend.port}`))
      await bodyPath(backend, porticoWarn, peer, start)
      return
    }
    const portico = {} as Record<LogLevel, Server>
    for (const level of LOG_LEVELS) {
      portico[level] = await start(`portico (LOG_LEVEL=${level})`, () => startPortico({ config: singleRouteConfig(backend.port), logLevel: level }))
    }
    const peer = await start('@fastify/http-proxy', () => startFastifyProxy(`http://127.0.0.1:${backend.port}`))

    const tpRuns = await interleaved([
      { name: 'direct', server: backend },
      ...LOG_LEVELS.map(level => ({ name: `portico (LOG_LEVEL=${level})`, server: portico[level] })),
      { name: '@fastify/http-proxy', server: peer }
    ], throughputRun)
    const throughput = {
      direct: medianResult(tpRuns.get('direct')!),
      portico: perLevel(level => medianResult(tpRuns.get(`portico (LOG_LEVEL=${level})`)!)),
      peer: medianResult(tpRuns.get('@fastify/http-proxy')!)
    }
    const frRuns = await interleaved([
      { name: 'direct', server: backend },
      ...LOG_LEVELS.map(level => ({ name: `portico (LOG_LEVEL=${level})`, server: portico[level] }))
    ], fixedRateRun)
    const fixedRate = {
      direct: medianResult(frRuns.get('direct')!),
      portico: perLevel(level => medianResult(frRuns.get(`portico (LOG_LEVEL=${level})`)!))
    }
    report(throughput, fixedRate, { throughput: Object.fromEntries(tpRuns), fixedRate: Object.fromEntries(frRuns) })
    await bodyPath(backend, portico.warn, peer, start)
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

function perLevel (f: (level: LogLevel) => LoadResult): Record<LogLevel, LoadResult> {
  const out = {} as Record<LogLevel, LoadResult>
  for (const level of LOG_LEVELS) out[level] = f(level)
  return out
}

/**
 * `opts.rounds` rounds of one run per target; each round starts one target later, so no
 * target always runs first (or right after the same neighbour). The runs by target name.
 */
async function interleaved (targets: Array<{ name: string, server: Server }>, measure: (name: string, target: Server, round: number) => Promise<LoadResult>): Promise<Map<string, LoadResult[]>> {
  const runs = new Map<string, LoadResult[]>(targets.map(t => [t.name, []]))
  for (let round = 0; round < opts.rounds; round++) {
    for (const t of rotated(targets, round)) runs.get(t.name)!.push(await measure(t.name, t.server, round))
  }
  return runs
}

/** Each figure's median over the rounds; the counts summed. */
function medianResult (runs: LoadResult[]): LoadResult {
  const med = (f: (r: LoadResult) => number) => median(runs.map(f))
  return {
    rps: med(r => r.rps),
    p50: med(r => r.p50),
    p99: med(r => r.p99),
    requests: runs.reduce((n, r) => n + r.requests, 0),
    failures: runs.reduce((n, r) => n + r.failures, 0),
    seconds: runs.reduce((n, r) => n + r.seconds, 0),
    cpuUsPerRequest: med(r => r.cpuUsPerRequest)
  }
}

function throughputRun (name: string, target: Server, round: number): Promise<LoadResult> {
  progress(`throughput round ${round + 1}/${opts.rounds}: ${name} (${opts.warmup} s warm-up + ${opts.duration} s)`)
  return measureThroughput(target.url, { connections: opts.connections, seconds: opts.duration, warmupSeconds: opts.warmup, cpu: target.child.cpuSeconds })
}

function fixedRateRun (name: string, target: Server, round: number): Promise<LoadResult> {
  progress(`fixed rate round ${round + 1}/${opts.rounds}: ${name} (${opts.rateWarmup} s warm-up + ${opts.rateDuration} s at ${opts.rate} req/s)`)
  return measureFixedRate(target.url, { rate: opts.rate, seconds: opts.rateDuration, warmupSeconds: opts.rateWarmup, connections: opts.rateConnections, cpu: target.child.cpuSeconds })
}

interface Throughput { direct: LoadResult, portico: Record<LogLevel, LoadResult>, peer: LoadResult }
interface FixedRate { direct: LoadResult, portico: Record<LogLevel, LoadResult> }

function report (tp: Throughput, fr: FixedRate, runs: Record<string, unknown>): void {
  const out: string[] = []
  const cpus = availableParallelism()
  out.push(`http-proxy benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'}; the load generator, the proxy and the backend share ${cpus === 1 ? 'it' : `these ${cpus}`} (no pinning), so absolute figures understate a proxy on its own cores`)
  out.push('')
  out.push(`Throughput: closed loop (autocannon), ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up, medians of ${opts.rounds} interleaved rounds; latency of 2xx responses;`)
  out.push('CPU µs/req is the CPU time of the server process measured (the backend for direct, else the proxy alone) per response')
  const tpRow = (name: string, r: LoadResult, vsDirect: boolean) =>
    [name, fmt(r.rps, 0), fmt(r.p50), fmt(r.p99), fmt(r.cpuUsPerRequest, 1), String(r.failures), vsDirect ? fmt(ratio(r.rps, tp.direct.rps)) : '']
  out.push(table(['target', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'failures', 'x direct'], [
    tpRow('direct to backend', tp.direct, false),
    ...LOG_LEVELS.map(l => tpRow(`portico (LOG_LEVEL=${l})`, tp.portico[l], true)),
    tpRow('@fastify/http-proxy', tp.peer, true)
  ]))
  out.push('')
  out.push(`Fixed rate: open loop, ${opts.rate} req/s, ${opts.rateDuration} s measured after ${opts.rateWarmup} s warm-up, medians of ${opts.rounds} interleaved rounds; added p99 is Portico's median less direct's`)
  const frRow = (name: string, r: LoadResult, added: boolean) =>
    [name, fmt(r.rps, 0), fmt(r.p50, 3), fmt(r.p99, 3), fmt(r.cpuUsPerRequest, 1), String(r.failures), added ? fmt(r.p99 - fr.direct.p99, 3) : '']
  out.push(table(['target', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'failures', 'added p99 ms'], [
    frRow('direct to backend', fr.direct, false),
    ...LOG_LEVELS.map(l => frRow(`portico (LOG_LEVEL=${l})`, fr.portico[l], true))
  ]))
  out.push('')

  const summary = summarize(tp, fr)
  out.push('Targets:')
  for (const l of LOG_LEVELS) {
    const s = summary.targets[l]
    out.push(`  LOG_LEVEL=${l}: portico/peer req/s ${fmt(s.rpsVsPeer)}x (target >= ${TARGET_RPS_RATIO}x: ${s.rpsTargetMet ? 'met' : 'NOT met'}); ` +
      `added p99 at ${opts.rate} req/s ${fmt(s.addedP99Ms, 3)} ms (target <= ${TARGET_ADDED_P99_MS} ms: ${s.latencyTargetMet ? 'met' : 'NOT met'}); ` +
      `peer/portico CPU per request ${fmt(s.cpuPerRequestPeerVsPortico)}x`)
  }
  out.push('')
  out.push(JSON.stringify(rounded({ ...summary, runs })))
  process.stdout.write(out.join('\n') + '\n')
}

function summarize (tp: Throughput, fr: FixedRate) {
  const targets = {} as Record<LogLevel, { rpsVsDirect: number, rpsVsPeer: number, addedP99Ms: number, cpuPerRequestPeerVsPortico: number, rpsTargetMet: boolean, latencyTargetMet: boolean }>
  for (const l of LOG_LEVELS) {
    const rpsVsPeer = ratio(tp.portico[l].rps, tp.peer.rps)
    const addedP99Ms = fr.portico[l].p99 - fr.direct.p99
    targets[l] = {
      rpsVsDirect: ratio(tp.portico[l].rps, tp.direct.rps),
      rpsVsPeer,
      addedP99Ms,
      cpuPerRequestPeerVsPortico: ratio(tp.peer.cpuUsPerRequest, tp.portico[l].cpuUsPerRequest),
      rpsTargetMet: rpsVsPeer >= TARGET_RPS_RATIO,
      latencyTargetMet: addedP99Ms <= TARGET_ADDED_P99_MS
    }
  }
  return {
    bench: 'http-proxy',
    node: process.version,
    cpus: availableParallelism(),
    options: opts,
    throughput: { direct: tp.direct, portico: tp.portico, fastifyHttpProxy: tp.peer },
    fixedRate: fr,
    peerRpsVsDirect: ratio(tp.peer.rps, tp.direct.rps),
    targets
  }
}

/**
 * Body-path targets, relative to the reference nginx measured in the same run: CPU per
 * request from issue 54 (agentgateway's ratios on the same bench were 2.60× and 1.88×), req/s
 * against the peer from issue 20.
 */
const BODY_TARGETS = {
  small: { cpuVsNginx: 2.4, rpsVsPeer: 1.5 },
  '64k': { cpuVsNginx: 1.85, rpsVsPeer: 1.3 }
} as const
/** Issue 54: ahead of agentgateway per core on every body size (Portico's CPU per request at most its). */
const TARGET_CPU_VS_AGENTGATEWAY = 1
const TARGET_RSS_LOADED_MB = 150
/** Anonymous memory after load, one worker (issue 54). */
const TARGET_ANON_LOADED_MB = 80

/** VmRSS and RssAnon of a process, in MB (RssFile, the binary's pages, is shared with others). */
function rssMb (pid: number | undefined): { rss: number, anon: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN)
    return { rss: kb('VmRSS') / 1024, anon: kb('RssAnon') / 1024 }
  } catch {
    return { rss: NaN, anon: NaN }
  }
}

/**
 * The body path: wrk -t1 (a client cheap enough to leave the cores to the servers), keep-alive
 * GETs of 12 bytes and of 64 KiB, through Portico (LOG_LEVEL=warn), @fastify/http-proxy and
 * nginx (the reference: one process, upstream keep-alive), agentgateway when its binary is at
 * hand (lib/agentgateway.ts: one worker thread, no access log), and direct; interleaved rounds,
 * medians. CPU µs per request is each server process's own (direct: the backend's); RSS
 * idle before the runs and the largest seen after one.
 */
async function bodyPath (backend: Server, portico: Server, peer: Server, start: (what: string, f: () => Promise<Server>) => Promise<Server>): Promise<void> {
  if (opts.bodyRounds === 0) return
  if (!await hasWrk() || !await hasNginx()) {
    process.stdout.write('\nBody path: skipped (needs wrk and nginx: apt-get install wrk nginx-light)\n')
    return
  }
  // The reference is nginx as an operator would set it for these bodies (buffers sized for
  // 64 KiB); nginx with its default 4 KiB buffers — the reference before issue 54, which
  // spilled 64 KiB answers to a temporary file — and unbuffered are measured beside it.
  const nginx = await start('nginx (reference)', () => startNginx(backend.port, 'sized'))
  const others: NginxBuffering[] = opts.nginxDefault === 1 ? ['default', 'off'] : []
  const agw = agentgateway.bin === undefined ? undefined : await start(`agentgateway (${agentgateway.bin})`, () => startAgentgateway(agentgateway.bin!, port => agentgatewayProxyConfig(port, backend.port)))
  if (agw === undefined) progress(agentgateway.skipped)
  const targets = [
    { name: 'direct', server: backend },
    { name: 'portico', server: portico },
    { name: '@fastify/http-proxy', server: peer },
    { name: 'nginx', server: nginx },
    ...(agw === undefined ? [] : [{ name: 'agentgateway', server: agw }]),
    ...await Promise.all(others.map(async b => ({ name: `nginx (buffers ${b})`, server: await start(`nginx (buffers ${b})`, () => startNginx(backend.port, b)) })))
  ]
  const idle = new Map(targets.map(t => [t.name, rssMb(t.server.child.proc.pid)]))
  const loaded = new Map(targets.map(t => [t.name, { rss: 0, anon: 0 }]))
  const sizes = ['small', '64k'] as const
  const runs = new Map<string, Array<{ rps: number, cpuUs: number, failures: number, p99: number }>>()
  for (let round = 0; round < opts.bodyRounds; round++) {
    for (const size of sizes) {
      for (const t of rotated(targets, round)) {
        const url = t.server.url + (size === '64k' ? '64k' : 'small')
        progress(`body path round ${round + 1}/${opts.bodyRounds}: ${size} ${t.name}`)
        await runWrk(url, { connections: opts.connections, seconds: 1 })
        const pid = t.server.child.proc.pid
        const cpu0 = processCpuSeconds(pid)
        const r: WrkResult = await runWrk(url, { connections: opts.connections, seconds: opts.bodyDuration })
        const cpuUs = (processCpuSeconds(pid) - cpu0) * 1e6 / Math.max(1, r.requests)
        const key = `${size} ${t.name}`
        runs.set(key, [...(runs.get(key) ?? []), { rps: r.rps, cpuUs, failures: r.failures, p99: r.p99 }])
        const m = rssMb(pid)
        const seen = loaded.get(t.name)!
        loaded.set(t.name, { rss: Math.max(seen.rss, m.rss), anon: Math.max(seen.anon, m.anon) })
      }
    }
  }
  const med = (key: string, field: 'rps' | 'cpuUs' | 'p99') => median(runs.get(key)!.map(r => r[field]))
  const out: string[] = ['', `Body path: wrk -t1 -c${opts.connections}, ${opts.bodyDuration} s per run, medians of ${opts.bodyRounds} interleaved rounds; CPU µs/req of each server process itself (direct: the backend); "nginx" is the reference (proxy buffers sized for 64 KiB, bench/lib/nginx.ts); ${agw === undefined ? agentgateway.skipped : `agentgateway: ${agentgateway.bin}, one worker thread, log level warn (bench/lib/agentgateway.ts)`}; RSS MB (VmRSS, RssAnon in brackets: RssFile is the binary's pages, shared)`]
  const summary: Record<string, unknown> = {}
  for (const size of sizes) {
    const nginxCpu = med(`${size} nginx`, 'cpuUs')
    const rows = targets.map(t => {
      const key = `${size} ${t.name}`
      const failures = runs.get(key)!.reduce((n, r) => n + r.failures, 0)
      return [t.name, fmt(med(key, 'rps'), 0), fmt(med(key, 'p99')), fmt(med(key, 'cpuUs'), 1), t.name === 'direct' ? '' : `${fmt(med(key, 'cpuUs') / nginxCpu)}x`, String(failures)]
    })
    out.push('', `${size === 'small' ? '12-byte' : '64 KiB'} responses`, table(['target', 'req/s', 'p99 ms', 'CPU µs/req', 'CPU vs nginx', 'failures'], rows))
    const cpuVsNginx = med(`${size} portico`, 'cpuUs') / nginxCpu
    const rpsVsPeer = ratio(med(`${size} portico`, 'rps'), med(`${size} @fastify/http-proxy`, 'rps'))
    const target = BODY_TARGETS[size]
    out.push(`portico: CPU per request ${fmt(cpuVsNginx)}x nginx's (target <= ${target.cpuVsNginx}x: ${cpuVsNginx <= target.cpuVsNginx ? 'met' : 'NOT met'}); req/s ${fmt(rpsVsPeer)}x @fastify/http-proxy's (target >= ${target.rpsVsPeer}x: ${rpsVsPeer >= target.rpsVsPeer ? 'met' : 'NOT met'})`)
    let cpuVsAgentgateway: number | undefined
    if (agw !== undefined) {
      const agwCpu = med(`${size} agentgateway`, 'cpuUs')
      cpuVsAgentgateway = med(`${size} portico`, 'cpuUs') / agwCpu
      out.push(`CPU µs/req: portico ${fmt(med(`${size} portico`, 'cpuUs'), 1)}, agentgateway ${fmt(agwCpu, 1)}, nginx ${fmt(nginxCpu, 1)}; portico ÷ agentgateway ${fmt(cpuVsAgentgateway)}x (target <= ${TARGET_CPU_VS_AGENTGATEWAY}x: ${cpuVsAgentgateway <= TARGET_CPU_VS_AGENTGATEWAY ? 'met' : 'NOT met'}); agentgateway ÷ nginx ${fmt(agwCpu / nginxCpu)}x`)
    }
    summary[size] = { cpuVsNginx, rpsVsPeer, ...(cpuVsAgentgateway === undefined ? {} : { cpuVsAgentgateway }), runs: Object.fromEntries(targets.map(t => [t.name, runs.get(`${size} ${t.name}`)])) }
  }
  out.push('', table(['process', 'RSS idle', 'RSS loaded'], targets.map(t => {
    const i = idle.get(t.name)!
    const l = loaded.get(t.name)!
    return [t.name, `${fmt(i.rss, 0)} (${fmt(i.anon, 0)})`, `${fmt(l.rss, 0)} (${fmt(l.anon, 0)})`]
  })))
  const porticoLoaded = loaded.get('portico')!.rss
  const porticoAnon = loaded.get('portico')!.anon
  out.push(`portico RSS under load ${fmt(porticoLoaded, 0)} MB (target <= ${TARGET_RSS_LOADED_MB} MB: ${porticoLoaded <= TARGET_RSS_LOADED_MB ? 'met' : 'NOT met'}); anonymous ${fmt(porticoAnon, 0)} MB (target <= ${TARGET_ANON_LOADED_MB} MB: ${porticoAnon <= TARGET_ANON_LOADED_MB ? 'met' : 'NOT met'})`)
  out.push(JSON.stringify(rounded({ bench: 'http-proxy body path', summary, rss: { idle: Object.fromEntries(idle), loaded: Object.fromEntries(loaded) } })))
  process.stdout.write(out.join('\n') + '\n')
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
