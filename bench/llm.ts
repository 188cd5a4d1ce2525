/**
 * LLM backend benchmark: chat completions (a 1 KiB answer with its usage, from an
 * OpenAI-compatible loopback server) sent directly, through a Portico `host:` route (plain
 * proxying), through a Portico `ai:` route with a token-based localRateLimit (the body is
 * read and rewritten, the usage read from the answer and taken from the bucket), and
 * through the Node peer (@fastify/http-proxy, which proxies without reading anything); then
 * the same for streamed answers (server-sent events, usage in the last event). All in one
 * run, rounds in rotating order; it prints requests/s, latencies and the ratios, chiefly
 * what the `ai` layer costs over plain proxying of the same request.
 *
 * Run: node bench/llm.ts [--rounds 2] [--duration 8] [--warmup 2] [--connections 32]
 * Progress goes to stderr; the table and a final JSON line go to stdout.
 */

import { availableParallelism, loadavg } from 'node:os'
import { measureThroughput, type LoadResult } from './lib/load.ts'
import { readOptions } from './lib/options.ts'
import { checkAnswer, llmBenchConfig } from './lib/llm-config.ts'
import { fmt, median, ratio, rotated, rounded, table } from './lib/report.ts'
import { startFastifyProxy, startLlmServer, startPortico, type Server } from './lib/servers.ts'

const opts = readOptions({
  rounds: { flag: 'rounds', default: 2, help: 'rounds over every target, in rotating order' },
  duration: { flag: 'duration', default: 8, help: 'seconds per measured run' },
  warmup: { flag: 'warmup', default: 2, help: 'seconds of warm-up before each run' },
  connections: { flag: 'connections', default: 32, help: 'concurrent connections (agentgateway\'s LLM benchmark uses 32)' }
})

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

const MESSAGES = [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Write a short paragraph of placeholder text, please.' }]
const BODY = JSON.stringify({ model: 'bench-model', messages: MESSAGES })
const STREAM_BODY = JSON.stringify({ model: 'bench-model', messages: MESSAGES, stream: true })

interface Target {
  name: string
  url: string
  body: string
  cpu?: () => number
}

async function main (): Promise<void> {
  const servers: Server[] = []
  const load = { start: loadavg(), end: [] as number[] }
  try {
    progress('starting the LLM server, portico (LOG_LEVEL=warn) and @fastify/http-proxy')
    const llm = await startLlmServer()
    servers.push(llm)
    const portico = await startPortico({ config: llmBenchConfig({ providerPort: llm.port, aiPolicies: '      localRateLimit:\n        - { maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1s, type: tokens }\n' }), logLevel: 'warn' })
    servers.push(portico)
    const peer = await startFastifyProxy(llm.url.replace(/\/$/, ''))
    servers.push(peer)
    const p = portico.url.replace(/\/$/, '')
    const path = '/v1/chat/completions'
    const targets: Target[] = [
      { name: 'direct', url: `${llm.url.replace(/\/$/, '')}${path}`, body: BODY, cpu: llm.child.cpuSeconds },
      { name: 'portico host:', url: `${p}/host`, body: BODY, cpu: portico.child.cpuSeconds },
      { name: 'portico ai:', url: `${p}/ai/chat/completions`, body: BODY, cpu: portico.child.cpuSeconds },
      { name: '@fastify/http-proxy', url: `${peer.url.replace(/\/$/, '')}${path}`, body: BODY, cpu: peer.child.cpuSeconds },
      { name: 'direct (stream)', url: `${llm.url.replace(/\/$/, '')}${path}`, body: STREAM_BODY, cpu: llm.child.cpuSeconds },
      { name: 'portico host: (stream)', url: `${p}/host`, body: STREAM_BODY, cpu: portico.child.cpuSeconds },
      { name: 'portico ai: (stream)', url: `${p}/ai/chat/completions`, body: STREAM_BODY, cpu: portico.child.cpuSeconds }
    ]
    for (const t of targets) await checkAnswer({ ...t, headers: { 'content-type': 'application/json' }, expect: '"total_tokens":214' })

    const runs = new Map<string, LoadResult[]>(targets.map(t => [t.name, []]))
    for (let round = 0; round < opts.rounds; round++) {
      for (const t of rotated(targets, round)) {
        progress(`round ${round + 1}/${opts.rounds}: ${t.name} (${opts.warmup} s warm-up + ${opts.duration} s)`)
        runs.get(t.name)!.push(await measureThroughput(t.url, {
          connections: opts.connections,
          seconds: opts.duration,
          warmupSeconds: opts.warmup,
          body: t.body,
          headers: { 'content-type': 'application/json' },
          ...(t.cpu !== undefined ? { cpu: t.cpu } : {})
        }))
      }
    }
    load.end = loadavg()
    report(targets, runs, load)
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

function report (targets: Target[], runs: Map<string, LoadResult[]>, load: { start: number[], end: number[] }): void {
  const cpus = availableParallelism()
  const out: string[] = []
  out.push(`LLM benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by the load generator, Portico, the peer and the LLM server (no pinning)`)
  out.push(`load average (1, 5, 15 min): ${load.start.map(n => fmt(n)).join(', ')} at the start; ${load.end.map(n => fmt(n)).join(', ')} at the end`)
  out.push(`closed loop (autocannon), POST of a chat completion, ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up, ${opts.rounds} rounds; answers 1 KiB JSON or 192 SSE events`)
  out.push('CPU µs/req is the measured server\'s own CPU time per response (the LLM server for direct, else the proxy)')
  const med = (name: string, pick: (r: LoadResult) => number) => median(runs.get(name)!.map(pick))
  const rows = targets.map(t => [t.name, fmt(med(t.name, r => r.rps), 0), fmt(med(t.name, r => r.p50)), fmt(med(t.name, r => r.p99)), fmt(med(t.name, r => r.cpuUsPerRequest), 1), String(runs.get(t.name)!.reduce((n, r) => n + r.failures, 0))])
  out.push(table(['target (median of rounds)', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'failures'], rows))
  out.push('')
  const rps = (name: string) => med(name, r => r.rps)
  const cpu = (name: string) => med(name, r => r.cpuUsPerRequest)
  const ratios = {
    aiOverHost: ratio(rps('portico ai:'), rps('portico host:')),
    aiOverDirect: ratio(rps('portico ai:'), rps('direct')),
    aiOverPeer: ratio(rps('portico ai:'), rps('@fastify/http-proxy')),
    hostOverPeer: ratio(rps('portico host:'), rps('@fastify/http-proxy')),
    aiCpuOverHostCpu: ratio(cpu('portico ai:'), cpu('portico host:')),
    streamAiOverHost: ratio(rps('portico ai: (stream)'), rps('portico host: (stream)')),
    streamAiOverDirect: ratio(rps('portico ai: (stream)'), rps('direct (stream)')),
    streamAiCpuOverHostCpu: ratio(cpu('portico ai: (stream)'), cpu('portico host: (stream)'))
  }
  const addedP50 = med('portico ai:', r => r.p50) - med('portico host:', r => r.p50)
  out.push(`JSON: ai/host req/s ${fmt(ratios.aiOverHost, 3)} (CPU per request ${fmt(ratios.aiCpuOverHostCpu, 3)}x), ai/direct ${fmt(ratios.aiOverDirect, 3)}, ai/peer ${fmt(ratios.aiOverPeer, 3)}, host/peer ${fmt(ratios.hostOverPeer, 3)}; the ai layer adds ${fmt(addedP50, 3)} ms at p50`)
  out.push(`stream: ai/host req/s ${fmt(ratios.streamAiOverHost, 3)} (CPU per request ${fmt(ratios.streamAiCpuOverHostCpu, 3)}x), ai/direct ${fmt(ratios.streamAiOverDirect, 3)}`)
  out.push('')
  out.push(JSON.stringify(rounded({
    bench: 'llm',
    node: process.version,
    cpus,
    loadAverage: load,
    options: opts,
    runs: Object.fromEntries(runs),
    ratios,
    aiAddedP50Ms: addedP50
  })))
  process.stdout.write(out.join('\n') + '\n')
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
