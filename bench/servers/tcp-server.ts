/**
 * A TCP server for the stream benchmark. The first byte a client sends says what it wants:
 * `D` — download: the server sends `size` bytes (64 KiB writes) and closes; `U` — upload: it
 * reads until the client half-closes and answers the byte count; `P` — ping: one byte back,
 * then close (a connection-rate test). Usage: node bench/servers/tcp-server.ts PORT SIZE —
 * prints "ready".
 */

import net from 'node:net'

const CHUNK = Buffer.alloc(64 * 1024, 7)

if (import.meta.main) {
  const size = Number(process.argv[3] ?? 256 * 1024 * 1024)
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, socket => {
    socket.on('error', () => {})
    socket.once('data', (first: Buffer) => {
      const mode = String.fromCharCode(first[0]!)
      if (mode === 'P') socket.end('p')
      else if (mode === 'U') {
        let n = first.length - 1
        socket.on('data', (c: Buffer) => { n += c.length })
        socket.on('end', () => socket.end(String(n)))
      } else {
        let left = size
        const pump = (): void => {
          while (left > 0) {
            const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left)
            left -= chunk.length
            if (!socket.write(chunk)) { socket.once('drain', pump); return }
          }
          socket.end()
        }
        pump()
      }
    })
  })
  server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => process.stdout.write('ready\n'))
}
