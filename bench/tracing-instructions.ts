/**
 * What OpenTelemetry tracing costs a proxied GET, counted in instructions rather than timed:
 * Portico runs under valgrind's callgrind, which counts every instruction each thread
 * executes, so the same build, config and requests give the same count run after run
 * whatever else the machine is doing (two runs of one config and seed agree within ~0.2 %). On a small
 * shared machine requests/s moves by 5 % and more between identical runs (bench/tracing.ts
 * runs an A/A control to show it), too much to see a cost of 1–3 %; a count has no such
 * noise, only the JIT's (below).
 *
 * For each config — tracing off, configured and sampling nothing (0 %), 1 % and 100 % of
 * requests (randomSampling), exported over OTLP/HTTP to a sink in another process — the
 * proxy gets `--warmup` requests, the counters are zeroed (callgrind_control), `--requests`
 * more are sent over 10 keep-alive connections and the counters dumped. Reported per request:
 *   - request thread: the event loop that serves the requests (what bounds requests/s);
 *   - all threads: with V8's helper threads (GC, compilers) and the span export thread.
 *
 * What the count does not settle alone: where V8's JIT lands. Which functions TurboFan
 * inlines, which stay in Maglev, which loads go through the generic inline-cache builtins,
 * can differ between processes (with --single-threaded, say, the configs even swapped
 * order). So each config can run under several V8 random seeds (`--seeds`,
 * `--random-seed`): the table gives the median and the range (here within ~1–2 %), and a
 * difference means something only beyond the ranges. And what a module costs can depend on
 * when it loads, not only on what runs: docs/tracing-cost-log.md ("Counted, not timed") has
 * the case found with this bench and `--node-flags=--import=…`.
 *
 * Three things valgrind changes, and what is done about them:
 *   - It runs one thread at a time, so V8's compiler threads finish their jobs many more
 *     requests later than in real time: after 3000 requests many hot functions still ran
 *     in their baseline or Maglev code (an untraced request counted ~148k instructions;
 *     after 20000, ~126k, nearly all of it TurboFan's). And a function that deoptimizes late
 *     (at 1 % sampling, when sampled requests first take their paths) can still be in
 *     Maglev code after 20000: the 1 % config then counted ~2,000 more (with `run` in
 *     Maglev) than after 60000. The default warm-up is 60000 so the counts are of the code
 *     a busy proxy runs; it costs little, as each process's start under valgrind is most
 *     of its time.
 *   - Its clock runs ~50× slower than the machine's, so work done per unit of time (the 1 s
 *     span handover, the export thread's 100 ms gather and each export call) lands on ~50×
 *     fewer requests. The export thread's share of "all threads" is therefore overstated at
 *     1 %; the request thread's figure has no such term.
 *   - V8 sizes the young generation by how fast allocation goes in time, so under the slowed
 *     clock a small change (one more header) can halve it and double the scavenges. Every
 *     config runs with the young generation fixed at the size Portico sets as its maximum
 *     (--min-semi-space-size = --max-semi-space-size), so the counts compare the requests'
 *     work, not where V8's sizing happened to land.
 *
 * Needs valgrind (Debian's package). Each config and seed takes about a minute; two run at a
 * time.
 *
 * Run: node bench/tracing-instructions.ts [--seeds 1] [--configs off,0,1,100,log,log-otlp] [--warmup 60000] [--requests 10000]
 *      [--node-flags='--a-v8-flag'] [--keep DIR] [--functions N] [--servers] [--before DIR]
 *
 * --functions N lists, per config, the N functions of the request thread whose instructions
 * per request moved most against off (log-otlp: against log) — V8's compiled code named through --perf-basic-prof
 * (bench/lib/callgrind.ts) — which is how the costs in docs/tracing-cost-log.md were
 * found: a header check's loop, a module loaded on the request's thread, a clone.
 *
 * --keep DIR keeps each run's callgrind files in DIR/<config>-<seed>/ (one per thread and
 * dump; …-01 is the request thread) and what the process printed, for `callgrind_annotate`
 * (which names V8's JIT code only through the perf map --functions reads; with --functions
 * that map is kept there too, as perf-<pid>.map).
 */

import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { MEMORY_REDUCER_FLAG, SEMI_SPACE_MB } from '@portico/proxy/v8-flags'
import { fmt, median, rounded, table } from './lib/report.ts'
import { dumpTotals, functionCounts, haveValgrind, jitCodeMap, movedFunctionsTable, run, sendRequests } from './lib/callgrind.ts'
import { freePort, scratchDir, startNode } from './lib/children.ts'
import { checkoutBin, PORTICO_BIN, porticoEnv, singleRouteConfig, startBackend, startOtlpSink, tracingConfig, type Server } from './lib/servers.ts'

const { values } = parseArgs({ options: { warmup: { type: 'string', default: '60000' }, requests: { type: 'string', default: '10000' }, 'node-flags': { type: 'string', default: '' }, seeds: { type: 'string', default: '1' }, keep: { type: 'string' }, functions: { type: 'string', default: '0' }, configs: { type: 'string', default: 'off,0,1,100' }, servers: { type: 'boolean', default: false }, before: { type: 'string' } } })
const WARMUP = Number(values.warmup)
/** How many functions to list per config: those whose instructions per request moved most against off (0: none). */
const FUNCTIONS = Number(values.functions)
const REQUESTS = Number(values.requests)
/** Extra Node/V8 flags for every config (to try a JIT hypothesis on both sides). */
const NODE_FLAGS = [...values['node-flags'].split(/\s+/).filter(f => f !== ''), ...(FUNCTIONS > 0 ? ['--perf-basic-prof'] : [])]
/** V8 random seeds each config runs under (1..N): each lands the JIT somewhere else. */
const SEEDS = Number(values.seeds)
/**
 * Which configs to run: off, the sampling percentages, `log` (the access log, LOG_LEVEL=info)
 * and `log-otlp` (the access log exported as OTLP logs too). off always runs: the others are
 * compared with it, log-otlp with log.
 */
const CONFIGS = new Set(['off', ...values.configs.split(',')])
/**
 * --before DIR: `off` also runs on the build in DIR (a checkout with its node_modules, as
 * bench/builds.ts takes), as config `before`; with --functions the table then lists what this
 * build's `off` runs more or less than the older one — how a data-path regression is found
 * without timing anything.
 */
const BEFORE = values.before === undefined ? undefined : checkoutBin(values.before)
if (BEFORE !== undefined) CONFIGS.add('before')
/** Where to keep each run's callgrind files (for callgrind_annotate); otherwise they go with the scratch directory. */
const KEEP = values.keep
/**
 * --servers: the admin, stats and readiness servers on (loopback, ports of the system's
 * choosing), as a default deployment runs them; without it they are off, as in the other benches.
 */
const SERVERS = values.servers
const PORTICO = PORTICO_BIN
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

interface Config {
  name: string
  /** Prepended to the one-route config. */
  yaml: string
  /** LOG_LEVEL: info writes the access log. */
  level: string
  /** The config its ratio is against. */
  base: string
  /** Another build's bin/portico.ts (--before); this checkout's otherwise. */
  bin?: string
}

interface Count {
  name: string
  seed: number
  /** Instructions per request: the event loop's thread, and every thread of the process. */
  requestThread: number
  allThreads: number
  /** With --functions: the request thread's instructions by function (whole count, not per request). */
  functions?: Map<string, number>
}


async function measure (name: string, seed: number, tracing: string, logLevel: string, backendPort: number, bin = PORTICO): Promise<Count> {
  const dir = KEEP === undefined ? scratchDir(`callgrind-${name}-${seed}`) : join(KEEP, `${name.replace(' %', '')}-${seed}`)
  if (KEEP !== undefined) mkdirSync(dir, { recursive: true })
  const port = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, tracing + singleRouteConfig(backendPort).replaceAll('{port}', String(port)))
  // The semi-space and memory-reducer flags on the command line: bin/portico.ts then runs as
  // it is (it starts Node again only when one was not given, which valgrind would not follow).
  const child = await startNode({
    name: `portico under callgrind (${name}, seed ${seed})`,
    command: 'valgrind',
    args: [
      '--tool=callgrind', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
      process.execPath, `--max-semi-space-size=${SEMI_SPACE_MB}`, `--min-semi-space-size=${SEMI_SPACE_MB}`, MEMORY_REDUCER_FLAG, `--random-seed=${seed}`, ...NODE_FLAGS, bin, '-f', configPath
    ],
    env: { ...porticoEnv(logLevel), ...(SERVERS ? { ADMIN_ADDR: '127.0.0.1:0', STATS_ADDR: '127.0.0.1:0', READINESS_ADDR: '127.0.0.1:0' } : {}) },
    // --perf-basic-prof (--functions) also makes V8 write isolate-*-v8.log files where the
    // process runs: in the run's directory, not the repository.
    cwd: dir,
    readyPort: port,
    timeoutMs: 180_000
  })
  try {
    const url = `http://127.0.0.1:${port}`
    progress(`${name}, seed ${seed}: ${WARMUP} requests to warm up, then ${REQUESTS} counted`)
    await sendRequests(url, { path: '/', method: 'GET' }, WARMUP)
    await run('callgrind_control', ['--zero', String(child.proc.pid)])
    await sendRequests(url, { path: '/', method: 'GET' }, REQUESTS)
    await run('callgrind_control', ['--dump', String(child.proc.pid)])
  } finally {
    // valgrind writes its last part file on the way out.
    await child.stop(30_000)
    if (KEEP !== undefined) writeFileSync(join(dir, 'output.log'), child.output())
  }
  const { main, all, mainFile } = dumpTotals(dir, 1)
  if (main === 0) throw new Error(`${name}: no callgrind dump found in ${dir}`)
  const count: Count = { name, seed, requestThread: main / REQUESTS, allThreads: all / REQUESTS }
  if (FUNCTIONS > 0) {
    const pid = child.proc.pid!
    count.functions = await functionCounts(mainFile, jitCodeMap(pid))
    // Kept with the run's files, for reading callgrind's caller trees by hand (JIT addresses).
    // (jitCodeMap reads no map when V8 wrote none; nor is one copied then.)
    if (KEEP !== undefined && existsSync(`/tmp/perf-${pid}.map`)) copyFileSync(`/tmp/perf-${pid}.map`, join(dir, `perf-${pid}.map`))
    rmSync(`/tmp/perf-${pid}.map`, { force: true })
  }
  return count
}

/**
 * With --functions N: per config, the N functions of the request thread whose instructions
 * per request moved most against off (seed 1 of each), JIT code named with its tier.
 */
function functionTables (counts: Count[], configs: Config[]): string[] {
  if (FUNCTIONS === 0) return []
  const first = (name: string): Count => counts.find(c => c.name === name && c.seed === 1)!
  return configs.filter(c => c.name !== c.base).map(c => c.name === 'before'
    // Read the other way: what this build runs more (+) or less (−) than the older one.
    ? movedFunctionsTable('request thread, off (this build) against before (seed 1)', first('before').functions!, first('off').functions!, REQUESTS, FUNCTIONS)
    : movedFunctionsTable(`request thread, ${c.name} against ${c.base} (seed 1)`, first(c.base).functions!, first(c.name).functions!, REQUESTS, FUNCTIONS))
}

async function main (): Promise<void> {
  if (!await haveValgrind('tracing-instructions')) return
  const servers: Server[] = []
  try {
    const backend = await startBackend()
    const sink = await startOtlpSink()
    servers.push(backend, sink)
    const traced = (sampling: string): string => tracingConfig(`http://127.0.0.1:${sink.port}`, sampling)
    // The access log (LOG_LEVEL=info) alone, and with its OTLP export: `log otlp` is compared with `log`.
    const otlpLog = `config:\n  accessLog:\n    otlp:\n      otlpEndpoint: http://127.0.0.1:${sink.port}\n      otlpProtocol: http\n`
    const all: Config[] = [
      { name: 'off', yaml: '', level: 'warn', base: 'off' },
      { name: '0 %', yaml: traced('false'), level: 'warn', base: 'off' },
      { name: '1 %', yaml: traced('0.01'), level: 'warn', base: 'off' },
      { name: '100 %', yaml: traced('true'), level: 'warn', base: 'off' },
      { name: 'log', yaml: '', level: 'info', base: 'off' },
      { name: 'log otlp', yaml: otlpLog, level: 'info', base: 'log' },
      ...(BEFORE !== undefined ? [{ name: 'before', yaml: '', level: 'warn', base: 'off', bin: BEFORE }] : [])
    ]
    const configs = all.filter(c => CONFIGS.has(c.name.replace(' %', '').replace(' ', '-')))
    if (configs.some(c => !configs.some(b => b.name === c.base))) throw new Error(`--configs: log-otlp is compared with log; run both`)
    // Two at a time: the counts do not depend on what else runs.
    const runs = configs.flatMap(c => Array.from({ length: SEEDS }, (_, i) => ({ ...c, seed: i + 1 })))
    const counts: Count[] = []
    for (let i = 0; i < runs.length; i += 2) {
      counts.push(...await Promise.all(runs.slice(i, i + 2).map(r => measure(r.name, r.seed, r.yaml, r.level, backend.port, r.bin))))
    }
    // Per config, the median over seeds; the seeds' spread is the JIT's, not tracing's.
    const summary = configs.map(c => {
      const mine = counts.filter(n => n.name === c.name)
      return { name: c.name, base: c.base, requestThread: median(mine.map(n => n.requestThread)), allThreads: median(mine.map(n => n.allThreads)), spread: mine.map(n => n.requestThread) }
    })
    const baseOf = (c: { base: string }) => summary.find(b => b.name === c.base)!
    const range = (xs: number[]): string => xs.length === 1 ? '' : `${fmt(Math.min(...xs), 0)}–${fmt(Math.max(...xs), 0)}`
    const versus = (c: typeof summary[number], key: 'requestThread' | 'allThreads'): string => c.name === c.base ? '' : `×${fmt(c[key] / baseOf(c)[key], 3)}${c.base === 'off' ? '' : ` (vs ${c.base})`}`
    const rows = summary.map(c => [c.name, fmt(c.requestThread, 0), range(c.spread), versus(c, 'requestThread'), fmt(c.allThreads, 0), versus(c, 'allThreads')])
    process.stdout.write([
      `tracing-instructions: Node ${process.version}, callgrind; instructions per proxied GET over ${REQUESTS} requests after ${WARMUP} (10 connections), young generation fixed at ${SEMI_SPACE_MB} MB semi-spaces${SERVERS ? ', admin, stats and readiness servers on' : ''}, median of ${SEEDS} V8 random seed${SEEDS === 1 ? '' : 's'}${NODE_FLAGS.length > 0 ? `, node flags ${NODE_FLAGS.join(' ')}` : ''}`,
      table(['config', 'request thread', 'seeds', 'vs off', 'all threads', 'vs off'], rows),
      'all threads include V8\'s helpers and the span export thread, whose per-second work valgrind\'s slow clock spreads over ~50× fewer requests (overstated at 1 %)',
      ...functionTables(counts, configs),
      JSON.stringify(rounded({ bench: 'tracing-instructions', node: process.version, nodeFlags: NODE_FLAGS, servers: SERVERS, seeds: SEEDS, warmup: WARMUP, requests: REQUESTS, summary, counts: counts.map(({ functions: _, ...c }) => c) }))
    ].join('\n') + '\n')
  } finally {
    for (const s of servers) await s.child.stop()
  }
}

await main()
