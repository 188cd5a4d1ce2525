/**
 * An OTLP/HTTP endpoint for tracing benchmarks: reads each export whole and answers 200 (a
 * collector's own work is not Portico's). Usage: node bench/servers/otlp-sink.ts PORT —
 * prints "ready" once listening.
 */

import http from 'node:http'

const port = Number(process.argv[2] ?? 0)

http.createServer((req, res) => {
  req.resume()
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end())
}).listen(port, '127.0.0.1', () => {
  process.stdout.write('ready\n')
})
