/**
 * The Node peer with several processes: Node's cluster module forking WORKERS processes
 * that each run bench/servers/fastify-proxy.ts's Fastify + @fastify/http-proxy on the same
 * port (the cluster primary accepts and hands connections round robin, Node's default on
 * Linux). Usage: node bench/servers/fastify-cluster.ts PORT UPSTREAM_URL WORKERS — prints
 * "ready" once every worker listens.
 */

import cluster from 'node:cluster'
import { fileURLToPath } from 'node:url'

const [port, upstream, workers] = process.argv.slice(2)
const count = Number(workers ?? 1)

cluster.setupPrimary({ exec: fileURLToPath(new URL('./fastify-proxy.ts', import.meta.url)), args: [port ?? '0', upstream ?? 'http://127.0.0.1:8080'], silent: true })
let ready = 0
for (let i = 0; i < count; i++) {
  const worker = cluster.fork()
  worker.process.stdout?.on('data', (chunk: Buffer) => {
    if (chunk.toString().includes('ready') && ++ready === count) process.stdout.write('ready\n')
  })
  worker.process.stderr?.pipe(process.stderr)
}
process.on('SIGTERM', () => {
  for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM')
  setTimeout(() => process.exit(0), 500).unref()
})
