/**
 * LLM translation benchmark (issue 50): what Portico's `ai` backend costs per request when
 * it passes an OpenAI chat completion through and when it translates an Anthropic Messages
 * request to an OpenAI-format provider and the answer back, against the plain HTTP proxy
 * route to the same fake provider and against the provider reached directly.
 *
 * - Throughput (autocannon, closed loop): a 1 KiB POST, the 1 KiB JSON answer of
 *   servers/llm-server.ts, and the same streamed (190 one-token SSE chunks and the usage):
 *   req/s and the CPU µs per request of the measured process (the provider for direct, else
 *   Portico alone); ratios to direct; CPU per 1,000 streamed tokens.
 * - Time to first token: sequential streamed requests to a second provider that paces its
 *   chunks (GAP_MS apart, the first too); the time from sending the request to the first
 *   token's bytes at the client, direct and through Portico, and what Portico adds.
 *
 * One run, rounds in rotating order, medians; no timed assertions.
 * Run: node bench/llm-translation.ts [--rounds 2] [--duration 4] [--warmup 1] [--connections 32] [--ttft-requests 60] [--gap 5] [--chunks 20]
 * Progress goes to stderr; the tables and a final JSON line go to stdout.
 */

import { availableParallelism, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { Agent, request } from 'undici'
import { LatencyRecorder } from './lib/latency.ts'
import { measureThroughput, type LoadResult } from './lib/load.ts'
import { readOptions } from './lib/options.ts'
import { checkAnswer, llmBenchConfig } from './lib/llm-config.ts'
import { fmt, median, ratio, rotated, rounded, table } from './lib/report.ts'
import { startLlmServer, startPortico, type Server } from './lib/servers.ts'

const opts = readOptions({
  rounds: { flag: 'rounds', default: 2, help: 'rounds over every target, in rotating order' },
  duration: { flag: 'duration', default: 4, help: 'seconds per measured throughput run' },
  warmup: { flag: 'warmup', default: 1, help: 'seconds of warm-up before each throughput run' },
  connections: { flag: 'connections', default: 32, help: 'concurrent connections (agentgateway\'s LLM benchmark uses 32)' },
  ttftRequests: { flag: 'ttft-requests', default: 60, help: 'sequential streamed requests per target and round for the time to first token' },
  gap: { flag: 'gap', default: 5, help: 'ms between the paced provider\'s chunks (and before the first)' },
  chunks: { flag: 'chunks', default: 20, help: 'one-token chunks of a paced stream' }
})

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

/** Tokens in a streamed answer of servers/llm-server.ts (its completion_tokens). */
const STREAM_TOKENS = 190

/** A request body padded to 1 KiB. */
function kib (make: (pad: string) => Record<string, unknown>): string {
  const bare = JSON.stringify(make('')).length
  const body = JSON.stringify(make('x'.repeat(1024 - bare)))
  if (body.length !== 1024) throw new Error(`request body of ${body.length} bytes`)
  return body
}
const SYSTEM = 'You are a helpful assistant.'
const USER = 'Write a short paragraph of placeholder text, please. '
const openai = (stream: boolean) => kib(pad => ({ model: 'bench-model', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER + pad }], ...(stream ? { stream: true } : {}) }))
const anthropic = (stream: boolean) => kib(pad => ({ model: 'bench-model', max_tokens: 512, system: SYSTEM, messages: [{ role: 'user', content: USER + pad }], ...(stream ? { stream: true } : {}) }))

interface Target {
  name: string
  url: string
  body: string
  headers: Record<string, string>
  /** What a whole answer holds (its usage), checked once before measuring. */
  expect: string
  cpu: () => number
  stream: boolean
}

const JSON_HEADERS = { 'content-type': 'application/json' }
const ANTHROPIC_HEADERS = { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': 'sk-bench' }

interface TtftTarget { name: string, url: string, body: string, headers: Record<string, string>, expect: string }

/** Sequential streamed requests; ms from sending to the first token's bytes ("lorem", the first word). */
async function measureTtft (t: TtftTarget, n: number, dispatcher: Agent): Promise<LatencyRecorder> {
  const rec = new LatencyRecorder()
  for (let i = 0; i < n; i++) {
    const start = performance.now()
    const res = await request(t.url, { method: 'POST', body: t.body, headers: t.headers, dispatcher })
    let first = NaN
    let text = ''
    for await (const chunk of res.body) {
      text += (chunk as Buffer).toString()
      if (Number.isNaN(first) && text.includes('lorem')) first = performance.now() - start
    }
    if (res.statusCode !== 200 || Number.isNaN(first) || !text.includes(t.expect)) throw new Error(`${t.name}: ${res.statusCode} ${text.slice(0, 300)}`)
    rec.add(first)
  }
  return rec
}

async function main (): Promise<void> {
  const servers: Server[] = []
  const load = { start: loadavg(), end: [] as number[] }
  const dispatcher = new Agent({ connections: 1 })
  try {
    progress('starting the fake provider, the paced provider and portico (LOG_LEVEL=warn)')
    const llm = await startLlmServer()
    servers.push(llm)
    const paced = await startLlmServer([String(opts.gap), String(opts.chunks)])
    servers.push(paced)
    const portico = await startPortico({ config: llmBenchConfig({ providerPort: llm.port, more: [{ name: 'paced', port: paced.port }] }), logLevel: 'warn' })
    servers.push(portico)
    const p = portico.url.replace(/\/$/, '')
    const direct = `${llm.url.replace(/\/$/, '')}/v1/chat/completions`
    const pcpu = portico.child.cpuSeconds
    const lcpu = llm.child.cpuSeconds
    const oaUsage = '"total_tokens":214'
    const anUsage = '"output_tokens":190'
    const targets: Target[] = [
      { name: 'direct', url: direct, body: openai(false), headers: JSON_HEADERS, expect: oaUsage, cpu: lcpu, stream: false },
      { name: 'portico host: (plain proxy)', url: `${p}/host`, body: openai(false), headers: JSON_HEADERS, expect: oaUsage, cpu: pcpu, stream: false },
      { name: 'portico ai: OpenAI pass-through', url: `${p}/ai/v1/chat/completions`, body: openai(false), headers: JSON_HEADERS, expect: oaUsage, cpu: pcpu, stream: false },
      { name: 'portico ai: Anthropic → OpenAI', url: `${p}/ai/v1/messages`, body: anthropic(false), headers: ANTHROPIC_HEADERS, expect: anUsage, cpu: pcpu, stream: false },
      { name: 'direct (stream)', url: direct, body: openai(true), headers: JSON_HEADERS, expect: oaUsage, cpu: lcpu, stream: true },
      { name: 'portico host: (stream)', url: `${p}/host`, body: openai(true), headers: JSON_HEADERS, expect: oaUsage, cpu: pcpu, stream: true },
      { name: 'portico ai: pass-through (stream)', url: `${p}/ai/v1/chat/completions`, body: openai(true), headers: JSON_HEADERS, expect: oaUsage, cpu: pcpu, stream: true },
      { name: 'portico ai: Anthropic ← OpenAI SSE (stream)', url: `${p}/ai/v1/messages`, body: anthropic(true), headers: ANTHROPIC_HEADERS, expect: anUsage, cpu: pcpu, stream: true }
    ]
    for (const t of targets) await checkAnswer(t)
    const pacedUsage = `"total_tokens":${24 + opts.chunks}`
    const ttftTargets: TtftTarget[] = [
      { name: 'direct', url: `${paced.url.replace(/\/$/, '')}/v1/chat/completions`, body: openai(true), headers: JSON_HEADERS, expect: pacedUsage },
      { name: 'portico ai: pass-through', url: `${p}/paced/v1/chat/completions`, body: openai(true), headers: JSON_HEADERS, expect: pacedUsage },
      { name: 'portico ai: Anthropic ← OpenAI SSE', url: `${p}/paced/v1/messages`, body: anthropic(true), headers: ANTHROPIC_HEADERS, expect: `"output_tokens":${opts.chunks}` }
    ]
    for (const t of ttftTargets) await measureTtft(t, 1, dispatcher)

    const runs = new Map<string, LoadResult[]>(targets.map(t => [t.name, []]))
    const ttft = new Map<string, Array<{ p50: number, p99: number }>>(ttftTargets.map(t => [t.name, []]))
    for (let round = 0; round < opts.rounds; round++) {
      for (const t of rotated(targets, round)) {
        progress(`round ${round + 1}/${opts.rounds}: ${t.name} (${opts.warmup} s warm-up + ${opts.duration} s)`)
        runs.get(t.name)!.push(await measureThroughput(t.url, { connections: opts.connections, seconds: opts.duration, warmupSeconds: opts.warmup, body: t.body, headers: t.headers, cpu: t.cpu }))
      }
      for (const t of rotated(ttftTargets, round)) {
        progress(`round ${round + 1}/${opts.rounds}: time to first token, ${t.name} (${opts.ttftRequests} requests)`)
        await measureTtft(t, 5, dispatcher)
        const rec = await measureTtft(t, opts.ttftRequests, dispatcher)
        ttft.get(t.name)!.push({ p50: rec.percentile(50), p99: rec.percentile(99) })
      }
    }
    load.end = loadavg()
    report(targets, runs, ttftTargets, ttft, load)
  } finally {
    await dispatcher.close()
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

function report (targets: Target[], runs: Map<string, LoadResult[]>, ttftTargets: TtftTarget[], ttft: Map<string, Array<{ p50: number, p99: number }>>, load: { start: number[], end: number[] }): void {
  const cpus = availableParallelism()
  const out: string[] = []
  out.push(`LLM translation benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by the load generator, Portico and the fake providers (no pinning)`)
  out.push(`load average (1, 5, 15 min): ${load.start.map(n => fmt(n)).join(', ')} at the start; ${load.end.map(n => fmt(n)).join(', ')} at the end`)
  out.push(`closed loop (autocannon), 1 KiB POSTs, ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up, ${opts.rounds} rounds; answers 1 KiB JSON or ${STREAM_TOKENS} one-token SSE chunks`)
  out.push('CPU µs/req is the measured server\'s own CPU time per response (the fake provider for direct, else Portico)')
  const med = (name: string, pick: (r: LoadResult) => number) => median(runs.get(name)!.map(pick))
  const rps = (name: string) => med(name, r => r.rps)
  const cpu = (name: string) => med(name, r => r.cpuUsPerRequest)
  const directOf = (t: Target) => t.stream ? 'direct (stream)' : 'direct'
  const rows = targets.map(t => [
    t.name, fmt(rps(t.name), 0), fmt(ratio(rps(t.name), rps(directOf(t))), 3), fmt(med(t.name, r => r.p50)), fmt(med(t.name, r => r.p99)), fmt(cpu(t.name), 1),
    t.stream ? fmt(cpu(t.name) / STREAM_TOKENS * 1000 / 1000, 2) : '', String(runs.get(t.name)!.reduce((n, r) => n + r.failures, 0))
  ])
  out.push(table(['target (median of rounds)', 'req/s', 'of direct', 'p50 ms', 'p99 ms', 'CPU µs/req', 'CPU ms/1k tokens', 'failures'], rows))
  out.push('')
  const tmed = (name: string, k: 'p50' | 'p99') => median(ttft.get(name)!.map(r => r[k]))
  out.push(`time to first token: sequential streamed requests, ${opts.ttftRequests} per target and round (after 5 unmeasured), a provider pacing ${opts.chunks} chunks ${opts.gap} ms apart (the first after ${opts.gap} ms)`)
  out.push(table(['target (median of rounds)', 'TTFT p50 ms', 'TTFT p99 ms', 'added p50 ms', 'added p99 ms'], ttftTargets.map(t => [
    t.name, fmt(tmed(t.name, 'p50'), 3), fmt(tmed(t.name, 'p99'), 3),
    t.name === 'direct' ? '' : fmt(tmed(t.name, 'p50') - tmed('direct', 'p50'), 3), t.name === 'direct' ? '' : fmt(tmed(t.name, 'p99') - tmed('direct', 'p99'), 3)
  ])))
  out.push('')
  const ratios = {
    hostOverDirect: ratio(rps('portico host: (plain proxy)'), rps('direct')),
    aiOverDirect: ratio(rps('portico ai: OpenAI pass-through'), rps('direct')),
    translatedOverDirect: ratio(rps('portico ai: Anthropic → OpenAI'), rps('direct')),
    aiOverHost: ratio(rps('portico ai: OpenAI pass-through'), rps('portico host: (plain proxy)')),
    aiCpuOverHostCpu: ratio(cpu('portico ai: OpenAI pass-through'), cpu('portico host: (plain proxy)')),
    translatedCpuOverAiCpu: ratio(cpu('portico ai: Anthropic → OpenAI'), cpu('portico ai: OpenAI pass-through')),
    streamAiOverDirect: ratio(rps('portico ai: pass-through (stream)'), rps('direct (stream)')),
    streamTranslatedOverDirect: ratio(rps('portico ai: Anthropic ← OpenAI SSE (stream)'), rps('direct (stream)')),
    streamTranslatedCpuOverAiCpu: ratio(cpu('portico ai: Anthropic ← OpenAI SSE (stream)'), cpu('portico ai: pass-through (stream)'))
  }
  out.push(`JSON, of direct: ai pass-through ${fmt(ratios.aiOverDirect, 3)}, Anthropic → OpenAI ${fmt(ratios.translatedOverDirect, 3)}, plain proxy ${fmt(ratios.hostOverDirect, 3)} (agentgateway's published ai route: 14,041/58,425 = 0.240 on 2 cores); ai/host CPU ${fmt(ratios.aiCpuOverHostCpu, 3)}x, translated/pass-through CPU ${fmt(ratios.translatedCpuOverAiCpu, 3)}x`)
  out.push(`stream, of direct: ai pass-through ${fmt(ratios.streamAiOverDirect, 3)}, Anthropic ← OpenAI SSE ${fmt(ratios.streamTranslatedOverDirect, 3)}; translated/pass-through CPU ${fmt(ratios.streamTranslatedCpuOverAiCpu, 3)}x`)
  out.push('')
  out.push(JSON.stringify(rounded({
    bench: 'llm-translation',
    node: process.version,
    cpus,
    loadAverage: load,
    options: opts,
    runs: Object.fromEntries(runs),
    ttft: Object.fromEntries(ttft),
    ratios
  })))
  process.stdout.write(out.join('\n') + '\n')
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
