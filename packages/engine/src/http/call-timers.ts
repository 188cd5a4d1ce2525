/**
 * The clocks of one backend call: the route's request and backend timeouts (504), the
 * streamed request body's idle timeout and minimum rate (408), the response stream's idle
 * timeout (the stream is cut), and the abort when the client leaves. The defaults are the
 * listener's (`timeout.http`, http/frontend.ts), a route's `policies.timeout` overrides them;
 * the table is in docs/configuration.md#timeouts. Their functions are made once, outside the
 * call, on purpose: with an abort closure over the call's whole scope (request, response,
 * handler) made per request, V8's young-generation GC kept promoting every request's
 * objects, and scavenges took 5-10 ms instead of under 1 ms (measured with
 * bench/http-proxy.ts at 1,000 requests/s).
 */

import type { Dispatcher } from 'undici'
import type { InboundRequest } from './inbound.ts'
import type { CallContext } from './call-context.ts'
import { PORTICO_ERRORS, PorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'
import { pollPeriod, Sweep, Sweeps } from './sweep.ts'
import { bodyLimits, bodyProgress, checkBodyProgress, type BodyLimits, type BodyProgress } from './body-clock.ts'

/**
 * The two timeouts a call can hit, each its own code: the route's whole-request budget
 * (never retried: it is the client's deadline) or the per-try backend timeout (retried when
 * the route retries, as HTTPRouteRetry says). Their messages are the 504's body.
 */
type TimeoutCode = 'PORTICO_REQUEST_TIMEOUT' | 'PORTICO_BACKEND_TIMEOUT'

/** What the abort paths (timeouts, client gone) need from a backend call. */
export interface CallState {
  controller: Dispatcher.DispatchController | null
  /** Which timeout fired, if one did: its message (the 504's body). */
  timedOut: string | null
  /** The route's request/backend timeout (or the client's grpc-timeout), while it runs. */
  timer: NodeJS.Timeout | undefined
  /**
   * The listener's default wait for response headers, for routes that set no timeout, while
   * it runs (its sweep; null: not waiting). It counts from the end of a streamed request body,
   * not its start (Envoy's route timeout starts there too), so a long upload is bounded by the
   * body's idle timeout and rate instead. It fires between `headersLimitMs` and 1.25 ×
   * `headersLimitMs` after `headersSince`. (The clocks' fields live on the call itself, not in
   * an object per clock: two fewer allocations per request.)
   */
  headersSweep: Sweep<CallState> | null
  /** Its place in that sweep (util/slot-set.ts), -1 when in none. */
  headersSlot: number
  headersLimitMs: number
  headersSince: number
  /** The request body being streamed, while its idle timeout watches it. */
  body: BodyWatch | null
  /**
   * The response stream's idle timeout, while it runs (its sweep; null: not watching): the
   * sweep reads `progress` as BodyWatch reads bytes, and fires between `streamIdleMs` and
   * 1.25 × `streamIdleMs` after the last progress.
   */
  streamSweep: Sweep<CallState> | null
  streamSlot: number
  streamIdleMs: number
  streamLastProgress: number
  streamLastChange: number
  /**
   * Progress of the response stream: the client response handler adds one per chunk from
   * the backend and per drain of the client's side (a counter, so a chunk costs no clock read).
   */
  progress: number
}

/** A streamed request body's clocks (http/body-clock.ts), polled by their own timer. */
interface BodyWatch extends BodyProgress {
  timer: NodeJS.Timeout
}

/**
 * Starts the call's clocks (from `ctx.upstreamStart`): the tighter of what is left of the
 * route's request timeout and backend timeout (or the client's grpc-timeout), else the
 * listener's default wait for response headers; the body's idle timeout and minimum rate when
 * a body is streamed; and the abort when the client leaves (`ctx.abortUpstream`). The
 * response stream's clock starts with the response (startStreamWatch).
 */
export function startCallTimers (ctx: CallContext, streamsBody: boolean): CallState {
  const call: CallState = { controller: null, timedOut: null, timer: undefined, headersSweep: null, headersSlot: -1, headersLimitMs: 0, headersSince: 0, body: null, streamSweep: null, streamSlot: -1, streamIdleMs: 0, streamLastProgress: 0, streamLastChange: 0, progress: 0 }
  const timeouts = ctx.route?.ir.timeouts
  const frontend = ctx.listener.frontend
  const grpcDeadline = grpcTimeoutMs(ctx.req.headers['grpc-timeout'])
  // The listener's default bounds the wait for response headers only when the route says
  // nothing: a route's requestTimeout is its whole budget (the Gateway API's backendRequest
  // must not exceed request), and an explicit 0 is no limit.
  const routeSets = timeouts?.backendRequestMs !== undefined || timeouts?.requestMs !== undefined
  if (routeSets || grpcDeadline !== undefined) {
    const elapsed = ctx.upstreamStart - ctx.startMono
    // The client's own deadline (gRPC's grpc-timeout) counts as the request timeout: it is
    // never retried past. 0 is no limit (the Gateway API's zero).
    const remainingRequest = Math.min(limit(timeouts?.requestMs), grpcDeadline ?? Infinity) - elapsed
    const backendLimit = limit(timeouts?.backendRequestMs)
    const wait = Math.max(0, Math.min(remainingRequest, backendLimit))
    if (wait !== Infinity) {
      const which: TimeoutCode = remainingRequest <= backendLimit ? 'PORTICO_REQUEST_TIMEOUT' : 'PORTICO_BACKEND_TIMEOUT'
      call.timer = setTimeout(onCallTimeout, wait, call, which)
    }
  }
  if (!routeSets && frontend.backendRequestTimeoutMs > 0) {
    const sweep = headerSweeps.get(pollPeriod(frontend.backendRequestTimeoutMs))
    call.headersSweep = sweep
    call.headersLimitMs = frontend.backendRequestTimeoutMs
    call.headersSince = ctx.upstreamStart
    sweep.add(call)
  }
  ctx.abortUpstream = abortOnClientClose(call)
  if (streamsBody && !ctx.req.complete) {
    const limits = bodyLimits(ctx)
    if (limits.idleMs > 0) watchBody(call, ctx.req, limits)
  }
  return call
}

/** A limit in ms from the IR, where absent and 0 are both no limit. */
function limit (ms: number | undefined): number {
  return ms === undefined || ms === 0 ? Infinity : ms
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

/**
 * The backend answered: its time is up. The body's idle watch goes on while the answer
 * streams (its minimum rate stops: a backend that answers early reads at its own pace, as
 * gRPC streams and Envoy Gateway's requestReceivedTimeout do).
 */
export function stopCallTimer (call: CallState): void {
  if (call.timer !== undefined) clearTimeout(call.timer)
  stopHeadersWait(call)
  if (call.body !== null) call.body.minBytes = 0
}

/**
 * The backend's response head arrived (at `ctx.upstreamHeadersAt`) and is on its way to the
 * client: the stream's idle timeout starts (the route's `streamIdleTimeout`, else the
 * listener's), counted from the head's arrival (no clock read of its own).
 */
export function startStreamWatch (call: CallState, ctx: CallContext): void {
  const idleMs = ctx.route?.ir.timeouts?.streamIdleMs ?? ctx.listener.frontend.streamIdleTimeoutMs
  if (idleMs <= 0 || call.streamSweep !== null) return
  const sweep = streamSweeps.get(pollPeriod(idleMs))
  call.streamSweep = sweep
  call.streamIdleMs = idleMs
  call.streamLastProgress = call.progress
  call.streamLastChange = ctx.upstreamHeadersAt
  sweep.add(call)
}

/** The call is over or dropped (a retry): every clock stops and the client-abort hook goes. */
export function releaseCall (call: CallState, ctx: CallContext): void {
  if (call.timer !== undefined) clearTimeout(call.timer)
  stopHeadersWait(call)
  stopBodyWatch(call)
  if (call.streamSweep !== null) {
    call.streamSweep.delete(call)
    call.streamSweep = null
  }
  ctx.abortUpstream = null
}

function stopHeadersWait (call: CallState): void {
  if (call.headersSweep === null) return
  call.headersSweep.delete(call)
  call.headersSweep = null
}

const headerSweeps = new Sweeps<CallState>(checkHeaders, { get: call => call.headersSlot, set: (call, slot) => { call.headersSlot = slot } })
const streamSweeps = new Sweeps<CallState>(checkStream, { get: call => call.streamSlot, set: (call, slot) => { call.streamSlot = slot } })

function checkHeaders (call: CallState, now: number): void {
  // Still receiving the body (its own limits watch it): the wait has not begun.
  if (call.body !== null) call.headersSince = now
  else if (now - call.headersSince >= call.headersLimitMs && call.controller !== null) {
    stopHeadersWait(call)
    onCallTimeout(call, 'PORTICO_BACKEND_TIMEOUT')
  }
}

function watchBody (call: CallState, req: InboundRequest, limits: BodyLimits): void {
  const every = pollPeriod(limits.idleMs)
  const watch = bodyProgress(req, limits, performance.now()) as BodyWatch
  watch.timer = setTimeout(checkBody, every, call, every)
  call.body = watch
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
    // The body is in: the default wait for the answer starts now (within `every`).
    if (call.headersSweep !== null) call.headersSince = performance.now()
    return
  }
  const cut = checkBodyProgress(watch, performance.now())
  if (cut !== null && call.controller !== null) {
    call.body = null
    call.controller.abort(cut)
    return
  }
  watch.timer = setTimeout(checkBody, every, call, every)
}

function checkStream (call: CallState, now: number): void {
  if (call.progress !== call.streamLastProgress) {
    call.streamLastProgress = call.progress
    call.streamLastChange = now
  } else if (now - call.streamLastChange >= call.streamIdleMs && call.controller !== null) {
    call.streamSweep!.delete(call)
    call.streamSweep = null
    call.controller.abort(new PorticoError('PORTICO_STREAM_IDLE_TIMEOUT', `response stream idle timeout: no progress for ${call.streamIdleMs} ms`))
  }
}

function onCallTimeout (call: CallState, code: TimeoutCode): void {
  call.timedOut = PORTICO_ERRORS[code].message
  call.controller?.abort(new PorticoError(code))
}

function abortOnClientClose (call: CallState): () => void {
  return () => { call.controller?.abort(new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'client closed the connection')) }
}
