/**
 * The request body's clocks, one rule for every reader of a body: the backend call that
 * streams it (http/call-timers.ts) and the policies that read it whole first
 * (http/request-body.ts: retries, extAuthz, extProc, `ai` backends, MCP). A body must not go
 * quiet for `requestBodyIdleTimeout`, and, until the response begins, each such period must
 * bring `requestBodyMinRate` bytes per second: a byte every few seconds is never idle, yet
 * holds a backend connection (or the client's own, and a pending read) as long as the client
 * likes. The route's `policies.timeout` overrides the listener's `timeout.http`
 * (docs/configuration.md#timeouts).
 *
 * Progress is read from the client socket's byte count when the reader polls, a few times
 * per period, instead of hooking every chunk: a body costs one timer, not work per chunk.
 */

import type { InboundRequest } from './inbound.ts'
import type { RouteTimeoutsIR } from '../ir/types.ts'
import { PorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'
import { pollPeriod } from './sweep.ts'

/** What the body's clocks read of a request. */
export interface BodyClockContext {
  readonly listener: { readonly frontend: { readonly requestBodyIdleTimeoutMs: number, readonly requestBodyMinRate: number } }
  readonly route: { readonly ir: { readonly timeouts?: RouteTimeoutsIR } } | null
  /** gRPC streams send when they have something to say: no minimum rate. */
  readonly grpc: object | null
}

/** A body's limits: no byte for `idleMs` (0: no clock), fewer than `minBytes` in one such period. */
export interface BodyLimits {
  idleMs: number
  minBytes: number
}

export function bodyLimits (ctx: BodyClockContext): BodyLimits {
  const timeouts = ctx.route?.ir.timeouts
  const idleMs = timeouts?.requestBodyIdleMs ?? ctx.listener.frontend.requestBodyIdleTimeoutMs
  // gRPC client and bidirectional streams send messages when they have them, as grpc-dotnet
  // exempts them from Kestrel's minimum rate; the idle timeout still applies.
  const minRate = ctx.grpc !== null ? 0 : timeouts?.requestBodyMinRate ?? ctx.listener.frontend.requestBodyMinRate
  return { idleMs, minBytes: Math.ceil(minRate * idleMs / 1000) }
}

/**
 * A body's progress between polls. The idle timeout fires between `idleMs` and 1.25 ×
 * `idleMs` after the last byte; the rate is judged over windows of at least `idleMs`.
 */
export interface BodyProgress {
  readonly req: InboundRequest
  readonly idleMs: number
  /** Bytes each window must bring; 0 once the response began (or no minimum). */
  minBytes: number
  lastBytes: number
  lastChange: number
  windowStart: number
  windowBytes: number
}

export function bodyProgress (req: InboundRequest, limits: BodyLimits, now: number): BodyProgress {
  const bytes = req.socket?.bytesRead ?? 0
  return { req, idleMs: limits.idleMs, minBytes: limits.minBytes, lastBytes: bytes, lastChange: now, windowStart: now, windowBytes: bytes }
}

/**
 * One poll: null while the body keeps its limits, else the PORTICO_REQUEST_BODY_TIMEOUT error
 * to fail its reader with (the client gets 408). Over HTTP/2 the count is the connection's.
 */
export function checkBodyProgress (p: BodyProgress, now: number): PorticoError | null {
  const bytes = p.req.socket?.bytesRead ?? 0
  // Bytes still buffered mean the reader (the backend) is not taking them: that wait is the
  // backend's, bounded by the route's timeouts, not the client's (and the window starts again).
  const readerBehind = p.req.readableLength > 0
  if (bytes !== p.lastBytes || readerBehind) {
    p.lastBytes = bytes
    p.lastChange = now
  } else if (now - p.lastChange >= p.idleMs) {
    return new PorticoError('PORTICO_REQUEST_BODY_TIMEOUT', `request body idle timeout: no bytes from the client for ${p.idleMs} ms`)
  }
  if (readerBehind || p.minBytes === 0) {
    p.windowStart = now
    p.windowBytes = bytes
  } else if (now - p.windowStart >= p.idleMs) {
    const got = bytes - p.windowBytes
    if (got < p.minBytes) return new PorticoError('PORTICO_REQUEST_BODY_TIMEOUT', `request body too slow: ${got} bytes from the client in ${Math.round(now - p.windowStart)} ms, below ${p.minBytes} per ${p.idleMs} ms (requestBodyMinRate)`)
    p.windowStart = now
    p.windowBytes = bytes
  }
  return null
}

/**
 * The clocks for a reader that holds the body itself (http/request-body.ts's two readers):
 * polls a few times per period and calls `onCut` once with the timeout error. Returns the
 * stop function, to call when the read ends either way (nothing to stop without a clock or
 * once the body is in).
 */
export function watchBodyClock (req: InboundRequest, ctx: BodyClockContext, onCut: (cut: PorticoError) => void): () => void {
  const limits = bodyLimits(ctx)
  if (limits.idleMs <= 0 || req.complete) return noClock
  const every = pollPeriod(limits.idleMs)
  const progress = bodyProgress(req, limits, performance.now())
  let timer: NodeJS.Timeout | undefined
  const poll = (): void => {
    const cut = checkBodyProgress(progress, performance.now())
    if (cut !== null) onCut(cut)
    else timer = setTimeout(poll, every)
  }
  timer = setTimeout(poll, every)
  return () => clearTimeout(timer)
}

function noClock (): void {}
