/**
 * `kubectl port-forward` in-process: a net.Server on an ephemeral loopback port; each
 * connection opens a port-forward WebSocket to the pod (client-node's PortForward) and pipes
 * bytes both ways. Closing stops the server and every open forward.
 */

import { createServer, type Socket } from 'node:net'
import { PassThrough, Writable } from 'node:stream'
import { PortForward, type KubeConfig } from '@kubernetes/client-node'
// Not re-exported by the package index; needed to give the handler streams of our own.
import { WebSocketHandler } from '@kubernetes/client-node/dist/web-socket-handler.js'
import type { Address } from './types.ts'

export interface PortForwardOptions {
  namespace: string
  pod: string
  /** Port inside the pod. */
  port: number
}

export interface PortForwardHandle {
  /** The loopback address that forwards to the pod's port. */
  address: Address
  close(): Promise<void>
}

interface ClosableSocket {
  close(): void
  on?(event: string, listener: (...args: unknown[]) => void): unknown
}

export async function startPortForward (kc: KubeConfig, options: PortForwardOptions): Promise<PortForwardHandle> {
  // Streams of our own so that client-node's stream bookkeeping never touches process.stdout.
  const idle = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough() }
  const forward = new PortForward(kc, true, new WebSocketHandler(kc, undefined, idle))
  const sockets = new Set<Socket>()
  const server = createServer(socket => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    // Anything on the error channel (e.g. nothing listens on that port in the pod) ends the
    // connection; the admin client then reports the instance as unreachable.
    const errors = new Writable({
      write (chunk: Buffer, _enc, done) {
        // (client-node also writes the channel's empty first frame, minus its port prefix.)
        if (chunk.length > 0) socket.destroy()
        done()
      }
    })
    forward.portForward(options.namespace, options.pod, [options.port], socket, errors, socket).then(ws => {
      const live = (typeof ws === 'function' ? ws() : ws) as ClosableSocket | null
      if (live === null) return
      socket.once('close', () => live.close())
      live.on?.('close', () => socket.end())
      if (socket.destroyed) live.close()
    }, () => {
      socket.destroy()
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve())
  })
  const addr = server.address()
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0
  let closed: Promise<void> | null = null
  return {
    address: { host: '127.0.0.1', port },
    close: () => {
      closed ??= new Promise<void>(resolve => {
        server.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
      return closed
    }
  }
}
