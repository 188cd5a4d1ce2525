/**
 * MCP session start for bench/mcp.ts: how long `initialize` takes on a new session, one
 * session after another, each ended (DELETE) before the next. Timed from the POST to the
 * end of its answer: what a client waits before its first call.
 */

import { request } from 'undici'
import { LatencyRecorder } from './latency.ts'
import { processCpuSeconds } from './children.ts'

export interface SessionsOptions {
  sessions: number
  /** Pause between sessions, ms (a person or an agent does not open sessions back to back). */
  gapMs: number
  progress(message: string): void
}

export interface SessionsResult {
  p50: number
  p99: number
  max: number
  /** CPU ms the gateway process itself spent per session (start, initialize, end; its children not counted). */
  cpuMsPerSession: number
}

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } }
}
const HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }

export async function measureSessionStarts (name: string, url: string, options: SessionsOptions, gatewayPid: number | undefined): Promise<SessionsResult> {
  options.progress(`${name}: ${options.sessions} sessions, ${options.gapMs} ms apart`)
  const latency = new LatencyRecorder()
  const cpu0 = processCpuSeconds(gatewayPid)
  for (let i = 0; i < options.sessions; i++) {
    if (options.gapMs > 0) await new Promise(resolve => setTimeout(resolve, options.gapMs))
    const t = performance.now()
    const res = await request(url, { method: 'POST', headers: HEADERS, body: JSON.stringify(INIT) })
    const text = await res.body.text()
    latency.add(performance.now() - t)
    const session = res.headers['mcp-session-id']
    if (res.statusCode !== 200 || typeof session !== 'string' || !text.includes('"result"')) {
      throw new Error(`${name}: initialize answered ${res.statusCode}: ${text.slice(0, 300)}`)
    }
    const headers = { ...HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' }
    const note = await request(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })
    await note.body.text()
    const end = await request(url, { method: 'DELETE', headers })
    await end.body.text()
  }
  const cpu = processCpuSeconds(gatewayPid) - cpu0
  return { p50: latency.percentile(50), p99: latency.percentile(99), max: latency.percentile(100), cpuMsPerSession: cpu / options.sessions * 1000 }
}
