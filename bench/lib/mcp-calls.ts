/**
 * tools/call round trips for the MCP benchmarks (mcp.ts, mcp-2026.ts): sequential calls for
 * latency, then concurrent callers for calls/s, with the CPU a process (Portico) spent per
 * call while they ran; and the "direct vs through Portico" rows they print.
 */

import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { Child } from './children.ts'
import { LatencyRecorder } from './latency.ts'
import { fmt, ratio } from './report.ts'

/** One connected client, reduced to what is measured: one call, and closing. */
export interface Caller {
  call(): Promise<unknown>
  close(): Promise<void>
}

export type Connect = () => Promise<Caller>

/** The reference stdio server's entry point (server-everything, whose `echo` tool the benches call). */
export const EVERYTHING = join(dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js')

/**
 * The MCP benches' Portico config: `/http/mcp` to the SDK-built streamable HTTP server on
 * `mcpPort` (bench/servers/mcp-server.ts), `/sse/mcp` to the same server over the legacy
 * HTTP+SSE transport, `/stdio/mcp` to server-everything, launched by Portico. `{port}` is the gateway's, filled in by startPortico.
 */
export function mcpTargetsConfig (mcpPort: number): string {
  return `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: http-target
    matches: [{ path: { pathPrefix: /http } }]
    backends: [{ mcp: { targets: [{ name: bench, mcp: { host: "http://127.0.0.1:${mcpPort}/mcp" } }] } }]
  - name: sse-target
    matches: [{ path: { pathPrefix: /sse } }]
    backends: [{ mcp: { targets: [{ name: bench, sse: { host: "http://127.0.0.1:${mcpPort}/sse" } }] } }]
  - name: stdio-target
    matches: [{ path: { pathPrefix: /stdio } }]
    backends: [{ mcp: { targets: [{ name: everything, stdio: { cmd: "${process.execPath}", args: ["${EVERYTHING}", stdio] } }] } }]
`
}

/** An SDK client on the streamable HTTP transport whose call is `echo`; closing ends its session (DELETE). */
export function httpClient (url: string): Connect {
  return async () => {
    const client = new Client({ name: 'bench', version: '1' })
    const transport = new StreamableHTTPClientTransport(new URL(url))
    await client.connect(transport as Transport)
    return {
      call: () => client.callTool({ name: 'echo', arguments: { message: 'hi' } }),
      close: async () => { await transport.terminateSession().catch(() => {}); await client.close() }
    }
  }
}

export interface CallsOptions {
  warmup: number
  calls: number
  clients: number
  duration: number
  progress(message: string): void
}

export interface CallsResult {
  p50: number
  p99: number
  callsPerSecond: number
  /** CPU µs the `cpuOf` process spent per call during the concurrent run (NaN without one). */
  cpuUsPerCall: number
}

export async function measureCalls (name: string, connect: Connect, options: CallsOptions, cpuOf?: Child): Promise<CallsResult> {
  options.progress(`${name}: ${options.warmup} + ${options.calls} sequential calls`)
  const one = await connect()
  const latency = new LatencyRecorder()
  try {
    for (let i = 0; i < options.warmup + options.calls; i++) {
      const t = performance.now()
      await one.call()
      if (i >= options.warmup) latency.add(performance.now() - t)
    }
  } finally {
    await one.close()
  }
  options.progress(`${name}: ${options.clients} clients for ${options.duration} s`)
  const callers = await Promise.all(Array.from({ length: options.clients }, () => connect()))
  let calls = 0
  const cpu0 = cpuOf?.cpuSeconds() ?? NaN
  const t0 = performance.now()
  const deadline = t0 + options.duration * 1000
  await Promise.all(callers.map(async c => {
    while (performance.now() < deadline) {
      await c.call()
      calls++
    }
  }))
  const elapsed = (performance.now() - t0) / 1000
  const cpu = (cpuOf?.cpuSeconds() ?? NaN) - cpu0
  await Promise.all(callers.map(c => c.close()))
  return { p50: latency.percentile(50), p99: latency.percentile(99), callsPerSecond: calls / elapsed, cpuUsPerCall: cpu / calls * 1e6 }
}

/**
 * Table rows for pairs of runs: direct, then through Portico with what it added, then through
 * agentgateway (mcp.ts with its binary at hand) the same way.
 */
export function directVsPorticoRows (results: Record<string, { direct: CallsResult, portico: CallsResult, agentgateway?: CallsResult }>, withCpu: boolean): string[][] {
  const rows: string[][] = []
  for (const [kind, r] of Object.entries(results)) {
    const cpu = withCpu ? [''] : []
    rows.push([`${kind}: direct`, fmt(r.direct.p50, 3), fmt(r.direct.p99, 3), fmt(r.direct.callsPerSecond, 0), '', '', ...cpu])
    for (const via of ['portico', 'agentgateway'] as const) {
      const v = r[via]
      if (v === undefined) continue
      rows.push([`${kind}: via ${via}`, fmt(v.p50, 3), fmt(v.p99, 3), fmt(v.callsPerSecond, 0), fmt(v.p50 - r.direct.p50, 3), fmt(ratio(v.callsPerSecond, r.direct.callsPerSecond)), ...(withCpu ? [fmt(v.cpuUsPerCall, 1)] : [])])
    }
  }
  return rows
}

export const ROW_HEADER = ['path', 'p50 ms', 'p99 ms', 'calls/s', 'added p50 ms', 'x direct calls/s']
