/**
 * MCP 2026-07-28 benchmark: tools/call through Portico vs the same client talking to the
 * same server directly, for the two ways Portico serves a 2026-07-28 client:
 *  - forwarded: the official SDK v2 client (pinned to 2026-07-28) → Portico → the SDK v2
 *    server (2026-07-28): Portico forwards each request as sent, no state;
 *  - bridged: the same client → Portico → the SDK v1 server (2025-11-25, a session):
 *    Portico answers discover and carries each call over its shared upstream session.
 *    Its direct baseline is the SDK v1 client on its own session with that server.
 * Sequential calls give latency (p50/p99); concurrent clients give calls/s and Portico's own
 * CPU per call. Targets (issue 17): forwarded ≥ 0.8× direct calls/s on 2 cores, added p50
 * ≤ 0.3 ms.
 *
 * Run: node bench/mcp-2026.ts [--calls 2000] [--clients 8] [--duration 5]
 */

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client'
import { freePort, startNode } from './lib/children.ts'
import { startPortico, type Server } from './lib/servers.ts'
import { directVsPorticoRows, measureCalls, ROW_HEADER, type Connect } from './lib/mcp-calls.ts'
import { readOptions } from './lib/options.ts'
import { ratio, rounded, table } from './lib/report.ts'

const TARGET_RATIO = 0.8
const TARGET_ADDED_P50_MS = 0.3

const opts = readOptions({
  calls: { flag: 'calls', default: 2000, help: 'sequential tools/call per latency run' },
  warmup: { flag: 'warmup', default: 300, help: 'calls before each measured run' },
  clients: { flag: 'clients', default: 8, help: 'concurrent clients in the throughput run' },
  duration: { flag: 'duration', default: 5, help: 'seconds per throughput run' }
})

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

function modernClient (url: string): Connect {
  return async () => {
    const client = new ClientV2({ name: 'bench-v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
    await client.connect(new TransportV2(new URL(url)))
    return { call: () => client.callTool({ name: 'echo', arguments: { message: 'hi' } }), close: () => client.close() }
  }
}

function legacyClient (url: string): Connect {
  return async () => {
    const client = new ClientV1({ name: 'bench-v1', version: '1' })
    const transport = new TransportV1(new URL(url))
    await client.connect(transport as Transport)
    return { call: () => client.callTool({ name: 'echo', arguments: { message: 'hi' } }), close: async () => { await transport.terminateSession().catch(() => {}); await client.close() } }
  }
}

async function main (): Promise<void> {
  const children: Server['child'][] = []
  try {
    const modernPort = await freePort()
    children.push(await startNode({ name: 'mcp-server-2026', args: [new URL('./servers/mcp-server-2026.ts', import.meta.url).pathname, String(modernPort)], readyLine: 'ready' }))
    const legacyPort = await freePort()
    children.push(await startNode({ name: 'mcp-server', args: [new URL('./servers/mcp-server.ts', import.meta.url).pathname, String(legacyPort)], readyLine: 'ready' }))
    const config = `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: modern
    matches: [{ path: { pathPrefix: /modern } }]
    backends: [{ mcp: { targets: [{ name: bench, mcp: { host: "http://127.0.0.1:${modernPort}/mcp" } }] } }]
  - name: legacy
    matches: [{ path: { pathPrefix: /legacy } }]
    backends: [{ mcp: { targets: [{ name: bench, mcp: { host: "http://127.0.0.1:${legacyPort}/mcp" } }] } }]
`
    const portico = await startPortico({ config, logLevel: 'warn' })
    children.push(portico.child)
    const measure = (name: string, connect: Connect, cpuOf?: Server['child']) => measureCalls(name, connect, { ...opts, progress }, cpuOf)
    const results = {
      forwarded: {
        direct: await measure('2026-07-28 → 2026-07-28, direct', modernClient(`http://127.0.0.1:${modernPort}/mcp`)),
        portico: await measure('2026-07-28 → 2026-07-28, through portico (forwarded)', modernClient(`http://127.0.0.1:${portico.port}/modern/mcp`), portico.child)
      },
      bridged: {
        direct: await measure('2025-11-25 client → 2025-11-25 server, direct', legacyClient(`http://127.0.0.1:${legacyPort}/mcp`)),
        portico: await measure('2026-07-28 client → portico → 2025-11-25 server (bridged)', modernClient(`http://127.0.0.1:${portico.port}/legacy/mcp`), portico.child)
      }
    }
    const rows = directVsPorticoRows(results, true)
    const f = results.forwarded
    const out = [
      `mcp 2026-07-28 benchmark: Node ${process.version}; tools/call echo; ${opts.calls} sequential calls (latency), ${opts.clients} clients x ${opts.duration} s (calls/s); client, portico and server share this machine's cores`,
      '',
      table([...ROW_HEADER, 'portico CPU us/call'], rows),
      '',
      `Targets (forwarded): calls/s >= ${TARGET_RATIO}x direct: ${ratio(f.portico.callsPerSecond, f.direct.callsPerSecond) >= TARGET_RATIO ? 'met' : 'NOT met'}; added p50 <= ${TARGET_ADDED_P50_MS} ms: ${f.portico.p50 - f.direct.p50 <= TARGET_ADDED_P50_MS ? 'met' : 'NOT met'}`,
      JSON.stringify(rounded({ bench: 'mcp-2026', node: process.version, options: opts, results }))
    ]
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
