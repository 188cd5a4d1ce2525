/**
 * The backend call: one undici dispatch whose handler streams the response straight into the
 * client's response (backpressure both ways, nothing buffered whole), applies the response
 * policies between the trace's response stages, and turns transport failures into 503/504.
 */

import { Transform, type Readable } from 'node:stream'
import type { Dispatcher } from 'undici'
import type { IncomingMessage } from 'node:http'
import type { RequestContext } from '../pipeline/context.ts'
import type { PipelineRuntime } from '../pipeline/run.ts'
import { applyResponsePolicies, respondLocal } from '../pipeline/respond.ts'
import { responseEndToEnd } from './headers.ts'
import { BodyTap, responseSnapshot } from '../trace/snapshot.ts'
import { PorticoError, isPorticoError } from '../util/errors.ts'
import { completeUpgrade } from './upgrade.ts'
import { interceptResponse } from './response-intercept.ts'
import { endLlmCall, LlmUsageTap } from '../llm/usage.ts'
import { requestHasBody } from './request-body.ts'

/**
 * Wraps one backend call's dispatch handler (retries decide on the raw answer there);
 * `release` stops the call's timers and client-abort hook when the wrapper drops the call.
 */
export type CallWrapper = (handler: Dispatcher.DispatchHandler, release: () => void) => Dispatcher.DispatchHandler

export function callUpstream (rt: PipelineRuntime, ctx: RequestContext, wrap?: CallWrapper): void {
  const backend = ctx.backend!
  const { req, res } = ctx
  const tracer = ctx.tracer
  if (backend.endpoints.length === 0) {
    // A Service with no ready endpoints (scaled to zero, all pods failing readiness).
    respondLocal(rt, ctx, 503, 'no healthy backends', 'NoHealthyBackend', `backend ${backend.name} has no ready endpoints`)
    return
  }
  if (!rt.pools.hasHealthyEndpoint(backend)) {
    // Passive health ejected every endpoint.
    respondLocal(rt, ctx, 503, 'no healthy backends', 'NoHealthyBackend', `every endpoint of backend ${backend.name} is ejected (passive health)`)
    return
  }
  let dispatcher: Dispatcher
  try {
    dispatcher = rt.pools.get(backend)
  } catch (err) {
    respondLocal(rt, ctx, 503, `upstream call failed: ${(err as Error).message}`, 'UpstreamFailure', (err as Error).message)
    return
  }

  let body: Readable | Buffer | null = null
  if (ctx.requestBody !== null) {
    // A policy read the body whole (extAuthz includeRequestBody): send that copy.
    body = ctx.requestBody
    if (tracer !== null && body.length > 0) tracer.emit({ type: 'bodySnapshot', stage: 'final request', body: body.subarray(0, rt.traceBodyLimit).toString('base64'), truncated: body.length > rt.traceBodyLimit })
  } else if (requestHasBody(req.headers)) {
    if (tracer !== null) {
      // Only traced requests pay for the copy: a pass-through that keeps the first bytes.
      const tap = new BodyTap(rt.traceBodyLimit)
      const tee = new Transform({
        transform (chunk: Buffer, _enc, done) {
          tap.push(chunk)
          done(null, chunk)
        },
        flush (done) {
          if (!tap.empty) ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'final request', body: tap.toBase64(), truncated: tap.truncated })
          done()
        }
      })
      req.on('error', err => tee.destroy(err))
      body = req.pipe(tee)
    } else {
      body = req
    }
  }

  ctx.upstreamStart = performance.now()
  const callStartUs = tracer?.now() ?? 0
  tracer?.emit({ type: 'backendCallStart', target: backend.target })

  const timeouts = ctx.route?.ir.timeouts
  let timer: NodeJS.Timeout | undefined
  const call: CallState = { controller: null, timedOut: null, body: null }
  if (timeouts !== undefined) {
    const remainingRequest = timeouts.requestMs === undefined ? Infinity : timeouts.requestMs - (ctx.upstreamStart - ctx.startMono)
    const backendLimit = timeouts.backendRequestMs ?? Infinity
    const wait = Math.max(0, Math.min(remainingRequest, backendLimit))
    if (wait !== Infinity) {
      const which = remainingRequest <= backendLimit ? 'request timeout' : 'upstream call timeout'
      timer = setTimeout(onCallTimeout, wait, call, which)
    }
  }
  ctx.abortUpstream = abortOnClientClose(call)
  const idleMs = ctx.listener.frontend.requestBodyIdleTimeoutMs
  if (body !== null && !Buffer.isBuffer(body) && idleMs > 0 && !req.complete) watchBody(call, req, idleMs)

  let responseTap: BodyTap | null = null
  /** ai backends: reads the token usage out of the answer. */
  let usageTap: LlmUsageTap | null = null
  let waitingForDrain = false

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart (c) {
      call.controller = c
    },
    onRequestUpgrade (_c, statusCode, headers, upstreamSocket) {
      if (timer !== undefined) clearTimeout(timer)
      stopBodyWatch(call)
      ctx.abortUpstream = null
      ctx.upstreamHeadersAt = performance.now()
      ctx.reason = 'Upstream'
      ctx.tracer?.emit({ type: 'backendCallResult', status: statusCode, error: null }, { eventStart: callStartUs })
      ctx.responseHeaders = headers
      ctx.status = statusCode
      ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'raw response', requestState: responseSnapshot(ctx, rt.env, true) })
      ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'final response', requestState: responseSnapshot(ctx, rt.env, false) })
      completeUpgrade(ctx, statusCode, headers, upstreamSocket)
    },
    onResponseStart (c, statusCode, headers) {
      if (timer !== undefined) clearTimeout(timer)
      ctx.upstreamHeadersAt = performance.now()
      ctx.status = statusCode
      ctx.reason = 'Upstream'
      ctx.responseHeaders = responseEndToEnd(headers)
      if (ctx.tracer !== null) {
        ctx.tracer.emit({ type: 'backendCallResult', status: statusCode, error: null }, { eventStart: callStartUs, severity: statusCode >= 500 ? 'error' : statusCode >= 400 ? 'warn' : 'info' })
        ctx.tracer.emit({ type: 'responseSnapshot', stage: 'raw response', requestState: responseSnapshot(ctx, rt.env, true) })
      }
      applyResponsePolicies(ctx, 'backend')
      ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'backend response ready', requestState: responseSnapshot(ctx, rt.env, false) })
      applyResponsePolicies(ctx, 'outer')
      ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'final response', requestState: responseSnapshot(ctx, rt.env, false) })
      if (res.destroyed) {
        c.abort(new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'client closed the connection'))
        return
      }
      try {
        res.writeHead(statusCode, ctx.responseHeaders as Record<string, string | string[]>)
      } catch (err) {
        ctx.error = `invalid response header from backend: ${(err as Error).message}`
        c.abort(err as Error)
        return
      }
      // Server-sent events and other streams must reach the client as they are produced.
      if (isStreaming(ctx.responseHeaders['content-type'])) res.flushHeaders()
      if (ctx.tracer !== null) responseTap = new BodyTap(rt.traceBodyLimit)
      if (ctx.llm !== null) usageTap = new LlmUsageTap(ctx.responseHeaders['content-type'])
      // A response policy replaced the body (transformation): the backend's is discarded.
      if (ctx.responseBody !== null) responseTap?.push(ctx.responseBody)
    },
    onResponseData (c, chunk) {
      usageTap?.push(chunk)
      if (ctx.responseBody !== null) return
      responseTap?.push(chunk)
      if (!res.write(chunk) && !waitingForDrain) {
        waitingForDrain = true
        c.pause()
        res.once('drain', () => {
          waitingForDrain = false
          c.resume()
        })
      }
    },
    onResponseEnd (_c, trailers) {
      ctx.abortUpstream = null
      stopBodyWatch(call)
      if (usageTap !== null) endLlmCall(ctx, usageTap)
      if (ctx.responseBody !== null) {
        if (responseTap !== null && !responseTap.empty) ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'response', body: responseTap.toBase64(), truncated: responseTap.truncated })
        res.end(ctx.responseBody)
        return
      }
      if (trailers !== null && typeof trailers === 'object' && Object.keys(trailers).length > 0 && res.chunkedEncoding) {
        res.addTrailers(trailers as Record<string, string>)
      }
      if (responseTap !== null && !responseTap.empty) {
        ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'response', body: responseTap.toBase64(), truncated: responseTap.truncated })
      }
      res.end()
    },
    onResponseError (_c, err) {
      if (timer !== undefined) clearTimeout(timer)
      stopBodyWatch(call)
      ctx.abortUpstream = null
      // A stream cut short still spent the tokens it reported so far.
      if (usageTap !== null) endLlmCall(ctx, usageTap)
      if (ctx.done || isPorticoError(err, 'PORTICO_DOWNSTREAM_CLOSED')) return
      const failure = classifyFailure(err, call.timedOut)
      ctx.error = failure.detail
      if (!res.headersSent) {
        ctx.tracer?.emit({ type: 'backendCallResult', status: null, error: failure.detail }, { eventStart: callStartUs, severity: 'error' })
        // The rest of a request body that was cut off cannot be read: the connection ends.
        respondLocal(rt, ctx, failure.status, failure.body, failure.reason, failure.detail, failure.status === 408 || failure.status === 400 ? CLOSE : undefined)
      } else {
        // Headers are out: the only honest signal left is to cut the connection.
        ctx.reason = failure.reason
        res.destroy(err)
      }
    }
  }

  // Response interceptors (extProc) see the response first; a retry wrapper sees the raw answer.
  let dispatched = interceptResponse(ctx, handler, {
    stopTimers: () => { if (timer !== undefined) clearTimeout(timer) },
    respondLocal: (status, payload, reason, error, headers) => {
      if (Buffer.isBuffer(payload)) ctx.responseBody = payload
      respondLocal(rt, ctx, status, Buffer.isBuffer(payload) ? '' : payload, reason, error, headers)
    }
  })
  if (wrap !== undefined) {
    dispatched = wrap(dispatched, () => {
      if (timer !== undefined) clearTimeout(timer)
      stopBodyWatch(call)
      ctx.abortUpstream = null
    })
  }
  try {
    dispatcher.dispatch({
      path: ctx.pathAndQuery,
      method: ctx.method as Dispatcher.HttpMethod,
      headers: ctx.headers as Record<string, string | string[]>,
      body: body as Dispatcher.DispatchOptions['body'],
      upgrade: ctx.upgrade !== null ? (firstValue(req.headers.upgrade) ?? 'websocket') : null
    }, dispatched)
  } catch (err) {
    dispatched.onResponseError!(call.controller as unknown as Dispatcher.DispatchController, err as Error)
  }
}

/**
 * What the abort paths (timeout, client gone) need from a backend call. Their functions are
 * made outside callUpstream on purpose: with an abort closure over callUpstream's whole scope
 * (request, response, handler) made per request, V8's young-generation GC kept promoting
 * every request's objects, and scavenges took 5-10 ms instead of under 1 ms (measured with
 * bench/http-proxy.ts at 1,000 requests/s).
 */
interface CallState {
  controller: Dispatcher.DispatchController | null
  /** Which timeout fired, if one did. */
  timedOut: string | null
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

const CLOSE = { connection: 'close' }

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

function firstValue (v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v
}

function isStreaming (contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && contentType.startsWith('text/event-stream')
}

interface Failure {
  status: number
  reason: 'Timeout' | 'UpstreamFailure' | 'InvalidRequest' | 'DownstreamClosed'
  body: string
  detail: string
}

/** Maps a transport error to the answer the client gets. */
export function classifyFailure (err: Error, timedOut: string | null): Failure {
  const code = (err as NodeJS.ErrnoException).code ?? ''
  const detail = code !== '' ? `${code}: ${err.message}` : err.message
  if (timedOut !== null) return { status: 504, reason: 'Timeout', body: timedOut, detail: timedOut }
  // The client stopped sending its body (http/frontend.ts: requestBodyIdleTimeout).
  if (isPorticoError(err, 'PORTICO_REQUEST_BODY_TIMEOUT')) return { status: 408, reason: 'Timeout', body: 'request body timeout', detail: err.message }
  // Node's parser refused the rest of the request (a bad chunk size, say).
  if (code.startsWith('HPE_')) return { status: 400, reason: 'InvalidRequest', body: 'bad request', detail }
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { status: 504, reason: 'Timeout', body: 'upstream call timeout', detail }
    case 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH':
      return { status: 400, reason: 'InvalidRequest', body: 'invalid request: body does not match content-length', detail }
    case 'ECONNABORTED':
    case 'ERR_STREAM_PREMATURE_CLOSE':
      return { status: 400, reason: 'DownstreamClosed', body: 'request body incomplete', detail }
    default:
      if (TLS_FAILURE.test(code)) {
        // Certificate verification, name mismatch or a refused handshake (backendTLS).
        const message = err.message.replace(/; if the root CA is installed locally.*$/, '')
        return { status: 503, reason: 'UpstreamFailure', body: `upstream TLS failed: ${message}`, detail: `${code}: ${message}` }
      }
      return { status: 503, reason: 'UpstreamFailure', body: `upstream call failed: ${err.message}`, detail }
  }
}

/** Error codes of a failed TLS handshake with a backend (OpenSSL verification codes, Node's TLS errors). */
const TLS_FAILURE = /^(ERR_SSL_|ERR_TLS_)|CERT|SELF_SIGNED|^UNABLE_TO_/
