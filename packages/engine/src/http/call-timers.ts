/**
 * The clocks of one backend call: the route's request and backend timeouts (504), the
 * streamed request body's idle timeout (408), and the abort when the client leaves. Their
 * functions are made once, outside the call, on purpose: with an abort closure over the
 * call's whole scope (request, response, handler) made per request, V8's young-generation
 * GC kept promoting every request's objects, and scavenges took 5-10 ms instead of under
 * 1 ms (measured with bench/http-proxy.ts at 1,000 requests/s).
 */

import type { Dispatcher } from 'undici'
import type { IncomingMessage } from 'node:http'
import type { CallContext } from './call-context.ts'
import { PorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'

/**
 * The two timeouts a call can hit, as the PORTICO_TIMEOUT error's message: the route's
 * whole-request budget (never retried: it is the client's deadline) or the per-try backend
 * timeout (retried when the route retries, as HTTPRouteRetry says).
 */
export const REQUEST_TIMEOUT = 'request timeout'
export const BACKEND_TIMEOUT = 'upstream call timeout'

/** What the abort paths (timeouts, client gone) need from a backend call. */
export interface CallState {
  controller: Dispatcher.DispatchController | null
  /** Which timeout fired, if one did. */
  timedOut: string | null
  /** The route's request/backend timeout, while it runs. */
  timer: NodeJS.Timeout | undefined
  /** The request body being streamed, while its idle timeout watches it. */
  body: BodyWatch | null
}

/**
 * A streamed request body's idle timeout. It polls the client socket's byte count (a few
 * times per timeout period) instead of hooking every chunk, so a body costs one timer, not
 * work per chunk; the timeout fires between `idleMs` and 1.25 × `idleMs` after the last byte.
 */
interface BodyWatch {
  req: IncomingMessage
  idleMs: number
  lastBytes: number
  lastChange: number
  timer: NodeJS.Timeout
}

/**
 * Starts the call's clocks (from `ctx.upstreamStart`): the tighter of what is left of the
 * request timeout and the backend timeout, the body's idle timeout when a body is streamed,
 * and the abort when the client leaves (`ctx.abortUpstream`).
 */
export function startCallTimers (ctx: CallContext, streamsBody: boolean): CallState {
  const call: CallState = { controller: null, timedOut: null, timer: undefined, body: null }
  const timeouts = ctx.route?.ir.timeouts
  const grpcDeadline = grpcTimeoutMs(ctx.req.headers['grpc-timeout'])
  if (timeouts !== undefined || grpcDeadline !== undefined) {
    const elapsed = ctx.upstreamStart - ctx.startMono
    // The client's own deadline (gRPC's grpc-timeout) counts as the request timeout: it is
    // never retried past.
    const remainingRequest = Math.min(timeouts?.requestMs ?? Infinity, grpcDeadline ?? Infinity) - elapsed
    const backendLimit = timeouts?.backendRequestMs ?? Infinity
    const wait = Math.max(0, Math.min(remainingRequest, backendLimit))
    if (wait !== Infinity) {
      const which = remainingRequest <= backendLimit ? REQUEST_TIMEOUT : BACKEND_TIMEOUT
      call.timer = setTimeout(onCallTimeout, wait, call, which)
    }
  }
  ctx.abortUpstream = abortOnClientClose(call)
  const idleMs = ctx.listener.frontend.requestBodyIdleTimeoutMs
  if (streamsBody && idleMs > 0 && !ctx.req.complete) watchBody(call, ctx.req, idleMs)
  return call
}

const GRPC_TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 }

/**
 * A `grpc-timeout` header in ms (gRPC over HTTP/2: 1 to 8 digits and a unit, H M S m u n),
 * or undefined when absent or malformed (then ignored, as gRPC servers do).
 */
export function grpcTimeoutMs (value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string') return undefined
  const m = /^(\d{1,8})([HMSmun])$/.exec(value)
  return m === null ? undefined : Number(m[1]) * GRPC_TIMEOUT_UNIT_MS[m[2]!]!
}

/** The backend answered: its time is up (the body's idle watch goes on while it streams). */
export function stopCallTimer (call: CallState): void {
  if (call.timer !== undefined) clearTimeout(call.timer)
}

/** The call is over or dropped (a retry): every clock stops and the client-abort hook goes. */
export function releaseCall (call: CallState, ctx: CallContext): void {
  if (call.timer !== undefined) clearTimeout(call.timer)
  stopBodyWatch(call)
  ctx.abortUpstream = null
}

function watchBody (call: CallState, req: IncomingMessage, idleMs: number): void {
  const every = Math.max(10, Math.floor(idleMs / 4))
  call.body = { req, idleMs, lastBytes: req.socket?.bytesRead ?? 0, lastChange: performance.now(), timer: setTimeout(checkBody, every, call, every) }
}

function stopBodyWatch (call: CallState): void {
  if (call.body === null) return
  clearTimeout(call.body.timer)
  call.body = null
}

function checkBody (call: CallState, every: number): void {
  const watch = call.body
  if (watch === null) return
  const { req } = watch
  if (req.complete || req.destroyed) {
    call.body = null
    return
  }
  const now = performance.now()
  const bytes = req.socket?.bytesRead ?? 0
  // Bytes still buffered mean the backend is not taking them: that wait is the backend's,
  // bounded by the route's timeouts, not the client's.
  if (bytes !== watch.lastBytes || req.readableLength > 0) {
    watch.lastBytes = bytes
    watch.lastChange = now
  } else if (now - watch.lastChange >= watch.idleMs && call.controller !== null) {
    call.body = null
    call.controller.abort(new PorticoError('PORTICO_REQUEST_BODY_TIMEOUT', `request body idle timeout: no bytes from the client for ${watch.idleMs} ms`))
    return
  }
  watch.timer = setTimeout(checkBody, every, call, every)
}

function onCallTimeout (call: CallState, which: string): void {
  call.timedOut = which
  call.controller?.abort(new PorticoError('PORTICO_TIMEOUT', which))
}

function abortOnClientClose (call: CallState): () => void {
  return () => { call.controller?.abort(new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'client closed the connection')) }
}
