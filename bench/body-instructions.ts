/**
 * What a proxied GET costs Portico and nginx, counted in instructions rather than timed
 * (issue 54): 12-byte and 64 KiB answers from the benchmark backend (bench/servers/backend.ts),
 * through Portico (one worker, `LOG_LEVEL=warn`) and through nginx as the reference
 * (bench/lib/nginx.ts: `sized` buffers, and nginx's `default` 4 KiB ones beside it), each
 * under callgrind. On a 2-core machine shared with other work, CPU µs per request move by
 * tens of per cent between runs (bench/http-proxy.ts's body path); a count does not move
 * with the load, only with where V8's JIT lands (bench/tracing-instructions.ts explains the
 * method).
 *
 * What a count leaves out: the kernel. callgrind counts the instructions a process runs in
 * user space; the system calls' own work (the copies into and out of the sockets, the TCP
 * stack on loopback) is not in it, and on a 64 KiB answer it is a large part of the CPU time
 * (bench/http-proxy.ts's CPU µs/request has both). The ratio of counts says how the proxies'
 * own code compares; the ratio of CPU µs/request what the operator pays.
 *
 * Per server and size: `--warmup` GETs over 10 keep-alive connections, the counters zeroed,
 * `--requests` counted, dumped. Reported per request: the thread that serves (Portico's
 * event loop, nginx's only one) and all threads (with V8's GC and compiler helpers).
 *
 * --before DIR: Portico of the build in DIR (a checkout with its node_modules) as well.
 * Needs valgrind and nginx. About 4 minutes with the defaults.
 *
 * Run: node bench/body-instructions.ts [--warmup 4000] [--requests 1000] [--before DIR] [--keep DIR] [--top N]
 */

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { MEMORY_REDUCER_FLAG, SEMI_SPACE_MB } from '@portico/proxy/v8-flags'
import { fmt, rounded, table } from './lib/report.ts'
import { freePort, scratchDir, startNode } from './lib/children.ts'
import { hasNginx, nginxConfig, type NginxBuffering } from './lib/nginx.ts'
import { dumpTotals, functionCounts, haveValgrind, jitCodeMap, run, sendRequests } from './lib/callgrind.ts'
import { checkoutBin, PORTICO_BIN, porticoEnv, singleRouteConfig, startBackend, type Server } from './lib/servers.ts'

const { values } = parseArgs({ options: { warmup: { type: 'string', default: '4000' }, requests: { type: 'string', default: '1000' }, before: { type: 'string' }, keep: { type: 'string' }, top: { type: 'string', default: '0' } } })
const WARMUP = Number(values.warmup)
const REQUESTS = Number(values.requests)
const TOP = Number(values.top)
const KEEP = values.keep
const PORTICO = PORTICO_BIN
const BEFORE = values.before === undefined ? undefined : checkoutBin(values.before)
const SIZES = [{ name: 'small', path: '/small' }, { name: '64k', path: '/64k' }] as const
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }


interface Target { name: string, kind: 'portico' | 'nginx', bin?: string, buffering?: NginxBuffering }
type Counts = Record<typeof SIZES[number]['name'], { requestThread: number, allThreads: number, top: Array<[string, number]> }>

async function measure (target: Target, backend: number): Promise<Counts> {
  const tag = target.name.replace(/\W+/g, '-')
  const dir = KEEP === undefined ? scratchDir(`callgrind-${tag}`) : join(KEEP, tag)
  if (KEEP !== undefined) mkdirSync(dir, { recursive: true })
  const port = await freePort()
  const valgrind = ['--tool=callgrind', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`]
  let args: string[]
  if (target.kind === 'portico') {
    const configPath = join(dir, 'config.yaml')
    writeFileSync(configPath, singleRouteConfig(backend).replaceAll('{port}', String(port)))
    args = [...valgrind, process.execPath, `--max-semi-space-size=${SEMI_SPACE_MB}`, `--min-semi-space-size=${SEMI_SPACE_MB}`, MEMORY_REDUCER_FLAG, '--random-seed=1', ...(TOP > 0 ? ['--perf-basic-prof'] : []), target.bin!, '-f', configPath]
  } else {
    const conf = join(dir, 'nginx.conf')
    writeFileSync(conf, nginxConfig(dir, port, backend, target.buffering!))
    args = [...valgrind, process.env.NGINX ?? 'nginx', '-c', conf, '-p', dir]
  }
  const child = await startNode({ name: `${target.name} under callgrind`, command: 'valgrind', args, env: porticoEnv('warn'), cwd: dir, readyPort: port, ownPort: true, timeoutMs: 600_000 })
  const ranges: Array<ReturnType<typeof jitCodeMap>> = []
  try {
    const url = `http://127.0.0.1:${port}`
    for (const size of SIZES) {
      progress(`${target.name}: ${size.name}, ${WARMUP} requests to warm up, then ${REQUESTS} counted`)
      await sendRequests(url, { path: size.path, method: 'GET' }, WARMUP)
      await run('callgrind_control', ['--zero', String(child.proc.pid)])
      await sendRequests(url, { path: size.path, method: 'GET' }, REQUESTS)
      await run('callgrind_control', ['--dump', String(child.proc.pid)])
      ranges.push(target.kind === 'portico' && TOP > 0 ? jitCodeMap(child.proc.pid!) : [])
    }
  } finally {
    await child.stop(30_000)
    if (KEEP !== undefined) writeFileSync(join(dir, 'output.log'), child.output())
  }
  const out = {} as Counts
  for (const [i, size] of SIZES.entries()) {
    const { main, all, mainFile } = dumpTotals(dir, i + 1)
    if (main === 0) throw new Error(`${target.name} ${size.name}: no callgrind dump in ${dir}`)
    let top: Array<[string, number]> = []
    if (TOP > 0) {
      const counts = await functionCounts(mainFile, ranges[i]!)
      top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, TOP).map(([name, n]) => [name, n / REQUESTS])
    }
    out[size.name] = { requestThread: main / REQUESTS, allThreads: all / REQUESTS, top }
  }
  return out
}

async function main (): Promise<void> {
  if (!await haveValgrind('body-instructions')) return
  if (!await hasNginx()) {
    process.stdout.write('body-instructions: skipped (needs nginx: apt-get install nginx-light)\n')
    return
  }
  let backend: Server | undefined
  try {
    backend = await startBackend()
    const targets: Target[] = [
      { name: 'portico', kind: 'portico', bin: PORTICO },
      ...(BEFORE !== undefined ? [{ name: 'portico (before)', kind: 'portico' as const, bin: BEFORE }] : []),
      { name: 'nginx', kind: 'nginx', buffering: 'sized' },
      { name: 'nginx (buffers default)', kind: 'nginx', buffering: 'default' }
    ]
    // One at a time: two processes under valgrind on two shared cores slow each other's warm-up, not the counts.
    const counts: Counts[] = []
    for (const t of targets) counts.push(await measure(t, backend.port))
    const reference = counts[targets.findIndex(t => t.name === 'nginx')]!
    const rows: string[][] = []
    for (const size of SIZES) {
      targets.forEach((t, i) => {
        const c = counts[i]![size.name]
        rows.push([size.name, t.name, fmt(c.requestThread, 0), fmt(c.allThreads, 0), `${fmt(c.allThreads / reference[size.name].allThreads, 2)}×`])
      })
    }
    const lines = [
      `body-instructions: Node ${process.version}, callgrind; instructions per GET over ${REQUESTS} requests after ${WARMUP} (10 keep-alive connections), user space only (the kernel's share is not counted)`,
      table(['size', 'server', 'serving thread', 'all threads', 'vs nginx (all threads)'], rows)
    ]
    if (TOP > 0) {
      targets.forEach((t, i) => {
        if (t.kind !== 'portico') return
        for (const size of SIZES) {
          lines.push('', `${t.name}, ${size.name}: the serving thread's ${TOP} largest functions (self instructions per request)`)
          lines.push(table(['function', 'per request'], counts[i]![size.name].top.map(([name, n]) => [name.slice(0, 110), fmt(n, 0)])))
        }
      })
    }
    lines.push(JSON.stringify(rounded({ bench: 'body-instructions', node: process.version, warmup: WARMUP, requests: REQUESTS, targets: targets.map((t, i) => ({ name: t.name, counts: Object.fromEntries(SIZES.map(s => [s.name, { requestThread: counts[i]![s.name].requestThread, allThreads: counts[i]![s.name].allThreads }])) })) })))
    process.stdout.write(lines.join('\n') + '\n')
  } finally {
    await backend?.child.stop()
  }
}

await main()
