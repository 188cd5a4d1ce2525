/**
 * gRPC benchmark: small unary calls (@grpc/grpc-js client and server, 64-byte messages)
 * directly and through Portico (a plain `host:` route; Portico calls the server over h2c),
 * with the same measurement as the MCP benchmarks: sequential calls for latency, concurrent
 * callers for calls/s, and Portico's CPU per call. Target (issue 19): ≥ 0.5× direct calls/s.
 *
 * Run: node bench/grpc.ts [--calls 2000] [--clients 8] [--duration 5]
 */

import * as grpc from '@grpc/grpc-js'
import { freePort, startNode } from './lib/children.ts'
import { startPortico, type Server } from './lib/servers.ts'
import { directVsPorticoRows, measureCalls, ROW_HEADER, type Connect } from './lib/mcp-calls.ts'
import { readOptions } from './lib/options.ts'
import { ratio, rounded, table } from './lib/report.ts'
import { ECHO_SERVICE } from './servers/grpc-server.ts'

const TARGET_RATIO = 0.5
const opts = readOptions({
  calls: { flag: 'calls', default: 2000, help: 'sequential calls per latency run' },
  warmup: { flag: 'warmup', default: 300, help: 'calls before each measured run' },
  clients: { flag: 'clients', default: 8, help: 'concurrent callers (each its own channel) in the throughput run' },
  duration: { flag: 'duration', default: 5, help: 'seconds per throughput run' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)
const MESSAGE = Buffer.alloc(64, 1)
const Client = grpc.makeGenericClientConstructor(ECHO_SERVICE, 'Echo')

function grpcClient (address: string): Connect {
  return async () => {
    // A channel of its own per caller (grpc-js would share one otherwise).
    const client = new Client(address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as unknown as grpc.Client & { Echo: (req: Buffer, cb: (err: grpc.ServiceError | null, res: Buffer) => void) => void }
    const call = () => new Promise<Buffer>((resolve, reject) => client.Echo(MESSAGE, (err, res) => err !== null ? reject(err) : resolve(res)))
    await call()
    return { call, close: async () => client.close() }
  }
}

async function main (): Promise<void> {
  const children: Server['child'][] = []
  try {
    const port = await freePort()
    children.push(await startNode({ name: 'grpc-server', args: [new URL('./servers/grpc-server.ts', import.meta.url).pathname, String(port)], readyLine: 'ready' }))
    const portico = await startPortico({ config: `gateways:\n  default: { port: {port}, protocol: HTTP }\nroutes:\n  - name: grpc\n    backends: [{ host: "127.0.0.1:${port}" }]\n`, logLevel: 'warn' })
    children.push(portico.child)
    const measure = (name: string, connect: Connect, cpuOf?: Server['child']) => measureCalls(name, connect, { ...opts, progress }, cpuOf)
    const results = {
      unary: {
        direct: await measure('gRPC unary, direct', grpcClient(`127.0.0.1:${port}`)),
        portico: await measure('gRPC unary, through portico', grpcClient(`127.0.0.1:${portico.port}`), portico.child)
      }
    }
    const u = results.unary
    process.stdout.write([
      `grpc benchmark: Node ${process.version}; unary echo of ${MESSAGE.length} bytes; ${opts.calls} sequential calls (latency), ${opts.clients} callers x ${opts.duration} s (calls/s); client, portico and server share this machine's cores`,
      '',
      table([...ROW_HEADER, 'portico CPU us/call'], directVsPorticoRows(results, true)),
      '',
      `Target: calls/s >= ${TARGET_RATIO}x direct: ${ratio(u.portico.callsPerSecond, u.direct.callsPerSecond) >= TARGET_RATIO ? 'met' : 'NOT met'}`,
      JSON.stringify(rounded({ bench: 'grpc', node: process.version, options: opts, results }))
    ].join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
