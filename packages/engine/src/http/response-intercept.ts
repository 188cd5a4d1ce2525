/**
 * Response interceptors: policies that must see (and may change) an answer before the
 * client gets it, asynchronously -- external processing sends the response headers, and
 * optionally the whole body, to a service and waits for its answer. A policy registers one
 * per request in its request hook; every answer then goes through them once, whoever made
 * it (as Envoy runs ext_proc's response phase on local replies too, and agentgateway its
 * response policies on every answer):
 *
 *   a backend's answer      the backend call wraps its dispatch handler (interceptResponse):
 *                           the response is held (headers, and the body when an
 *                           interceptor buffers it) until every interceptor has answered;
 *                           interceptors that stream the body (extProc's streamed modes)
 *                           get it chunk by chunk instead, the backend paused meanwhile
 *                           (and, while it is idle, pass on what their service answered
 *                           meanwhile: answersReady / onAnswers)
 *   a whole answer          the proxy's own (directResponse, redirects, errors) and the MCP
 *                           layer's JSON answers: interceptAnswer, the body known up front
 *   a streamed answer       an MCP SSE stream: interceptAnswer on its head; its body cannot
 *                           be held (config/to-ir.ts refuses a body mode on MCP routes)
 *
 * The interceptors run in one order (innermost phase first) by the same steps
 * (runHeaders, runBody) for all three. An answer takes them (takeInterceptors): a later
 * answer of the same request -- their own failure, a backend body that broke after the
 * head -- does not run them again.
 *
 * Requests without interceptors pay nothing: each answer checks one field of the
 * request's state (`responseInterceptors`, null until a policy adds one).
 */

import type { Dispatcher } from 'undici'
import type { InboundResponse } from './inbound.ts'
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
  /**
   * Whether a backend's body goes through `onChunk` as it streams instead of being held whole
   * (asked with wantsBody; an answer the proxy makes whole still goes to onBody). Only when
   * every body taker of the answer streams: one that wants the body whole holds it for all.
   */
  streamsBody?(): boolean
  /**
   * One chunk of the backend's body (`end`: the body ended; `chunk` is then empty or what an
   * earlier taker gave at the end). Resolves with the bytes to pass on (possibly none, or
   * more than one chunk's worth), or ends the answer: before the first byte reached the
   * client it is replaced (`respond`: the draft; `fail`), after it the client's response is
   * cut (headers sent cannot be taken back).
   */
  onChunk?(draft: ResponseDraft, chunk: Buffer, end: boolean): Promise<ChunkResult>
  /**
   * While the backend's body is idle (every chunk so far through, the end not yet come): a
   * promise that resolves when this taker may have bytes to pass on without a new chunk (a
   * full-duplex processor answered a chunk after it went out); null when it never will.
   */
  answersReady?(): Promise<void> | null
  /**
   * After answersReady resolved: the bytes to pass on (possibly none), taken without a new
   * chunk; they then go through the later takers' onChunk as a chunk. Or it ends the answer,
   * as onChunk does.
   */
  onAnswers?(draft: ResponseDraft): Promise<ChunkResult>
}

export type ChunkResult = { action: 'data', data: Buffer } | Exclude<InterceptResult, { action: 'continue' }>

/** What interception reads of a request's state (request/context.ts RequestContext has it). */
export interface InterceptContext {
  readonly method: string
  readonly res: InboundResponse
  readonly done: boolean
  upstreamHeadersAt: number
  /** The request's response interceptors, in the order their policies ran; null for none. */
  responseInterceptors: ResponseInterceptor[] | null
  /** The backend (an h2 or h2c one is never paused while its body streams: see pump). */
  readonly backend?: { readonly h2c?: boolean, readonly h2?: boolean } | null
  /** Set for a gRPC request (its backend call is HTTP/2). */
  readonly grpc?: object | null
}

export function addResponseInterceptor (ctx: InterceptContext, interceptor: ResponseInterceptor): void {
  (ctx.responseInterceptors ??= []).push(interceptor)
}

/**
 * The request's interceptors for the answer about to go out, innermost phase first (the
 * backend's, then the route's, then the gateway's); null for none. Taken once: the request
 * has none afterwards, so an answer made while or after they ran does not run them again.
 */
export function takeInterceptors (ctx: InterceptContext): ResponseInterceptor[] | null {
  const list = ctx.responseInterceptors
  ctx.responseInterceptors = null
  return list === null || list.length === 0 ? null : [...list].reverse()
}

/** The client left (or the answer failed) while an interceptor ran: stop. */
type Stopped = 'stopped'

/** Each interceptor's header step in turn; the first result that ends the answer, else continue. */
async function runHeaders (ordered: ResponseInterceptor[], draft: ResponseDraft, going: () => boolean): Promise<InterceptResult | Stopped> {
  for (const i of ordered) {
    const r = await i.onHeaders(draft)
    if (!going()) return 'stopped'
    if (r.action !== 'continue') return r
  }
  return CONTINUE
}

/** The interceptors that want the whole body, after the header step. */
function bodyTakersOf (ordered: ResponseInterceptor[], draft: ResponseDraft): ResponseInterceptor[] {
  return draft.hasBody ? ordered.filter(i => i.wantsBody()) : []
}

/** The first body taker whose limit `size` is over; null when it fits them all. */
function overLimit (takers: ResponseInterceptor[], size: number): ResponseInterceptor | null {
  return takers.find(i => i.maxBodyBytes < size) ?? null
}

/** Each body taker's body step in turn, with the whole body in `draft.body`. */
async function runBody (takers: ResponseInterceptor[], draft: ResponseDraft, going: () => boolean): Promise<InterceptResult | Stopped> {
  for (const i of takers) {
    const r = await i.onBody(draft)
    if (!going()) return 'stopped'
    if (r.action !== 'continue') return r
  }
  return CONTINUE
}

const CONTINUE: InterceptResult = { action: 'continue' }

/** An answer as the interceptors left it. `body` null: its own body; `reason`/`error` null: its own. */
export interface InterceptedAnswer {
  status: number
  headers: HeaderMap
  body: Buffer | null
  reason: string | null
  error: string | null
}

/**
 * The interceptors over an answer the proxy makes (a local answer, an MCP answer): its body
 * known whole (`body`), or streaming and never held (`'stream'`: only the header step
 * applies; an interceptor that wants the body fails the answer -- the config loader refuses
 * that combination, so this is never silent). Resolves with the answer to send -- the draft
 * as they changed it, their immediate response, or their failure (a 500) -- or null when
 * the client left (or another answer went out) meanwhile.
 */
export async function interceptAnswer (ctx: InterceptContext, ordered: ResponseInterceptor[], draft: ResponseDraft, body: Buffer | 'stream'): Promise<InterceptedAnswer | null> {
  let result: InterceptResult | Stopped
  try {
    result = await runAll(ctx, ordered, draft, body)
  } catch (err) {
    result = { action: 'fail', status: 500, body: 'internal error', reason: 'Internal', error: `response processing failed: ${(err as Error)?.message ?? String(err)}` }
  }
  if (result === 'stopped' || ctx.done || ctx.res.headersSent || ctx.res.destroyed) return null
  if (result.action === 'fail') return { status: result.status, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: Buffer.from(result.body), reason: result.reason, error: result.error }
  return { status: draft.status, headers: draft.headers, body: draft.body, reason: result.action === 'respond' ? 'ExtProc' : null, error: null }
}

/** The header step, then the body step when an interceptor wants the body. */
async function runAll (ctx: InterceptContext, ordered: ResponseInterceptor[], draft: ResponseDraft, body: Buffer | 'stream'): Promise<InterceptResult | Stopped> {
  const going = () => !ctx.done
  const head = await runHeaders(ordered, draft, going)
  // Ended, or a body given at the headers (it replaces the answer's).
  if (head !== CONTINUE || draft.body !== null) return head
  const takers = bodyTakersOf(ordered, draft)
  if (takers.length === 0) return CONTINUE
  if (body === 'stream') {
    return { action: 'fail', status: 500, body: 'internal error', reason: 'Internal', error: 'a response policy wants the body of a streamed answer, which cannot be held' }
  }
  // Too large for one: it fails the answer, or lets it through unprocessed.
  const over = overLimit(takers, body.length)
  if (over !== null) return over.onBodyTooLarge()
  draft.body = body
  return await runBody(takers, draft, going)
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
 * interceptors, else a wrapper that runs them (innermost phase first) on the answer that
 * reaches it before `handler` sees the response. A retried call is wrapped per attempt; the
 * attempt whose answer arrives first past the retries takes the interceptors.
 */
export function interceptResponse (ctx: InterceptContext, handler: Dispatcher.DispatchHandler, hooks: InterceptHooks): Dispatcher.DispatchHandler {
  if (ctx.responseInterceptors === null || ctx.responseInterceptors.length === 0) return handler
  let ordered: ResponseInterceptor[] = []
  let mode: 'waiting' | 'buffering' | 'streaming' | 'passing' | 'discarding' | 'done' = 'waiting'
  let draft: ResponseDraft | null = null
  let controller: Dispatcher.DispatchController | null = null
  let queued: Buffer[] = []
  let size = 0
  let ended: { trailers: Record<string, string | string[]> | null } | null = null
  let upstreamError: Error | null = null
  let headersAt = 0
  let bodyTakers: ResponseInterceptor[] = []
  const going = (): boolean => upstreamError === null && !ctx.done

  const finish = (result: InterceptResult | Stopped): boolean => {
    if (result === 'stopped') return true
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
    if (finish(await runHeaders(ordered, draft!, going))) return
    if (draft!.body !== null) {
      // Replaced at the headers: the backend's body is dropped.
      mode = 'discarding'
      deliverHeaders(controller!)
      handler.onResponseData?.(controller!, draft!.body)
      if (ended !== null) handler.onResponseEnd?.(NOOP_CONTROLLER, ended.trailers ?? {})
      controller!.resume()
      return
    }
    bodyTakers = bodyTakersOf(ordered, draft!)
    if (bodyTakers.length === 0) {
      passThrough()
      return
    }
    if (bodyTakers.every(i => i.streamsBody?.() === true && i.onChunk !== undefined)) {
      // Chunk by chunk: the length may change, so the answer goes out without content-length.
      mode = 'streaming'
      // undici's HTTP/2 client drops what arrives while a stream is paused (http/client-response.ts):
      // such a body is never paused; what waits for the takers is bounded by their limit instead.
      mayPause = !(ctx.backend?.h2c === true || ctx.backend?.h2 === true || (ctx.grpc ?? null) !== null)
      waitLimit = Math.min(...bodyTakers.map(i => i.maxBodyBytes))
      waiting = queued.reduce((n, c) => n + c.length, 0)
      delete draft!.headers['content-length']
      void pump()
      return
    }
    mode = 'buffering'
    if (!checkSize()) return
    if (ended !== null) await afterBody()
    else controller!.resume()
  }

  const checkSize = (): boolean => {
    const over = overLimit(bodyTakers, size)
    if (over === null) return true
    if (finish(over.onBodyTooLarge())) return false
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

  /** Headers go out before the first byte a streaming taker passes on (its headers answer applied by then). */
  let headersDelivered = false
  let pumping = false
  let mayPause = true
  let waitLimit = Infinity
  let waiting = 0
  /** Takers whose answersReady resolved (their bytes go out before the next chunk), and the ones watched now. */
  const answered = new Set<ResponseInterceptor>()
  const watched = new Set<ResponseInterceptor>()
  /** While the body is idle, each taker with answers to come is watched (once): its answers wake the pump. */
  const watchAnswers = (): void => {
    for (const i of bodyTakers) {
      if (watched.has(i) || i.onAnswers === undefined) continue
      const ready = i.answersReady?.() ?? null
      if (ready === null) continue
      watched.add(i)
      ready.then(() => {
        watched.delete(i)
        answered.add(i)
        void pump().catch(failed)
      }, failed)
    }
  }
  /** What a taker passes on, or null when the pump must stop (the exchange ended meanwhile, or the taker ended the answer). */
  const dataOf = (r: ChunkResult): Buffer | null => {
    if (!going()) {
      mode = 'done'
      return null
    }
    if (r.action !== 'data') {
      streamFailed(r)
      return null
    }
    return r.data
  }
  /**
   * The streaming body: each queued chunk through every taker in order (the backend paused
   * meanwhile, so at most the chunks already in flight wait here), then the end. While the
   * backend is idle, what a taker's processor answers meanwhile goes on at once (onAnswers),
   * through the takers after it.
   */
  const pump = async (): Promise<void> => {
    if (pumping) return
    pumping = true
    try {
      while (mode === 'streaming') {
        const from = bodyTakers.findIndex(i => answered.has(i))
        let chunk: Buffer | undefined
        let data: Buffer
        let end = false
        let next = 0
        if (from >= 0) {
          // A processor answered while the backend was idle: its bytes first.
          const taker = bodyTakers[from]!
          answered.delete(taker)
          const taken = dataOf(await taker.onAnswers!(draft!))
          if (taken === null) return
          data = taken
          next = from + 1
          if (data.length === 0) continue
        } else {
          chunk = queued.shift()
          if (chunk !== undefined) waiting -= chunk.length
          end = chunk === undefined && ended !== null
          if (chunk === undefined && !end) {
            controller!.resume()
            // resume() may hand over data or the end at once (while this pump still runs).
            if (queued.length > 0 || ended !== null) continue
            watchAnswers()
            return
          }
          if (mayPause) controller!.pause()
          data = chunk ?? Buffer.alloc(0)
        }
        for (const i of bodyTakers.slice(next)) {
          const taken = dataOf(await i.onChunk!(draft!, data, end))
          if (taken === null) return
          data = taken
        }
        if (!headersDelivered && (data.length > 0 || end)) {
          headersDelivered = true
          deliverHeaders(controller!)
        }
        if (data.length > 0) handler.onResponseData?.(controller!, data)
        if (end) {
          mode = 'done'
          handler.onResponseEnd?.(NOOP_CONTROLLER, ended?.trailers ?? {})
          return
        }
      }
    } finally {
      pumping = false
    }
  }

  /** A streaming taker ended the answer: replaced while nothing went out, else the client's response is cut. */
  const streamFailed = (r: Exclude<InterceptResult, { action: 'continue' }>): void => {
    if (!headersDelivered) {
      finish(r)
      return
    }
    mode = 'done'
    if (ended === null && upstreamError === null) controller?.abort(new PorticoError('PORTICO_RESPONSE_REPLACED'))
    handler.onResponseError?.(NOOP_CONTROLLER, new PorticoError('PORTICO_RESPONSE_REPLACED', r.action === 'fail' ? r.error : 'the response was replaced after it began'))
  }

  const afterBody = async (): Promise<void> => {
    draft!.body = Buffer.concat(queued)
    queued = []
    if (finish(await runBody(bodyTakers, draft!, () => !ctx.done))) return
    mode = 'done'
    deliverHeaders(NOOP_CONTROLLER)
    handler.onResponseData?.(NOOP_CONTROLLER, draft!.body!)
    handler.onResponseEnd?.(NOOP_CONTROLLER, ended?.trailers ?? {})
  }

  const failed = (err: unknown): void => {
    if (mode === 'done' || ctx.done) return
    const r = { action: 'fail', status: 500, body: 'internal error', reason: 'Internal', error: `response processing failed: ${(err as Error)?.message ?? String(err)}` } as const
    if (mode === 'streaming') streamFailed(r)
    else finish(r)
  }

  return {
    onRequestStart (c, context) {
      controller = c
      handler.onRequestStart?.(c, context)
    },
    onRequestUpgrade (c, statusCode, headers, socket) {
      handler.onRequestUpgrade?.(c, statusCode, headers, socket)
    },
    onResponseStart (c, statusCode, headers, statusMessage) {
      controller = c
      const taken = takeInterceptors(ctx)
      if (taken === null) {
        // Another answer took them already: this one goes through as it is.
        mode = 'passing'
        return handler.onResponseStart?.(c, statusCode, headers, statusMessage)
      }
      ordered = taken
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
        case 'streaming':
          queued.push(Buffer.from(chunk))
          waiting += chunk.length
          if (mayPause) c.pause()
          else if (waiting > waitLimit) {
            streamFailed({ action: 'fail', status: 502, body: 'bad gateway', reason: 'UpstreamFailure', error: `more than ${waitLimit} bytes of the backend's answer waiting for the response policies` })
            return
          }
          void pump().catch(failed)
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
        case 'streaming':
          void pump().catch(failed)
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
