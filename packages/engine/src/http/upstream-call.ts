/**
 * The backend call: one undici dispatch, its handler composed as undici composes its own --
 * a base handler that streams the answer into the client's response
 * (http/client-response.ts), wrapped by optional handlers only when the request needs them:
 *
 *   retries (the pipeline's `outer`)        see the raw answer first, may drop it
 *   response interceptors (extProc)         hold the answer until their services reply
 *   the pipeline's `inner` (LLM usage)      read the answer as it streams past
 *   trace body capture (traced requests)    keep the first bytes of the body
 *   ClientResponse                          response policies via hooks, head, body, failures
 *
 * A plain proxied request pays for the base handler and the call's clocks only.
 */

import type { Dispatcher } from 'undici'
import { Transform, type Readable } from 'node:stream'
import type { UpstreamPools } from './upstream-pools.ts'
import type { UpstreamCaller } from './dispatcher.ts'
import type { CallContext, UpstreamHooks } from './call-context.ts'
import { Base64Stream } from './grpc.ts'
import { ClientResponse } from './client-response.ts'
import { releaseCall, startCallTimers, stopCallTimer } from './call-timers.ts'
import { tracedRequestBody, TraceResponseBody } from './trace-bodies.ts'
import { interceptResponse } from './response-intercept.ts'
import { requestHasBody } from './request-body.ts'
import { traceCallStart } from '../trace/backend-call.ts'
import { performance } from '../util/clock.ts'

/** What the backend call needs of the runtime that runs it. */
export interface UpstreamRuntime {
  pools: UpstreamPools
  /** Cap on bytes captured per body snapshot. */
  traceBodyLimit: number
}

/**
 * Wraps one backend call's dispatch handler (retries decide on the raw answer there);
 * `release` stops the call's timers and client-abort hook when the wrapper drops the call.
 */
export type CallWrapper = (handler: Dispatcher.DispatchHandler, release: () => void) => Dispatcher.DispatchHandler

export interface CallOptions<C> {
  /** Wraps the handler that answers the client, inside the interceptors (an `ai` backend's usage reader). */
  inner?: (handler: Dispatcher.DispatchHandler, ctx: C) => Dispatcher.DispatchHandler
  /** Wraps the whole call: sees the raw answer before anything else (retries). */
  outer?: CallWrapper
}

export function callUpstream<R extends UpstreamRuntime, C extends CallContext> (rt: R, ctx: C, hooks: UpstreamHooks<R, C>, options?: CallOptions<C>): void {
  const dispatcher = pickDispatcher(rt, ctx, hooks)
  if (dispatcher === null) return
  const body = bodyToSend(rt, ctx)
  ctx.upstreamStart = performance.now()
  traceCallStart(ctx, ctx.backend!.target, ctx.backend!.endpoints)
  const call = startCallTimers(ctx, body !== null && !Buffer.isBuffer(body))

  let handler: Dispatcher.DispatchHandler = new ClientResponse(rt, ctx, call, hooks)
  if (ctx.tracer !== null) handler = new TraceResponseBody(handler, ctx, rt.traceBodyLimit)
  if (options?.inner !== undefined) handler = options.inner(handler, ctx)
  if (ctx.responseInterceptors !== null) {
    handler = interceptResponse(ctx, handler, {
      stopTimers: () => stopCallTimer(call),
      respondLocal: (status, payload, reason, error, headers) => {
        if (Buffer.isBuffer(payload)) ctx.responseBody = payload
        hooks.respondLocal(rt, ctx, status, Buffer.isBuffer(payload) ? '' : payload, reason, error, headers)
      }
    })
  }
  if (options?.outer !== undefined) handler = options.outer(handler, () => releaseCall(call, ctx))
  try {
    dispatcher.dispatch({
      path: ctx.pathAndQuery,
      method: ctx.method as Dispatcher.HttpMethod,
      headers: ctx.headers as Record<string, string | string[]>,
      body: body as Dispatcher.DispatchOptions['body'],
      upgrade: ctx.upgrade !== null ? (firstValue(ctx.req.headers.upgrade) ?? 'websocket') : null
    }, handler)
  } catch (err) {
    handler.onResponseError!(call.controller as unknown as Dispatcher.DispatchController, err as Error)
  }
}

/** The backend's connection pool, or null after answering 503 (no endpoint to call). */
function pickDispatcher<R extends UpstreamRuntime, C extends CallContext> (rt: R, ctx: C, hooks: UpstreamHooks<R, C>): UpstreamCaller | null {
  const backend = ctx.backend!
  if (backend.endpoints.length === 0) {
    // A Service with no ready endpoints (scaled to zero, all pods failing readiness).
    hooks.respondLocal(rt, ctx, 503, 'no healthy backends', 'NoHealthyBackend', `backend ${backend.name} has no ready endpoints`)
    return null
  }
  if (!rt.pools.hasHealthyEndpoint(backend)) {
    // Passive health ejected every endpoint.
    hooks.respondLocal(rt, ctx, 503, 'no healthy backends', 'NoHealthyBackend', `every endpoint of backend ${backend.name} is ejected (passive health)`)
    return null
  }
  try {
    return rt.pools.get(backend, ctx.grpc !== null)
  } catch (err) {
    hooks.respondLocal(rt, ctx, 503, `upstream call failed: ${(err as Error).message}`, 'UpstreamFailure', (err as Error).message)
    return null
  }
}

/** The body to send: the copy a policy read whole, the request stream (traced: through a tap), or none. */
function bodyToSend (rt: UpstreamRuntime, ctx: CallContext): Readable | Buffer | null {
  const body = plainBody(rt, ctx)
  // grpc-web-text: the client's base64 becomes the gRPC bytes the backend expects.
  if (body === null || ctx.grpc?.text !== true) return body
  const b64 = new Base64Stream()
  if (Buffer.isBuffer(body)) return b64.decode(body)
  return body.pipe(new Transform({ transform: (chunk: Buffer, _e, done) => done(null, b64.decode(chunk)) }))
}

function plainBody (rt: UpstreamRuntime, ctx: CallContext): Readable | Buffer | null {
  const tracer = ctx.tracer
  if (ctx.requestBody !== null) {
    const body = ctx.requestBody
    if (tracer !== null && body.length > 0) tracer.emit({ type: 'bodySnapshot', stage: 'final request', body: body.subarray(0, rt.traceBodyLimit).toString('base64'), truncated: body.length > rt.traceBodyLimit })
    return body
  }
  if (!requestHasBody(ctx.req.headers)) return null
  return tracer !== null ? tracedRequestBody(ctx, ctx.req, rt.traceBodyLimit) : ctx.req
}

function firstValue (v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v
}
