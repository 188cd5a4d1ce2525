/**
 * MCP sessions, their upstream sessions and the stdio servers they launch live on one
 * thread, the primary's: a session must be found by whichever worker receives its next
 * request, and a stdio target must run once per gateway, not once per worker. A worker
 * therefore hands every request for an MCP route (engine: `handoff`) to the primary whole,
 * over an HTTP/1.1 connection on a Unix socket; the primary runs the full pipeline for it
 * (policies, rate limits, trace, metrics, access log) with the client's addresses as the
 * worker saw them, and the worker streams the answer back (SSE included).
 *
 * The socket is one of local-socket.ts (abstract on Linux, else a file in a 0700 directory);
 * what keeps others out is the random 256-bit token every request must carry, which never
 * leaves the process.
 */

import http from '@portico/engine/node-http'
import { timingSafeEqual } from 'node:crypto'
import type { TLSSocket } from 'node:tls'
import type { Pool } from 'undici'
import type { ClientFacts, Engine, InboundRequest, InboundResponse } from '@portico/engine/serving'
import { undici } from '@portico/engine/serving'
import { localSocketPath, socketToken } from './local-socket.ts'

const TOKEN_HEADER = 'x-portico-handoff'
const CLIENT_HEADER = 'x-portico-client'

/** Headers of the hop, not the message (RFC 9110 §7.6.1), and HTTP/2 pseudo-headers. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', TOKEN_HEADER, CLIENT_HEADER])

export interface HandoffServer {
  socketPath: string
  token: string
  close(): Promise<void>
}

/** The primary's end: answers handed-over requests with `engine`. */
export async function startHandoffServer (engine: Engine): Promise<HandoffServer> {
  const { path: socketPath, remove } = localSocketPath('mcp')
  const token = socketToken()
  const expected = Buffer.from(token)
  const server = http.createServer({ requestTimeout: 0, keepAliveTimeout: 65_000, noDelay: true }, (req, res) => {
    const given = Buffer.from(String(req.headers[TOKEN_HEADER] ?? ''))
    let facts: (ClientFacts & { bind: string }) | null = null
    try {
      if (given.length === expected.length && timingSafeEqual(given, expected)) facts = JSON.parse(String(req.headers[CLIENT_HEADER])) as ClientFacts & { bind: string }
    } catch {}
    if (facts === null || typeof facts.bind !== 'string') {
      res.writeHead(403, { connection: 'close' }).end()
      return
    }
    stripInternal(req)
    const { bind, ...client } = facts
    engine.handleHandoff(bind, req, res, client)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ path: socketPath }, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return {
    socketPath,
    token,
    close: () => new Promise(resolve => {
      server.close(() => {
        remove()
        resolve()
      })
      server.closeAllConnections()
    })
  }
}

/** The two internal headers never reach the pipeline (nor traces, nor backends). */
function stripInternal (req: InboundRequest): void {
  delete req.headers[TOKEN_HEADER]
  delete req.headers[CLIENT_HEADER]
  const raw = req.rawHeaders
  for (let i = raw.length - 2; i >= 0; i -= 2) {
    const name = raw[i]!.toLowerCase()
    if (name === TOKEN_HEADER || name === CLIENT_HEADER) raw.splice(i, 2)
  }
}

/** A worker's end: `relay(req, res, bindKey)` forwards one request to the primary and streams the answer back. */
export function handoffRelay (target: { socketPath: string, token: string }): { relay: (req: InboundRequest, res: InboundResponse, bindKey: string) => void, close: () => Promise<void> } {
  // No limits here: the primary's pipeline applies the route's timeouts, and MCP streams
  // (GET, SSE answers) stay open as long as the session wants.
  // Made at the first relayed request: a config without MCP routes never loads undici here.
  let pool: Pool | null = null
  const poolOf = (): Pool => pool ??= new (undici().Pool)('http://portico.internal', { socketPath: target.socketPath, connections: null, pipelining: 1, bodyTimeout: 0, headersTimeout: 0, keepAliveTimeout: 60_000 })
  const relay = (req: InboundRequest, res: InboundResponse, bindKey: string): void => {
    const socket = req.socket as TLSSocket | undefined
    const client: ClientFacts & { bind: string } = {
      bind: bindKey,
      remoteAddress: socket?.remoteAddress ?? '',
      remotePort: socket?.remotePort ?? 0,
      localAddress: socket?.localAddress ?? '',
      localPort: socket?.localPort ?? 0,
      ...(typeof socket?.servername === 'string' ? { servername: socket.servername } : {})
    }
    const headers: Record<string, string | string[]> = {}
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || name.startsWith(':') || HOP_BY_HOP.has(name)) continue
      headers[name] = value
    }
    headers[TOKEN_HEADER] = target.token
    headers[CLIENT_HEADER] = JSON.stringify(client)
    const framed = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined
    const abort = new AbortController()
    res.once('close', () => { if (!res.writableFinished) abort.abort() })
    poolOf().request({ path: req.url ?? '/', method: (req.method ?? 'GET') as 'GET', headers, body: framed ? req : null, signal: abort.signal }).then(
      answer => {
        const out: Record<string, string | string[]> = {}
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value
        }
        res.writeHead(answer.statusCode, out)
        // Each chunk as it comes (SSE), with the client's pace holding the primary's back.
        const body = answer.body
        body.once('error', () => res.destroy())
        body.on('data', (chunk: Buffer) => {
          if (!res.write(chunk)) {
            body.pause()
            res.once('drain', () => body.resume())
          }
        })
        body.once('end', () => res.end())
      },
      () => {
        if (res.destroyed) return
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }).end('MCP routes are unavailable: the primary thread does not answer\n')
        else res.destroy()
      }
    )
  }
  return { relay, close: async () => { await pool?.close() } }
}
