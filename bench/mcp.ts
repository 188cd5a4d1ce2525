/**
 * MCP benchmark: tools/call round trips through Portico vs the official SDK client talking
 * to the same server directly, for a streamable-HTTP server (built with the SDK) and for the
 * reference stdio server (server-everything's `echo`). Sequential calls give latency
 * (p50/p99); concurrent clients give calls/s and Portico's CPU µs per call (its own process,
 * every thread; the stdio server it launches is a child process, not counted). Target: Portico
 * adds at most 0.5 ms at p50.
 *
 * Then session start: `initialize` on new sessions through the quick start's own config
 * (examples/quickstart.yaml, its stdio route /mcp), against the SDK client launching the same
 * server itself. Target: p50 <= 50 ms through the quick-start route.
 *
 * With agentgateway's binary at hand (`--agentgateway BIN`, default the cached build
 * lib/agentgateway.ts names), the same calls through agentgateway (one worker thread, the same
 * two targets, its stdio server launched by it) and its CPU µs per call, measured the same way.
 * Issue 54's target: Portico's CPU per HTTP-target call at most agentgateway's.
 *
 * Run: node bench/mcp.ts [--calls 2000] [--clients 8] [--duration 5] [--sessions 20] [--session-gap 1000] [--sessions-only 1] [--agentgateway BIN|off]
 */

import { loadavg } from 'node:os'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { freePort, startNode } from './lib/children.ts'
import { startPortico, type Server } from './lib/servers.ts'
import { directVsPorticoRows, EVERYTHING, httpClient, mcpTargetsConfig, measureCalls, ROW_HEADER, type CallsResult, type Connect } from './lib/mcp-calls.ts'
import { readOptions } from './lib/options.ts'
import { fmt, rounded, table } from './lib/report.ts'
import { measureSessionStarts, type SessionsResult } from './lib/mcp-sessions.ts'
import { readFileSync } from 'node:fs'
import { LatencyRecorder } from './lib/latency.ts'
import { agentgatewayMcpConfig, agentgatewayOption, startAgentgateway } from './lib/agentgateway.ts'

const TARGET_ADDED_P50_MS = 0.5
const TARGET_SESSION_START_P50_MS = 50
/** Issue 54: Portico's CPU per tools/call to the HTTP target at most agentgateway's. */
const TARGET_CPU_VS_AGENTGATEWAY = 1

const agentgateway = agentgatewayOption()

const opts = readOptions({
  calls: { flag: 'calls', default: 2000, help: 'sequential tools/call per latency run' },
  warmup: { flag: 'warmup', default: 300, help: 'calls before each measured run' },
  clients: { flag: 'clients', default: 8, help: 'concurrent clients in the throughput run' },
  duration: { flag: 'duration', default: 5, help: 'seconds per throughput run' },
  sessions: { flag: 'sessions', default: 20, help: 'new sessions per session-start run' },
  sessionGap: { flag: 'session-gap', default: 1000, help: 'ms between new sessions (the back-to-back run uses 0)' },
  sessionsOnly: { flag: 'sessions-only', default: 0, help: '1: only the session-start runs' }
}, agentgateway.rest)

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

const echo = (client: Client) => () => client.callTool({ name: 'echo', arguments: { message: 'hi' } })

function stdioClient (): Connect {
  return async () => {
    const client = new Client({ name: 'bench', version: '1' })
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }))
    return { call: echo(client), close: () => client.close() }
  }
}

/** `cpuOf`: the process whose CPU per call the throughput run reports (Portico's own: its stdio children not counted). */
const measure = (name: string, connect: Connect, cpuOf?: Server['child']) => measureCalls(name, connect, { ...opts, progress }, cpuOf)

/** The quick start's config as shipped, on a free port, its stdio command made absolute. */
function quickstartConfig (): string {
  const root = new URL('../', import.meta.url).pathname
  return readFileSync(join(root, 'examples/quickstart.yaml'), 'utf8')
    .replace(/port: 3000\b/, 'port: {port}')
    .replace(/cmd: \.\.\//, `cmd: ${root}`)
}

/** The SDK client launching server-everything itself and initializing: a process per session. */
async function directSessionStarts (sessions: number, gapMs: number): Promise<SessionsResult> {
  progress(`stdio server launched by the client: ${sessions} sessions, ${gapMs} ms apart`)
  const latency = new LatencyRecorder()
  for (let i = 0; i < sessions; i++) {
    if (gapMs > 0) await new Promise(resolve => setTimeout(resolve, gapMs))
    const client = new Client({ name: 'bench', version: '1' })
    const t = performance.now()
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }))
    latency.add(performance.now() - t)
    await client.close()
  }
  return { p50: latency.percentile(50), p99: latency.percentile(99), max: latency.percentile(100), cpuMsPerSession: NaN }
}

async function sessionStarts (children: Server['child'][]): Promise<{ rows: string[][], results: Record<string, SessionsResult> }> {
  const portico = await startPortico({ config: quickstartConfig(), logLevel: 'warn' })
  children.push(portico.child)
  const url = `http://127.0.0.1:${portico.port}/mcp`
  const pid = portico.child.proc.pid
  const results: Record<string, SessionsResult> = {
    // The first session of a fresh gateway, alone (what a new user's first client waits).
    'quick start /mcp, first session': await measureSessionStarts('quick start /mcp, first session', url, { sessions: 1, gapMs: 0, progress }, pid),
    'quick start /mcp': await measureSessionStarts('quick start /mcp', url, { sessions: opts.sessions, gapMs: opts.sessionGap, progress }, pid),
    'quick start /mcp, back to back': await measureSessionStarts('quick start /mcp, back to back', url, { sessions: opts.sessions, gapMs: 0, progress }, pid),
    'stdio, client launches the server': await directSessionStarts(Math.min(opts.sessions, 10), opts.sessionGap)
  }
  const rows = Object.entries(results).map(([name, r]) => [name, fmt(r.p50, 1), fmt(r.p99, 1), fmt(r.max, 1), Number.isNaN(r.cpuMsPerSession) ? '' : fmt(r.cpuMsPerSession, 1)])
  return { rows, results }
}

async function main (): Promise<void> {
  const children: Server['child'][] = []
  try {
    const mcpPort = await freePort()
    const upstream = await startNode({ name: 'mcp-server', args: [new URL('./servers/mcp-server.ts', import.meta.url).pathname, String(mcpPort)], readyLine: 'ready' })
    children.push(upstream)
    if (opts.sessionsOnly === 1) {
      const starts = await sessionStarts(children)
      process.stdout.write(sessionReport(starts).join('\n') + '\n')
      return
    }
    const config = mcpTargetsConfig(mcpPort)
    const portico = await startPortico({ config, logLevel: 'warn' })
    children.push(portico.child)
    let agw: Server | undefined
    if (agentgateway.bin !== undefined) {
      progress(`starting agentgateway (${agentgateway.bin})`)
      agw = await startAgentgateway(agentgateway.bin, port => agentgatewayMcpConfig(port, mcpPort))
      children.push(agw.child)
    } else {
      progress(agentgateway.skipped)
    }
    const viaAgentgateway = async (name: string, path: string) => agw === undefined ? {} : { agentgateway: await measure(name, httpClient(`http://127.0.0.1:${agw.port}${path}`), agw.child) }
    const results = {
      http: {
        direct: await measure('http target, direct', httpClient(`http://127.0.0.1:${mcpPort}/mcp`)),
        portico: await measure('http target, through portico', httpClient(`http://127.0.0.1:${portico.port}/http/mcp`), portico.child),
        ...await viaAgentgateway('http target, through agentgateway', '/http/mcp')
      },
      stdio: {
        direct: await measure('stdio target, direct (SDK spawns it)', stdioClient()),
        portico: await measure('stdio target, through portico', httpClient(`http://127.0.0.1:${portico.port}/stdio/mcp`), portico.child),
        ...await viaAgentgateway('stdio target, through agentgateway', '/stdio/mcp')
      }
    }
    const rows = directVsPorticoRows(results, true)
    const callsLoad = loadavg().map(n => n.toFixed(2)).join(' ')
    const starts = await sessionStarts(children)
    const out = [
      `mcp benchmark: Node ${process.version}; tools/call echo; ${opts.calls} sequential calls (latency), ${opts.clients} clients x ${opts.duration} s (calls/s, and the gateway's CPU µs per call: its own process, every thread, not the stdio server it launched); client, gateway and server share this machine's cores; ${agw === undefined ? agentgateway.skipped : `agentgateway: ${agentgateway.bin}, one worker thread, log level warn`}; load average ${callsLoad}`,
      '',
      table([...ROW_HEADER, 'gateway CPU µs/call'], rows),
      '',
      `Target: added p50 <= ${TARGET_ADDED_P50_MS} ms — http: ${results.http.portico.p50 - results.http.direct.p50 <= TARGET_ADDED_P50_MS ? 'met' : 'NOT met'}; stdio: ${results.stdio.portico.p50 - results.stdio.direct.p50 <= TARGET_ADDED_P50_MS ? 'met' : 'NOT met'}`,
      ...agentgatewayLines(results),
      JSON.stringify(rounded({ bench: 'mcp', node: process.version, options: opts, results })),
      '',
      ...sessionReport(starts)
    ]
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
  }
}

/** Portico's CPU per call against agentgateway's, per target (none without agentgateway). */
function agentgatewayLines (results: Record<string, { portico: CallsResult, agentgateway?: CallsResult }>): string[] {
  return Object.entries(results).flatMap(([kind, r]) => {
    if (r.agentgateway === undefined) return []
    const vs = r.portico.cpuUsPerCall / r.agentgateway.cpuUsPerCall
    const target = kind === 'http' ? ` (target <= ${TARGET_CPU_VS_AGENTGATEWAY}x: ${vs <= TARGET_CPU_VS_AGENTGATEWAY ? 'met' : 'NOT met'})` : ''
    return [`${kind}: CPU µs/call portico ${fmt(r.portico.cpuUsPerCall, 1)}, agentgateway ${fmt(r.agentgateway.cpuUsPerCall, 1)}; portico ÷ agentgateway ${fmt(vs)}x${target}`]
  })
}

function sessionReport ({ rows, results }: { rows: string[][], results: Record<string, SessionsResult> }): string[] {
  const p50 = results['quick start /mcp']!.p50
  return [
    `mcp session start: initialize on a new session (POST to answer), ${opts.sessions} sessions ${opts.sessionGap} ms apart and back to back; Node ${process.version}; load average ${loadavg().map(n => n.toFixed(2)).join(' ')}`,
    '',
    table(['session start', 'p50 ms', 'p99 ms', 'max ms', 'portico CPU ms/session'], rows),
    '',
    `Target: initialize p50 <= ${TARGET_SESSION_START_P50_MS} ms through the quick-start route: ${p50 <= TARGET_SESSION_START_P50_MS ? 'met' : 'NOT met'} (${fmt(p50, 1)} ms)`,
    JSON.stringify(rounded({ bench: 'mcp-session-start', node: process.version, options: opts, results }))
  ]
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
