/**
 * Memory under load against GC work, for V8 flags that cap the old generation's growth
 * between mark-compacts (issue 54: ≤ 80 MiB private under 50 keep-alive connections with one
 * event loop). Portico (WORKERS=1, this tree) started with Portico's V8 flags and one variant
 * flag each (none: as bin/portico.ts runs it, with its --heap-growing-percent; a variant of
 * that flag replaces it, `--heap-growing-percent=0` being V8's own factor), idle 2 s
 * (start-up's collection), then wrk -c50 for --seconds through it to the benchmark backend;
 * variants run in rotated order, round by round. Per run: private memory (smaps_rollup
 * Private_*) sampled every 250 ms under load (median and largest), the process's CPU µs per
 * request, and the mark-compacts under load (--trace-gc: how many, and
 * their main-thread ms per 10,000 requests).
 *
 * Run: node bench/heap-growing.ts [--rounds 2] [--seconds 12] [--path /small] [--variant=FLAG]…
 * (`--variant=`: none; without --variant: none and --heap-growing-percent=0)
 */

import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { MALLOC_TUNABLES } from '@portico/proxy/malloc-tunables'
import { MEMORY_REDUCER_FLAG, SEMI_SPACE_FLAG } from '@portico/proxy/v8-flags'
import { fmt, median, table } from './lib/report.ts'
import { freePort, scratchDir, startNode } from './lib/children.ts'
import { runWrk } from './lib/wrk.ts'
import { PORTICO_BIN, porticoEnv, singleRouteConfig, startBackend } from './lib/servers.ts'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '2' }, seconds: { type: 'string', default: '12' }, path: { type: 'string', default: '/small' }, variant: { type: 'string', multiple: true, default: ['', '--heap-growing-percent=0'] } } })
const SECONDS = Number(values.seconds)
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }
const privateMiB = (pid: number): number => readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n').filter(l => /^Private_(Clean|Dirty):/.test(l)).reduce((s, l) => s + Number(/(\d+)/.exec(l)![1]), 0) / 1024

interface Run { medianMiB: number, maxMiB: number, cpuUsPerRequest: number, markCompacts: number, mcMsPer10k: number, rps: number }

async function once (variant: string, backend: number): Promise<Run> {
  const dir = scratchDir('heap-growing')
  const port = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, singleRouteConfig(backend).replaceAll('{port}', String(port)))
  const child = await startNode({ name: `portico ${variant || 'default'}`, args: [SEMI_SPACE_FLAG, MEMORY_REDUCER_FLAG, '--trace-gc', ...(variant === '' ? [] : [variant]), PORTICO_BIN, '-f', configPath], env: { ...porticoEnv('warn'), GLIBC_TUNABLES: MALLOC_TUNABLES }, readyPort: port, cwd: dir })
  try {
    await sleep(2000)
    const pid = child.proc.pid!
    const before = child.output().length
    const cpu0 = child.cpuSeconds()
    const samples: number[] = []
    const sampler = setInterval(() => samples.push(privateMiB(pid)), 250)
    const wrk = await runWrk(`http://127.0.0.1:${port}${values.path!}`, { connections: 50, seconds: SECONDS })
    clearInterval(sampler)
    const cpu = child.cpuSeconds() - cpu0
    const mcs = child.output().slice(before).split('\n').filter(l => /Mark-Compact/.test(l))
    const mcMs = mcs.reduce((s, l) => s + Number(/MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \//.exec(l)?.[1] ?? 0), 0)
    return { medianMiB: median(samples), maxMiB: Math.max(...samples), cpuUsPerRequest: cpu * 1e6 / wrk.requests, markCompacts: mcs.length, mcMsPer10k: mcMs * 10_000 / wrk.requests, rps: wrk.rps }
  } finally {
    await child.stop()
  }
}

const backend = await startBackend()
try {
  const variants = values.variant!
  const runs = new Map<string, Run[]>(variants.map(v => [v, []]))
  for (let r = 0; r < Number(values.rounds); r++) {
    const order = r % 2 === 0 ? variants : [...variants].reverse()
    for (const v of order) {
      progress(`round ${r + 1}: ${v || 'default'}`)
      runs.get(v)!.push(await once(v, backend.port))
    }
  }
  const rows = variants.map(v => {
    const rs = runs.get(v)!
    const m = (f: (r: Run) => number, d = 1) => rs.map(r => fmt(f(r), d)).join(' / ')
    return [v || 'default', m(r => r.medianMiB), m(r => r.maxMiB), m(r => r.cpuUsPerRequest), m(r => r.markCompacts, 0), m(r => r.mcMsPer10k), m(r => r.rps, 0)]
  })
  process.stdout.write(`heap-growing: WORKERS=1, wrk -c50 ${SECONDS} s ${values.path}, runs ${values.rounds} (each figure per run)\n` + table(['variant', 'private MiB median', 'private MiB max', 'CPU µs/request', 'mark-compacts', 'MC ms / 10k req', 'req/s'], rows) + '\n')
} finally {
  await backend.child.stop()
}
