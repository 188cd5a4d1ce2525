/**
 * HTTP/1.1 upgrades (WebSocket): the request runs the same pipeline as any other -- routes,
 * policies, trace -- with a InboundResponse bound to the raw socket so local answers (404,
 * 401, ...) are ordinary responses (pipeline/run.ts handleUpgrade). The backend call asks
 * undici for the upgrade; on 101 the two sockets are joined here and bytes flow both ways
 * until either side closes.
 */

import type { IncomingMessage } from 'node:http'
import type { InboundRequest, InboundResponse } from './inbound.ts'
import http from '../util/node-http.ts'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'

/**
 * A response bound to an upgrade request's raw socket, for the proxy's own answers. Such an
 * answer ends the connection: there is no HTTP parser left on this socket to read a next
 * request.
 */
export function upgradeResponse (req: InboundRequest, socket: Duplex): InboundResponse {
  // Node's ServerResponse reads only the request's method and version (and, for HTTP/1.0,
  // its TE): any server's request will do (proxy/src/h1-server.ts hands over its own).
  const res = new http.ServerResponse(req as IncomingMessage)
  res.assignSocket(socket as Socket)
  socket.on('error', () => socket.destroy())
  res.shouldKeepAlive = false
  res.once('finish', () => socket.end())
  return res
}

/**
 * Calls `serve` once no response of an earlier request is pending on the connection. An
 * upgrade request pipelined behind a request still being answered reaches the `upgrade`
 * listener at once (Node hands the socket over as soon as it has parsed the head), while that
 * answer still owns the socket: binding a response to it then would throw (an uncaught
 * ERR_HTTP_SOCKET_ASSIGNED) and leave the client waiting. The earlier answers go out first;
 * a connection that closes meanwhile is left alone.
 */
export function afterPendingResponses (socket: Duplex, serve: () => void): void {
  const pending = (socket as Duplex & { _httpMessage?: InboundResponse | null })._httpMessage
  if (pending == null) {
    if (!socket.destroyed && socket.writable) serve()
    return
  }
  // Node took its error listener off the socket when it handed it over: a reset while the
  // earlier answers are written must not become an uncaught 'error'.
  if (socket.listenerCount('error') === 0) socket.on('error', () => socket.destroy())
  // Node's own 'finish' listener runs first: it frees the socket or binds the next queued answer.
  pending.once('finish', () => afterPendingResponses(socket, serve))
}

/** The start of the HTTP/2 client preface (RFC 9113 §3.4), as an HTTP/1.1 parser sees it. */
const H2_PREFACE_LINE = Buffer.from('PRI * HTTP/2.0\r\n', 'latin1')

/**
 * An HTTP/1.1 request carrying an `Upgrade` the listener refused (h2c, or anything but the
 * allowed upgrades) is served as a plain request, and its answer closes the connection: Node's
 * parser stopped at the end of its head as for an upgrade, so it drops whatever the client
 * sent behind the head in the same read (a pipelined request would never be answered), and
 * an HTTP/2 preface sent later stalls it. Returns true when the preface is already there:
 * an h2c client must wait for a 101 before it sends one (RFC 7540 §3.2; RFC 9113 dropped the
 * h2c upgrade altogether), so the request is a smuggling attempt and gets a 400.
 */
export function refuseUpgrade (req: InboundRequest, res: InboundResponse): boolean {
  res.shouldKeepAlive = false
  // The read the parser is working through while it announces this request (a copy).
  const parser = (req.socket as (Socket & { parser?: { getCurrentBuffer?: () => Buffer } | null }) | null)?.parser
  const read = parser?.getCurrentBuffer?.()
  return read !== undefined && read.includes(H2_PREFACE_LINE)
}

/** What joining the sockets needs of a request's state (request/context.ts RequestContext has it). */
export interface UpgradeContext {
  readonly res: InboundResponse
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
