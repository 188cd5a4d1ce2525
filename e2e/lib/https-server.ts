/**
 * An HTTPS server for tests that run it as its own process (e.g. in a test host's network
 * namespace). Usage: node https-server.ts ADDRESS PORT NAME CERT KEY — prints "listening"
 * when ready; answers every request 200 with `NAME <method> <path>`.
 */

import { readFileSync } from 'node:fs'
import { createServer } from 'node:https'

const [address, port, name, cert, key] = process.argv.slice(2) as [string, string, string, string, string]
const server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (req, res) => {
  req.resume()
  res.writeHead(200, { 'content-type': 'text/plain' })
  res.end(`${name} ${req.method} ${req.url}`)
})
server.listen(Number(port), address, () => process.stdout.write('listening\n'))
