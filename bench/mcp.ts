/**
 * MCP benchmark: tools/call round trips through Portico vs the official SDK client talking
 * to the same server directly, for a streamable-HTTP server (built with the SDK) and for the
 * reference stdio server (server-everything's `echo`). Sequential calls give latency
 * (p50/p99); concurrent clients give calls/s. Target: Portico adds at most 0.5 ms at p50.
 *
 * Run: node bench/mcp.ts [--calls 2000] [--clients 8] [--duration 5]
 */

import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { freePort, startNode } from './lib/children.ts'
import { startPortico, type Server } from './lib/servers.ts'
import { directVsPorticoRows, measureCalls, ROW_HEADER, type Connect } from './lib/mcp-calls.ts'
import { readOptions } from './lib/options.ts'
import { rounded, table } from './lib/report.ts'

const TARGET_ADDED_P50_MS = 0.5

const opts = readOptions({
  calls: { flag: 'calls', default: 2000, help: 'sequential tools/call per latency run' },
  warmup: { flag: 'warmup', default: 300, help: 'calls before each measured run' },
  clients: { flag: 'clients', default: 8, help: 'concurrent clients in the throughput run' },
  duration: { flag: 'duration', default: 5, help: 'seconds per throughput run' }
})

const require = createRequire(import.meta.url)
const EVERYTHING = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js')
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

const echo = (client: Client) => () => client.callTool({ name: 'echo', arguments: { message: 'hi' } })

function httpClient (url: string): Connect {
  return async () => {
    const client = new Client({ name: 'bench', version: '1' })
    const transport = new StreamableHTTPClientTransport(new URL(url))
    await client.connect(transport as Transport)
    return { call: echo(client), close: async () => { await transport.terminateSession().catch(() => {}); await client.close() } }
  }
}

function stdioClient (): Connect {
  return async () => {
    const client = new Client({ name: 'bench', version: '1' })
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }))
    return { call: echo(client), close: () => client.close() }
  }
}

const measure = (name: string, connect: Connect) => measureCalls(name, connect, { ...opts, progress })

async function main (): Promise<void> {
  const children: Server['child'][] = []
  try {
    const mcpPort = await freePort()
    const upstream = await startNode({ name: 'mcp-server', args: [new URL('./servers/mcp-server.ts', import.meta.url).pathname, String(mcpPort)], readyLine: 'ready' })
    children.push(upstream)
    const config = `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: http-target
    matches: [{ path: { pathPrefix: /http } }]
    backends: [{ mcp: { targets: [{ name: bench, mcp: { host: "http://127.0.0.1:${mcpPort}/mcp" } }] } }]
  - name: stdio-target
    matches: [{ path: { pathPrefix: /stdio } }]
    backends: [{ mcp: { targets: [{ name: everything, stdio: { cmd: "${process.execPath}", args: ["${EVERYTHING}", stdio] } }] } }]
`
    const portico = await startPortico({ config, logLevel: 'warn' })
    children.push(portico.child)
    const results = {
      http: {
        direct: await measure('http target, direct', httpClient(`http://127.0.0.1:${mcpPort}/mcp`)),
        portico: await measure('http target, through portico', httpClient(`http://127.0.0.1:${portico.port}/http/mcp`))
      },
      stdio: {
        direct: await measure('stdio target, direct (SDK spawns it)', stdioClient()),
        portico: await measure('stdio target, through portico', httpClient(`http://127.0.0.1:${portico.port}/stdio/mcp`))
      }
    }
    const rows = directVsPorticoRows(results, false)
    const out = [
      `mcp benchmark: Node ${process.version}; tools/call echo; ${opts.calls} sequential calls (latency), ${opts.clients} clients x ${opts.duration} s (calls/s); client, portico and server share this machine's cores`,
      '',
      table(ROW_HEADER, rows),
      '',
      `Target: added p50 <= ${TARGET_ADDED_P50_MS} ms — http: ${results.http.portico.p50 - results.http.direct.p50 <= TARGET_ADDED_P50_MS ? 'met' : 'NOT met'}; stdio: ${results.stdio.portico.p50 - results.stdio.direct.p50 <= TARGET_ADDED_P50_MS ? 'met' : 'NOT met'}`,
      JSON.stringify(rounded({ bench: 'mcp', node: process.version, options: opts, results }))
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
