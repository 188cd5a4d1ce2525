/**
 * A tiny echo server for tests that run it as its own process (e.g. in a test host's network
 * namespace). Usage: node echo-server.ts ADDRESS PORT NAME — prints "listening" when ready;
 * answers every request with JSON {name, method, path, host}.
 */

import http from 'node:http'

const [address, port, name] = process.argv.slice(2) as [string, string, string]
http.createServer((req, res) => {
  req.resume()
  const body = JSON.stringify({ name, method: req.method, path: req.url, host: req.headers.host })
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
}).listen(Number(port), address, () => process.stdout.write('listening\n'))
