/**
 * Whether V8's memory reducer still costs Portico anything after an idle spell, and what it
 * saves (issue 54). Two Portico processes side by side (WORKERS=1, the semi-space flag given,
 * so neither starts Node again): one with `--no-memory-reducer`, one with `--memory-reducer`
 * (V8's default, and Portico's since 2026-12-06: packages/proxy/src/v8-flags.ts). Each: ready,
 * idle --settle s (start-up's collection, and the reducer's first run in the one that has
 * it), the load — `--wrk` s of wrk -c50 when given (enough allocation for mark-compacts,
 * after which V8 starts its reducer again; GETs over 10 connections alone run none), then
 * `--warmup` GETs and `--requests` counted GETs ("before") — then idle until the reducer has
 * run its heap-reducing GCs since the load (`Mark-Compact (reduce)` under --trace-gc, less
 * start-up's own, reason `testing`), plus --settle s, at most --idle s (both processes idle
 * as long), then the load again ("after"), and V8's print of
 * `process.nextTick`'s feedback (the tick literal's `DefineKeyedOwnPropertyInLiteral` slots:
 * megamorphic is the slow mode src/tick-maps.ts holds off).
 *
 * Reported per process: the reducing GCs (before the load; while idle after it), private
 * memory (smaps_rollup Private_Clean + Private_Dirty, MiB) after start, after the load and
 * after the idle, the tick literal's slots, and with --callgrind the instructions per GET on
 * the event-loop thread and all threads, before and after the idle (the counted windows
 * are callgrind dumps; a count does not move with the machine's load). Memory is read
 * without --callgrind (valgrind's own memory is in a process it runs). Under valgrind the load
 * is too slow for a mark-compact: there the reducer runs at start only.
 * --reverse starts the processes in the other order (the first start after a change writes
 * Node's compile cache, and held ~5 MiB more in one run).
 *
 * Run: node bench/memory-reducer.ts [--callgrind] [--warmup 3000] [--requests 1000] [--idle 300] [--settle 15] [--reverse] [--wrk SECONDS]
 */

import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { SEMI_SPACE_MB } from '@portico/proxy/v8-flags'
import { fmt, rounded, table } from './lib/report.ts'
import { freePort, scratchDir, startNode, type Child } from './lib/children.ts'
import { runWrk } from './lib/wrk.ts'
import { dumpTotals, haveValgrind, run, sendRequests } from './lib/callgrind.ts'
import { PORTICO_BIN, porticoEnv, singleRouteConfig, startBackend } from './lib/servers.ts'

const { values } = parseArgs({ options: { callgrind: { type: 'boolean', default: false }, warmup: { type: 'string', default: '3000' }, requests: { type: 'string', default: '1000' }, idle: { type: 'string', default: '300' }, settle: { type: 'string', default: '15' }, reverse: { type: 'boolean', default: false }, wrk: { type: 'string', default: '0' } } })
const CALLGRIND = values.callgrind
const WARMUP = Number(values.warmup)
const REQUESTS = Number(values.requests)
const IDLE_S = Number(values.idle)
const SETTLE_S = Number(values.settle)
const WRK_S = Number(values.wrk)
const progress = (msg: string): void => { process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${msg}\n`) }

/** Preloaded: on SIGUSR2, V8's print of nextTick (to C's stdout, flushed when the process exits). */
const PROBE = `
const debugPrint = new Function('f', '%DebugPrint(f)')
process.on('SIGUSR2', () => { debugPrint(process.nextTick); process.stderr.write('PROBE printed\\n') })
`

const privateMiB = (pid: number): number => readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n').filter(l => /^Private_(Clean|Dirty):/.test(l)).reduce((s, l) => s + Number(/(\d+)/.exec(l)![1]), 0) / 1024
/**
 * The heap-reducing full GCs V8's memory reducer ran: `Mark-Compact (reduce)` under --trace-gc,
 * less start-up's own (src/startup-gc.ts: `gc()`, reason `testing`).
 */
const reducingGcs = (output: string): number => output.split('\n').filter(l => l.includes('Mark-Compact (reduce)') && !l.includes('testing')).length
/** The full GCs of any reason in `output` (for the report: what ran, and why). */
const markCompacts = (output: string): string[] => output.split('\n').filter(l => l.includes('Mark-Compact'))

interface Subject { name: string, flag: string, dir: string, child: Child, url: string, memory: number[], reducingBefore: number, reducingIdle: number, slots: string[], counts: Array<{ main: number, all: number }> }

async function start (name: string, flag: string, backendPort: number): Promise<Subject> {
  const dir = scratchDir(`memory-reducer-${flag}`)
  const port = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, singleRouteConfig(backendPort).replaceAll('{port}', String(port)))
  writeFileSync(join(dir, 'probe.mjs'), PROBE)
  const node = [process.execPath, `--max-semi-space-size=${SEMI_SPACE_MB}`, flag, '--trace-gc', '--allow-natives-syntax', '--random-seed=1', '--import', join(dir, 'probe.mjs'), PORTICO_BIN, '-f', configPath]
  const valgrind = ['--tool=callgrind', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`]
  const child = await startNode({ name, ...(CALLGRIND ? { command: 'valgrind', args: [...valgrind, ...node] } : { args: node.slice(1) }), env: porticoEnv('warn'), cwd: dir, readyPort: port, ownPort: true, timeoutMs: 600_000 })
  return { name, flag, dir, child, url: `http://127.0.0.1:${port}`, memory: [], reducingBefore: 0, reducingIdle: 0, slots: [], counts: [] }
}

/** `--wrk` s of wrk -c50 when asked, `--warmup` GETs, then `--requests` counted (a callgrind dump when counting). */
async function load (s: Subject): Promise<void> {
  // A heavier load first (wrk -c50): enough allocation for mark-compacts, after which V8 starts its reducer again.
  if (WRK_S > 0) await runWrk(`${s.url}/small`, { connections: 50, seconds: WRK_S })
  await sendRequests(s.url, { path: '/small', method: 'GET' }, WARMUP)
  if (CALLGRIND) await run('callgrind_control', ['--zero', String(s.child.proc.pid)])
  await sendRequests(s.url, { path: '/small', method: 'GET' }, REQUESTS)
  if (CALLGRIND) await run('callgrind_control', ['--dump', String(s.child.proc.pid)])
}

async function main (): Promise<void> {
  if (CALLGRIND && !await haveValgrind('memory-reducer')) return
  // The backend idles as long: without the reducer, so that only the proxies differ.
  const backend = await startBackend(undefined, ['--no-memory-reducer'])
  const subjects: Subject[] = []
  try {
    // Started in either order (--reverse): the first start writes Node's compile cache for both.
    const variants = [['--no-memory-reducer (Portico until 2026-12-06)', '--no-memory-reducer'], ['--memory-reducer (V8\'s default, Portico\'s)', '--memory-reducer']] as const
    for (const [name, flag] of values.reverse ? [...variants].reverse() : variants) subjects.push(await start(name, flag, backend.port))
    subjects.sort((a, b) => a.flag === '--no-memory-reducer' ? -1 : b.flag === '--no-memory-reducer' ? 1 : 0)
    progress(`both ready; settling ${SETTLE_S} s`)
    await sleep(SETTLE_S * 1000)
    for (const s of subjects) {
      s.memory.push(privateMiB(s.child.proc.pid!))
      progress(`${s.name}: full GCs since start:\n${markCompacts(s.child.output()).join('\n')}`)
    }
    // One at a time: under valgrind, two warm-ups on two shared cores only slow each other.
    for (const s of subjects) {
      progress(`${s.name}: ${WARMUP} + ${REQUESTS} GETs (before)`)
      await load(s)
    }
    const loadEnd: number[] = []
    for (const s of subjects) {
      s.memory.push(privateMiB(s.child.proc.pid!))
      s.reducingBefore = reducingGcs(s.child.output())
      loadEnd.push(s.child.output().length)
    }
    progress(`idle until the reducer has run (at most ${IDLE_S} s)`)
    const idleStart = Date.now()
    const reducer = subjects[1]!
    while (Date.now() - idleStart < IDLE_S * 1000 && reducingGcs(reducer.child.output()) === reducer.reducingBefore) await sleep(1000)
    const more = Math.min(SETTLE_S * 1000, Math.max(0, IDLE_S * 1000 - (Date.now() - idleStart)))
    progress(`${fmt((Date.now() - idleStart) / 1000, 0)} s idle (${reducingGcs(reducer.child.output()) - reducer.reducingBefore} reducing GCs); ${fmt(more / 1000, 0)} s more`)
    await sleep(more)
    const idleS = (Date.now() - idleStart) / 1000
    for (const [i, s] of subjects.entries()) {
      s.memory.push(privateMiB(s.child.proc.pid!))
      s.reducingIdle = reducingGcs(s.child.output()) - s.reducingBefore
      progress(`${s.name}: full GCs while idle:\n${markCompacts(s.child.output().slice(loadEnd[i])).join('\n')}`)
    }
    for (const s of subjects) {
      progress(`${s.name}: ${WARMUP} + ${REQUESTS} GETs (after)`)
      await load(s)
      s.child.proc.kill('SIGUSR2')
      for (let i = 0; i < 600 && !s.child.output().includes('PROBE printed'); i++) await sleep(100)
    }
    for (const s of subjects) {
      await s.child.stop(60_000)
      s.slots = [...s.child.output().matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map(m => m[1]!)
      if (CALLGRIND) {
        for (const dump of [1, 2]) {
          const { main, all } = dumpTotals(s.dir, dump)
          s.counts.push({ main: main / REQUESTS, all: all / REQUESTS })
        }
      }
    }
    const slots = (s: Subject): string => s.slots.length === 0 ? 'not printed' : [...new Set(s.slots)].join(', ') + ` (${s.slots.length} slots)`
    const lines = [
      `memory-reducer: Node ${process.version}${CALLGRIND ? ', callgrind' : ''}; WORKERS=1; ${WARMUP} + ${REQUESTS} GETs (10 keep-alive connections) before and after ${fmt(idleS, 0)} s idle`,
      table(['process', 'reducing GCs before the load', 'while idle', 'private MiB after start', 'after the load', 'after the idle', 'tick literal after'], subjects.map(s => [s.name, String(s.reducingBefore), String(s.reducingIdle), ...s.memory.map(m => fmt(m, 1)), slots(s)]))
    ]
    if (CALLGRIND) {
      lines.push('', 'instructions per GET (user space)', table(['process', 'event loop before', 'after', 'all threads before', 'after'], subjects.map(s => [s.name, fmt(s.counts[0]!.main, 0), fmt(s.counts[1]!.main, 0), fmt(s.counts[0]!.all, 0), fmt(s.counts[1]!.all, 0)])))
    }
    lines.push(JSON.stringify(rounded({ bench: 'memory-reducer', node: process.version, callgrind: CALLGRIND, idleSeconds: idleS, processes: subjects.map(s => ({ name: s.name, reducingBefore: s.reducingBefore, reducingIdle: s.reducingIdle, privateMiB: s.memory, slots: [...new Set(s.slots)], counts: s.counts })) })))
    process.stdout.write(lines.join('\n') + '\n')
  } finally {
    await Promise.all(subjects.map(s => s.child.stop()))
    await backend.child.stop()
  }
}

await main()
