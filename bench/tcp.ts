/**
 * TCP benchmark (issue 19): a TCP listener with one tcpRoute against the same server reached
 * directly, in one run — bulk throughput each way (one connection moving `--mib` MiB) and
 * the rate of short connections (connect, one byte each way, close) from `--clients`
 * concurrent connectors. Portico's CPU per MiB and per connection comes from its /proc
 * accounting. Target: throughput ≥ 0.8× direct.
 *
 * Run: node bench/tcp.ts [--mib 512] [--rounds 3] [--clients 16] [--duration 5]
 */

import net from 'node:net'
import { freePort, startNode, type Child } from './lib/children.ts'
import { startPortico } from './lib/servers.ts'
import { readOptions } from './lib/options.ts'
import { fmt, median, ratio, rounded, table } from './lib/report.ts'

const TARGET_RATIO = 0.8
const opts = readOptions({
  mib: { flag: 'mib', default: 512, help: 'MiB moved per throughput run' },
  rounds: { flag: 'rounds', default: 3, help: 'interleaved rounds (medians reported)' },
  clients: { flag: 'clients', default: 16, help: 'concurrent connectors in the connection-rate run' },
  duration: { flag: 'duration', default: 5, help: 'seconds per connection-rate run' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

/** MiB/s of one connection: `D` reads `mib` MiB from the server, `U` sends them. */
async function bulk (port: number, mode: 'D' | 'U', mib: number): Promise<number> {
  const bytes = mib * 1024 * 1024
  const chunk = Buffer.alloc(64 * 1024, 3)
  const started = performance.now()
  await new Promise<void>((resolve, reject) => {
    let got = 0
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true, noDelay: true }, () => {
      s.write(mode)
      if (mode === 'D') return
      let left = bytes
      const pump = (): void => {
        while (left > 0) {
          left -= chunk.length
          if (!s.write(chunk)) { s.once('drain', pump); return }
        }
        s.end()
      }
      pump()
    })
    s.on('data', (c: Buffer) => { got += c.length })
    s.on('end', () => s.end())
    s.on('close', () => (mode === 'U' || got === bytes ? resolve() : reject(new Error(`got ${got} of ${bytes} bytes`))))
    s.on('error', reject)
  })
  return mib / ((performance.now() - started) / 1000)
}

/** Short connections per second from `clients` loops for `seconds`. */
async function connectionRate (port: number, clients: number, seconds: number): Promise<number> {
  const until = performance.now() + seconds * 1000
  let done = 0
  const one = () => new Promise<void>((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' }, () => s.write('P'))
    s.on('data', () => {})
    s.on('close', () => resolve())
    s.on('error', reject)
  })
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < until) {
      await one()
      done++
    }
  }))
  return done / seconds
}

async function main (): Promise<void> {
  const children: Child[] = []
  try {
    const port = await freePort()
    children.push(await startNode({ name: 'tcp-server', args: [new URL('./servers/tcp-server.ts', import.meta.url).pathname, String(port), String(opts.mib * 1024 * 1024)], readyLine: 'ready' }))
    const portico = await startPortico({ config: `gateways:\n  tcp: { port: {port}, protocol: TCP }\ntcpRoutes:\n  - name: bench\n    gateways: tcp\n    backends: [{ host: "127.0.0.1:${port}" }]\n`, logLevel: 'warn' })
    children.push(portico.child)
    const runs: Record<'download' | 'upload', Record<'direct' | 'portico', number[]>> = { download: { direct: [], portico: [] }, upload: { direct: [], portico: [] } }
    const cpuPerMiB: number[] = []
    for (let round = 1; round <= opts.rounds; round++) {
      for (const mode of ['D', 'U'] as const) {
        const name = mode === 'D' ? 'download' : 'upload'
        runs[name].direct.push(await bulk(port, mode, opts.mib))
        const cpu0 = portico.child.cpuSeconds()
        runs[name].portico.push(await bulk(portico.port, mode, opts.mib))
        cpuPerMiB.push((portico.child.cpuSeconds() - cpu0) * 1e6 / opts.mib)
        progress(`round ${round} ${name}: direct ${fmt(runs[name].direct.at(-1)!, 0)} MiB/s, portico ${fmt(runs[name].portico.at(-1)!, 0)} MiB/s`)
      }
    }
    const rateDirect = await connectionRate(port, opts.clients, opts.duration)
    const cpu0 = portico.child.cpuSeconds()
    const ratePortico = await connectionRate(portico.port, opts.clients, opts.duration)
    const cpuPerConn = (portico.child.cpuSeconds() - cpu0) * 1e6 / (ratePortico * opts.duration)
    progress(`connections/s: direct ${fmt(rateDirect, 0)}, portico ${fmt(ratePortico, 0)}`)
    const m = (xs: number[]) => median(xs)
    const rows = [
      ['download MiB/s', fmt(m(runs.download.direct), 0), fmt(m(runs.download.portico), 0), fmt(ratio(m(runs.download.portico), m(runs.download.direct)))],
      ['upload MiB/s', fmt(m(runs.upload.direct), 0), fmt(m(runs.upload.portico), 0), fmt(ratio(m(runs.upload.portico), m(runs.upload.direct)))],
      ['short connections/s', fmt(rateDirect, 0), fmt(ratePortico, 0), fmt(ratio(ratePortico, rateDirect))]
    ]
    const worst = Math.min(ratio(m(runs.download.portico), m(runs.download.direct)), ratio(m(runs.upload.portico), m(runs.upload.direct)))
    process.stdout.write([
      `tcp benchmark: Node ${process.version}; ${opts.mib} MiB per bulk run, medians of ${opts.rounds} interleaved rounds; ${opts.clients} connectors x ${opts.duration} s; client, portico and server share this machine's cores`,
      '',
      table(['', 'direct', 'portico', 'portico/direct'], rows),
      '',
      `portico CPU: ${fmt(m(cpuPerMiB), 0)} us per MiB forwarded, ${fmt(cpuPerConn, 0)} us per short connection`,
      `Target: throughput >= ${TARGET_RATIO}x direct: ${worst >= TARGET_RATIO ? 'met' : 'NOT met'}`,
      JSON.stringify(rounded({ bench: 'tcp', node: process.version, options: opts, runs, rateDirect, ratePortico, cpuPerMiB: m(cpuPerMiB), cpuPerConn }))
    ].join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
  }
}

await main()
