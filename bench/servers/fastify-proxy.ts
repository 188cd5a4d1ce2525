/**
 * The Node peer for comparison: Fastify with @fastify/http-proxy (undici inside), with the
 * undici settings @fastify/reply-from documents as its defaults (128 connections, no
 * pipelining, 60 s keep-alive) and Fastify's default of no request logging.
 * Usage: node bench/servers/fastify-proxy.ts PORT UPSTREAM_URL — prints "ready" once listening.
 */

import Fastify from 'fastify'
import proxy from '@fastify/http-proxy'

const port = Number(process.argv[2] ?? 0)
const upstream = process.argv[3] ?? 'http://127.0.0.1:8080'

const app = Fastify({ logger: false })
await app.register(proxy, {
  upstream,
  undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 }
})
await app.listen({ host: '127.0.0.1', port })
process.stdout.write('ready\n')

process.on('SIGTERM', () => {
  app.close().then(() => process.exit(0), () => process.exit(1))
})
