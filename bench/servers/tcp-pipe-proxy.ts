/**
 * The Node peer for the TCP benchmark: the plain way to proxy TCP in Node — `net` sockets
 * joined by `pipe()` both ways (half-close passed on, either side closing ends both), with no
 * routing, metrics, logs or timers. Usage: node bench/servers/tcp-pipe-proxy.ts PORT
 * TARGET_PORT — prints "ready" once listening.
 */

import net from 'node:net'

const port = Number(process.argv[2] ?? 0)
const target = Number(process.argv[3])

net.createServer({ allowHalfOpen: true, noDelay: true }, client => {
  const upstream = net.connect({ port: target, host: '127.0.0.1', allowHalfOpen: true, noDelay: true })
  client.pipe(upstream)
  upstream.pipe(client)
  client.on('error', () => upstream.destroy())
  upstream.on('error', () => client.destroy())
  client.on('close', () => upstream.destroy())
  upstream.on('close', () => client.destroy())
}).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'))
