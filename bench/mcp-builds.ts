/**
 * MCP before vs after: Portico's own CPU per `tools/call` from this checkout ("after") and
 * from another checkout ("before", e.g. `git archive main` unpacked beside this one with its
 * node_modules linked), to the same two targets bench/mcp.ts uses — the SDK-built streamable
 * HTTP server and the reference stdio server (server-everything, launched by each Portico).
 *
 * Both builds run at once and are measured in ABBA rounds (before first in odd rounds, after
 * first in even ones), so a load that drifts on a shared machine hits both alike; the ratio
 * after/before is taken within each round and its median reported. Each round's run is
 * bench/mcp.ts's throughput run: `--clients` SDK clients calling back to back for
 * `--duration` s, CPU read from the Portico process alone (its stdio children not counted).
 *
 * Run: node bench/mcp-builds.ts --before /path/to/other/checkout [--rounds 4] [--duration 5] [--clients 8]
 */

import { loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort, startNode, type Child } from './lib/children.ts'
import { checkoutBin, startPortico, type Server } from './lib/servers.ts'
import { httpClient, mcpTargetsConfig, measureCalls } from './lib/mcp-calls.ts'
import { fmt, median, rounded, table } from './lib/report.ts'

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    rounds: { type: 'string', default: '4' },
    duration: { type: 'string', default: '5' },
    clients: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '300' }
  }
})
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }
if (values.before === undefined) {
  process.stderr.write('usage: node bench/mcp-builds.ts --before <checkout dir> [--rounds N] [--duration S] [--clients N] [--warmup calls]\n')
  process.exit(2)
}
const beforeBin = checkoutBin(values.before)
const opts = { rounds: Number(values.rounds), duration: Number(values.duration), clients: Number(values.clients), warmup: Number(values.warmup) }

/** One throughput run through one build: CPU µs per call of that Portico. */
async function run (name: string, url: string, portico: Child): Promise<number> {
  // One sequential call is all the latency part needs: only the concurrent run's CPU is read.
  const r = await measureCalls(name, httpClient(url), { warmup: opts.warmup, calls: 1, clients: opts.clients, duration: opts.duration, progress }, portico)
  return r.cpuUsPerCall
}

const children: Child[] = []
try {
  const mcpPort = await freePort()
  children.push(await startNode({ name: 'mcp-server', args: [new URL('./servers/mcp-server.ts', import.meta.url).pathname, String(mcpPort)], readyLine: 'ready' }))
  const config = mcpTargetsConfig(mcpPort)
  const builds: Record<'before' | 'after', Server> = {
    before: await startPortico({ config, logLevel: 'warn', bin: beforeBin }),
    after: await startPortico({ config, logLevel: 'warn' })
  }
  children.push(builds.before.child, builds.after.child)
  const load = loadavg()
  const targets = ['http', 'stdio'] as const
  const cpu: Record<string, Record<'before' | 'after', number[]>> = { http: { before: [], after: [] }, stdio: { before: [], after: [] } }
  for (let round = 1; round <= opts.rounds; round++) {
    const order: Array<'before' | 'after'> = round % 2 === 1 ? ['before', 'after'] : ['after', 'before']
    for (const target of targets) {
      for (const build of order) {
        const s = builds[build]
        cpu[target]![build].push(await run(`round ${round}, ${target}, ${build}`, `http://127.0.0.1:${s.port}/${target}/mcp`, s.child))
      }
    }
  }
  const rows = targets.map(t => {
    const c = cpu[t]!
    const ratios = c.after.map((a, i) => a / c.before[i]!)
    return [t, fmt(median(c.before), 1), fmt(median(c.after), 1), fmt(median(ratios), 3), ratios.map(r => fmt(r, 3)).join(' ')]
  })
  const out = [
    `mcp builds benchmark: Node ${process.version}; tools/call echo, ${opts.clients} SDK clients x ${opts.duration} s per run, ${opts.rounds} rounds in ABBA order; Portico's own CPU µs per call (stdio children not counted); load average ${load.map(n => fmt(n)).join(', ')} at the start, ${loadavg().map(n => fmt(n)).join(', ')} at the end`,
    `before: ${beforeBin}; after: this checkout`,
    '',
    table(['target', 'before µs/call', 'after µs/call', 'after/before (median of rounds)', 'per round'], rows),
    JSON.stringify(rounded({ bench: 'mcp-builds', node: process.version, options: opts, cpu }))
  ]
  process.stdout.write(out.join('\n') + '\n')
} finally {
  await Promise.all(children.map(c => c.stop()))
}
