/**
 * The base handler of a backend call: streams the backend's answer straight into the
 * client's response (backpressure both ways, nothing buffered whole), joins the sockets of
 * an accepted upgrade, and turns a transport failure into the proxy's own answer (502/503/504,
 * or a cut connection once the head is out: it goes with the body's first byte, see
 * writeHead). The pipeline's response policies and trace
 * snapshots run through `hooks` when the head arrives. Optional handlers wrap this one
 * (http/trace-bodies.ts, llm/usage-handler.ts, http/response-intercept.ts, retries) only
 * when a request needs them.
 */

import type { Dispatcher } from 'undici'
import type { Duplex } from 'node:stream'
import type { CallContext, UpstreamHooks } from './call-context.ts'
import { releaseCall, startStreamWatch, stopCallTimer, type CallState } from './call-timers.ts'
import { classifyFailure } from './call-failure.ts'
import { responseEndToEnd, trailerFields } from './headers.ts'
import { Base64Stream, grpcWebTrailerFrame } from './grpc.ts'
import { completeUpgrade } from './upgrade.ts'
import { traceCallResult } from '../trace/backend-call.ts'
import { PorticoError, isPorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'

const CLOSE = { connection: 'close' }

export class ClientResponse<R, C extends CallContext> implements Dispatcher.DispatchHandler {
  private readonly rt: R
  private readonly ctx: C
  private readonly call: CallState
  private readonly hooks: UpstreamHooks<R, C>
  private waitingForDrain = false
  /** grpc-web-text: the answer's bytes go to the client as base64. */
  private base64: Base64Stream | null = null
  /** The backend's status, and whether its head still waits to be written (see writeHead). */
  private status = 0
  private headPending = false
  /** The call ended in onResponseError (once: a later failure must not cut the answer it gave). */
  private failed = false

  constructor (rt: R, ctx: C, call: CallState, hooks: UpstreamHooks<R, C>) {
    this.rt = rt
    this.ctx = ctx
    this.call = call
    this.hooks = hooks
  }

  onRequestStart (c: Dispatcher.DispatchController): void {
    this.call.controller = c
  }

  onRequestUpgrade (_c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>, upstreamSocket: Duplex): void {
    const ctx = this.ctx
    releaseCall(this.call, ctx)
    ctx.upstreamHeadersAt = performance.now()
    ctx.reason = 'Upstream'
    traceCallResult(ctx, statusCode, null)
    ctx.responseHeaders = headers
    ctx.status = statusCode
    this.hooks.upgradeHead(this.rt, ctx)
    completeUpgrade(ctx, statusCode, headers, upstreamSocket)
  }

  onResponseStart (c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    const ctx = this.ctx
    const res = ctx.res
    stopCallTimer(this.call)
    ctx.upstreamHeadersAt = performance.now()
    ctx.status = statusCode
    ctx.reason = 'Upstream'
    ctx.responseHeaders = responseEndToEnd(headers)
    traceCallResult(ctx, statusCode, null)
    this.hooks.responseHead(this.rt, ctx)
    if (res.destroyed) {
      c.abort(new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'client closed the connection'))
      return
    }
    try {
      if (ctx.grpc !== null && ctx.responseHeaders['grpc-status'] !== undefined) ctx.grpc.status = Number(ctx.responseHeaders['grpc-status'])
      if (ctx.grpc?.web === true) {
        // The gRPC-Web client gets its own content type; the trailers follow in the body.
        const type = ctx.responseHeaders['content-type']
        if (typeof type === 'string' && type.startsWith('application/grpc')) ctx.responseHeaders['content-type'] = (ctx.grpc.text ? 'application/grpc-web-text' : 'application/grpc-web') + type.slice(16)
        if (ctx.grpc.text) this.base64 = new Base64Stream()
        delete ctx.responseHeaders['content-length']
      }
      if (ctx.req.httpVersionMajor === 2 && ctx.grpc?.web !== true && ctx.responseHeaders['grpc-status'] !== undefined) {
        // A gRPC "trailers-only" answer (a status and no message): over HTTP/2 it must stay
        // one HEADERS frame that ends the stream, or the client never sees its status. Set,
        // not written: end() then sends the head with END_STREAM.
        res.statusCode = statusCode
        for (const [name, value] of Object.entries(ctx.responseHeaders)) if (value !== undefined) res.setHeader(name, value as string | string[])
        return
      }
    } catch (err) {
      ctx.error = `invalid response header from backend: ${(err as Error).message}`
      c.abort(err as Error)
      return
    }
    this.status = statusCode
    this.headPending = true
    // Server-sent events and other streams must reach the client as they are produced, and a
    // gRPC client may wait for its response metadata before any message: their heads go now.
    const streaming = isStreaming(ctx.responseHeaders['content-type'])
    if ((streaming || ctx.grpc !== null) && this.writeHead(c) && streaming) res.flushHeaders()
    startStreamWatch(this.call, ctx)
  }

  /**
   * Writes the backend's head to the client. It waits for the body's first byte (or the
   * answer's end): until then a framing error in the body (an over-long chunk extension, an
   * overflowing first chunk size) or a backend that closes early is still answered with the
   * proxy's own 5xx, which is also what the access log records -- nothing has gone out. An
   * HTTP/1.1 client sees no difference (Node writes the head with the first body bytes
   * anyway); an HTTP/2 client gets the HEADERS frame with the first DATA frame.
   * A 204 or 304 never carries Content-Length or Transfer-Encoding (RFC 9110 §8.6, §15.4.5):
   * what the backend said of a body that is not there means nothing to the client.
   * False when Node refused the head: the call then ends in the proxy's own answer.
   */
  private writeHead (c: Dispatcher.DispatchController): boolean {
    this.headPending = false
    const ctx = this.ctx
    const headers = ctx.responseHeaders
    const status = this.status
    if ((status === 204 || status === 304) && (headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined)) {
      delete headers['content-length']
      delete headers['transfer-encoding']
    }
    try {
      ctx.res.writeHead(status, headers as Record<string, string | string[]>)
      return true
    } catch (err) {
      ctx.error = `invalid response header from backend: ${(err as Error).message}`
      c.abort(err as Error)
      // A call already over (its end being written) or a controller that does nothing (a
      // response interceptor's) does not call back: the client is answered here.
      if (!this.failed) this.onResponseError(c, err as Error)
      return false
    }
  }

  onResponseData (c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.call.progress++
    // A response policy replaced the body (transformation): the backend's is discarded.
    if (this.ctx.responseBody !== null) return
    if (this.headPending && !this.writeHead(c)) return
    this.ctx.responseBytes += chunk.length
    const res = this.ctx.res
    if (!res.write(this.base64 === null ? chunk : this.base64.encode(chunk)) && !this.waitingForDrain) {
      if (upstreamIsHttp2(this.ctx)) {
        // undici's HTTP/2 client drops what arrives while a stream is paused (8.12: 1 MiB
        // gRPC answers lost tens of KiB to a slow reader), so such an answer is not paused:
        // the client's side buffers it, up to a bound, past which the call is cut.
        if (res.writableLength > H2_UPSTREAM_BUFFER_LIMIT) c.abort(new PorticoError('PORTICO_DOWNSTREAM_SLOW', `the client reads the answer too slowly (over ${H2_UPSTREAM_BUFFER_LIMIT} bytes waiting)`))
        return
      }
      this.waitingForDrain = true
      c.pause()
      res.once('drain', () => {
        // The client took what waited: progress for the stream's idle timeout (a client that
        // stops reading is cut by it, as Envoy's stream idle timeout cuts one).
        this.call.progress++
        this.waitingForDrain = false
        c.resume()
      })
    }
  }

  /**
   * Whether the chunks given to onResponseData are out of Portico's hands (the backend
   * connection may then read into their buffer again: LendingHandler in h1-connection.ts):
   * nothing of the answer waits in the client's socket or the response, where a write that
   * did not go out at once (a slow client) keeps the chunk itself; and no base64 remainder
   * holds part of one. Node corks an HTTP/1.1 client's socket at a response's write and
   * uncorks it on the next tick, so that what one callback writes goes out in one `writev`;
   * this is asked at the end of the backend read that made those writes, the same moment for
   * that purpose: the socket is uncorked here (Node's own uncork then finds nothing to do),
   * so a 64 KiB answer's first chunk goes out before the next read rather than keeping the
   * buffer to itself.
   */
  chunkReleased (): boolean {
    if (this.base64 !== null) return false
    const res = this.ctx.res
    if (res.writableLength === 0) return true
    const socket = this.ctx.req.httpVersionMajor === 1 ? res.socket : null
    if (socket == null || socket.writableCorked !== 1) return false
    socket.uncork()
    return res.writableLength === 0
  }

  onResponseEnd (c: Dispatcher.DispatchController, received: Record<string, string | string[] | undefined>): void {
    const ctx = this.ctx
    const res = ctx.res
    releaseCall(this.call, ctx)
    if (this.headPending && !this.writeHead(c)) return
    if (ctx.responseBody !== null) {
      res.end(ctx.responseBody)
      return
    }
    const trailers = trailerFields(received)
    if (ctx.grpc !== null && trailers?.['grpc-status'] !== undefined) ctx.grpc.status = Number(trailers['grpc-status'])
    if (ctx.grpc?.web === true && trailers !== null && typeof trailers === 'object' && Object.keys(trailers).length > 0) {
      const frame = grpcWebTrailerFrame(trailers)
      // grpc-web-text: the messages' base64 ends (padded), the trailer frame is its own segment.
      if (this.base64 !== null) res.end(this.base64.flush() + frame.toString('base64'))
      else res.end(frame)
      return
    }
    if (this.base64 !== null) res.write(this.base64.flush())
    // Trailers (gRPC's grpc-status, grpc-message) go on where the client's protocol carries
    // them: HTTP/2, or a chunked HTTP/1.1 body.
    if (trailers !== null && typeof trailers === 'object' && Object.keys(trailers).length > 0 && (res.chunkedEncoding || ctx.req.httpVersionMajor === 2)) {
      res.addTrailers(trailers as Record<string, string>)
    }
    res.end()
  }

  onResponseError (_c: Dispatcher.DispatchController, err: Error): void {
    if (this.failed) return
    this.failed = true
    this.headPending = false
    const ctx = this.ctx
    const res = ctx.res
    releaseCall(this.call, ctx)
    if (ctx.done || isPorticoError(err, 'PORTICO_DOWNSTREAM_CLOSED')) return
    const failure = classifyFailure(err, this.call.timedOut)
    ctx.error = failure.detail
    if (!res.headersSent) {
      traceCallResult(ctx, null, failure.detail)
      // The rest of a request body that was cut off cannot be read: the connection ends.
      this.hooks.respondLocal(this.rt, ctx, failure.status, failure.body, failure.reason, failure.detail, failure.status === 408 || failure.status === 400 ? CLOSE : undefined)
    } else {
      // Headers are out: the only honest signal left is to cut the connection.
      ctx.reason = failure.reason
      res.destroy(err)
    }
  }
}

function isStreaming (contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && contentType.startsWith('text/event-stream')
}

/** How much of an HTTP/2 backend's answer may wait for a slow client (not paused: see onResponseData). */
const H2_UPSTREAM_BUFFER_LIMIT = 16 * 1024 * 1024

/** The backend call may run over HTTP/2: an h2c or h2 backend, or a gRPC request (its own HTTP/2 pool). */
function upstreamIsHttp2 (ctx: CallContext): boolean {
  return ctx.backend?.h2c === true || ctx.backend?.h2 === true || ctx.grpc !== null
}
