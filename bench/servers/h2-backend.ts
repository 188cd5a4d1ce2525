/**
 * The HTTP/2 counterpart of backend.ts for benchmarks: Node's http2 server over cleartext
 * (h2c with prior knowledge), every request answered `200 hello world`. Usage: node
 * bench/servers/h2-backend.ts PORT — prints "ready".
 */

import http2 from 'node:http2'

const body = Buffer.from('hello world\n')
const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } }, (req, res) => {
  req.resume()
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length })
  res.end(body)
})
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => process.stdout.write('ready\n'))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
