/**
 * Two targets compared in one run, the way a busy shared machine allows: rounds of two
 * throughput runs in ABBA order (A first in odd rounds, B first in even ones), so a steady
 * drift in the machine's load favours neither; the ratio B/A is taken within each round
 * (its two runs back to back) and the median of those ratios reported — steadier than the
 * ratio of medians when the load moves between rounds.
 */

import { measureThroughput, measureWrkThroughput, type CpuProbe, type LoadResult, type ThreadCpuProbe } from './load.ts'
import { fmt, median, ratio, table } from './report.ts'

export interface AbbaTarget {
  /** Label in progress lines and tables. */
  name: string
  url: string
  headers?: Record<string, string>
  body?: string
  /** CPU of this target's own process, when the two are different processes (two builds). */
  cpu?: CpuProbe
  /** And thread by thread (bench/tracing.ts). */
  threads?: ThreadCpuProbe
  /** Called before each of its runs (bench/tracing.ts --placement apart pins its threads). */
  before?: () => void
}

export interface AbbaOptions {
  rounds: number
  duration: number
  warmup: number
  connections: number
  /** CPU of the process under test (the same for both targets). */
  cpu?: CpuProbe
  progress: (message: string) => void
  /**
   * The load generator: autocannon in this process (the default), or wrk (lib/wrk.ts), a C
   * client that takes far less of a small machine's CPU from the targets (GETs only: a
   * target's `headers` or `body` need autocannon).
   */
  load?: 'autocannon' | 'wrk'
}

export interface AbbaResult {
  a: LoadResult[]
  b: LoadResult[]
  /** B/A req/s in each round. */
  roundRatios: number[]
  /** B/A CPU per request in each round. */
  roundCpuRatios: number[]
  /** Medians of the rounds' ratios. */
  rpsRatio: number
  cpuRatio: number
  median: { aRps: number, bRps: number, aCpuUsPerRequest: number, bCpuUsPerRequest: number }
}

export async function compareAbba (a: AbbaTarget, b: AbbaTarget, options: AbbaOptions): Promise<AbbaResult> {
  const [runsA, runsB] = await interleavedRounds([a, b], options)
  return pairRounds(runsA!, runsB!)
}

/**
 * Several targets measured in the same rounds, so each target serves the same load, a
 * drift in the machine's speed favours none, and any two of them can be compared round by
 * round (`pairRounds`). Rounds go in pairs, one order and then its reverse, and each pair
 * starts one target later than the last (ABC CBA, BCA ACB, CAB BAC): with three targets or
 * more, plain ABC CBA keeps the middle one in the middle, and a position that costs
 * something then leans every ratio of that target. `start` shifts the first order (a bench
 * with several groups gives each its own). Returns each target's runs, round by round.
 */
export async function interleavedRounds (targets: AbbaTarget[], options: AbbaOptions & { start?: number }): Promise<LoadResult[][]> {
  const runs: LoadResult[][] = targets.map(() => [])
  for (let round = 1; round <= options.rounds; round++) {
    const order = roundOrder(targets.length, round, options.start ?? 0)
    for (const which of order) {
      const target = targets[which]!
      options.progress(`round ${round}/${options.rounds}: ${target.name} (${options.warmup} s warm-up + ${options.duration} s)`)
      target.before?.()
      const cpu = target.cpu ?? options.cpu
      const throughput = {
        connections: options.connections,
        seconds: options.duration,
        warmupSeconds: options.warmup,
        ...(target.headers !== undefined ? { headers: target.headers } : {}),
        ...(target.body !== undefined ? { body: target.body } : {}),
        ...(cpu !== undefined ? { cpu } : {}),
        ...(target.threads !== undefined ? { threads: target.threads } : {})
      }
      runs[which]!.push(await (options.load === 'wrk' ? measureWrkThroughput(target.url, throughput) : measureThroughput(target.url, throughput)))
    }
  }
  return runs
}

/** The order of `count` targets in round `round` (1-based): see interleavedRounds. */
export function roundOrder (count: number, round: number, start = 0): number[] {
  const shift = (Math.floor((round - 1) / 2) + start) % count
  const order = Array.from({ length: count }, (_, i) => (i + shift) % count)
  return round % 2 === 0 ? order.reverse() : order
}

/**
 * B against A from two targets' runs in the same rounds (interleavedRounds): the rounds' B/A
 * ratios and the medians, a[i] with b[i].
 */
export function pairRounds (a: LoadResult[], b: LoadResult[]): AbbaResult {
  const roundRatios = a.map((r, i) => ratio(b[i]!.rps, r.rps))
  const roundCpuRatios = a.map((r, i) => ratio(b[i]!.cpuUsPerRequest, r.cpuUsPerRequest))
  return {
    a,
    b,
    roundRatios,
    roundCpuRatios,
    rpsRatio: median(roundRatios),
    cpuRatio: median(roundCpuRatios),
    median: {
      aRps: median(a.map(r => r.rps)),
      bRps: median(b.map(r => r.rps)),
      aCpuUsPerRequest: median(a.map(r => r.cpuUsPerRequest)),
      bCpuUsPerRequest: median(b.map(r => r.cpuUsPerRequest))
    }
  }
}

/**
 * Several comparisons of the same two configs as one: their rounds together, the medians
 * taken over all of them (bench/tracing.ts compares several pairs of processes).
 */
export function mergeAbba (results: AbbaResult[]): AbbaResult {
  return pairRounds(results.flatMap(r => r.a), results.flatMap(r => r.b))
}

/**
 * How far the pooled median of B/A req/s ratios can be trusted, when the comparisons are
 * separate pairs of processes: a 95 % bootstrap interval that resamples the pairs, then the
 * rounds within each drawn pair, and takes the pooled median each time. Both levels are
 * resampled because on a shared machine they vary apart: rounds of one pair by the
 * machine's speed from second to second, pairs by the JIT state and code placement each
 * process happened to get (2026-11-28: one pair's median ×1.04, another's ×1.25, in one run
 * at 1 % sampling). A seeded generator, so a run's interval can be reproduced from its ratios.
 */
export function ratioInterval (pairs: AbbaResult[], iterations = 4000, seed = 1): { low: number, high: number } {
  let state = seed >>> 0
  const random = (n: number): number => {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n)
  }
  const medians: number[] = []
  for (let k = 0; k < iterations; k++) {
    const pooled: number[] = []
    for (let p = 0; p < pairs.length; p++) {
      const ratios = pairs[random(pairs.length)]!.roundRatios
      for (let r = 0; r < ratios.length; r++) pooled.push(ratios[random(ratios.length)]!)
    }
    medians.push(median(pooled))
  }
  medians.sort((x, y) => x - y)
  return { low: medians[Math.floor(iterations * 0.025)]!, high: medians[Math.ceil(iterations * 0.975) - 1]! }
}

/**
 * The per-round table (each round's A and B runs) and the line of per-round B/A ratios,
 * `labels` naming A and B.
 */
export function abbaReport (result: AbbaResult, labels: { a: string, b: string }): string[] {
  const rows: string[][] = []
  result.a.forEach((a, i) => {
    for (const [label, r] of [[labels.a, a], [labels.b, result.b[i]!]] as const) {
      rows.push([`${i + 1}`, label, fmt(r.rps, 0), fmt(r.p50), fmt(r.p99), fmt(r.cpuUsPerRequest, 1), String(r.failures)])
    }
  })
  return [
    table(['round', 'route', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'failures'], rows),
    '',
    `per round, ${labels.b}/${labels.a} req/s: ${result.roundRatios.map(r => fmt(r, 3)).join(', ')}; CPU µs/req: ${result.roundCpuRatios.map(r => fmt(r, 3)).join(', ')}`
  ]
}
