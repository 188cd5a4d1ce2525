/**
 * What V8's young-generation GC keeps of a proxied request, and what that costs: Portico under
 * wrk -c50 (one event loop), with one full GC forced while the load runs -- as any long-lived
 * proxy gets one sooner or later (the old generation's limit, the memory reducer) -- then a
 * measured window. Reported per build: requests/s, CPU µs per request, bytes promoted to the
 * old generation per request, full GCs per 100,000 requests, and after ÷ before.
 *
 * Why the forced GC. A proxy whose young-generation GC keeps request objects alive through
 * garbage in the old generation (util/slot-set.ts: a Set's rebuilt tables did) behaves in two
 * ways: before its first full GC under load nothing is promoted and all looks well; after it,
 * every request's objects are promoted and a full GC follows every fraction of a second. Which
 * one a timed run sees depends on whether such a GC happened in it, so the bench makes one
 * happen, through the inspector (`--inspect` on a port of its own; the session is closed
 * before the window).
 *
 * Run: node bench/young-gc.ts [--before DIR] [--seconds 8] [--rounds 2] [--path /small]
 *      [--connections 50] [--semi MB] [--close 1]
 * --semi: the semi-space size given to Node (default: Portico's own, src/v8-flags.ts).
 * --close 1: every request on a new connection (`Connection: close`), as clients without
 * keep-alive send them.
 * Needs wrk. About (seconds + 6) × rounds × builds seconds.
 */

import { parseArgs } from 'node:util'
import { SEMI_SPACE_MB } from '@portico/proxy/v8-flags'
import { fmt, median, ratio, rounded, table } from './lib/report.ts'
import { freePort } from './lib/children.ts'
import { checkoutBin, PORTICO_BIN, singleRouteConfig, startBackend, startPortico, type Server } from './lib/servers.ts'
import { hasWrk, runWrk } from './lib/wrk.ts'

const { values } = parseArgs({ options: { before: { type: 'string' }, seconds: { type: 'string', default: '8' }, rounds: { type: 'string', default: '2' }, path: { type: 'string', default: '/small' }, connections: { type: 'string', default: '50' }, semi: { type: 'string' }, close: { type: 'string', default: '0' } } })
const SECONDS = Number(values.seconds)
const ROUNDS = Number(values.rounds)
const CONNECTIONS = Number(values.connections)
const SEMI = Number(values.semi ?? SEMI_SPACE_MB)
const HEADERS = values.close === '1' ? ['Connection: close'] : []
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

interface Build { name: string, bin: string }
interface Window { rps: number, cpuUsPerRequest: number, promotedPerRequest: number, fullGcsPer100k: number, scavengePauseMsPer1k: number }

/** `--trace-gc-nvp` lines: one per GC, with its kind (`gc=s` scavenge, `gc=mc` mark-compact), pause and bytes promoted. */
function gcStats (log: string): { scavenges: number, fullGcs: number, promoted: number, scavengePauseMs: number } {
  const out = { scavenges: 0, fullGcs: 0, promoted: 0, scavengePauseMs: 0 }
  for (const line of log.split('\n')) {
    const kind = / gc=(\w+) /.exec(line)?.[1]
    if (kind === undefined) continue
    if (kind === 's') {
      out.scavenges++
      out.promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0)
      out.scavengePauseMs += Number(/pause=([\d.]+)/.exec(line)?.[1] ?? 0)
    } else if (kind === 'mc' || kind === 'mmc') out.fullGcs++
  }
  return out
}

/** A full GC in the process behind `inspectPort`, through the inspector protocol. */
async function forceFullGc (inspectPort: number): Promise<void> {
  const list = await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json() as Array<{ webSocketDebuggerUrl: string }>
  const ws = new WebSocket(list[0]!.webSocketDebuggerUrl)
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject })
  await new Promise<void>(resolve => {
    ws.onmessage = () => resolve()
    ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }))
  })
  ws.close()
}

async function measure (build: Build, backend: Server): Promise<Window> {
  const inspectPort = await freePort()
  const portico = await startPortico({
    bin: build.bin,
    config: singleRouteConfig(backend.port),
    logLevel: 'warn',
    nodeFlags: [`--max-semi-space-size=${SEMI}`, `--min-semi-space-size=${SEMI}`, '--trace-gc-nvp', `--inspect=127.0.0.1:${inspectPort}`]
  })
  try {
    const url = `${portico.url.replace(/\/$/, '')}${values.path}`
    const warm = runWrk(url, { connections: CONNECTIONS, seconds: 4, headers: HEADERS })
    await new Promise(resolve => setTimeout(resolve, 2_000))
    await forceFullGc(inspectPort)
    await warm
    const logFrom = portico.child.output().length
    const cpu0 = portico.child.cpuSeconds()
    const load = await runWrk(url, { connections: CONNECTIONS, seconds: SECONDS, headers: HEADERS })
    const cpu = portico.child.cpuSeconds() - cpu0
    const gc = gcStats(portico.child.output().slice(logFrom))
    return {
      rps: load.rps,
      cpuUsPerRequest: cpu * 1e6 / load.requests,
      promotedPerRequest: gc.promoted / load.requests,
      fullGcsPer100k: gc.fullGcs * 1e5 / load.requests,
      scavengePauseMsPer1k: gc.scavengePauseMs * 1e3 / load.requests
    }
  } finally {
    await portico.child.stop()
  }
}

if (!await hasWrk()) {
  process.stderr.write('young-gc: needs wrk\n')
  process.exit(2)
}
const builds: Build[] = [...(values.before !== undefined ? [{ name: 'before', bin: checkoutBin(values.before) }] : []), { name: values.before !== undefined ? 'after' : 'portico', bin: PORTICO_BIN }]
const backend = await startBackend()
const results = new Map<string, Window[]>(builds.map(b => [b.name, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
      progress(`round ${round + 1}/${ROUNDS}: ${build.name}, a full GC under load, then ${SECONDS} s of wrk -c${CONNECTIONS} ${values.path}${HEADERS.length > 0 ? ' (Connection: close)' : ''}`)
      results.get(build.name)!.push(await measure(build, backend))
    }
  }
} finally {
  await backend.child.stop()
}

const med = (name: string, key: keyof Window): number => median(results.get(name)!.map(w => w[key]))
const KEYS: Array<[keyof Window, string, number]> = [['rps', 'requests/s', 0], ['cpuUsPerRequest', 'CPU µs/request', 1], ['promotedPerRequest', 'promoted B/request', 0], ['fullGcsPer100k', 'full GCs per 100k requests', 1], ['scavengePauseMsPer1k', 'scavenge pause ms per 1k requests', 2]]
const header = ['', ...builds.map(b => b.name), ...(builds.length === 2 ? ['after ÷ before'] : [])]
const rows = KEYS.map(([key, label, decimals]) => [label, ...builds.map(b => fmt(med(b.name, key), decimals)), ...(builds.length === 2 ? [fmt(ratio(med('after', key), med('before', key)), 3) + '×'] : [])])
process.stdout.write(`young-gc: ${values.path}${HEADERS.length > 0 ? ' with Connection: close' : ''}, wrk -c${CONNECTIONS} ${SECONDS} s after a full GC under load, ${SEMI} MB semi-spaces, medians of ${ROUNDS} rounds\n${table(header, rows)}\n`)
process.stdout.write(JSON.stringify(rounded({ bench: 'young-gc', path: values.path, close: HEADERS.length > 0, semiMb: SEMI, rounds: ROUNDS, results: Object.fromEntries(results) })) + '\n')
