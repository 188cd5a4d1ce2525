/**
 * InferencePool benchmark (issue 52): what the endpoint picker's round trip costs per
 * request. One Portico process with two routes to the same loopback backend: a plain route,
 * and an `inferencePool` whose single endpoint is that backend and whose picker
 * (servers/endpoint-picker.ts, a process of its own, plaintext gRPC) always picks it — so
 * the only difference is the ext_proc stream to the picker: the request headers, the 1 KiB
 * body, the pick, the response headers and their answer.
 *
 * - Throughput (autocannon, closed loop), a 1 KiB JSON POST: rounds of two back-to-back runs
 *   in ABBA order (compareAbba); req/s, and CPU µs per request of Portico, of the picker and
 *   of the backend apart; the medians of the rounds' pool/plain ratios.
 * - Added latency: an open loop at a fixed rate (measureFixedRate), the same POST, both
 *   routes in ABBA order; p50/p99 and what the pool adds over the plain route.
 *
 * - extProc (--extproc 1, the default): the plain route against the same route with an
 *   `extProc` policy (servers/ext-processor.ts, default modes: request and response headers,
 *   answered unchanged) — the same ext_proc client (traffic/ext-proc-grpc.ts) as the pool's.
 *
 * One run, medians; no timed assertions. Counted instead of timed: inference-pool-instructions.ts.
 * Run: node bench/inference-pool.ts [--rounds 3] [--duration 10] [--warmup 2] [--connections 50] [--rate 500] [--extproc 1]
 * Progress goes to stderr; the tables and a final JSON line go to stdout.
 */

import { availableParallelism, loadavg } from 'node:os'
import { request } from 'undici'
import { compareAbba, roundOrder, type AbbaResult } from './lib/abba.ts'
import { measureFixedRate, type LoadResult } from './lib/load.ts'
import { readOptions } from './lib/options.ts'
import { fmt, median, ratio, rounded, table } from './lib/report.ts'
import { startBackend, startEndpointPicker, startExtProcessor, startPortico, type Server } from './lib/servers.ts'

const opts = readOptions({
  rounds: { flag: 'rounds', default: 3, help: 'rounds of two runs, plain and pool (ABBA order), for throughput and for the fixed rate' },
  duration: { flag: 'duration', default: 10, help: 'seconds per measured run' },
  warmup: { flag: 'warmup', default: 2, help: 'seconds of warm-up before each run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections (throughput)' },
  rate: { flag: 'rate', default: 500, help: 'requests/s of the fixed-rate runs' },
  extproc: { flag: 'extproc', default: 1, help: '1: also plain against a route with an extProc policy (the same ext_proc client), throughput rounds in ABBA order; 0: not' }
})

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

/** A chat completion request padded to 1 KiB: what a model server behind a pool gets. */
function body (): string {
  const make = (pad: string) => JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Write a short paragraph of placeholder text, please. ' + pad }] })
  const text = make('x'.repeat(1024 - make('').length))
  if (text.length !== 1024) throw new Error(`request body of ${text.length} bytes`)
  return text
}
const BODY = body()
const HEADERS = { 'content-type': 'application/json' }
const SERVED = 'x-conformance-test-served-endpoint'

function config (backendPort: number, pickerPort: number, processorPort: number): string {
  return `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: plain
    matches: [{ path: { pathPrefix: /plain } }]
    backends: [{ host: 127.0.0.1:${backendPort} }]
  - name: pool
    matches: [{ path: { pathPrefix: /pool } }]
    backends:
      - inferencePool:
          name: bench
          endpoints: ["127.0.0.1:${backendPort}"]
          endpointPicker: { host: 127.0.0.1:${pickerPort}, tls: false, failureMode: FailClose }
  - name: extproc
    matches: [{ path: { pathPrefix: /extproc } }]
    policies:
      extProc: { host: 127.0.0.1:${processorPort} }
    backends: [{ host: 127.0.0.1:${backendPort} }]
`
}

/** One request to each route: both served, and only the pool's through the picker. */
async function check (base: string, endpoint: string): Promise<void> {
  const post = async (path: string) => {
    const res = await request(`${base}${path}`, { method: 'POST', body: BODY, headers: HEADERS })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`sanity check of ${path}: ${res.statusCode} ${text.slice(0, 300)}`)
    return res.headers[SERVED]
  }
  const plain = await post('/plain')
  const pool = await post('/pool')
  if (plain !== undefined) throw new Error(`sanity check: the plain route went through the picker (${SERVED}: ${String(plain)})`)
  if (pool !== endpoint) throw new Error(`sanity check: the pool route's ${SERVED} is ${String(pool)}, not ${endpoint}`)
}

interface Processes { portico: Server, picker: Server, backend: Server, processor: Server }

/** CPU seconds of each process, as a "thread kind" probe, so every run reports µs/req of each. */
function cpuByProcess (p: Processes): () => Map<string, number> {
  return () => new Map([['portico', p.portico.child.cpuSeconds()], ['picker', p.picker.child.cpuSeconds()], ['backend', p.backend.child.cpuSeconds()], ['processor', p.processor.child.cpuSeconds()]])
}

async function fixedRateRounds (base: string, p: Processes): Promise<{ plain: LoadResult[], pool: LoadResult[] }> {
  const runs = { plain: [] as LoadResult[], pool: [] as LoadResult[] }
  const names = ['plain', 'pool'] as const
  for (let round = 1; round <= opts.rounds; round++) {
    for (const which of roundOrder(2, round)) {
      const name = names[which]!
      progress(`fixed rate, round ${round}/${opts.rounds}: ${name} (${opts.rate} req/s, ${opts.warmup} s warm-up + ${opts.duration} s)`)
      runs[name].push(await measureFixedRate(`${base}/${name}`, { rate: opts.rate, seconds: opts.duration, warmupSeconds: opts.warmup, connections: 256, body: BODY, headers: HEADERS, cpu: p.portico.child.cpuSeconds }))
    }
  }
  return runs
}

async function main (): Promise<void> {
  const servers: Server[] = []
  const load = { start: loadavg(), end: [] as number[] }
  try {
    progress('starting backend, endpoint picker and portico (LOG_LEVEL=warn)')
    const backend = await startBackend()
    servers.push(backend)
    const endpoint = `127.0.0.1:${backend.port}`
    const picker = await startEndpointPicker(endpoint)
    servers.push(picker)
    const processor = await startExtProcessor()
    servers.push(processor)
    const portico = await startPortico({ config: config(backend.port, picker.port, processor.port), logLevel: 'warn' })
    servers.push(portico)
    const base = portico.url.replace(/\/$/, '')
    await check(base, endpoint)
    const processes = { portico, picker, backend, processor }
    const threads = cpuByProcess(processes)

    const throughput = await compareAbba(
      { name: 'plain', url: `${base}/plain`, body: BODY, headers: HEADERS, threads },
      { name: 'pool', url: `${base}/pool`, body: BODY, headers: HEADERS, threads },
      { rounds: opts.rounds, duration: opts.duration, warmup: opts.warmup, connections: opts.connections, cpu: portico.child.cpuSeconds, progress }
    )
    const extproc = opts.extproc === 1
      ? await compareAbba(
        { name: 'plain', url: `${base}/plain`, body: BODY, headers: HEADERS, threads },
        { name: 'extproc', url: `${base}/extproc`, body: BODY, headers: HEADERS, threads },
        { rounds: opts.rounds, duration: opts.duration, warmup: opts.warmup, connections: opts.connections, cpu: portico.child.cpuSeconds, progress }
      )
      : null
    const fixed = await fixedRateRounds(base, processes)
    load.end = loadavg()
    report(throughput, extproc, fixed, load)
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

function report (t: AbbaResult, ext: AbbaResult | null, fixed: { plain: LoadResult[], pool: LoadResult[] }, load: { start: number[], end: number[] }): void {
  const cpus = availableParallelism()
  const us = (r: LoadResult, kind: string) => r.threadUsPerRequest?.[kind] ?? NaN
  const out: string[] = []
  out.push(`InferencePool benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by the load generator, Portico, the endpoint picker and the backend (no pinning)`)
  out.push(`load average (1, 5, 15 min): ${load.start.map(n => fmt(n)).join(', ')} at the start; ${load.end.map(n => fmt(n)).join(', ')} at the end`)
  out.push(`1 KiB JSON POSTs; plain = a route to the backend; pool = the same backend as the single endpoint of an inferencePool whose picker (plaintext gRPC, its own process) always picks it`)
  out.push(`throughput: closed loop (autocannon), ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up per run, ${opts.rounds} rounds in ABBA order; CPU µs/req of each process per response`)
  const rows: string[][] = []
  t.a.forEach((a, i) => {
    for (const [label, r] of [['plain', a], ['pool', t.b[i]!]] as const) {
      rows.push([`${i + 1}`, label, fmt(r.rps, 0), fmt(r.p50), fmt(r.p99), fmt(us(r, 'portico'), 1), fmt(us(r, 'picker'), 1), fmt(us(r, 'backend'), 1), String(r.failures)])
    }
  })
  out.push(table(['round', 'route', 'req/s', 'p50 ms', 'p99 ms', 'Portico µs/req', 'picker µs/req', 'backend µs/req', 'failures'], rows))
  out.push('')
  const med = (runs: LoadResult[], kind: string) => median(runs.map(r => us(r, kind)))
  const pickerCpu = med(t.b, 'picker')
  const porticoAdded = t.median.bCpuUsPerRequest - t.median.aCpuUsPerRequest
  out.push(`per round, pool/plain req/s: ${t.roundRatios.map(r => fmt(r, 3)).join(', ')}; Portico CPU µs/req: ${t.roundCpuRatios.map(r => fmt(r, 3)).join(', ')}`)
  out.push(`median req/s: plain ${fmt(t.median.aRps, 0)}, pool ${fmt(t.median.bRps, 0)}; median of the rounds' pool/plain: ${fmt(t.rpsRatio, 3)}`)
  out.push(`median Portico CPU µs/req: plain ${fmt(t.median.aCpuUsPerRequest, 1)}, pool ${fmt(t.median.bCpuUsPerRequest, 1)} (+${fmt(porticoAdded, 1)}); median of the rounds' pool/plain: ${fmt(t.cpuRatio, 3)}; the picker's own: ${fmt(pickerCpu, 1)} µs/req`)
  out.push('')
  if (ext !== null) {
    out.push(`extProc: plain against a route with an extProc policy (default modes: the request and the response headers, each answered unchanged by servers/ext-processor.ts, plaintext gRPC), the same throughput runs`)
    const erows: string[][] = []
    ext.a.forEach((a, i) => {
      for (const [label, r] of [['plain', a], ['extproc', ext.b[i]!]] as const) erows.push([`${i + 1}`, label, fmt(r.rps, 0), fmt(r.p50), fmt(r.p99), fmt(us(r, 'portico'), 1), fmt(us(r, 'processor'), 1), String(r.failures)])
    })
    out.push(table(['round', 'route', 'req/s', 'p50 ms', 'p99 ms', 'Portico µs/req', 'processor µs/req', 'failures'], erows))
    out.push(`median Portico CPU µs/req: plain ${fmt(ext.median.aCpuUsPerRequest, 1)}, extproc ${fmt(ext.median.bCpuUsPerRequest, 1)} (+${fmt(ext.median.bCpuUsPerRequest - ext.median.aCpuUsPerRequest, 1)}); median of the rounds' extproc/plain: CPU ${fmt(ext.cpuRatio, 3)}, req/s ${fmt(ext.rpsRatio, 3)}`)
    out.push('')
  }
  out.push(`added latency: open loop at ${opts.rate} req/s, ${opts.duration} s measured after ${opts.warmup} s warm-up per run, ${opts.rounds} rounds in ABBA order`)
  const frows: string[][] = []
  fixed.plain.forEach((a, i) => {
    const b = fixed.pool[i]!
    frows.push([`${i + 1}`, 'plain', fmt(a.rps, 0), fmt(a.p50, 3), fmt(a.p99, 3), '', '', String(a.failures)])
    frows.push([`${i + 1}`, 'pool', fmt(b.rps, 0), fmt(b.p50, 3), fmt(b.p99, 3), fmt(b.p50 - a.p50, 3), fmt(b.p99 - a.p99, 3), String(b.failures)])
  })
  out.push(table(['round', 'route', 'req/s', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'failures'], frows))
  const addedP50 = median(fixed.pool.map((b, i) => b.p50 - fixed.plain[i]!.p50))
  const addedP99 = median(fixed.pool.map((b, i) => b.p99 - fixed.plain[i]!.p99))
  out.push(`median of the rounds' added latency: p50 ${fmt(addedP50, 3)} ms, p99 ${fmt(addedP99, 3)} ms`)
  out.push('')
  out.push(JSON.stringify(rounded({
    bench: 'inference-pool',
    node: process.version,
    cpus,
    loadAverage: load,
    options: opts,
    throughput: { plain: t.a, pool: t.b },
    ...(ext !== null ? { extProc: { plain: ext.a, extproc: ext.b, cpuRatio: ext.cpuRatio, rpsRatio: ext.rpsRatio, addedCpuUsPerRequest: ext.median.bCpuUsPerRequest - ext.median.aCpuUsPerRequest } } : {}),
    fixedRate: fixed,
    median: {
      plainRps: t.median.aRps,
      poolRps: t.median.bRps,
      plainPorticoCpuUsPerRequest: t.median.aCpuUsPerRequest,
      poolPorticoCpuUsPerRequest: t.median.bCpuUsPerRequest,
      poolPickerCpuUsPerRequest: pickerCpu,
      plainP50: median(fixed.plain.map(r => r.p50)),
      plainP99: median(fixed.plain.map(r => r.p99)),
      poolP50: median(fixed.pool.map(r => r.p50)),
      poolP99: median(fixed.pool.map(r => r.p99))
    },
    roundRatios: t.roundRatios,
    roundCpuRatios: t.roundCpuRatios,
    rpsRatio: t.rpsRatio,
    porticoCpuPerRequestRatio: t.cpuRatio,
    porticoAddedCpuUsPerRequest: porticoAdded,
    pickerCpuOverPlainPortico: ratio(pickerCpu, t.median.aCpuUsPerRequest),
    addedLatency: { p50: addedP50, p99: addedP99 }
  })))
  process.stdout.write(out.join('\n') + '\n')
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
