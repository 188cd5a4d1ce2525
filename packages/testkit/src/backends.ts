/**
 * Small loopback HTTP servers that stand in for backends, plus hashing helpers for body
 * integrity checks.
 */

import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'
import type { Socket } from 'node:net'

export interface Backend {
  server: http.Server
  port: number
  /** `127.0.0.1:PORT`, as a route's `host:` wants it. */
  host: string
  url: string
  /** Every request received, in arrival order. */
  requests: http.IncomingMessage[]
  close(): Promise<void>
}

/**
 * Where a backend listens: another loopback address (127.0.0.2, ... — as an InferencePool's
 * pods, which share a port and differ by address) and a given port (default: a free one).
 */
export interface BackendListen { address?: string, port?: number }

/** Starts a node:http server on a free loopback port (or `listen`'s). Always close() it (after hooks). */
export async function startBackend (handler: http.RequestListener, listen: BackendListen = {}): Promise<Backend> {
  const host = listen.address ?? '127.0.0.1'
  const requests: http.IncomingMessage[] = []
  const sockets = new Set<Socket>()
  const server = http.createServer((req, res) => {
    requests.push(req)
    handler(req, res)
  })
  server.on('connection', socket => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host, port: listen.port ?? 0 }, () => resolve())
  })
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    server,
    port,
    host: `${host}:${port}`,
    url: `http://${host}:${port}`,
    requests,
    close: () => new Promise<void>(resolve => {
      server.close(() => resolve())
      server.closeAllConnections()
      for (const s of sockets) s.destroy()
    })
  }
}

export interface EchoedRequest {
  name: string
  method: string
  url: string
  headers: http.IncomingHttpHeaders
  rawHeaders: string[]
  bodyLength: number
  bodySha256: string
}

/**
 * A backend that answers every request with a JSON description of it (method, url, headers,
 * body length and hash). `name` says which backend answered; `respond` can add headers.
 */
export async function startEchoBackend (name = 'echo', responseHeaders: Record<string, string | string[]> = {}, listen: BackendListen = {}): Promise<Backend> {
  return await startBackend((req, res) => {
    const hash = createHash('sha256')
    let length = 0
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk)
      length += chunk.length
    })
    req.on('end', () => {
      const echoed: EchoedRequest = {
        name,
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bodyLength: length,
        bodySha256: hash.digest('hex')
      }
      const body = JSON.stringify(echoed)
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-backend': name, ...responseHeaders })
      res.end(body)
    })
  }, listen)
}

export function sha256 (data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex')
}

/** Deterministic-length random bytes (random content defeats any accidental compression). */
export function randomBody (bytes: number): Buffer {
  return randomBytes(bytes)
}
