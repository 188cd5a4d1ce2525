/**
 * TCP benchmark (issue 19): a TCP listener with one tcpRoute, against the same server reached
 * directly, through the plain Node way (`servers/tcp-pipe-proxy.ts`: two sockets joined by
 * pipe()) and, when Go is installed, through a native splice(2) proxy
 * (`servers/tcp-splice-proxy.go`), in one run — bulk throughput each way (one connection
 * moving `--mib` MiB) and the rate of short connections (connect, one byte each way, close)
 * from `--clients` concurrent connectors.
 *
 * Fairness: the same client (this process) and server for every target; one unmeasured
 * warm-up pass through each; rounds interleave the targets, each round starting with the next
 * one in turn, and the medians are reported. Each process's CPU comes from /proc (this
 * process's from process.cpuUsage), so the figures say where the machine's cores went: with
 * client, proxy and server on two cores the proxy's CPU per MiB decides how close to direct
 * it can get. Target: throughput ≥ 0.8× direct.
 *
 * `--pin 1` gives the proxies CPU 0 and the client and server the other CPUs
 * (taskset): direct then runs on the client's and server's CPUs alone, and a proxy's ratio
 * says whether it keeps up with a flow when it has a core of its own, as in a deployment,
 * rather than how three processes share two cores.
 *
 * Run: node bench/tcp.ts [--mib 512] [--rounds 5] [--clients 16] [--duration 2] [--pin 0|1]
 */

import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import net from 'node:net'
import { availableParallelism, loadavg } from 'node:os'
import { join } from 'node:path'
import { freePort, hasTaskset, pinSelf, scratchDir, startNode, type Child } from './lib/children.ts'
import { startPortico } from './lib/servers.ts'
import { readOptions } from './lib/options.ts'
import { fmt, median, ratio, rounded, table } from './lib/report.ts'

const TARGET_RATIO = 0.8
const opts = readOptions({
  mib: { flag: 'mib', default: 512, help: 'MiB moved per throughput run' },
  rounds: { flag: 'rounds', default: 5, help: 'interleaved rounds (medians reported)' },
  clients: { flag: 'clients', default: 16, help: 'concurrent connectors in the connection-rate runs' },
  duration: { flag: 'duration', default: 2, help: 'seconds per connection-rate run' },
  pin: { flag: 'pin', default: 0, help: '1: the proxies on CPU 0, client and server on the others (taskset), so a proxy has a core of its own as in a deployment; 0: nothing pinned' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

/** MiB/s of one connection: `D` reads `mib` MiB from the server, `U` sends them. */
async function bulk (port: number, mode: 'D' | 'U', mib: number): Promise<number> {
  const bytes = mib * 1024 * 1024
  const chunk = Buffer.alloc(64 * 1024, 3)
  const started = performance.now()
  await new Promise<void>((resolve, reject) => {
    let got = 0
    let answer = ''
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
    // A download counts the bytes; an upload gets the server's count of what it received.
    s.on('data', (c: Buffer) => { if (mode === 'D') got += c.length; else answer += c.toString() })
    s.on('end', () => s.end())
    s.on('close', () => {
      const received = mode === 'D' ? got : Number(answer)
      if (received === bytes) resolve()
      else reject(new Error(`${mode === 'D' ? 'got' : 'the server got'} ${received} of ${bytes} bytes`))
    })
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

function ownCpuSeconds (): number {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

type Name = 'direct' | 'portico' | 'pipe' | 'splice'
interface Target { name: Name, label: string, port: number, child: Child | null }
interface Sample { rate: number, proxyUs: number, clientUs: number, serverUs: number }

/** The Go toolchain, if there is one (PATH, or where the official tarball goes). */
function goBinary (): string | null {
  for (const go of ['go', '/usr/local/go/bin/go']) {
    try {
      execFileSync(go, ['version'], { stdio: 'ignore' })
      return go
    } catch {}
  }
  return null
}

/** The splice proxy built into a scratch directory, or null without Go. */
function buildSpliceProxy (): string | null {
  const go = goBinary()
  if (go === null) return null
  const out = join(scratchDir('tcp-splice-proxy'), 'tcp-splice-proxy')
  execFileSync(go, ['build', '-o', out, new URL('./servers/tcp-splice-proxy.go', import.meta.url).pathname], { stdio: 'ignore', timeout: 120_000 })
  return existsSync(out) ? out : null
}

/** One measured run against `t`: its rate, and the CPU µs per unit (MiB or connection) of the proxy, this client and the server. */
async function sample (t: Target, server: Child, units: number, run: () => Promise<number>): Promise<Sample> {
  const p0 = t.child?.cpuSeconds() ?? 0
  const c0 = ownCpuSeconds()
  const s0 = server.cpuSeconds()
  const rate = await run()
  const n = units > 0 ? units : rate
  return { rate, proxyUs: ((t.child?.cpuSeconds() ?? 0) - p0) * 1e6 / n, clientUs: (ownCpuSeconds() - c0) * 1e6 / n, serverUs: (server.cpuSeconds() - s0) * 1e6 / n }
}

/** `items` rotated by `k` places: each round starts with the next target. */
function rotated<T> (items: T[], k: number): T[] {
  return items.map((_, i) => items[(i + k) % items.length]!)
}

async function main (): Promise<void> {
  const children: Child[] = []
  const loadBefore = loadavg()
  const cpuCount = availableParallelism()
  const pinned = opts.pin === 1
  if (pinned && (!hasTaskset() || cpuCount < 2)) throw new Error('--pin 1 needs taskset and at least 2 CPUs')
  const rest = cpuCount === 2 ? '1' : `1-${cpuCount - 1}`
  const proxyCpus = pinned ? { cpus: '0' } : {}
  const serverCpus = pinned ? { cpus: rest } : {}
  if (pinned) pinSelf(rest)
  const placement = pinned ? `pinned: proxies on CPU 0, client and server on CPU ${rest}` : 'shared: client, proxy and server share this machine\'s cores'
  try {
    const port = await freePort()
    const server = await startNode({ name: 'tcp-server', args: [new URL('./servers/tcp-server.ts', import.meta.url).pathname, String(port), String(opts.mib * 1024 * 1024)], readyLine: 'ready', ...serverCpus })
    children.push(server)
    const portico = await startPortico({ config: `gateways:\n  tcp: { port: {port}, protocol: TCP }\ntcpRoutes:\n  - name: bench\n    gateways: tcp\n    backends: [{ host: "127.0.0.1:${port}" }]\n`, logLevel: 'warn', ...proxyCpus })
    children.push(portico.child)
    const pipePort = await freePort()
    const pipe = await startNode({ name: 'tcp-pipe-proxy', args: [new URL('./servers/tcp-pipe-proxy.ts', import.meta.url).pathname, String(pipePort), String(port)], readyLine: 'ready', ...proxyCpus })
    children.push(pipe)
    const targets: Target[] = [{ name: 'direct', label: 'direct', port, child: null }, { name: 'portico', label: 'portico', port: portico.port, child: portico.child }, { name: 'pipe', label: 'node pipe', port: pipePort, child: pipe }]
    const splice = buildSpliceProxy()
    if (splice !== null) {
      const splicePort = await freePort()
      const child = await startNode({ name: 'tcp-splice-proxy', command: splice, args: [String(splicePort), String(port)], readyLine: 'ready', ...proxyCpus })
      children.push(child)
      targets.push({ name: 'splice', label: 'go splice', port: splicePort, child })
    } else progress('no Go toolchain: the splice proxy is left out')
    const names = targets.map(t => t.name)
    const proxies = targets.filter(t => t.name !== 'direct')
    progress('warm-up')
    for (const t of targets) {
      // The server sends `--mib` MiB per download: a warm-up download is a whole one.
      await bulk(t.port, 'D', opts.mib)
      await bulk(t.port, 'U', Math.min(opts.mib, 128))
      await connectionRate(t.port, opts.clients, 0.5)
    }
    const runs = { download: [] as Array<Record<Name, Sample>>, upload: [] as Array<Record<Name, Sample>>, connections: [] as Array<Record<Name, Sample>> }
    for (let round = 0; round < opts.rounds; round++) {
      for (const mode of ['D', 'U'] as const) {
        const row = {} as Record<Name, Sample>
        for (const t of rotated(targets, round)) row[t.name] = await sample(t, server, opts.mib, () => bulk(t.port, mode, opts.mib))
        runs[mode === 'D' ? 'download' : 'upload'].push(row)
        progress(`round ${round + 1} ${mode === 'D' ? 'download' : 'upload'} MiB/s: ${names.map(n => `${n} ${fmt(row[n].rate, 0)}`).join(', ')}`)
      }
      const row = {} as Record<Name, Sample>
      for (const t of rotated(targets, round)) row[t.name] = await sample(t, server, 0, async () => await connectionRate(t.port, opts.clients, opts.duration) * opts.duration)
      for (const n of names) row[n].rate /= opts.duration
      runs.connections.push(row)
      progress(`round ${round + 1} connections/s: ${names.map(n => `${n} ${fmt(row[n].rate, 0)}`).join(', ')}`)
    }
    const m = (kind: keyof typeof runs, name: Name, field: keyof Sample) => median(runs[kind].map(r => r[name][field]))
    const line = (label: string, kind: keyof typeof runs) => [label, fmt(m(kind, 'direct', 'rate'), 0), ...proxies.flatMap(t => [fmt(m(kind, t.name, 'rate'), 0), fmt(ratio(m(kind, t.name, 'rate'), m(kind, 'direct', 'rate')))])]
    const cpu = (label: string, kind: keyof typeof runs, unit: string) => [label, unit, ...proxies.map(t => fmt(m(kind, t.name, 'proxyUs'), 0)), fmt(m(kind, 'direct', 'clientUs'), 0), fmt(m(kind, 'direct', 'serverUs'), 0)]
    const down = ratio(m('download', 'portico', 'rate'), m('download', 'direct', 'rate'))
    const up = ratio(m('upload', 'portico', 'rate'), m('upload', 'direct', 'rate'))
    const loadAfter = loadavg()
    process.stdout.write([
      `tcp benchmark: Node ${process.version}; ${opts.mib} MiB per bulk run; ${opts.clients} connectors x ${opts.duration} s per rate run; medians of ${opts.rounds} interleaved rounds after a warm-up; ${placement}; load average ${loadBefore.map(l => fmt(l, 1)).join(' ')} before, ${loadAfter.map(l => fmt(l, 1)).join(' ')} after`,
      '',
      table(['', 'direct', ...proxies.flatMap(t => [t.label, `/direct`])], [line('download MiB/s', 'download'), line('upload MiB/s', 'upload'), line('short connections/s', 'connections')]),
      '',
      'CPU (from /proc), per unit moved:',
      table(['', 'unit', ...proxies.map(t => t.label), 'client (direct)', 'server (direct)'], [cpu('download', 'download', 'us/MiB'), cpu('upload', 'upload', 'us/MiB'), cpu('short connections', 'connections', 'us/conn')]),
      '',
      `Target: throughput >= ${TARGET_RATIO}x direct: ${Math.min(down, up) >= TARGET_RATIO ? 'met' : 'NOT met'}`,
      JSON.stringify(rounded({ bench: 'tcp', node: process.version, options: opts, placement, loadavg: { before: loadBefore, after: loadAfter }, runs }))
    ].join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
  }
}

await main()
