/**
 * Does the start-up collection (packages/proxy/src/startup-gc.ts) leave the proxy slower
 * after it? Instructions per proxied GET counted under callgrind (a count does not move with
 * the machine's load), for this tree and a --before tree, in two orders of events:
 * `during`: requests from the moment the proxy answers, so the collection a second later
 * runs under load; `before`: --quiet seconds idle first (the collection runs idle), then
 * the same requests. Each: --warmup GETs over 10 keep-alive connections, the counters
 * zeroed, --requests counted. Node runs with --trace-gc: the mark-compacts of each run are
 * listed, to see when the collection ran.
 *
 * Run: node bench/startup-gc-instructions.ts --before DIR [--warmup 4000] [--requests 1000] [--quiet 5] [--path /small] [--repeat 1]
 */

import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { MEMORY_REDUCER_FLAG, SEMI_SPACE_FLAG } from '@portico/proxy/v8-flags'
import { fmt, table } from './lib/report.ts'
import { freePort, scratchDir, startNode } from './lib/children.ts'
import { dumpTotals, haveValgrind, run, sendRequests } from './lib/callgrind.ts'
import { checkoutBin, PORTICO_BIN, porticoEnv, singleRouteConfig, startBackend } from './lib/servers.ts'

const { values } = parseArgs({ options: { before: { type: 'string' }, warmup: { type: 'string', default: '4000' }, requests: { type: 'string', default: '1000' }, quiet: { type: 'string', default: '5' }, path: { type: 'string', default: '/small' }, repeat: { type: 'string', default: '1' } } })
if (values.before === undefined) {
  process.stderr.write('usage: node bench/startup-gc-instructions.ts --before DIR [--warmup N] [--requests N] [--quiet S] [--path P] [--repeat N]\n')
  process.exit(2)
}
const WARMUP = Number(values.warmup)
const REQUESTS = Number(values.requests)
const QUIET_MS = Number(values.quiet) * 1000
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

async function measure (name: string, bin: string, order: 'during' | 'before', backend: number): Promise<{ main: number, all: number, markCompacts: string[] }> {
  const dir = scratchDir(`startup-gc-${name}-${order}`)
  const port = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, singleRouteConfig(backend).replaceAll('{port}', String(port)))
  // The flags bin/portico.ts would start Node with (given here: valgrind does not follow its execve).
  const args = ['--tool=callgrind', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
    process.execPath, SEMI_SPACE_FLAG, MEMORY_REDUCER_FLAG, '--random-seed=1', '--trace-gc', bin, '-f', configPath]
  const child = await startNode({ name: `${name} under callgrind`, command: 'valgrind', args, env: porticoEnv('warn'), cwd: dir, readyPort: port, ownPort: true, timeoutMs: 600_000 })
  try {
    const url = `http://127.0.0.1:${port}`
    if (order === 'before') await sleep(QUIET_MS)
    progress(`${name}, collection ${order} load: ${WARMUP} requests, then ${REQUESTS} counted`)
    await sendRequests(url, { path: values.path!, method: 'GET' }, WARMUP)
    await run('callgrind_control', ['--zero', String(child.proc.pid)])
    await sendRequests(url, { path: values.path!, method: 'GET' }, REQUESTS)
    await run('callgrind_control', ['--dump', String(child.proc.pid)])
  } finally {
    await child.stop(30_000)
  }
  const { main, all } = dumpTotals(dir, 1)
  const markCompacts = child.output().split('\n').filter(l => /Mark-Compact/.test(l)).map(l => l.replace(/^\[\d+:0x[0-9a-f]+\]\s*/, '').slice(0, 120))
  return { main: main / REQUESTS, all: all / REQUESTS, markCompacts }
}

if (await haveValgrind('startup-gc-instructions')) {
  const backend = await startBackend()
  try {
    const rows: string[][] = []
    const notes: string[] = []
    for (let r = 0; r < Number(values.repeat); r++) {
      for (const order of ['during', 'before'] as const) {
        for (const [name, bin] of [['after', PORTICO_BIN], ['before', checkoutBin(values.before)]] as const) {
          const c = await measure(name, bin, order, backend.port)
          rows.push([name, order, fmt(c.main, 0), fmt(c.all, 0)])
          notes.push(`${name} ${order}: ${c.markCompacts.join(' | ')}`)
        }
      }
    }
    process.stdout.write(`startup-gc-instructions: ${values.path}, ${REQUESTS} counted after ${WARMUP}\n` + table(['tree', 'collection', 'serving thread', 'all threads'], rows) + '\n' + notes.join('\n') + '\n')
  } finally {
    await backend.child.stop()
  }
}
