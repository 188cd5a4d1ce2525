/**
 * The xDS port (9978) in one of three modes: `plaintext`, `tls`, or `either` — both on one
 * port, told apart by the first byte of each connection (0x16 starts a TLS handshake). Both
 * gRPC servers get their connections injected, so one listening socket serves both.
 */

import net from 'node:net'
import { Server, ServerCredentials } from '@grpc/grpc-js'
import type { Pem } from './certs.ts'

export type XdsMode = 'plaintext' | 'tls' | 'either'

export interface XdsListenerOptions {
  mode: XdsMode
  host: string
  port: number
  /** Serving certificate (tls and either); called again to rotate. */
  tls?: () => Pem
  /** Registers the services on a gRPC server (called once per server). */
  register: (server: Server) => void
}

export interface XdsListener {
  port: number
  /** Replaces the serving certificate for new connections. */
  rotate(): void
  close(): Promise<void>
}

export async function startXdsListener (options: XdsListenerOptions): Promise<XdsListener> {
  const servers: Server[] = []
  let plain: ReturnType<Server['createConnectionInjector']> | null = null
  let secure: ReturnType<Server['createConnectionInjector']> | null = null
  const makeSecure = () => {
    const pem = options.tls!()
    const server = new Server()
    options.register(server)
    servers.push(server)
    return server.createConnectionInjector(ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(pem.cert), private_key: Buffer.from(pem.key) }], false))
  }
  if (options.mode !== 'tls') {
    const server = new Server()
    options.register(server)
    servers.push(server)
    plain = server.createConnectionInjector(ServerCredentials.createInsecure())
  }
  if (options.mode !== 'plaintext') {
    if (options.tls === undefined) throw new Error(`xDS mode ${options.mode} needs a certificate`)
    secure = makeSecure()
  }
  const sockets = new Set<net.Socket>()
  const listener = net.createServer(socket => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    socket.once('readable', () => {
      const first = socket.read(1) as Buffer | null
      if (first === null) {
        socket.destroy()
        return
      }
      socket.unshift(first)
      const isTls = first[0] === 0x16
      const target = isTls ? secure : plain
      if (target === null) {
        socket.destroy()
        return
      }
      target.injectConnection(socket)
    })
  })
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject)
    listener.listen({ host: options.host, port: options.port }, () => resolve())
  })
  const address = listener.address()
  return {
    port: typeof address === 'object' && address !== null ? address.port : options.port,
    rotate () {
      if (options.mode === 'plaintext') return
      secure = makeSecure()
    },
    close: async () => {
      // Stop accepting, end the gRPC sessions, then the sockets under them: a proxy's
      // stream never ends by itself.
      const closed = new Promise<void>(resolve => listener.close(() => resolve()))
      for (const s of servers) s.forceShutdown()
      for (const socket of sockets) socket.destroy()
      await closed
    }
  }
}
