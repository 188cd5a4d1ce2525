/**
 * Policy overhead benchmark: requests/s of a route with request and response header
 * modifiers, CORS and a local rate limit (a bucket too large to ever refuse) against a bare
 * route, both in one Portico process to one loopback backend, measured in alternating
 * rounds so machine load drifts hit both alike. Every request carries an allowed Origin, so
 * CORS does its full work (origin match, response headers). Target: at most 10 % fewer
 * requests/s with the policies.
 *
 * Run: node bench/policies.ts [--rounds 3] [--duration 10] [--warmup 3] [--connections 50]
 * Progress goes to stderr; the table and a final JSON line go to stdout.
 */

import { availableParallelism, loadavg } from 'node:os'
import { request } from 'undici'
import { abbaReport, compareAbba, type AbbaResult } from './lib/abba.ts'
import { readOptions } from './lib/options.ts'
import { fmt, rounded } from './lib/report.ts'
import { startBackend, startPortico, type Server } from './lib/servers.ts'

const TARGET_MAX_DROP = 0.10

const opts = readOptions({
  rounds: { flag: 'rounds', default: 4, help: 'rounds of two runs, bare and policies (ABBA order)' },
  duration: { flag: 'duration', default: 10, help: 'seconds per measured throughput run' },
  warmup: { flag: 'warmup', default: 3, help: 'seconds of warm-up before each run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections' }
})

const ORIGIN = 'https://app.example.com'
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

function config (backendPort: number): string {
  return `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: bare
    matches: [{ path: { pathPrefix: /bare } }]
    backends: [{ host: 127.0.0.1:${backendPort} }]
  - name: policies
    matches: [{ path: { pathPrefix: /policies } }]
    policies:
      requestHeaderModifier:
        set: { x-route: policies }
        add: { x-trace: bench }
        remove: [x-remove]
      responseHeaderModifier:
        set: { x-served-by: portico }
        remove: [x-powered-by]
      cors:
        allowOrigins: [${ORIGIN}, "https://*.example.org"]
        allowMethods: [GET, POST]
        allowHeaders: [content-type]
        exposeHeaders: [x-served-by]
        maxAge: 600
        allowCredentials: true
      localRateLimit:
        - { maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1s }
    backends: [{ host: 127.0.0.1:${backendPort} }]
`
}

/** One request to each route: the policies must be doing their work, and only there. */
async function check (base: string): Promise<void> {
  const get = async (path: string) => {
    const res = await request(`${base}${path}`, { headers: { origin: ORIGIN } })
    await res.body.dump()
    return res
  }
  const bare = await get('/bare')
  const withPolicies = await get('/policies')
  if (bare.statusCode !== 200 || withPolicies.statusCode !== 200) throw new Error(`sanity check: statuses ${bare.statusCode}, ${withPolicies.statusCode}`)
  if (bare.headers['access-control-allow-origin'] !== undefined) throw new Error('sanity check: the bare route has CORS headers')
  if (withPolicies.headers['access-control-allow-origin'] !== ORIGIN || withPolicies.headers['x-served-by'] !== 'portico') {
    throw new Error(`sanity check: the policy route lacks its headers: ${JSON.stringify(withPolicies.headers)}`)
  }
}

async function main (): Promise<void> {
  const servers: Server[] = []
  const load = { start: loadavg(), end: [] as number[] }
  try {
    progress('starting backend')
    const backend = await startBackend()
    servers.push(backend)
    progress('starting portico (LOG_LEVEL=warn)')
    const portico = await startPortico({ config: config(backend.port), logLevel: 'warn' })
    servers.push(portico)
    const base = portico.url.replace(/\/$/, '')
    await check(base)

    const result = await compareAbba(
      { name: 'bare', url: `${base}/bare`, headers: { origin: ORIGIN } },
      { name: 'policies', url: `${base}/policies`, headers: { origin: ORIGIN } },
      { ...opts, cpu: portico.child.cpuSeconds, progress }
    )
    load.end = loadavg()
    report(result, load)
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

function report (result: AbbaResult, load: { start: number[], end: number[] }): void {
  const out: string[] = []
  const cpus = availableParallelism()
  out.push(`policies benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by the load generator, Portico and the backend (no pinning)`)
  out.push(`load average (1, 5, 15 min): ${load.start.map(n => fmt(n)).join(', ')} at the start; ${load.end.map(n => fmt(n)).join(', ')} at the end`)
  out.push(`closed loop (autocannon), ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up per run, ${opts.rounds} rounds in ABBA order;`)
  out.push('policies = requestHeaderModifier + responseHeaderModifier + cors (allowed Origin on every request) + localRateLimit (never refusing);')
  out.push('CPU µs/req is Portico\'s own CPU time per response')
  out.push(...abbaReport(result, { a: 'bare', b: 'policies' }))
  const { rpsRatio, cpuRatio, median: m } = result
  const drop = 1 - rpsRatio
  const signed = (n: number) => `${n >= 0 ? '+' : ''}${fmt(n, 1)}`
  out.push(`median req/s: bare ${fmt(m.aRps, 0)}, policies ${fmt(m.bRps, 0)}; median of the rounds' policies/bare: ${fmt(rpsRatio, 3)} (req/s ${signed((rpsRatio - 1) * 100)} %; target: a drop of at most ${TARGET_MAX_DROP * 100} %: ${drop <= TARGET_MAX_DROP ? 'met' : 'NOT met'})`)
  out.push(`median CPU µs/req: bare ${fmt(m.aCpuUsPerRequest, 1)}, policies ${fmt(m.bCpuUsPerRequest, 1)}; median of the rounds' policies/bare: ${fmt(cpuRatio, 3)} (${signed((cpuRatio - 1) * 100)} %)`)
  out.push('')
  out.push(JSON.stringify(rounded({
    bench: 'policies',
    node: process.version,
    cpus,
    loadAverage: load,
    options: opts,
    runs: { bare: result.a, policies: result.b },
    median: { bareRps: m.aRps, policiesRps: m.bRps, bareCpuUsPerRequest: m.aCpuUsPerRequest, policiesCpuUsPerRequest: m.bCpuUsPerRequest },
    roundRatios: result.roundRatios,
    roundCpuRatios: result.roundCpuRatios,
    rpsRatio,
    rpsDrop: drop,
    cpuPerRequestRatio: cpuRatio,
    targetMet: drop <= TARGET_MAX_DROP
  })))
  process.stdout.write(out.join('\n') + '\n')
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
