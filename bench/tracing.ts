/**
 * What OpenTelemetry tracing costs a proxied GET: Portico with tracing off against the same
 * config with `config.tracing` sampling 1 % and 100 % of requests (randomSampling), spans
 * exported over OTLP/HTTP to a sink on loopback that accepts every batch (a collector's
 * work is not Portico's). ABBA rounds per comparison (bench/lib/abba.ts); ratios are
 * taken within each round and the median reported, with each proxy's own CPU per request.
 * The cost of tracing *off* against a build without it is bench/builds.ts's question.
 *
 * A control comes first: a second untraced proxy against the first, the same way (A/A).
 * Its ratio is the noise floor of this machine and run — two identical processes differ by
 * where they run and what their JIT chose — and tracing's ratios mean something only
 * beyond it (`--control 0` skips it).
 *
 * Each config runs as `--processes` processes (3), and each comparison is made pair by pair
 * (the first off process against the first traced one, and so on, both of a pair at the same
 * V8 random seed), its rounds pooled into one median. One pair of processes is one draw of two JIT states: runs of one pair agree
 * with each other, while separate runs of the same build came out ×0.86 to ×0.99 at 1 %
 * (2026-11-27), so the spread between processes, not between rounds, is what more
 * processes average out.
 *
 * The load comes from wrk, as in bench/http-proxy.ts: a C client takes far less of the 2
 * cores from the proxies than autocannon in this process (`--load autocannon`, the way
 * before 2026-11-27).
 *
 * `--node-flags='--a-v8-flag'` passes flags to every proxy (a JIT hypothesis).
 *
 * Run: node bench/tracing.ts [--load wrk] [--rounds 2] [--processes 3] [--node-flags=…] [--duration 5] [--warmup 2] [--connections 50] [--control 1] [--samplings 0.01,1]
 * (`--samplings`: the sampling ratios to compare with off; 0 records nothing but still
 * propagates, and starts no export thread)
 */

import http from 'node:http'
import { availableParallelism, loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { abbaReport, compareAbba, mergeAbba, type AbbaResult } from './lib/abba.ts'
import { fmt, rounded } from './lib/report.ts'
import { freePort } from './lib/children.ts'
import { hasWrk } from './lib/wrk.ts'
import { startBackend, startPortico, type Server } from './lib/servers.ts'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    processes: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '50' },
    control: { type: 'string', default: '1' },
    samplings: { type: 'string', default: '0.01,1' },
    load: { type: 'string', default: 'wrk' },
    'node-flags': { type: 'string', default: '' }
  }
})
const opts = { rounds: Number(values.rounds), processes: Math.max(1, Number(values.processes)), duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections), control: values.control !== '0', samplings: values.samplings.split(',').map(Number), load: values.load, nodeFlags: values['node-flags'].split(/\s+/).filter(f => f !== '') }
const progress = (msg: string): void => { process.stderr.write(`[bench] ${msg}\n`) }

/** An OTLP/HTTP endpoint that reads each export and answers 200 (and counts the bytes). */
async function startSink (): Promise<{ url: string, bytes: () => number, close: () => Promise<void> }> {
  let bytes = 0
  const port = await freePort()
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => { bytes += c.length })
    req.on('end', () => { res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end() })
  })
  await new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${port}`, bytes: () => bytes, close: () => new Promise(resolve => server.close(() => resolve())) }
}

function config (backendPort: number, tracing: string): string {
  return `${tracing}gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: bench
    backends:
      - host: 127.0.0.1:${backendPort}
`
}

async function main (): Promise<void> {
  const servers: Server[] = []
  const sink = await startSink()
  try {
    const backend = await startBackend()
    servers.push(backend)
    const traced = (sampling: string) => `config:\n  tracing:\n    otlpEndpoint: ${sink.url}\n    otlpProtocol: http\n    randomSampling: ${sampling}\n`
    const many = async (tracing: string): Promise<Server[]> => {
      const started: Server[] = []
      for (let i = 0; i < opts.processes; i++) {
        // Pair i runs at V8 random seed i + 1 on both sides: the seed places V8's code and
        // heap pages and seeds its hashes, so a pair compares like with like, and the pairs
        // sample different placements.
        started.push(await startPortico({ config: config(backend.port, tracing), logLevel: 'warn', nodeFlags: [`--random-seed=${i + 1}`, ...opts.nodeFlags] }))
        servers.push(started.at(-1)!)
      }
      return started
    }
    const off = await many('')
    const twin = opts.control ? await many('') : null
    const traces = []
    for (const ratio of opts.samplings) {
      const name = `${fmt(ratio * 100, ratio < 0.01 && ratio > 0 ? 2 : 0)}% sampled`
      traces.push({ ratio, name, servers: await many(traced(ratio >= 1 ? 'true' : String(ratio))) })
    }
    if (opts.load !== 'wrk' && opts.load !== 'autocannon') throw new Error(`--load: wrk or autocannon, not ${opts.load}`)
    const generator: 'wrk' | 'autocannon' = opts.load === 'wrk' && await hasWrk() ? 'wrk' : 'autocannon'
    if (generator !== opts.load) progress('wrk not found: autocannon instead')
    const load = loadavg()
    const common = { rounds: opts.rounds, duration: opts.duration, warmup: opts.warmup, connections: opts.connections, progress, load: generator }
    const target = (name: string, s: Server) => ({ name, url: s.url, cpu: s.child.cpuSeconds })
    /** Pair by pair (off's i-th process against the other's), the rounds pooled. */
    const comparePairs = async (name: string, others: Server[]): Promise<AbbaResult> => {
      const results: AbbaResult[] = []
      for (let i = 0; i < opts.processes; i++) {
        progress(`pair ${i + 1}/${opts.processes}`)
        results.push(await compareAbba(target('off', off[i]!), target(name, others[i]!), common))
      }
      return mergeAbba(results)
    }
    let control: AbbaResult | null = null
    if (twin !== null) {
      progress('control: off vs another off')
      control = await comparePairs('off (twin)', twin)
    }
    const results = []
    for (const t of traces) {
      progress(`off vs ${t.name}`)
      results.push({ ...t, r: await comparePairs(t.name, t.servers) })
    }
    const out = [
      `tracing benchmark: Node ${process.version}; ${opts.connections} connections; each comparison ${opts.processes} pairs of processes × ${opts.rounds} ABBA rounds of ${opts.duration} s (rounds numbered across the pairs), load by ${generator}; ${availableParallelism()} CPUs, load average ${loadavg().map(l => fmt(l, 2)).join(' ')} (at start ${load.map(l => fmt(l, 2)).join(' ')}); spans to an OTLP/HTTP sink on loopback (${sink.bytes()} bytes received)`,
      '',
      ...(control !== null
        ? [...abbaReport(control, { a: 'off', b: 'off (twin)' }), `control, off (twin) / off: req/s ${fmt(control.rpsRatio, 3)}x, CPU µs/req ${fmt(control.cpuRatio, 3)}x (median of rounds; rounds ${control.roundRatios.map(r => fmt(r, 3)).join(', ')}) — the noise floor`, '']
        : []),
      ...results.flatMap(({ name, r }) => [
        ...abbaReport(r, { a: 'off', b: name }),
        `${name} / off: req/s ${fmt(r.rpsRatio, 3)}x, CPU µs/req ${fmt(r.cpuRatio, 3)}x (median of rounds)`,
        ''
      ]),
      JSON.stringify(rounded({ bench: 'tracing', load: generator, ...(control !== null ? { control: { rpsRatio: control.rpsRatio, cpuRatio: control.cpuRatio, roundRatios: control.roundRatios } } : {}), samplings: results.map(({ ratio, r }) => ({ ratio, rpsRatio: r.rpsRatio, cpuRatio: r.cpuRatio, median: r.median })) }))
    ]
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
    await sink.close()
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
