/**
 * Trace benchmark: what the per-request trace costs. (1) requests/s with the trace code
 * path present but no watcher armed, against the same proxy with tracing switched off
 * (DEBUG_TRACE=off) — the cost every request pays for the feature; (2) the latency of a
 * request that is traced (a watcher armed, every event serialized and streamed) against an
 * untraced one, request by request.
 *
 * Run: node bench/trace.ts [--duration 10] [--traced 200]
 */

import { request } from 'undici'
import { createParser } from 'eventsource-parser'
import { freePort } from './lib/children.ts'
import { measureThroughput } from './lib/load.ts'
import { LatencyRecorder } from './lib/latency.ts'
import { readOptions } from './lib/options.ts'
import { fmt, ratio, rounded, table } from './lib/report.ts'
import { singleRouteConfig, startBackend, startPortico, type Server } from './lib/servers.ts'

const opts = readOptions({
  duration: { flag: 'duration', default: 10, help: 'seconds per measured throughput run' },
  warmup: { flag: 'warmup', default: 3, help: 'seconds of warm-up before each throughput run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections for throughput runs' },
  traced: { flag: 'traced', default: 200, help: 'sequential requests for the traced/untraced latency comparison' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

/** Arms a trace, sends one request, waits for its last event; returns the request's latency. */
async function tracedRequest (admin: string, url: string, tag: string): Promise<number> {
  const armed = await request(`${admin}/debug/trace?header=x-bench-trace:${tag}`, { method: 'POST' })
  let onReady!: () => void
  const ready = new Promise<void>(resolve => { onReady = resolve })
  let onDone!: () => void
  const done = new Promise<void>(resolve => { onDone = resolve })
  const parser = createParser({
    onComment: c => { if (c.trim() === 'ready') onReady() },
    onEvent: e => { if (e.data.includes('"requestFinished"')) onDone() }
  })
  const reading = (async () => { for await (const chunk of armed.body) parser.feed(Buffer.from(chunk as Uint8Array).toString('utf8')) })()
  await ready
  const t = performance.now()
  const res = await request(url, { headers: { 'x-bench-trace': tag } })
  await res.body.dump()
  const ms = performance.now() - t
  await done
  await reading.catch(() => {})
  return ms
}

async function main (): Promise<void> {
  const servers: Server[] = []
  try {
    const backend = await startBackend()
    servers.push(backend)
    const adminPort = await freePort()
    const on = await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` } })
    servers.push(on)
    const off = await startPortico({ config: singleRouteConfig(backend.port), logLevel: 'warn', env: { DEBUG_TRACE: 'off' } })
    servers.push(off)

    progress('throughput: tracing on, no watcher')
    const idle = await measureThroughput(on.url, { connections: opts.connections, seconds: opts.duration, warmupSeconds: opts.warmup, cpu: on.child.cpuSeconds })
    progress('throughput: tracing off')
    const disabled = await measureThroughput(off.url, { connections: opts.connections, seconds: opts.duration, warmupSeconds: opts.warmup, cpu: off.child.cpuSeconds })

    progress(`latency: ${opts.traced} untraced and ${opts.traced} traced sequential requests`)
    const plain = new LatencyRecorder()
    const traced = new LatencyRecorder()
    const admin = `http://127.0.0.1:${adminPort}`
    for (let i = 0; i < 50; i++) await tracedRequest(admin, on.url, `w${i}`) // warm-up
    for (let i = 0; i < opts.traced; i++) {
      const t = performance.now()
      const res = await request(on.url)
      await res.body.dump()
      plain.add(performance.now() - t)
      traced.add(await tracedRequest(admin, on.url, `t${i}`))
    }
    const out = [
      `trace benchmark: Node ${process.version}; ${opts.connections} connections, ${opts.duration} s measured; machine shared by load generator, proxies and backend`,
      '',
      table(['proxy', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req'], [
        ['tracing on, no watcher', fmt(idle.rps, 0), fmt(idle.p50), fmt(idle.p99), fmt(idle.cpuUsPerRequest, 1)],
        ['tracing off (DEBUG_TRACE=off)', fmt(disabled.rps, 0), fmt(disabled.p50), fmt(disabled.p99), fmt(disabled.cpuUsPerRequest, 1)]
      ]),
      `no-watcher / off req/s: ${fmt(ratio(idle.rps, disabled.rps), 3)}x`,
      '',
      table(['request', 'p50 ms', 'p99 ms'], [
        ['untraced', fmt(plain.percentile(50), 3), fmt(plain.percentile(99), 3)],
        ['traced (all events streamed)', fmt(traced.percentile(50), 3), fmt(traced.percentile(99), 3)]
      ]),
      `latency a trace adds at p50: ${fmt(traced.percentile(50) - plain.percentile(50), 3)} ms`,
      JSON.stringify(rounded({
        bench: 'trace',
        noWatcher: idle,
        off: disabled,
        rpsRatio: ratio(idle.rps, disabled.rps),
        untraced: { p50: plain.percentile(50), p99: plain.percentile(99) },
        traced: { p50: traced.percentile(50), p99: traced.percentile(99) }
      }))
    ]
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
