/**
 * How far apart processes of one build land: `--processes` Porticos of each build are started
 * in turn, each warmed up with `--warmup` proxied GETs and then measured over `--requests`
 * more (CPU µs per request of the whole process), one after another so they never share the
 * machine with each other.
 *
 * Why beside builds.ts: builds.ts measures one process per build, and a process's JIT can
 * settle in a slower state that it keeps for its whole life — a site in Node's own stream and
 * tick code compiled against feedback that was megamorphic at the moment TurboFan ran, say,
 * calling the runtime for every property it defines from then on. Such a process is not a
 * little slower but 30–60 % slower, so one ABBA run of two processes can show a "regression"
 * that is one unlucky process, or hide one that makes the slow state likelier. Counted
 * instructions (tracing-instructions.ts --before) give the per-request work; this gives how
 * often a process lands badly, which only many processes show.
 *
 * Run: node bench/process-spread.ts [--before DIR] [--processes 6] [--warmup 60000]
 *      [--requests 20000] [--connections 50] [--node-flags '--a-v8-flag']
 * Prints each process's figure, and per build the median, min and max.
 */

import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { processCpuSeconds } from './lib/children.ts'
import { fmt, median, rounded, table } from './lib/report.ts'
import { checkoutBin, singleRouteConfig, startBackend, startPortico } from './lib/servers.ts'

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    processes: { type: 'string', default: '6' },
    warmup: { type: 'string', default: '60000' },
    requests: { type: 'string', default: '20000' },
    connections: { type: 'string', default: '50' },
    'node-flags': { type: 'string', default: '' }
  }
})
const PROCESSES = Number(values.processes)
const WARMUP = Number(values.warmup)
const REQUESTS = Number(values.requests)
const CONNECTIONS = Number(values.connections)
const NODE_FLAGS = values['node-flags'].split(/\s+/).filter(f => f !== '')
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

/** `n` GETs over `CONNECTIONS` keep-alive connections, each answer read to its end. */
async function send (url: string, n: number): Promise<void> {
  const pool = new Pool(url, { connections: CONNECTIONS })
  let left = n
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (left-- > 0) {
      const res = await pool.request({ path: '/', method: 'GET' })
      await res.body.dump()
    }
  }))
  await pool.close()
}

const builds: Array<{ name: string, bin?: string }> = [{ name: 'this build' }]
if (values.before !== undefined) builds.push({ name: 'before', bin: checkoutBin(values.before) })

const backend = await startBackend()
const results = new Map<string, number[]>(builds.map(b => [b.name, []]))
try {
  // Alternating builds, so a drift in the machine's load reaches both alike.
  for (let i = 0; i < PROCESSES; i++) {
    for (const build of builds) {
      const p = await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', nodeFlags: NODE_FLAGS, ...(build.bin !== undefined ? { bin: build.bin } : {}) })
      try {
        const url = `http://127.0.0.1:${p.port}`
        progress(`${build.name}, process ${i + 1}/${PROCESSES}: ${WARMUP} requests to warm up, ${REQUESTS} measured`)
        await send(url, WARMUP)
        const start = processCpuSeconds(p.child.proc.pid)
        await send(url, REQUESTS)
        results.get(build.name)!.push((processCpuSeconds(p.child.proc.pid) - start) / REQUESTS * 1e6)
      } finally {
        await p.child.stop()
      }
    }
  }
} finally {
  await backend.child.stop()
}
const rows = builds.map(b => {
  const xs = results.get(b.name)!
  return [b.name, xs.map(x => fmt(x, 1)).join(', '), fmt(median(xs), 1), fmt(Math.min(...xs), 1), fmt(Math.max(...xs), 1)]
})
process.stdout.write([
  `process-spread: Node ${process.version}; CPU µs per proxied GET of each process (whole process), ${REQUESTS} requests after ${WARMUP}, ${CONNECTIONS} connections${NODE_FLAGS.length > 0 ? `, node flags ${NODE_FLAGS.join(' ')}` : ''}`,
  table(['build', 'processes', 'median', 'min', 'max'], rows),
  JSON.stringify(rounded({ bench: 'process-spread', node: process.version, warmup: WARMUP, requests: REQUESTS, connections: CONNECTIONS, results: Object.fromEntries(results) }))
].join('\n') + '\n')
