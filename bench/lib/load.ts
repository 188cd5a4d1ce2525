/**
 * Load generation. Two shapes:
 * - throughput: autocannon, closed loop (each connection sends its next request when the
 *   previous answer arrives), so requests/s is what the target sustains — or wrk, the same
 *   closed loop from a C client that leaves more of a small machine to the targets;
 * - fixed rate: an open loop over an undici pool that starts requests on a fixed schedule
 *   whatever the answers do (autocannon's `overallRate` sends each second's quota in one
 *   burst, which measures queueing, not the latency a steady load sees).
 * Each measured run is preceded by a warm-up run against the same target, whose figures are
 * dropped (JIT, connection pools, TCP slow start).
 */

import autocannon from 'autocannon'
import { Pool, type Dispatcher } from 'undici'
import { setTimeout as sleep } from 'node:timers/promises'
import { LatencyRecorder } from './latency.ts'
import { runWrk } from './wrk.ts'

export interface LoadResult {
  /** Successful (2xx) responses per second over the measured run. */
  rps: number
  /** Latency percentiles of successful responses, in ms. */
  p50: number
  p99: number
  /** 2xx responses counted. */
  requests: number
  /** Non-2xx responses, transport errors and timeouts. */
  failures: number
  seconds: number
  /** CPU time the measured process used per 2xx response, in µs (NaN when not measured). */
  cpuUsPerRequest: number
  /** The same by kind of thread (ThreadCpuProbe's kinds), when a thread probe was given. */
  threadUsPerRequest?: Record<string, number>
}

/** Cumulative CPU seconds of the process under test (see Child.cpuSeconds). */
export type CpuProbe = () => number
/** Cumulative CPU seconds of each kind of thread of the process under test (see Child.threadCpuSeconds). */
export type ThreadCpuProbe = () => Map<string, number>

export interface ThroughputOptions {
  connections: number
  seconds: number
  warmupSeconds: number
  /** Request headers (e.g. an Origin for CORS). */
  headers?: Record<string, string>
  /** A POST with this body instead of a GET. */
  body?: string
  /** Measures the CPU the target spends per request during the measured run. */
  cpu?: CpuProbe
  /** And thread by thread. */
  threads?: ThreadCpuProbe
}

export interface FixedRateOptions {
  /** Requests started per second. */
  rate: number
  seconds: number
  warmupSeconds: number
  /** Max connections the client pool may open. */
  connections: number
  /** Request headers. */
  headers?: Record<string, string>
  /** A POST with this body instead of a GET. */
  body?: string
  cpu?: CpuProbe
}

/** Closed-loop load with autocannon: a warm-up run, then the measured one. */
export async function measureThroughput (url: string, options: ThroughputOptions): Promise<LoadResult> {
  if (options.warmupSeconds > 0) await runAutocannon(url, options.connections, options.warmupSeconds, options.headers, options.body)
  return withCpu(options, () => runAutocannon(url, options.connections, options.seconds, options.headers, options.body))
}

/** Closed-loop load with wrk (lib/wrk.ts; GETs only): a warm-up run, then the measured one. */
export async function measureWrkThroughput (url: string, options: ThroughputOptions): Promise<LoadResult> {
  if (options.headers !== undefined || options.body !== undefined) throw new Error('wrk load sends plain GETs: no headers or body')
  if (options.warmupSeconds > 0) await runWrk(url, { connections: options.connections, seconds: options.warmupSeconds })
  return withCpu(options, async () => {
    const r = await runWrk(url, { connections: options.connections, seconds: options.seconds })
    return { rps: r.rps, p50: r.p50, p99: r.p99, requests: r.requests, failures: r.failures, seconds: options.seconds, cpuUsPerRequest: NaN }
  })
}

/** Runs `measure` and fills in the CPU per request the probes saw meanwhile. */
async function withCpu (probes: { cpu?: CpuProbe | undefined, threads?: ThreadCpuProbe | undefined }, measure: () => Promise<LoadResult>): Promise<LoadResult> {
  const before = probes.cpu?.() ?? NaN
  const threadsBefore = probes.threads?.()
  const result = await measure()
  const used = (probes.cpu?.() ?? NaN) - before
  const perRequest = (seconds: number): number => result.requests > 0 ? (seconds * 1e6) / result.requests : NaN
  const threadsAfter = probes.threads?.()
  return {
    ...result,
    cpuUsPerRequest: perRequest(used),
    // A kind absent before (a thread started during the run) counts from zero.
    ...(threadsBefore !== undefined && threadsAfter !== undefined ? { threadUsPerRequest: Object.fromEntries([...threadsAfter].map(([kind, s]) => [kind, perRequest(s - (threadsBefore.get(kind) ?? 0))])) } : {})
  }
}

function runAutocannon (url: string, connections: number, seconds: number, headers?: Record<string, string>, body?: string): Promise<LoadResult> {
  const latency = new LatencyRecorder()
  return new Promise((resolve, reject) => {
    const request = body !== undefined ? { method: 'POST' as const, body } : {}
    const instance = autocannon({ url, connections, duration: seconds, pipelining: 1, timeout: 10, ...request, ...(headers !== undefined ? { headers } : {}) }, (err, result) => {
      if (err !== null) return reject(err)
      resolve({
        rps: result['2xx'] / result.duration,
        p50: latency.percentile(50),
        p99: latency.percentile(99),
        requests: result['2xx'],
        failures: result.non2xx + result.errors + result.timeouts,
        seconds: result.duration,
        cpuUsPerRequest: NaN
      })
    })
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latency.add(ms)
    })
  })
}

/** Open-loop load at a fixed rate: a warm-up run, then the measured one. */
export async function measureFixedRate (url: string, options: FixedRateOptions): Promise<LoadResult> {
  const target = new URL(url)
  const pool = new Pool(target.origin, { connections: options.connections, pipelining: 1 })
  try {
    const path = target.pathname + target.search
    const request = { path, method: options.body !== undefined ? 'POST' as const : 'GET' as const, ...(options.headers !== undefined ? { headers: options.headers } : {}), ...(options.body !== undefined ? { body: options.body } : {}) }
    if (options.warmupSeconds > 0) await runFixedRate(pool, request, options.rate, options.warmupSeconds)
    return await withCpu(options, () => runFixedRate(pool, request, options.rate, options.seconds))
  } finally {
    await pool.close()
  }
}

/**
 * Every ~1 ms, starts as many requests as the schedule says are due. Latency runs from the
 * moment a request is handed to the pool (queueing in the pool included) to its last byte.
 */
async function runFixedRate (pool: Pool, request: Dispatcher.RequestOptions, rate: number, seconds: number): Promise<LoadResult> {
  const latency = new LatencyRecorder()
  const inFlight = new Set<Promise<void>>()
  let failures = 0
  let started = 0
  const total = Math.round(rate * seconds)
  const t0 = performance.now()

  const one = async () => {
    const begin = performance.now()
    try {
      const res = await pool.request(request)
      await res.body.dump()
      if (res.statusCode >= 200 && res.statusCode < 300) latency.add(performance.now() - begin)
      else failures++
    } catch {
      failures++
    }
  }

  while (started < total) {
    const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate))
    for (; started < due; started++) {
      const p = one()
      inFlight.add(p)
      void p.finally(() => inFlight.delete(p))
    }
    await sleep(1)
  }
  const elapsed = (performance.now() - t0) / 1000
  await Promise.all(inFlight)
  return {
    rps: latency.count / elapsed,
    p50: latency.percentile(50),
    p99: latency.percentile(99),
    requests: latency.count,
    failures,
    seconds: elapsed,
    cpuUsPerRequest: NaN
  }
}
