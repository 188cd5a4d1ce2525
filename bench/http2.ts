/**
 * HTTP/2 benchmark with h2load (Debian's nghttp2-client): small GETs over h2c with prior
 * knowledge, many streams per connection, against
 *  - direct: Node's http2 server answering itself (bench/servers/h2-backend.ts);
 *  - Portico (h2c downstream) in front of the HTTP/1.1 backend of the HTTP/1.1 benchmark;
 *  - Portico (h2c downstream) in front of the h2c backend (`http.version: HTTP2`).
 * Prints requests/s, the ratio to direct and Portico's CPU per request, from one run.
 *
 * Run: node bench/http2.ts [--duration 5] [--connections 8] [--streams 16]
 */

import { execFile } from 'node:child_process'
import { freePort, startNode } from './lib/children.ts'
import { startBackend, startPortico, type Server } from './lib/servers.ts'
import { readOptions } from './lib/options.ts'
import { fmt, ratio, rounded, table } from './lib/report.ts'

const opts = readOptions({
  duration: { flag: 'duration', default: 5, help: 'seconds per run' },
  connections: { flag: 'connections', default: 8, help: 'h2load clients (connections)' },
  streams: { flag: 'streams', default: 16, help: 'concurrent streams per connection' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

interface Run { requestsPerSecond: number, cpuUsPerRequest: number, failed: number }

async function h2load (url: string, cpuOf?: Server['child']): Promise<Run> {
  const args = ['-D', String(opts.duration), '--warm-up-time', '1', '-c', String(opts.connections), '-m', String(opts.streams), '-t', '1', url]
  const cpu0 = cpuOf?.cpuSeconds() ?? NaN
  const out = await new Promise<string>((resolve, reject) => {
    execFile('h2load', args, { timeout: (opts.duration + 30) * 1000 }, (err, stdout) => err !== null ? reject(new Error(`h2load failed: ${err.message} (install: apt-get install nghttp2-client)`)) : resolve(stdout))
  })
  const cpu = (cpuOf?.cpuSeconds() ?? NaN) - cpu0
  const rps = Number(/finished in [^,]+, ([\d.]+) req\/s/.exec(out)?.[1] ?? NaN)
  const done = Number(/requests: \d+ total, \d+ started, (\d+) done/.exec(out)?.[1] ?? NaN)
  const failed = Number(/(\d+) failed/.exec(out)?.[1] ?? NaN)
  // CPU over the measured part only is not separable from the warm-up: counted per request done.
  return { requestsPerSecond: rps, cpuUsPerRequest: cpu / done * 1e6, failed }
}

async function main (): Promise<void> {
  const children: Server['child'][] = []
  try {
    const h2Port = await freePort()
    children.push(await startNode({ name: 'h2-backend', args: [new URL('./servers/h2-backend.ts', import.meta.url).pathname, String(h2Port)], readyLine: 'ready' }))
    const h1 = await startBackend()
    children.push(h1.child)
    const portico = await startPortico({
      logLevel: 'warn',
      config: `gateways:\n  default: { port: {port}, protocol: HTTP }\nroutes:\n  - name: h1\n    matches: [{ path: { pathPrefix: /h1 } }]\n    backends: [{ host: "127.0.0.1:${h1.port}" }]\n  - name: h2\n    matches: [{ path: { pathPrefix: /h2 } }]\n    backends: [{ host: "127.0.0.1:${h2Port}", policies: { http: { version: HTTP2 } } }]\n`
    })
    children.push(portico.child)
    progress('direct: h2load against the h2c server')
    const direct = await h2load(`http://127.0.0.1:${h2Port}/`)
    progress('portico → HTTP/1.1 backend')
    const toH1 = await h2load(`http://127.0.0.1:${portico.port}/h1`, portico.child)
    progress('portico → h2c backend')
    const toH2 = await h2load(`http://127.0.0.1:${portico.port}/h2`, portico.child)
    const rows = [
      ['direct (h2c server)', fmt(direct.requestsPerSecond, 0), '', '', String(direct.failed)],
      ['portico h2c → HTTP/1.1 backend', fmt(toH1.requestsPerSecond, 0), fmt(ratio(toH1.requestsPerSecond, direct.requestsPerSecond)), fmt(toH1.cpuUsPerRequest, 1), String(toH1.failed)],
      ['portico h2c → h2c backend', fmt(toH2.requestsPerSecond, 0), fmt(ratio(toH2.requestsPerSecond, direct.requestsPerSecond)), fmt(toH2.cpuUsPerRequest, 1), String(toH2.failed)]
    ]
    process.stdout.write([
      `http2 benchmark: Node ${process.version}; h2load ${opts.connections} connections x ${opts.streams} streams, ${opts.duration} s; GET of 12 bytes; load generator, portico and servers share this machine's cores`,
      '',
      table(['path', 'req/s', 'x direct', 'portico CPU us/req', 'failed'], rows),
      '',
      JSON.stringify(rounded({ bench: 'http2', node: process.version, options: opts, results: { direct, toH1, toH2 } }))
    ].join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
