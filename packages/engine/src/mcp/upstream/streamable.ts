/**
 * The client side of the streamable HTTP transport, for Portico's upstream MCP sessions,
 * on Portico's HTTP/1.1 keep-alive pool (http-shared.ts): POST per message (JSON or SSE answers), a GET stream for
 * server-initiated messages (reopened with Last-Event-ID if it drops), DELETE to end the
 * session. It implements UpstreamTransport (transport.ts, the SDK's Transport and more), like the SDK's own client transport,
 * which it replaces on the hot path because that one goes through fetch and web streams for
 * every message — most of the gateway's added latency per call in the MCP benchmark.
 *
 * What the target sends is capped (`maxMessageBytes`: a JSON body, or one SSE event): past
 * it that answer is dropped and its request fails through `onrequestfailed`, as it does
 * when its stream breaks. A request the target connection gives up on (its timeout) is
 * aborted with `abandon`, so an upstream that never answers holds no pooled connection.
 *
 * Resumability (streamable HTTP, 2025-11-25): a server may answer a POST with an SSE stream
 * that only primes an event id (and maybe `retry`) and then closes it — SSE polling. The
 * answer then comes on a GET with `Last-Event-ID`, after `retry` ms; that GET is made with
 * the request's own abort signal, so the target's requestTimeout bounds the whole exchange.
 * A stream that ends with no answer and no event id to resume from fails its request.
 */

import type { RelatedInfo, UpstreamTransport } from './transport.ts'
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js'
import { httpStatusError, readJsonAnswer, readSse, requestTarget, startRequest, upstreamPool, type TargetAnswer } from './http-shared.ts'
import type { H1Pool } from '../../http/h1-pool.ts'
import { PorticoError } from '../../util/errors.ts'

/** Waits `ms`, or rejects when `signal` aborts (the request was given up on). */
function sleep (ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason as Error)
  if (ms <= 0) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason as Error)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/**
 * One request's exchange with the target, to abort when it is abandoned, times out or the
 * transport closes: its POST's answer, and the signal of what follows when its SSE stream
 * must be resumed (the GETs and the waits between them), made only then — a call answered
 * with JSON never makes an AbortController or adds a listener.
 */
class Exchange {
  answer: TargetAnswer | null = null
  reason: Error | null = null
  private controller: AbortController | null = null

  get aborted (): boolean {
    return this.reason !== null
  }

  get signal (): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController()
      if (this.reason !== null) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }

  abort (reason: Error = new DOMException('This operation was aborted', 'AbortError')): void {
    if (this.reason !== null) return
    this.reason = reason
    this.answer?.destroy(reason)
    this.controller?.abort(reason)
  }
}

export interface HttpClientTransportOptions {
  /** Resume an existing upstream session. */
  sessionId?: string
  /** Largest JSON body or SSE event accepted from the server (default 4 MiB). */
  maxMessageBytes?: number
  /**
   * Bounds the exchanges no request timer covers: notification and response POSTs, DELETE
   * (the target's requestTimeout; default 60 s). Requests are timed by their caller.
   */
  requestTimeoutMs?: number
}

/** What one SSE body brought: the last event id and retry it named, and whether the awaited answer came. */
interface SseOutcome {
  lastEventId: string | undefined
  retryMs: number | undefined
  answered: boolean
}

type RequestId = string | number

const GET_RETRY_MS = 1000
/** Reopening a GET stream that keeps failing backs off up to this. */
const GET_RETRY_MAX_MS = 30_000
/** A resumed POST stream that brings nothing new is retried no faster than this, doubling. */
const RESUME_BACKOFF_START_MS = 100
const RESUME_BACKOFF_MAX_MS = 5_000
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000
const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

export class StreamableHttpClientTransport implements UpstreamTransport {
  readonly kind = 'streamable' as const
  onclose?: () => void
  onerror?: (error: Error) => void
  /**
   * `extra` carries `relatedRequestId` (RelatedInfo): the request whose POST stream carried
   * the message. (Typed as the SDK's MessageExtraInfo, which Transport requires.)
   */
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void
  /** A request whose answer will not come: its stream broke, or the answer was too large. */
  onrequestfailed?: (id: RequestId, error: Error) => void
  sessionId?: string
  private protocolVersion: string | undefined
  private readonly url: URL
  private readonly pool: H1Pool
  private closed = false
  private getAbort: AbortController | null = null
  private lastEventId: string | undefined
  /** The `retry` the standalone stream asked for (ms), used before reopening it. */
  private getRetryMs: number | undefined
  private getStarted = false
  /**
   * Settles once the first GET got an answer (a stream, 405 "none", an error status) or
   * failed: until then server-initiated messages may have nowhere to go.
   */
  private getAnswered: Promise<void> | null = null
  private answerGet: (() => void) | null = null
  /**
   * The GET stream will not come back: the server has none (405), or refused it for this
   * session (400, 404 — typically after it restarted and forgot the session).
   */
  streamGone = false
  private readonly maxMessageBytes: number
  private readonly requestTimeoutMs: number
  /** POSTs of requests still waiting for their answer, to abort when abandoned. */
  private readonly inflight = new Map<RequestId, Exchange>()

  constructor (url: URL, options: HttpClientTransportOptions = {}) {
    this.url = url
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
    this.pool = upstreamPool(url)
    if (options.sessionId !== undefined) this.sessionId = options.sessionId
  }

  async start (): Promise<void> {
    // Connections open on first use; a resumed session reopens its stream at once.
    if (this.sessionId !== undefined) this.openGetStream()
  }

  /**
   * Resolves once the GET stream for server-initiated messages has been answered (or the
   * server said it has none), or after `timeoutMs`; at once if it was never opened.
   */
  async streamReady (timeoutMs: number): Promise<void> {
    if (this.getAnswered === null) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([this.getAnswered, new Promise<void>(resolve => { timer = setTimeout(resolve, timeoutMs) })])
    clearTimeout(timer)
  }

  setProtocolVersion (version: string): void {
    this.protocolVersion = version
  }

  private headers (): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }
    if (this.sessionId !== undefined) h['mcp-session-id'] = this.sessionId
    if (this.protocolVersion !== undefined) h['mcp-protocol-version'] = this.protocolVersion
    return h
  }

  async send (message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed')
    const requestId = 'method' in message && 'id' in message ? message.id as RequestId : undefined
    const exchange = new Exchange()
    if (requestId !== undefined) this.inflight.set(requestId, exchange)
    // A notification or response has no caller timing it: it gets the requestTimeout here.
    const timer = requestId === undefined ? setTimeout(() => exchange.abort(new PorticoError('PORTICO_MCP_TIMEOUT', `no answer within ${this.requestTimeoutMs} ms`)), this.requestTimeoutMs) : undefined
    timer?.unref()
    let streaming = false
    try {
      const call = startRequest(this.pool, { path: this.url.pathname + this.url.search, method: 'POST', headers: this.headers(), body: JSON.stringify(message) })
      exchange.answer = call
      const res = await call.head
      const sid = res.headers['mcp-session-id']
      if (typeof sid === 'string' && sid !== '') this.sessionId = sid
      if (res.statusCode === 202) {
        await res.dump()
        if ('method' in message && message.method === 'notifications/initialized') this.openGetStream()
        return
      }
      if (res.statusCode < 200 || res.statusCode >= 300) throw await httpStatusError(res, this.url)
      const type = res.header('content-type')
      if (type.startsWith('application/json')) {
        const body = await readJsonAnswer(res, this.maxMessageBytes) as JSONRPCMessage | JSONRPCMessage[]
        for (const m of Array.isArray(body) ? body : [body]) this.onmessage?.(m)
        return
      }
      if (type.startsWith('text/event-stream')) {
        // The answer streams; consume it without holding up the caller.
        streaming = true
        void this.followPostStream(res, requestId, exchange).then(
          () => { if (requestId !== undefined) this.inflight.delete(requestId) },
          (err: Error) => {
            if (requestId !== undefined && this.inflight.delete(requestId)) this.onrequestfailed?.(requestId, err)
            else if (!exchange.aborted && !this.closed) this.onerror?.(err)
          }).finally(() => clearTimeout(timer))
        return
      }
      await res.dump()
    } finally {
      if (!streaming) {
        clearTimeout(timer)
        if (requestId !== undefined) this.inflight.delete(requestId)
      }
    }
  }

  /**
   * Reads the SSE answer to a POST and, when the server closes it before the answer (SSE
   * polling), resumes it with GET + Last-Event-ID after the `retry` it named, until the
   * answer comes, the request is abandoned (its timeout) or the server refuses to resume.
   */
  private async followPostStream (body: TargetAnswer, requestId: RequestId | undefined, exchange: Exchange): Promise<void> {
    let outcome = await this.readAnswerSse(body, requestId)
    if (requestId === undefined) return
    let lastEventId = outcome.lastEventId
    let retryMs = outcome.retryMs
    let idle = RESUME_BACKOFF_START_MS
    const signal = exchange.signal
    while (!outcome.answered && !this.closed && !signal.aborted && this.inflight.has(requestId)) {
      if (lastEventId === undefined) throw new PorticoError('PORTICO_MCP_UPSTREAM_STREAM', 'the stream ended before the answer, with no event id to resume from')
      await sleep(retryMs ?? 0, signal)
      const headers: Record<string, string> = { ...this.headers(), accept: 'text/event-stream', 'last-event-id': lastEventId }
      delete headers['content-type']
      const res = await requestTarget(this.pool, { path: this.url.pathname + this.url.search, method: 'GET', headers, signal })
      if (res.statusCode !== 200 || !res.header('content-type').startsWith('text/event-stream')) {
        await res.dump()
        throw new PorticoError('PORTICO_MCP_UPSTREAM_HTTP', `HTTP ${res.statusCode} resuming the answer's stream (Last-Event-ID ${lastEventId})`)
      }
      outcome = await this.readAnswerSse(res, requestId, false, true)
      if (outcome.retryMs !== undefined) retryMs = outcome.retryMs
      if (outcome.lastEventId !== undefined && outcome.lastEventId !== lastEventId) {
        lastEventId = outcome.lastEventId
        idle = RESUME_BACKOFF_START_MS
      } else if (!outcome.answered) {
        // Nothing new: do not hammer a server that keeps closing at once.
        await sleep(idle, signal)
        idle = Math.min(idle * 2, RESUME_BACKOFF_MAX_MS)
      }
    }
  }

  /** Gives up on a request (the caller was answered already): its POST is aborted. */
  abandon (id: RequestId): void {
    const exchange = this.inflight.get(id)
    if (exchange === undefined) return
    this.inflight.delete(id)
    exchange.abort()
  }

  /**
   * Reads an SSE body: the answer to a POST (`requestId`; the stream ends once it is in) or
   * the standalone stream (undefined). Rejects when an event passes maxMessageBytes.
   */
  private async readAnswerSse (body: TargetAnswer, requestId: RequestId | undefined, standalone = false, stopWhenAnswered = false): Promise<SseOutcome> {
    const outcome: SseOutcome = { lastEventId: undefined, retryMs: undefined, answered: false }
    await readSse(body, {
      maxEventBytes: this.maxMessageBytes,
      // Every event id counts, a priming event's (no data) too: it is where a resume starts.
      onId: id => {
        outcome.lastEventId = id === '' ? undefined : id
        if (standalone) this.lastEventId = outcome.lastEventId
      },
      onRetry: ms => {
        if (!Number.isFinite(ms) || ms < 0) return
        outcome.retryMs = Math.min(ms, RESUME_BACKOFF_MAX_MS * 6)
        if (standalone) this.getRetryMs = outcome.retryMs
      },
      onBadMessage: err => this.onerror?.(err),
      onMessage: value => {
        const message = value as JSONRPCMessage
        let settled: Exchange | undefined
        if (!('method' in message) && 'id' in message) {
          const id = message.id as RequestId
          if (id === requestId) {
            outcome.answered = true
            this.inflight.delete(requestId)
          } else {
            // Another request's answer, come another way (a server may answer a polled
            // request on whichever stream is open): its own resume stops.
            settled = this.inflight.get(id)
            if (settled !== undefined) this.inflight.delete(id)
          }
        }
        // Which request's POST stream carried it: a server-initiated request (sampling,
        // elicitation) on it belongs to that request, whoever else shares the session.
        this.onmessage?.(message, requestId !== undefined && !standalone ? { relatedRequestId: requestId } satisfies RelatedInfo as MessageExtraInfo : undefined)
        settled?.abort()
      },
      done: () => stopWhenAnswered && outcome.answered
    })
    return outcome
  }

  /**
   * The session's stream for server-initiated messages; reopened while the session lives
   * (after the server's `retry`, else 1 s doubling to 30 s while it keeps failing). It stops
   * for good when the server has none (405) or refuses it for this session (400, 404: after
   * a restart the server no longer knows the session; 404 also closes the transport, so the
   * target is re-initialized). Retrying those would only knock on the door forever.
   */
  private openGetStream (): void {
    if (this.closed || this.getStarted) return
    this.getStarted = true
    this.getAnswered = new Promise<void>(resolve => { this.answerGet = resolve })
    const answered = () => {
      this.answerGet?.()
      this.answerGet = null
    }
    const loop = async () => {
      let backoff = GET_RETRY_MS
      while (!this.closed) {
        const abort = new AbortController()
        this.getAbort = abort
        try {
          const headers: Record<string, string> = { accept: 'text/event-stream' }
          if (this.sessionId !== undefined) headers['mcp-session-id'] = this.sessionId
          if (this.protocolVersion !== undefined) headers['mcp-protocol-version'] = this.protocolVersion
          if (this.lastEventId !== undefined) headers['last-event-id'] = this.lastEventId
          const res = await requestTarget(this.pool, { path: this.url.pathname + this.url.search, method: 'GET', headers, signal: abort.signal })
          answered()
          if (res.statusCode === 405 || res.statusCode === 400 || res.statusCode === 404) {
            await res.dump()
            this.streamGone = true
            if (res.statusCode === 400) this.onerror?.(new PorticoError('PORTICO_MCP_UPSTREAM_HTTP', `upstream refused the session's GET stream (HTTP 400); not retried`))
            if (res.statusCode === 404) {
              this.onerror?.(new PorticoError('PORTICO_MCP_UPSTREAM_HTTP', `upstream session ${this.sessionId ?? ''} not found`))
              void this.close()
            }
            return
          }
          if (res.statusCode !== 200) {
            await res.dump()
          } else {
            backoff = GET_RETRY_MS
            await this.readAnswerSse(res, undefined, true)
          }
        } catch (err) {
          answered()
          if (this.closed) return
          this.onerror?.(err as Error)
        }
        if (this.closed) return
        const wait = this.getRetryMs ?? backoff
        backoff = Math.min(backoff * 2, GET_RETRY_MAX_MS)
        await new Promise(resolve => setTimeout(resolve, wait).unref())
      }
    }
    void loop().finally(answered)
  }

  /** DELETE: ends the upstream session. */
  async terminateSession (): Promise<void> {
    if (this.sessionId === undefined) return
    const headers = this.headers()
    try {
      const res = await requestTarget(this.pool, { path: this.url.pathname + this.url.search, method: 'DELETE', headers, signal: AbortSignal.timeout(this.requestTimeoutMs) })
      await res.dump()
    } catch {}
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.answerGet?.()
    this.getAbort?.abort()
    for (const exchange of this.inflight.values()) exchange.abort()
    this.inflight.clear()
    await this.pool.close().catch(() => {})
    this.onclose?.()
  }
}
