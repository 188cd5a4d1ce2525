/**
 * How long new backend connections take to set up, from Node's and undici's diagnostics
 * channels (nothing in the request path): `net.client.socket` marks when a client socket
 * is created and when its TCP connect completes; `portico:upstream:connected` (the HTTP/1.1
 * client, http/h1-pool.ts) and undici's `undici:client:connected` (HTTP/2) say the connection
 * (TLS included) is ready and to which host. The TLS handshake is the time
 * between the two. Hosts are named by the backend that has them as an endpoint.
 */

import dc from 'node:diagnostics_channel'
import type { Socket } from 'node:net'
import { performance } from '@portico/engine/clock'

interface Timing { start: number, tcp: number }

export type ConnectObserver = (backend: string, tcpSeconds: number, tlsSeconds: number | null) => void

/** Subscribes; returns the function that unsubscribes. */
export function watchUpstreamConnects (backendOf: (host: string, port: number) => string, observe: ConnectObserver): () => void {
  const timings = new WeakMap<Socket, Timing>()
  const onSocket = (message: unknown): void => {
    const socket = (message as { socket?: Socket }).socket
    if (socket === undefined) return
    const t: Timing = { start: performance.now(), tcp: 0 }
    timings.set(socket, t)
    socket.once('connect', () => { t.tcp = performance.now() })
  }
  const onConnected = (message: unknown): void => {
    const { connectParams, socket } = message as { connectParams?: { hostname?: string, port?: string | number, protocol?: string }, socket?: Socket & { encrypted?: boolean } }
    if (socket === undefined || connectParams === undefined) return
    const t = timings.get(socket)
    if (t === undefined || t.tcp === 0) return
    const now = performance.now()
    const port = Number(connectParams.port !== undefined && connectParams.port !== '' ? connectParams.port : connectParams.protocol === 'https:' ? 443 : 80)
    const host = String(connectParams.hostname ?? '').replace(/^\[|\]$/g, '')
    observe(backendOf(host, port), (t.tcp - t.start) / 1000, socket.encrypted === true ? (now - t.tcp) / 1000 : null)
  }
  dc.subscribe('net.client.socket', onSocket)
  dc.subscribe('undici:client:connected', onConnected)
  dc.subscribe('portico:upstream:connected', onConnected)
  return () => {
    dc.unsubscribe('net.client.socket', onSocket)
    dc.unsubscribe('undici:client:connected', onConnected)
    dc.unsubscribe('portico:upstream:connected', onConnected)
  }
}
