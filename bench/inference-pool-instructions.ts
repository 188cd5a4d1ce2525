/**
 * What an InferencePool's endpoint pick and an extProc policy cost Portico per request,
 * counted in instructions rather than timed (bench/tracing-instructions.ts explains the
 * method and its caveats: callgrind counts every instruction a thread runs, so the count does
 * not move with the machine's load, only with where V8's JIT lands). On a 2-core machine
 * shared with other work, CPU µs per request move by tens of percent between runs
 * (bench/inference-pool.ts); a count does not.
 *
 * One Portico under callgrind, three routes to the same loopback backend, each sent the same
 * 1 KiB JSON POST over 10 keep-alive connections:
 *   - plain: a `host:` route;
 *   - pool: an `inferencePool` whose single endpoint is that backend, its picker
 *     (servers/endpoint-picker.ts, plaintext gRPC, a process of its own) always picking it:
 *     the request headers, the body, the pick, the body back, the response headers;
 *   - extproc: the plain route with an `extProc` policy (servers/ext-processor.ts), default
 *     modes: the request headers and the response headers, each answered unchanged.
 * (Message timeouts of 30 s: valgrind runs Portico ~50× slower.)
 * Per route: `--warmup` requests, the counters zeroed, `--requests` counted, dumped.
 * Reported per request: the event loop's thread (what the requests cost) and all threads
 * (with V8's GC and compiler helpers), and each route less plain.
 *
 * --before DIR: the same on the build in DIR (a checkout with its node_modules), to compare.
 * Needs valgrind. About 3 minutes a build with the defaults (two builds run at a time).
 *
 * Run: node bench/inference-pool-instructions.ts [--warmup 4000] [--requests 1000] [--before DIR] [--keep DIR]
 */

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { MEMORY_REDUCER_FLAG, SEMI_SPACE_MB } from '@portico/proxy/v8-flags'
import { fmt, rounded, table } from './lib/report.ts'
import { dumpTotals, haveValgrind, run, sendRequests } from './lib/callgrind.ts'
import { freePort, scratchDir, startNode } from './lib/children.ts'
import { checkoutBin, PORTICO_BIN, porticoEnv, startBackend, startEndpointPicker, startExtProcessor, type Server } from './lib/servers.ts'

const { values } = parseArgs({ options: { warmup: { type: 'string', default: '4000' }, requests: { type: 'string', default: '1000' }, before: { type: 'string' }, keep: { type: 'string' } } })
const WARMUP = Number(values.warmup)
const REQUESTS = Number(values.requests)
const KEEP = values.keep
const PORTICO = PORTICO_BIN
const BEFORE = values.before === undefined ? undefined : checkoutBin(values.before)
const ROUTES = ['plain', 'pool', 'extproc'] as const
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

function body (): string {
  const make = (pad: string) => JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Write a short paragraph of placeholder text, please. ' + pad }] })
  return make('x'.repeat(1024 - make('').length))
}
const BODY = body()

function config (port: number, backend: number, picker: number, processor: number): string {
  return `gateways:
  default: { port: ${port}, protocol: HTTP }
routes:
  - name: plain
    matches: [{ path: { pathPrefix: /plain } }]
    backends: [{ host: 127.0.0.1:${backend} }]
  - name: pool
    matches: [{ path: { pathPrefix: /pool } }]
    backends:
      - inferencePool:
          name: bench
          endpoints: ["127.0.0.1:${backend}"]
          endpointPicker: { host: 127.0.0.1:${picker}, tls: false, failureMode: FailClose, timeout: 30s }
  - name: extproc
    matches: [{ path: { pathPrefix: /extproc } }]
    policies:
      extProc: { host: 127.0.0.1:${processor}, timeout: 30s }
    backends: [{ host: 127.0.0.1:${backend} }]
`
}


type Counts = Record<typeof ROUTES[number], { requestThread: number, allThreads: number }>

async function measure (name: string, bin: string, backend: number, picker: number, processor: number): Promise<Counts> {
  const dir = KEEP === undefined ? scratchDir(`callgrind-${name}`) : join(KEEP, name)
  if (KEEP !== undefined) mkdirSync(dir, { recursive: true })
  const port = await freePort()
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, config(port, backend, picker, processor))
  const child = await startNode({
    name: `portico under callgrind (${name})`,
    command: 'valgrind',
    args: [
      '--tool=callgrind', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
      process.execPath, `--max-semi-space-size=${SEMI_SPACE_MB}`, `--min-semi-space-size=${SEMI_SPACE_MB}`, MEMORY_REDUCER_FLAG, '--random-seed=1', bin, '-f', configPath
    ],
    env: porticoEnv('warn'),
    cwd: dir,
    readyPort: port,
    timeoutMs: 180_000
  })
  try {
    const url = `http://127.0.0.1:${port}`
    for (const route of ROUTES) {
      progress(`${name}: ${route}, ${WARMUP} requests to warm up, then ${REQUESTS} counted`)
      await sendRequests(url, { path: `/${route}`, method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } }, WARMUP)
      await run('callgrind_control', ['--zero', String(child.proc.pid)])
      await sendRequests(url, { path: `/${route}`, method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } }, REQUESTS)
      await run('callgrind_control', ['--dump', String(child.proc.pid)])
    }
  } finally {
    await child.stop(30_000)
    if (KEEP !== undefined) writeFileSync(join(dir, 'output.log'), child.output())
  }
  const out = {} as Counts
  ROUTES.forEach((route, i) => {
    const { main, all } = dumpTotals(dir, i + 1)
    if (main === 0) throw new Error(`${name} ${route}: no callgrind dump in ${dir}`)
    out[route] = { requestThread: main / REQUESTS, allThreads: all / REQUESTS }
  })
  return out
}

async function main (): Promise<void> {
  if (!await haveValgrind('inference-pool-instructions')) return
  const servers: Server[] = []
  try {
    const backend = await startBackend()
    servers.push(backend)
    const picker = await startEndpointPicker(`127.0.0.1:${backend.port}`)
    servers.push(picker)
    const processor = await startExtProcessor()
    servers.push(processor)
    const builds = [{ name: 'this build', bin: PORTICO }, ...(BEFORE !== undefined ? [{ name: 'before', bin: BEFORE }] : [])]
    const counts = await Promise.all(builds.map(b => measure(b.name.replace(' ', '-'), b.bin, backend.port, picker.port, processor.port)))
    const rows: string[][] = []
    builds.forEach((b, i) => {
      const c = counts[i]!
      for (const route of ROUTES) {
        const added = route === 'plain' ? '' : `+${fmt(c[route].requestThread - c.plain.requestThread, 0)} (×${fmt(c[route].requestThread / c.plain.requestThread, 2)})`
        rows.push([b.name, route, fmt(c[route].requestThread, 0), added, fmt(c[route].allThreads, 0)])
      }
    })
    process.stdout.write([
      `inference-pool-instructions: Node ${process.version}, callgrind; instructions per 1 KiB POST over ${REQUESTS} requests after ${WARMUP} per route (10 connections), young generation fixed at ${SEMI_SPACE_MB} MB semi-spaces`,
      table(['build', 'route', 'request thread', 'vs plain', 'all threads'], rows),
      JSON.stringify(rounded({ bench: 'inference-pool-instructions', node: process.version, warmup: WARMUP, requests: REQUESTS, builds: builds.map((b, i) => ({ name: b.name, counts: counts[i] })) }))
    ].join('\n') + '\n')
  } finally {
    for (const s of servers) await s.child.stop()
  }
}

await main()
