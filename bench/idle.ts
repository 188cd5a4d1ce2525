/**
 * A proxy that served load, sat idle, and serves again: does it come back as fast as it
 * left? Two Portico processes, one as it starts (V8's memory reducer on, its default: while a
 * process allocates nothing for a while, V8 runs full GCs that shrink its heap;
 * packages/proxy/src/v8-flags.ts) and one with `--no-memory-reducer` (as bin/portico.ts
 * started it from 2026-11-29 to 2026-12-06), each warmed up and measured (`--rounds` runs of `--duration` s, "before"),
 * then both left idle for `--idle` s, then measured again ("after") beside a third started
 * only then ("fresh", Portico's flags). Their runs alternate (A B B A …) so the machine's
 * swings fall on all. Reported per process: req/s and CPU µs per request before and after
 * (medians), after/before, after/fresh (the idle's own share, whatever the machine does
 * after an idle), the heap-reducing GCs V8 ran while idle (`--trace-gc`), and RSS before
 * and after the idle.
 *
 * Found 2026-11-29 while measuring tracing (docs/tracing-cost-log.md, eighteenth session):
 * with the reducer, after 240 s idle, a proxy served ×0.72 of its requests/s for 10 s and
 * ×0.86 for the 30 s after: the tick literal's feedback turned megamorphic by the reducer's
 * GCs, which the tick object held since 2026-12-06 prevents (src/tick-maps.ts). Counted
 * rather than timed: bench/memory-reducer.ts.
 *
 * Placement as bench/tracing.ts's pinned: each proxy, all its threads, on the last CPU; wrk
 * and the backend on the others. The backend, a Node process idle as long, runs without the
 * reducer, so that only the proxies differ across the idle.
 *
 * Run: node bench/idle.ts [--idle 240] [--rounds 4] [--duration 5] [--warmup 10] [--connections 50]
 */

import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { hasTaskset, pinSelf, processCpuSeconds, treeRssBytes } from './lib/children.ts'
import { fmt, median, rounded, table } from './lib/report.ts'
import { singleRouteConfig, startBackend, startPortico, type Server } from './lib/servers.ts'
import { hasWrk, runWrk } from './lib/wrk.ts'

const { values } = parseArgs({ options: { idle: { type: 'string', default: '240' }, rounds: { type: 'string', default: '4' }, duration: { type: 'string', default: '5' }, warmup: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' } } })
const opts = { idle: Number(values.idle), rounds: Number(values.rounds), duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections) }
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

interface Subject { name: string, server: Server, before: Run[], after: Run[] }
interface Run { rps: number, cpuUs: number }

function rssMb (pid: number): number {
  return treeRssBytes(pid) / 2 ** 20
}

/** The heap-reducing full GCs V8 reported (--trace-gc) in `output`. */
function reducingGcs (output: string): number {
  return output.split('\n').filter(l => l.includes('(reduce)')).length
}

async function measure (s: Subject, seconds: number): Promise<Run> {
  const pid = s.server.child.proc.pid!
  const cpu = processCpuSeconds(pid)
  const r = await runWrk(s.server.url, { connections: opts.connections, seconds })
  return { rps: r.requests / seconds, cpuUs: (processCpuSeconds(pid) - cpu) * 1e6 / r.requests }
}

/** `rounds` runs of each subject, A B B A …. */
async function rounds (subjects: Subject[], into: 'before' | 'after'): Promise<void> {
  for (let round = 0; round < opts.rounds; round++) {
    for (const s of round % 2 === 0 ? subjects : [...subjects].reverse()) {
      progress(`${into}, round ${round + 1}/${opts.rounds}: ${s.name}`)
      s[into].push(await measure(s, opts.duration))
    }
  }
}

async function main (): Promise<void> {
  const last = availableParallelism() - 1
  if (last < 1 || !hasTaskset()) throw new Error('needs 2 CPUs and taskset')
  if (!await hasWrk()) throw new Error('needs wrk')
  pinSelf(last === 1 ? '0' : `0-${last - 1}`)
  const started: Server[] = []
  try {
    // The backend is a Node process too, idle as long: without the reducer, so that only
    // the proxies differ across the idle (with it, both proxies came back slower).
    const backend = await startBackend(undefined, ['--no-memory-reducer'])
    started.push(backend)
    const subjects: Subject[] = []
    for (const [name, flags] of [['portico (memory reducer on, V8\'s default)', []], ['--no-memory-reducer', ['--no-memory-reducer']]] as const) {
      const server = await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', nodeFlags: ['--trace-gc', '--random-seed=1', ...flags], cpus: String(last) })
      started.push(server)
      subjects.push({ name, server, before: [], after: [] })
    }
    for (const s of subjects) {
      progress(`warming ${s.name} up for ${opts.warmup} s`)
      await measure(s, opts.warmup)
    }
    await rounds(subjects, 'before')
    const rssBefore = subjects.map(s => rssMb(s.server.child.proc.pid!))
    const gcsBefore = subjects.map(s => reducingGcs(s.server.child.output()))
    progress(`idle for ${opts.idle} s`)
    await new Promise(resolve => setTimeout(resolve, opts.idle * 1000))
    const rssIdle = subjects.map(s => rssMb(s.server.child.proc.pid!))
    const reduced = subjects.map((s, i) => reducingGcs(s.server.child.output()) - gcsBefore[i]!)
    // A third proxy, started and warmed only now, is measured in the same rounds: what the
    // machine itself does after the idle (its own caches, the backend's, wrk's) falls on it
    // too, so "after / fresh" is the idle proxies' own share.
    const fresh: Subject = { name: 'fresh (started after the idle)', server: await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', nodeFlags: ['--trace-gc', '--random-seed=1'], cpus: String(last) }), before: [], after: [] }
    started.push(fresh.server)
    progress(`warming ${fresh.name} up for ${opts.warmup} s`)
    await measure(fresh, opts.warmup)
    await rounds([...subjects, fresh], 'after')
    const freshRps = median(fresh.after.map(r => r.rps))
    const rows = subjects.map((s, i) => {
      const before = { rps: median(s.before.map(r => r.rps)), cpuUs: median(s.before.map(r => r.cpuUs)) }
      const after = { rps: median(s.after.map(r => r.rps)), cpuUs: median(s.after.map(r => r.cpuUs)) }
      return { name: s.name, before, after, rpsRatio: after.rps / before.rps, cpuRatio: after.cpuUs / before.cpuUs, firstAfter: s.after[0]!.rps / before.rps, afterFresh: after.rps / freshRps, reducingGcs: reduced[i]!, rssBefore: rssBefore[i]!, rssIdle: rssIdle[i]! }
    })
    const out = [
      `idle benchmark: Node ${process.version}; ${opts.connections} connections (wrk); ${opts.rounds} runs of ${opts.duration} s each side of ${opts.idle} s idle, after ${opts.warmup} s of warm-up; each proxy on CPU ${last} (all its threads), wrk and the backend on the others`,
      '',
      table(['process', 'req/s before', 'after', 'after/before', 'first run after', 'after/fresh', 'CPU µs/req before', 'after', 'after/before', 'reducing GCs while idle', 'RSS MB before idle', 'after idle'], rows.map(r => [
        r.name, fmt(r.before.rps, 0), fmt(r.after.rps, 0), `×${fmt(r.rpsRatio, 3)}`, `×${fmt(r.firstAfter, 3)}`, `×${fmt(r.afterFresh, 3)}`, fmt(r.before.cpuUs, 1), fmt(r.after.cpuUs, 1), `×${fmt(r.cpuRatio, 3)}`, String(r.reducingGcs), fmt(r.rssBefore, 0), fmt(r.rssIdle, 0)
      ])),
      `fresh (started after the idle, Portico's flags): ${fmt(freshRps, 0)} req/s in the same rounds`,
      '',
      `after/before, Portico's start (the reducer on) against --no-memory-reducer: req/s ×${fmt(rows[0]!.rpsRatio / rows[1]!.rpsRatio, 3)}`,
      '',
      JSON.stringify(rounded({ bench: 'idle', idleSeconds: opts.idle, freshRps, processes: rows }))
    ]
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(started.map(s => s.child.stop()))
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
