/**
 * HTTP/1.1 upgrades (WebSocket): the request runs the same pipeline as any other — routes,
 * policies, trace — with a ServerResponse bound to the raw socket so local answers (404,
 * 401, ...) are ordinary responses. The backend call asks undici for the upgrade; on 101 the
 * two sockets are joined and bytes flow both ways until either side closes.
 */

import { ServerResponse, type IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'
import type { CompiledBind } from '../engine/compiled.ts'
import { handleRequest, type PipelineRuntime } from '../pipeline/run.ts'
import type { RequestContext } from '../pipeline/context.ts'
import { upgradeAllowed } from './frontend.ts'
import { hostOnly } from '../routing/hostname.ts'

export function handleUpgrade (rt: PipelineRuntime, bind: CompiledBind, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const res = new ServerResponse(req)
  res.assignSocket(socket as Socket)
  socket.on('error', () => socket.destroy())
  // A local answer (no route, denied, failed) ends the connection: there is no HTTP parser
  // left on this socket to read a next request.
  res.shouldKeepAlive = false
  res.once('finish', () => socket.end())
  // The listener asks the engine first (shouldUpgradeCallback), so only allowed upgrades get
  // here; on a Node without that hook a refused one (h2c, ...) still never reaches a backend
  // as an upgrade: it is proxied as a plain request, without its Upgrade headers.
  const allowed = upgradeAllowed(bind.selectListener(hostOnly(req.headers.host)).frontend, req.headers.upgrade)
  handleRequest(rt, bind, req, res, allowed ? { socket, head } : undefined)
}

/** Joins the client socket to the backend's after a 101 from the backend. */
export function completeUpgrade (ctx: RequestContext, statusCode: number, headers: Record<string, string | string[] | undefined>, upstream: Duplex): void {
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
