/**
 * Before vs after: the same proxied GET through Portico from this checkout ("after") and
 * from another checkout ("before", e.g. a `git worktree` of an older commit with its
 * dependencies installed), to one loopback backend, in ABBA rounds so machine load drifts
 * hit both alike. Each Portico's CPU is its own process's. The question it answers: did a
 * change make the plain data path slower?
 *
 * Run: node bench/builds.ts --before /path/to/other/checkout [--after /path/to/checkout]
 *      [--rounds 4] [--duration 5]
 *      [--warmup 3] [--connections 50] [--log-level warn]
 *      [--env-before K=V]… [--env-after K=V]… [--path /64k] [--load wrk]
 * --env-after (or -before) runs that side with the variable set: one build, two environments
 * (`--before .` for this checkout), e.g. GLIBC_TUNABLES. --path /64k asks the backend for a
 * 64 KiB answer; --load wrk uses wrk (a C client: less of a small machine's CPU).
 * Progress goes to stderr; the table and a final JSON line go to stdout.
 */

import { availableParallelism, loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { abbaReport, compareAbba } from './lib/abba.ts'
import { fmt, rounded } from './lib/report.ts'
import { checkoutBin, singleRouteConfig, startBackend, startPortico, type Server } from './lib/servers.ts'

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    rounds: { type: 'string', default: '4' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    'log-level': { type: 'string', default: 'warn' },
    'env-before': { type: 'string', multiple: true, default: [] },
    'env-after': { type: 'string', multiple: true, default: [] },
    path: { type: 'string', default: '/' },
    load: { type: 'string', default: 'autocannon' }
  }
})
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

if (values.before === undefined) {
  process.stderr.write('usage: node bench/builds.ts --before <checkout dir> [--after <checkout dir>] [--rounds N] [--duration S] [--warmup S] [--connections N] [--log-level L]\n')
  process.exit(2)
}
const beforeBin = checkoutBin(values.before)
const afterBin = values.after !== undefined ? checkoutBin(values.after) : undefined
const opts = { rounds: Number(values.rounds), duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections) }
const logLevel = values['log-level']!
const envOf = (list: string[]): Record<string, string> => Object.fromEntries(list.map(kv => {
  const i = kv.indexOf('=')
  if (i <= 0) throw new Error(`--env-before/--env-after: want KEY=VALUE, got "${kv}"`)
  return [kv.slice(0, i), kv.slice(i + 1)]
}))
const envBefore = envOf(values['env-before']!)
const envAfter = envOf(values['env-after']!)
if (values.load !== 'autocannon' && values.load !== 'wrk') throw new Error('--load: autocannon or wrk')
const load = values.load

function describeEnv (env: Record<string, string>): string {
  const list = Object.entries(env).map(([k, v]) => `${k}=${v}`)
  return list.length === 0 ? '' : ` (${list.join(' ')})`
}

const servers: Server[] = []
try {
  const backend = await startBackend()
  servers.push(backend)
  const config = singleRouteConfig(backend.port)
  const before = await startPortico({ config, logLevel, bin: beforeBin, env: envBefore })
  servers.push(before)
  const after = await startPortico({ config, logLevel, env: envAfter, ...(afterBin !== undefined ? { bin: afterBin } : {}) })
  servers.push(after)
  const loadavgAt = { start: loadavg() }
  const result = await compareAbba(
    { name: 'before', url: `http://127.0.0.1:${before.port}${values.path}`, cpu: before.child.cpuSeconds },
    { name: 'after', url: `http://127.0.0.1:${after.port}${values.path}`, cpu: after.child.cpuSeconds },
    { ...opts, progress, load }
  )
  const cpus = availableParallelism()
  const out = [
    `builds benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by the load generator, both Portico processes (one loaded at a time) and the backend`,
    `before: ${beforeBin}${describeEnv(envBefore)}; after: ${afterBin ?? 'this checkout'}${describeEnv(envAfter)}; GET ${values.path}; LOG_LEVEL=${logLevel}; load average ${loadavgAt.start.map(n => fmt(n)).join(', ')} at the start, ${loadavg().map(n => fmt(n)).join(', ')} at the end`,
    `closed loop (${load}), ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up per run, ${opts.rounds} rounds in ABBA order; CPU µs/req is each Portico's own`,
    ...abbaReport(result, { a: 'before', b: 'after' }),
    '',
    `after/before (median of rounds): req/s ${fmt(result.rpsRatio, 3)}x, CPU µs/req ${fmt(result.cpuRatio, 3)}x (before ${fmt(result.median.aCpuUsPerRequest, 1)}, after ${fmt(result.median.bCpuUsPerRequest, 1)})`
  ]
  process.stdout.write(out.join('\n') + '\n')
  process.stdout.write(JSON.stringify(rounded({ bench: 'builds', node: process.version, cpus, options: { ...opts, logLevel, path: values.path, load, envBefore, envAfter }, rpsRatio: result.rpsRatio, cpuRatio: result.cpuRatio, median: result.median, roundRatios: result.roundRatios, roundCpuRatios: result.roundCpuRatios })) + '\n')
} finally {
  await Promise.all(servers.map(s => s.child.stop()))
}
