/**
 * Response interceptors: policies that must see (and may change) a backend's response
 * before the client gets it, asynchronously — external processing sends the response
 * headers, and optionally the whole body, to a service and waits for its answer. A policy
 * registers one per request in its request hook; the backend call then wraps its dispatch
 * handler so the response is held (headers, and the body when an interceptor buffers it)
 * until every interceptor has answered, and the handler gets the changed response.
 *
 * Requests without interceptors pay nothing: the backend call checks one field of the
 * request's state (`responseInterceptors`, null until a policy adds one).
 */

import type { Dispatcher } from 'undici'
import type { ServerResponse } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import { PorticoError, isPorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'

/** The response as interceptors see and change it. */
export interface ResponseDraft {
  status: number
  headers: HeaderMap
  /** The whole body once buffered (or replaced); null while only the headers are known. */
  body: Buffer | null
  /** Whether the backend's response has a body (so far as the headers tell). */
  hasBody: boolean
}

export type InterceptResult =
  | { action: 'continue' }
  /** The draft is the final response (status, headers, body): later interceptors and the backend's body are skipped. */
  | { action: 'respond' }
  /** The interceptor failed and the request must fail: answered with this status and body. */
  | { action: 'fail', status: number, body: string, reason: string, error: string }

export interface ResponseInterceptor {
  /** Called with the response headers; may change the draft (a `body` set here replaces the backend's). */
  onHeaders(draft: ResponseDraft): Promise<InterceptResult>
  /** Whether the whole body must be buffered and passed to `onBody` (asked after onHeaders). */
  wantsBody(): boolean
  /** Largest body buffered for this interceptor. */
  readonly maxBodyBytes: number
  /** Called with the whole body in `draft.body`; may change it. */
  onBody(draft: ResponseDraft): Promise<InterceptResult>
  /** The body is larger than maxBodyBytes: fail, or let the response through unprocessed. */
  onBodyTooLarge(): InterceptResult
}

/** What interception reads of a request's state (request/context.ts RequestContext has it). */
export interface InterceptContext {
  readonly method: string
  readonly res: ServerResponse
  readonly done: boolean
  upstreamHeadersAt: number
  /** The request's response interceptors, in the order their policies ran; null for none. */
  responseInterceptors: ResponseInterceptor[] | null
}

export function addResponseInterceptor (ctx: InterceptContext, interceptor: ResponseInterceptor): void {
  (ctx.responseInterceptors ??= []).push(interceptor)
}

/** What the wrapper needs from the backend call. */
export interface InterceptHooks {
  /** The backend answered: stop the call's timers (the interceptors' time is not the backend's). */
  stopTimers(): void
  /** Answer the client from the proxy (the backend's response is dropped). */
  respondLocal(status: number, body: Buffer | string, reason: string, error: string | null, headers?: HeaderMap): void
}

const NOOP_CONTROLLER = {
  pause () {},
  resume () {},
  abort () {},
  paused: false,
  aborted: false,
  reason: null
} as unknown as Dispatcher.DispatchController

/**
 * The dispatch handler to use for a backend call: `handler` itself when the request has no
 * interceptors, else a wrapper that runs them (innermost phase first) before `handler`
 * sees the response.
 */
export function interceptResponse (ctx: InterceptContext, handler: Dispatcher.DispatchHandler, hooks: InterceptHooks): Dispatcher.DispatchHandler {
  const list = ctx.responseInterceptors
  if (list === null || list.length === 0) return handler
  const ordered = [...list].reverse()
  let mode: 'waiting' | 'buffering' | 'passing' | 'discarding' | 'done' = 'waiting'
  let draft: ResponseDraft | null = null
  let controller: Dispatcher.DispatchController | null = null
  let queued: Buffer[] = []
  let size = 0
  let ended: { trailers: Record<string, string | string[]> | null } | null = null
  let upstreamError: Error | null = null
  let headersAt = 0
  let bodyTakers: ResponseInterceptor[] = []

  const finish = (result: InterceptResult): boolean => {
    if (result.action === 'continue') return false
    mode = 'done'
    if (result.action === 'respond') {
      const d = draft!
      hooks.respondLocal(d.status, d.body ?? Buffer.alloc(0), 'ExtProc', null, d.headers)
    } else {
      hooks.respondLocal(result.status, result.body, result.reason, result.error)
    }
    if (ended === null && upstreamError === null) controller?.abort(new PorticoError('PORTICO_RESPONSE_REPLACED'))
    return true
  }

  /** Hands the (changed) response to the real handler. */
  const deliverHeaders = (c: Dispatcher.DispatchController): void => {
    const d = draft!
    if (d.body !== null) {
      d.headers['content-length'] = String(d.body.length)
      delete d.headers['transfer-encoding']
    }
    handler.onResponseStart?.(c, d.status, d.headers as Record<string, string | string[]>, '')
    ctx.upstreamHeadersAt = headersAt
  }

  const afterHeaders = async (): Promise<void> => {
    for (const i of ordered) {
      const r = await i.onHeaders(draft!)
      if (upstreamError !== null || ctx.done) return
      if (finish(r)) return
    }
    if (draft!.body !== null) {
      // Replaced at the headers: the backend's body is dropped.
      mode = 'discarding'
      deliverHeaders(controller!)
      handler.onResponseData?.(controller!, draft!.body)
      if (ended !== null) handler.onResponseEnd?.(NOOP_CONTROLLER, ended.trailers ?? {})
      controller!.resume()
      return
    }
    bodyTakers = draft!.hasBody ? ordered.filter(i => i.wantsBody()) : []
    if (bodyTakers.length === 0) {
      passThrough()
      return
    }
    mode = 'buffering'
    if (!checkSize()) return
    if (ended !== null) await afterBody()
    else controller!.resume()
  }

  const checkSize = (): boolean => {
    const limit = Math.min(...bodyTakers.map(i => i.maxBodyBytes))
    if (size <= limit) return true
    const over = bodyTakers.find(i => i.maxBodyBytes < size)!
    const r = over.onBodyTooLarge()
    if (finish(r)) return false
    // Let it through unprocessed.
    passThrough()
    return false
  }

  /** From here on the response streams through unchanged: headers, what was queued, the rest. */
  const passThrough = (): void => {
    mode = 'passing'
    deliverHeaders(controller!)
    for (const chunk of queued) handler.onResponseData?.(controller!, chunk)
    queued = []
    if (ended !== null) handler.onResponseEnd?.(controller!, ended.trailers ?? {})
    else controller!.resume()
  }

  const afterBody = async (): Promise<void> => {
    draft!.body = Buffer.concat(queued)
    queued = []
    for (const i of bodyTakers) {
      const r = await i.onBody(draft!)
      if (ctx.done) return
      if (finish(r)) return
    }
    mode = 'done'
    deliverHeaders(NOOP_CONTROLLER)
    handler.onResponseData?.(NOOP_CONTROLLER, draft!.body!)
    handler.onResponseEnd?.(NOOP_CONTROLLER, ended?.trailers ?? {})
  }

  const failed = (err: unknown): void => {
    if (mode === 'done' || ctx.done) return
    finish({ action: 'fail', status: 500, body: 'internal error', reason: 'Internal', error: `response processing failed: ${(err as Error)?.message ?? String(err)}` })
  }

  return {
    onRequestStart (c, context) {
      controller = c
      handler.onRequestStart?.(c, context)
    },
    onRequestUpgrade (c, statusCode, headers, socket) {
      handler.onRequestUpgrade?.(c, statusCode, headers, socket)
    },
    onResponseStart (c, statusCode, headers) {
      controller = c
      hooks.stopTimers()
      headersAt = performance.now()
      const copy: HeaderMap = {}
      for (const [k, v] of Object.entries(headers)) copy[k.toLowerCase()] = v
      const noBody = ctx.method === 'HEAD' || statusCode === 204 || statusCode === 304 || copy['content-length'] === '0'
      draft = { status: statusCode, headers: copy, body: null, hasBody: !noBody }
      c.pause()
      afterHeaders().catch(failed)
    },
    onResponseData (c, chunk) {
      switch (mode) {
        case 'passing':
          handler.onResponseData?.(c, chunk)
          return
        case 'waiting':
        case 'buffering':
          queued.push(Buffer.from(chunk))
          size += chunk.length
          if (mode === 'buffering') checkSize()
          return
        default:
      }
    },
    onResponseEnd (c, trailers) {
      ended = { trailers: trailers as Record<string, string | string[]> }
      switch (mode) {
        case 'passing':
        case 'discarding':
          handler.onResponseEnd?.(c, trailers)
          return
        case 'buffering':
          afterBody().catch(failed)
          return
        default:
      }
    },
    onResponseError (c, err) {
      upstreamError = err
      if (isPorticoError(err, 'PORTICO_RESPONSE_REPLACED')) return
      if (mode === 'done' && ctx.res.headersSent) return
      handler.onResponseError?.(c, err)
    }
  }
}
