/**
 * Before vs after: the same proxied GET through Portico from this checkout ("after") and
 * from another checkout ("before", e.g. a `git worktree` of an older commit with its
 * dependencies installed), to one loopback backend, in ABBA rounds so machine load drifts
 * hit both alike. Each Portico's CPU is its own process's. The question it answers: did a
 * change make the plain data path slower?
 *
 * Run: node bench/builds.ts --before /path/to/other/checkout [--after /path/to/checkout]
 *      [--rounds 4] [--duration 5]
 *      [--warmup 3] [--connections 50] [--log-level warn] [--path /] [--load autocannon|wrk]
 * (`--path /64k`: the benchmark backend's 64 KiB answer; `--load wrk`: the C client, which
 * leaves more of a small machine to the servers.)
 * Progress goes to stderr; the table and a final JSON line go to stdout.
 */

import { existsSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { abbaReport, compareAbba } from './lib/abba.ts'
import { fmt, rounded } from './lib/report.ts'
import { singleRouteConfig, startBackend, startPortico, type Server } from './lib/servers.ts'

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    rounds: { type: 'string', default: '4' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    'log-level': { type: 'string', default: 'warn' },
    path: { type: 'string', default: '/' },
    load: { type: 'string', default: 'autocannon' }
  }
})
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

if (values.before === undefined) {
  process.stderr.write('usage: node bench/builds.ts --before <checkout dir> [--after <checkout dir>] [--rounds N] [--duration S] [--warmup S] [--connections N] [--log-level L]\n')
  process.exit(2)
}
const beforeBin = join(resolve(values.before), 'packages/proxy/bin/portico.ts')
if (!existsSync(beforeBin)) {
  process.stderr.write(`bench: ${beforeBin} does not exist\n`)
  process.exit(2)
}
const afterBin = values.after !== undefined ? join(resolve(values.after), 'packages/proxy/bin/portico.ts') : undefined
if (afterBin !== undefined && !existsSync(afterBin)) {
  process.stderr.write(`bench: ${afterBin} does not exist\n`)
  process.exit(2)
}
const opts = { rounds: Number(values.rounds), duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections) }
const logLevel = values['log-level']!
const path = values.path!
const loadGenerator = values.load === 'wrk' ? 'wrk' : 'autocannon'

const servers: Server[] = []
try {
  const backend = await startBackend()
  servers.push(backend)
  const config = singleRouteConfig(backend.port)
  const before = await startPortico({ config, logLevel, bin: beforeBin })
  servers.push(before)
  const after = await startPortico({ config, logLevel, ...(afterBin !== undefined ? { bin: afterBin } : {}) })
  servers.push(after)
  const load = { start: loadavg() }
  const result = await compareAbba(
    { name: 'before', url: `http://127.0.0.1:${before.port}${path}`, cpu: before.child.cpuSeconds },
    { name: 'after', url: `http://127.0.0.1:${after.port}${path}`, cpu: after.child.cpuSeconds },
    { ...opts, progress, load: loadGenerator }
  )
  const cpus = availableParallelism()
  const out = [
    `builds benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by the load generator, both Portico processes (one loaded at a time) and the backend`,
    `before: ${beforeBin}; after: ${afterBin ?? 'this checkout'}; LOG_LEVEL=${logLevel}; load average ${load.start.map(n => fmt(n)).join(', ')} at the start, ${loadavg().map(n => fmt(n)).join(', ')} at the end`,
    `closed loop (${loadGenerator}), GET ${path}, ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up per run, ${opts.rounds} rounds in ABBA order; CPU µs/req is each Portico's own`,
    ...abbaReport(result, { a: 'before', b: 'after' }),
    '',
    `after/before (median of rounds): req/s ${fmt(result.rpsRatio, 3)}x, CPU µs/req ${fmt(result.cpuRatio, 3)}x (before ${fmt(result.median.aCpuUsPerRequest, 1)}, after ${fmt(result.median.bCpuUsPerRequest, 1)})`
  ]
  process.stdout.write(out.join('\n') + '\n')
  process.stdout.write(JSON.stringify(rounded({ bench: 'builds', node: process.version, cpus, options: { ...opts, logLevel, path, load: loadGenerator }, rpsRatio: result.rpsRatio, cpuRatio: result.cpuRatio, median: result.median, roundRatios: result.roundRatios, roundCpuRatios: result.roundCpuRatios })) + '\n')
} finally {
  await Promise.all(servers.map(s => s.child.stop()))
}
