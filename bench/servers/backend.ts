/**
 * A tiny HTTP backend for benchmarks: every request gets `200 hello world` (12 bytes), and a
 * path starting `/64k` 64 KiB (the body-path case of bench/http-proxy.ts).
 * Usage: node bench/servers/backend.ts PORT — prints "ready" once listening.
 */

import http from 'node:http'

const port = Number(process.argv[2] ?? 0)
const body = Buffer.from('hello world\n')
const big = Buffer.alloc(64 * 1024, 'portico ')

const server = http.createServer({ keepAliveTimeout: 65_000, noDelay: true }, (req, res) => {
  // Drain any request body so the connection can carry the next request.
  req.resume()
  const answer = req.url!.startsWith('/64k') ? big : body
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': answer.length })
  res.end(answer)
})

server.listen(port, '127.0.0.1', () => {
  process.stdout.write('ready\n')
})

process.on('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
