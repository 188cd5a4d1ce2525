/**
 * HTTP/1.1 upgrades (WebSocket): the request runs the same pipeline as any other — routes,
 * policies, trace — with a ServerResponse bound to the raw socket so local answers (404,
 * 401, ...) are ordinary responses (pipeline/run.ts handleUpgrade). The backend call asks
 * undici for the upgrade; on 101 the two sockets are joined here and bytes flow both ways
 * until either side closes.
 */

import type { IncomingMessage, ServerResponse } from 'node:http'
import http from '../util/node-http.ts'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'

/**
 * A response bound to an upgrade request's raw socket, for the proxy's own answers. Such an
 * answer ends the connection: there is no HTTP parser left on this socket to read a next
 * request.
 */
export function upgradeResponse (req: IncomingMessage, socket: Duplex): ServerResponse {
  const res = new http.ServerResponse(req)
  res.assignSocket(socket as Socket)
  socket.on('error', () => socket.destroy())
  res.shouldKeepAlive = false
  res.once('finish', () => socket.end())
  return res
}

/** What joining the sockets needs of a request's state (request/context.ts RequestContext has it). */
export interface UpgradeContext {
  readonly res: ServerResponse
  readonly upgrade: { socket: Duplex, head: Buffer } | null
  upgraded: boolean
  status: number
}

/** Joins the client socket to the backend's after a 101 from the backend. */
export function completeUpgrade (ctx: UpgradeContext, statusCode: number, headers: Record<string, string | string[] | undefined>, upstream: Duplex): void {
  const { socket, head } = ctx.upgrade!
  const res = ctx.res
  ctx.upgraded = true
  ctx.status = statusCode
  res.detachSocket(socket as Socket)
  let head101 = `HTTP/1.1 ${statusCode} Switching Protocols\r\n`
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    for (const v of Array.isArray(value) ? value : [value]) head101 += `${name}: ${v}\r\n`
  }
  socket.write(head101 + '\r\n')
  if (head.length > 0) upstream.write(head)
  let closed = false
  const close = () => {
    if (closed) return
    closed = true
    socket.destroy()
    upstream.destroy()
    res.emit('close')
  }
  socket.on('error', close).on('close', close)
  upstream.on('error', close).on('close', close)
  socket.pipe(upstream)
  upstream.pipe(socket)
}
