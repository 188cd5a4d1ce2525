/**
 * A backend on a raw TCP socket, for the tests of hostile answers: what it writes is bytes,
 * never checked or framed by a library. It splits what Portico sends on a connection into
 * request heads (the tests send no bodies) and hands each request's path and its socket to
 * `answer`, which writes whatever the test needs — two responses, half of one, a bad status.
 */

import net, { type AddressInfo } from 'node:net'

export interface RawBackend {
  server: net.Server
  /** `127.0.0.1:port`, for a route's `host`. */
  host: string
  /** Connections accepted so far. */
  connections: () => number
}

export async function startRawBackend (answer: (path: string, socket: net.Socket) => void): Promise<RawBackend> {
  let connections = 0
  const server = net.createServer(socket => {
    connections++
    let buf = ''
    socket.on('error', () => {})
    socket.on('data', d => {
      buf += d.toString('latin1')
      let end: number
      while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
        const path = buf.slice(0, buf.indexOf('\r\n')).split(' ')[1] ?? '/'
        buf = buf.slice(end + 4)
        answer(path, socket)
      }
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return { server, host: `127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections }
}
