/**
 * Where tracing's cost lands on the request thread, sampled in real time: `perf record` of
 * each proxy's request thread (the event loop that serves requests and bounds requests/s)
 * under wrk, for tracing off and each sampling ratio, reported in CPU µs per request by kind
 * of code — the kernel, glibc's malloc, V8's compiled code by tier, its builtins, its GC and
 * compiler on this thread, other native code — and by symbol, against off.
 *
 * Why beside bench/tracing-instructions.ts: callgrind counts the instructions the thread runs
 * in user space. The kernel's side of the sockets (half of the thread's time) is not in the
 * count, and code whose time goes in cache misses — glibc walking the chunks it keeps freed,
 * say — costs more than its count says. This profile is how one such cost was found: the id
 * pools' 12 KB hex conversion mallocs its buffer, and each such malloc made glibc consolidate
 * its fast bins (docs/tracing-cost-log.md, sixteenth session).
 *
 * What a sample cannot settle alone: a process's JIT state and code placement move its time by
 * ±3 µs a request (of ~35–45), as much as the differences looked for. So each config runs as
 * `--processes` processes (V8 random seeds 1…N, as in bench/tracing.ts), all measured in the
 * same rounds, in turn and then in reverse, and the samples of a config's processes are
 * pooled. Rows that move by less than the spread between processes of one config (`off`'s
 * processes are printed one by one for that) mean nothing.
 *
 * Placement is bench/tracing.ts's `pinned` (every proxy, all its threads, on the last CPU;
 * wrk, the backend and the OTLP sink on the others) or, with `--placement apart`, its `apart`
 * (the request thread alone on the last CPU, the proxy's other threads with wrk). `--before DIR` runs each config on the
 * build in DIR as well (a copy of the tree with its node_modules, as bench/builds.ts takes),
 * labelled `… (before)`.
 *
 * Needs perf (Debian's linux-perf) allowed to sample other processes' threads (root, or
 * kernel.perf_event_paranoid ≤ 1), and taskset.
 *
 * Run: node bench/tracing-profile.ts [--configs off,0.01] [--processes 2] [--rounds 2] [--duration 6]
 *      [--warmup 15] [--frequency 4000] [--symbols 25] [--before DIR]
 *      [--placement pinned|apart]
 */

import { execFile, spawn } from 'node:child_process'
import { readdirSync, rmSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { placeProxies, scratchDir } from './lib/children.ts'
import { fmt, table } from './lib/report.ts'
import { singleRouteConfig, startBackend, startOtlpSink, startPortico, tracingConfig, type Server } from './lib/servers.ts'
import { hasWrk, runWrk } from './lib/wrk.ts'

const { values } = parseArgs({ options: { configs: { type: 'string', default: 'off,0.01' }, processes: { type: 'string', default: '2' }, rounds: { type: 'string', default: '2' }, duration: { type: 'string', default: '6' }, warmup: { type: 'string', default: '15' }, frequency: { type: 'string', default: '4000' }, symbols: { type: 'string', default: '25' }, before: { type: 'string' }, placement: { type: 'string', default: 'pinned' } } })
const opts = { configs: values.configs.split(','), processes: Number(values.processes), rounds: Number(values.rounds), duration: Number(values.duration), warmup: Number(values.warmup), frequency: Number(values.frequency), symbols: Number(values.symbols), before: values.before, placement: values.placement }
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }
const CONNECTIONS = 50

/** The kinds of code a sampled symbol is counted under, in the order they are printed. */
const KINDS = ['kernel', 'glibc malloc', 'JS TurboFan', 'JS Maglev', 'JS baseline/interpreted', 'V8 builtins', 'V8 GC', 'V8 compiler/runtime', 'other native'] as const
type Kind = typeof KINDS[number]

/**
 * A symbol's kind, from how `perf report` names it: `[k]` the kernel's; V8's code through
 * --perf-basic-prof's map, `JS:*` TurboFan, `JS:+` Maglev, `JS:^` Sparkplug, `JS:~` the
 * interpreter; `Builtins_…` V8's builtins; the rest is native code by its name.
 */
function kindOf (symbol: string): Kind {
  if (symbol.startsWith('[k]')) return 'kernel'
  const name = symbol.slice(4)
  if (/^(malloc|free|cfree|realloc|calloc|_int_|malloc_consolidate|unlink_chunk|__libc_malloc|__libc_free|tcache)/.test(name)) return 'glibc malloc'
  if (name.startsWith('JS:*')) return 'JS TurboFan'
  if (name.startsWith('JS:+')) return 'JS Maglev'
  if (name.startsWith('JS:')) return 'JS baseline/interpreted'
  if (name.startsWith('Builtins_')) return 'V8 builtins'
  if (/Scaveng|Heap::|MarkCompact|Sweep|Evacuat|Marking|heap::base/.test(name)) return 'V8 GC'
  if (/compiler::|Compiler|Deoptimiz|Runtime_|maglev::/.test(name)) return 'V8 compiler/runtime'
  return 'other native'
}

interface Subject { config: string, label: string, server: Server }

/** perf's samples of one thread, by symbol, while `load` runs. */
async function sampleThread (tid: number, file: string, load: () => Promise<number>): Promise<{ requests: number, samples: Map<string, number> }> {
  const perf = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', String(opts.frequency), '-o', file, '-t', String(tid)], { stdio: 'ignore' })
  await new Promise(resolve => setTimeout(resolve, 300)) // perf attaches
  const requests = await load()
  perf.kill('SIGINT')
  await new Promise(resolve => perf.once('exit', resolve))
  const report = await new Promise<string>((resolve, reject) => execFile('perf', ['report', '-i', file, '--no-children', '-n', '--sort', 'sym', '--stdio'], { maxBuffer: 256 << 20 }, (err, out) => err !== null ? reject(err) : resolve(out)))
  const samples = new Map<string, number>()
  for (const line of report.split('\n')) {
    const m = /^\s+[\d.]+%\s+(\d+)\s+(\[.\]\s+.*?)\s*$/.exec(line)
    if (m === null) continue
    // A JS function is named with its file's URL: keep the path from the tree's root, so a
    // function of the --before tree and the same one of this tree are one row.
    const symbol = m[2]!.replace(/\s+/, ' ').replace(/file:\/\/\S*?\/(packages|bench|node_modules)\//, '$1/')
    samples.set(symbol, (samples.get(symbol) ?? 0) + Number(m[1]))
  }
  return { requests, samples }
}

async function main (): Promise<void> {
  if (!await hasWrk()) throw new Error('needs wrk')
  if (opts.placement === 'shared') throw new Error('--placement: pinned or apart')
  const placement = placeProxies(opts.placement, availableParallelism())
  // Apart, a proxy's threads are placed again before each of its runs: a thread started
  // since runs where the thread that started it does.
  const place = (pid: number): void => placement.place?.(pid)
  const dir = scratchDir('tracing-profile')
  const started: Server[] = []
  try {
    const backend = await startBackend()
    const sink = await startOtlpSink()
    started.push(backend, sink)
    const labels = opts.configs.flatMap(c => [c, ...(opts.before !== undefined ? [`${c} (before)`] : [])])
    const subjects: Subject[] = []
    for (let i = 0; i < opts.processes; i++) {
      for (const label of labels) {
        const config = label.split(' ')[0]!
        const bin = label.endsWith('(before)') ? { bin: join(opts.before!, 'packages/proxy/bin/portico.ts') } : {}
        const traced = config === 'off' ? '' : tracingConfig(`http://127.0.0.1:${sink.port}`, Number(config) >= 1 ? 'true' : config)
        const yaml = traced + singleRouteConfig(backend.port)
        const server = await startPortico({ config: yaml, logLevel: 'warn', nodeFlags: ['--perf-basic-prof', `--random-seed=${i + 1}`], ...(placement.proxyCpus !== undefined ? { cpus: placement.proxyCpus } : {}), ...bin })
        started.push(server)
        subjects.push({ config, label, server })
      }
    }
    progress(`${subjects.length} proxies: warming each up for ${opts.warmup} s`)
    for (const s of subjects) {
      place(s.server.child.proc.pid!)
      await runWrk(s.server.url, { connections: CONNECTIONS, seconds: opts.warmup })
    }
    const requests = new Map<string, number>()
    const samples = new Map<string, Map<string, number>>()
    const perProcess: Array<{ label: string, us: number }> = []
    const usPerSample = 1e6 / opts.frequency
    for (let round = 0; round < opts.rounds; round++) {
      for (const [k, s] of (round % 2 === 0 ? subjects : [...subjects].reverse()).entries()) {
        progress(`round ${round + 1}/${opts.rounds}: ${s.label}, process ${k + 1}/${subjects.length}`)
        // taskset execs the command in place, so the child's pid is node's, and its main thread's id.
        place(s.server.child.proc.pid!)
        const got = await sampleThread(s.server.child.proc.pid!, join(dir, `perf-${round}-${k}.data`), async () => (await runWrk(s.server.url, { connections: CONNECTIONS, seconds: opts.duration })).requests)
        requests.set(s.label, (requests.get(s.label) ?? 0) + got.requests)
        const into = samples.get(s.label) ?? new Map<string, number>()
        let total = 0
        for (const [symbol, n] of got.samples) { into.set(symbol, (into.get(symbol) ?? 0) + n); total += n }
        samples.set(s.label, into)
        perProcess.push({ label: s.label, us: total * usPerSample / got.requests })
      }
    }
    const us = (label: string, pick: (symbol: string) => boolean): number => {
      let n = 0
      for (const [symbol, count] of samples.get(label)!) if (pick(symbol)) n += count
      return n * usPerSample / requests.get(label)!
    }
    const base = labels[0]!
    const row = (name: string, pick: (symbol: string) => boolean) => [name, ...labels.map(l => {
      const v = us(l, pick)
      return l === base ? fmt(v, 2) : `${fmt(v, 2)} (${v - us(base, pick) >= 0 ? '+' : ''}${fmt(v - us(base, pick), 2)})`
    })]
    const out = [
      `tracing profile: Node ${process.version}; request thread sampled by perf at ${opts.frequency} Hz; ${opts.processes} processes a config × ${opts.rounds} rounds of ${opts.duration} s (wrk, ${CONNECTIONS} connections), after ${opts.warmup} s of warm-up each; placement ${placement.label}`,
      '',
      'CPU µs per request on the request thread, by kind of code (in brackets, against the first config):',
      table(['kind', ...labels], [...KINDS.map(k => row(k, s => kindOf(s) === k)), row('all', () => true)]),
      '',
      `each process's total (the spread within a config is the noise): ${labels.map(l => `${l}: ${perProcess.filter(p => p.label === l).map(p => fmt(p.us, 1)).join(', ')}`).join('; ')}`
    ]
    const symbols = new Set<string>()
    for (const m of samples.values()) for (const s of m.keys()) symbols.add(s)
    for (const l of labels.slice(1)) {
      const moved = [...symbols].map(s => ({ s, a: us(base, x => x === s), b: us(l, x => x === s) })).sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a)).slice(0, opts.symbols)
      out.push('', `symbols that moved most, ${l} against ${base} (µs per request):`, table(['symbol', base, l, 'moved'], moved.map(m => [m.s.slice(0, 100), fmt(m.a, 3), fmt(m.b, 3), `${m.b - m.a >= 0 ? '+' : ''}${fmt(m.b - m.a, 3)}`])))
    }
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(started.map(s => s.child.stop()))
    // --perf-basic-prof leaves each proxy's symbol map in /tmp and V8's log in the working directory.
    const pids = new Set(started.map(s => String(s.child.proc.pid)))
    for (const pid of pids) rmSync(`/tmp/perf-${pid}.map`, { force: true })
    for (const file of readdirSync('.')) if (pids.has(/^isolate-0x[0-9a-f]+-(\d+)-v8\.log$/.exec(file)?.[1] ?? '')) rmSync(file, { force: true })
  }
}

await main()
