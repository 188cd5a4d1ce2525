/**
 * What one MCP `tools/call` through Portico costs, counted in instructions rather than
 * timed, for this build and (`--before DIR`) another — the load-independent companion of
 * bench/mcp-builds.ts, for a machine too busy to time a difference of a few percent.
 *
 * Portico runs under valgrind's callgrind (as in bench/tracing-instructions.ts, which says
 * what valgrind changes and why the young generation is fixed); its targets run outside it:
 * the SDK-built streamable HTTP server (bench/servers/mcp-server.ts; `--targets sse`: the
 * same server as a legacy HTTP+SSE target) and the reference stdio server
 * (server-everything, which Portico launches; valgrind does not follow children). For
 * each build and target: one MCP session per connection (initialize, initialized), `--warmup`
 * calls of `echo`, the counters zeroed, `--calls` more counted, over `--connections`
 * keep-alive connections, each call a POST with the session's id answered as JSON. Reported
 * per call: the event loop's thread (WORKERS=1: the one that serves MCP) and all threads.
 *
 * Needs valgrind. Each run takes a few minutes (under callgrind Portico serves ~100 calls/s);
 * one runs at a time.
 *
 * --functions N lists the N functions of the request thread (V8's code named through
 * --perf-basic-prof, bench/lib/callgrind.ts) whose instructions per call differ most between
 * the builds, and between the HTTP and the stdio target of this build: where a change, or
 * the HTTP target's own path, spends. --top N lists each run's N costliest functions (self
 * instructions per call): where a call spends at all.
 *
 * Run: node bench/mcp-instructions.ts [--before DIR] [--warmup 8000] [--calls 4000] [--connections 8] [--targets http,stdio,sse] [--functions N] [--top N]
 */

import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { MEMORY_REDUCER_FLAG, SEMI_SPACE_MB } from '@portico/proxy/v8-flags'
import { fmt, rounded, table } from './lib/report.ts'
import { dumpTotals, functionCounts, haveValgrind, jitCodeMap, movedFunctionsTable, run } from './lib/callgrind.ts'
import { freePort, scratchDir, startNode, type Child } from './lib/children.ts'
import { checkoutBin, porticoEnv } from './lib/servers.ts'
import { mcpTargetsConfig } from './lib/mcp-calls.ts'

const { values } = parseArgs({ options: { before: { type: 'string' }, warmup: { type: 'string', default: '8000' }, calls: { type: 'string', default: '4000' }, connections: { type: 'string', default: '8' }, targets: { type: 'string', default: 'http,stdio' }, functions: { type: 'string', default: '0' }, top: { type: 'string', default: '0' } } })
/** How many functions to list: those whose instructions per call differ most between the builds, and between the targets (0: none). */
const FUNCTIONS = Number(values.functions)
/** How many of the request thread's costliest functions to list per build and target, self instructions per call (0: none). */
const TOP = Number(values.top)
/** Whether the functions are counted at all (V8's code named through --perf-basic-prof). */
const BY_FUNCTION = FUNCTIONS > 0 || TOP > 0
const WARMUP = Number(values.warmup)
const CALLS = Number(values.calls)
const CONNECTIONS = Number(values.connections)
const TARGETS = values.targets.split(',') as Array<'http' | 'sse' | 'stdio'>
const AFTER = fileURLToPath(new URL('../packages/proxy/bin/portico.ts', import.meta.url))
const BEFORE = values.before === undefined ? undefined : checkoutBin(values.before)
const PROTOCOL_VERSION = '2025-06-18'
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }


/** One MCP session on its own keep-alive connection: `call()` is one tools/call echo. */
async function openSession (origin: string, path: string): Promise<{ call: () => Promise<void>, close: () => Promise<void> }> {
  const pool = new Pool(origin, { connections: 1 })
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }
  const post = async (body: unknown): Promise<{ status: number, sid: string | undefined, text: string }> => {
    const res = await pool.request({ path, method: 'POST', headers, body: JSON.stringify(body) })
    const text = await res.body.text()
    const sid = res.headers['mcp-session-id']
    return { status: res.statusCode, sid: typeof sid === 'string' ? sid : undefined, text }
  }
  const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'bench', version: '1' } } })
  if (init.status !== 200 || init.sid === undefined) throw new Error(`initialize: HTTP ${init.status} ${init.text.slice(0, 200)}`)
  headers['mcp-session-id'] = init.sid
  headers['mcp-protocol-version'] = PROTOCOL_VERSION
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' })
  let id = 1
  return {
    call: async () => {
      const r = await post({ jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } })
      if (r.status !== 200 || !r.text.includes('"result"')) throw new Error(`tools/call: HTTP ${r.status} ${r.text.slice(0, 200)}`)
    },
    close: async () => {
      await pool.request({ path, method: 'DELETE', headers }).then(res => res.body.dump(), () => {})
      await pool.close()
    }
  }
}

async function calls (sessions: Array<{ call: () => Promise<void> }>, n: number): Promise<void> {
  let left = n
  await Promise.all(sessions.map(async s => {
    while (left-- > 0) await s.call()
  }))
}

interface Count {
  build: string
  target: string
  requestThread: number
  allThreads: number
  /** With --functions: the request thread's instructions by function (whole count, not per call). */
  functions?: Map<string, number>
}

async function measure (build: string, bin: string, target: 'http' | 'sse' | 'stdio', mcpPort: number): Promise<Count> {
  const dir = scratchDir(`callgrind-mcp-${build}-${target}`)
  const port = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, mcpTargetsConfig(mcpPort).replaceAll('{port}', String(port)))
  // The V8 flags on the command line: bin/portico.ts then runs as it is (it starts Node again
  // only when one was not given, which valgrind would not follow).
  const child: Child = await startNode({
    name: `portico under callgrind (${build}, ${target})`,
    command: 'valgrind',
    args: [
      '--tool=callgrind', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
      process.execPath, `--max-semi-space-size=${SEMI_SPACE_MB}`, `--min-semi-space-size=${SEMI_SPACE_MB}`, MEMORY_REDUCER_FLAG, '--random-seed=1', ...(BY_FUNCTION ? ['--perf-basic-prof'] : []), bin, '-f', configPath
    ],
    env: porticoEnv('warn'),
    cwd: dir,
    readyPort: port,
    // Under callgrind on a busy machine Node takes minutes to start.
    timeoutMs: 600_000
  })
  try {
    // One after another: the first session loads what its target's transport needs (a build
    // that loads the MCP SDK and zod then blocks for seconds under callgrind), and sessions
    // opened meanwhile would have their initialize bodies time out (408).
    const sessions: Array<Awaited<ReturnType<typeof openSession>>> = []
    for (let i = 0; i < CONNECTIONS; i++) sessions.push(await openSession(`http://127.0.0.1:${port}`, `/${target}/mcp`))
    progress(`${build}, ${target}: ${WARMUP} calls to warm up, then ${CALLS} counted`)
    await calls(sessions, WARMUP)
    await run('callgrind_control', ['--zero', String(child.proc.pid)])
    await calls(sessions, CALLS)
    await run('callgrind_control', ['--dump', String(child.proc.pid)])
    await Promise.all(sessions.map(s => s.close()))
  } finally {
    // valgrind writes its last part file on the way out.
    await child.stop(30_000)
  }
  const { main, all, mainFile } = dumpTotals(dir, 1)
  if (main === 0) throw new Error(`${build} ${target}: no callgrind dump found in ${dir}`)
  const count: Count = { build, target, requestThread: main / CALLS, allThreads: all / CALLS }
  if (BY_FUNCTION) {
    const pid = child.proc.pid!
    count.functions = await functionCounts(mainFile, jitCodeMap(pid))
    rmSync(`/tmp/perf-${pid}.map`, { force: true })
  }
  return count
}

/** With --functions: what moved most per call, this build against before, and the HTTP target against stdio. */
function functionTables (counts: Count[]): string[] {
  const tops = TOP === 0
    ? []
    : counts.map(c => [
      `request thread, ${c.build}, ${c.target}: the ${TOP} costliest functions, self instructions per call`,
      table(['function', 'per call'], [...c.functions!].sort((a, b) => b[1] - a[1]).slice(0, TOP).map(([name, n]) => [name.length > 100 ? `${name.slice(0, 99)}…` : name, fmt(n / CALLS, 0)]))
    ].join('\n'))
  if (FUNCTIONS === 0) return tops
  const find = (build: string, target: string) => counts.find(c => c.build === build && c.target === target)
  const pairs: Array<[string, Count | undefined, Count | undefined]> = [
    ...TARGETS.map(t => [`${t}: after against before`, find('before', t), find('after', t)] as [string, Count | undefined, Count | undefined]),
    ['after: the http target against stdio', find('after', 'stdio'), find('after', 'http')]
  ]
  return pairs.filter(([, a, b]) => a !== undefined && b !== undefined)
    .map(([title, a, b]) => movedFunctionsTable(`request thread, ${title}`, a!.functions!, b!.functions!, CALLS, FUNCTIONS, 'call'))
    .concat(tops)
}

async function main (): Promise<void> {
  if (!await haveValgrind('mcp-instructions')) return
  const mcpPort = await freePort()
  const server = await startNode({ name: 'mcp-server', args: [new URL('./servers/mcp-server.ts', import.meta.url).pathname, String(mcpPort)], readyLine: 'ready' })
  try {
    const builds = [...(BEFORE !== undefined ? [{ build: 'before', bin: BEFORE }] : []), { build: 'after', bin: AFTER }]
    const runs = TARGETS.flatMap(target => builds.map(b => ({ ...b, target })))
    const counts: Count[] = []
    // One at a time, to keep a shared machine's load modest (the counts would not change with two).
    for (const r of runs) counts.push(await measure(r.build, r.bin, r.target, mcpPort))
    const rows = counts.map(c => {
      const before = counts.find(b => b.build === 'before' && b.target === c.target)
      const vs = (key: 'requestThread' | 'allThreads'): string => before === undefined || c.build === 'before' ? '' : `×${fmt(c[key] / before[key], 3)}`
      return [c.target, c.build, fmt(c.requestThread, 0), vs('requestThread'), fmt(c.allThreads, 0), vs('allThreads')]
    })
    process.stdout.write([
      `mcp-instructions: Node ${process.version}, callgrind; instructions per tools/call (echo) through Portico over ${CALLS} calls after ${WARMUP} (${CONNECTIONS} sessions, one keep-alive connection each), young generation fixed at ${SEMI_SPACE_MB} MB semi-spaces, V8 seed 1${BEFORE !== undefined ? `; before: ${BEFORE}` : ''}`,
      table(['target', 'build', 'request thread', 'vs before', 'all threads', 'vs before'], rows),
      ...functionTables(counts),
      JSON.stringify(rounded({ bench: 'mcp-instructions', node: process.version, warmup: WARMUP, calls: CALLS, connections: CONNECTIONS, counts: counts.map(({ functions: _, ...c }) => c) }))
    ].join('\n') + '\n')
  } finally {
    await server.stop()
  }
}

await main()
