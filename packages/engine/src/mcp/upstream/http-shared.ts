/**
 * What the HTTP transports to a target share — streamable HTTP (streamable.ts, the
 * initialize-era sessions), legacy HTTP+SSE (sse.ts, 2024-11-05) and stateless 2026-07-28
 * (stateless.ts, stateless-forward.ts):
 * the keep-alive pool, one request and its answer, a JSON answer read within
 * maxMessageBytes, an SSE answer read event by event within it, and the error an
 * unexpected status becomes. One piece, so a fix to how a target's bytes are bounded or
 * parsed reaches every revision (and the next one).
 *
 * The pool is Portico's own HTTP/1.1 client (http/h1-pool.ts), the one the HTTP data path
 * uses, with its connection-reuse checks and TLS for https targets. An answer is read by a
 * plain dispatch handler (`TargetAnswer`), not through a Readable and an async iterator:
 * a JSON body is collected as it comes, an SSE body is fed to its parser chunk by chunk.
 * Through undici's Pool.request those layers cost a tools/call about 188,000 instructions
 * more to an HTTP target than to a stdio one (bench/README.md, "MCP per call").
 */

import type { Dispatcher } from 'undici'
import { createParser } from 'eventsource-parser'
import { H1Pool } from '../../http/h1-pool.ts'
import type { LendingHandler } from '../../http/h1-connection.ts'
import { messageTooLarge, SseEventMeter } from '../protocol/message-limits.ts'
import { redactUrl } from '../../ir/redact.ts'
import { PorticoError } from '../../util/errors.ts'

/** Enough of an error page for a log line. */
const MAX_ERROR_TEXT_BYTES = 4096
/**
 * How long a target may take to send an answer's head when the caller names no limit
 * (undici's default, kept): the pool's, one timer per connection re-armed per call.
 */
const DEFAULT_HEADERS_TIMEOUT_MS = 300_000
/** What `dump` reads of a body nobody wants before it cuts the connection instead (undici's dump limit). */
const DUMP_LIMIT_BYTES = 128 * 1024
/**
 * What is kept of a body before its reader comes (a response policy deciding on the head, say)
 * before the connection stops reading: a target streaming meanwhile grows no buffer here.
 */
const EARLY_LIMIT_BYTES = 64 * 1024

/**
 * The keep-alive pool of one target origin (http or https, TLS verified against
 * Node's default CAs, as undici did); a call may name shorter clocks of its own (TargetRequest).
 */
export function upstreamPool (url: URL): H1Pool {
  return new H1Pool(url.origin, { connections: 64, keepAliveTimeout: 30_000, headersTimeout: DEFAULT_HEADERS_TIMEOUT_MS })
}

export interface TargetRequest {
  path: string
  method: 'GET' | 'POST' | 'DELETE'
  headers: Record<string, string>
  body?: string | Buffer
  /** Aborts the call (head or body): the connection is cut, the answer rejects with the signal's reason. */
  signal?: AbortSignal
  /** The wait for the answer's head (ms); absent: the pool's (300 s). */
  headersTimeoutMs?: number
  /** The longest quiet between two chunks of the body (ms); 0 or absent: none (streams are timed by their callers). */
  idleTimeoutMs?: number
}

/** One request to a target; resolves with its answer's head, the body to be read from the answer. */
export function requestTarget (pool: H1Pool, req: TargetRequest): Promise<TargetAnswer> {
  if (req.signal?.aborted === true) return Promise.reject(req.signal.reason as Error)
  return startRequest(pool, req).head
}

/**
 * One request to a target, as its answer at once (`head` settles when the head is in): for
 * a caller that ends it with `destroy` instead of a signal — no AbortController and no
 * listener on the hot path of a call.
 */
export function startRequest (pool: H1Pool, req: TargetRequest): TargetAnswer {
  const answer = new TargetAnswer(req)
  pool.dispatch({ path: req.path, method: req.method, headers: req.headers, body: req.body ?? null }, answer)
  return answer
}

/** A body's reader: `owned` chunks are copies it may keep; the others are lent until it returns. */
type Sink = (chunk: Buffer, owned: boolean) => void

/**
 * The answer to one request, as the dispatch handler that receives it. `head` settles with
 * it once the status and headers are in; the body is then read once, with `whole`, `each` or
 * `dump` (what comes before is kept, copied, until then). Every chunk is let go of before
 * its callback returns (copied where kept), so the connection reads on into its own buffer.
 */
export class TargetAnswer implements LendingHandler {
  statusCode = 0
  headers: Record<string, string | string[]> = {}
  readonly head: Promise<TargetAnswer>
  private resolveHead!: (answer: TargetAnswer) => void
  private rejectHead!: (err: Error) => void
  private controller: Dispatcher.DispatchController | null = null
  private readonly signal: AbortSignal | undefined
  private readonly idleMs: number
  private timer: NodeJS.Timeout | null = null
  private headIn = false
  private ended = false
  private error: Error | null = null
  /** Chunks that came before the body was asked for (copies), and their bytes. */
  private early: Buffer[] | null = null
  private earlyBytes = 0
  /** Reading stopped at EARLY_LIMIT_BYTES until the reader comes. */
  private held = false
  private sink: Sink | null = null
  /** The body's reader, settled at its end or failure. */
  private settle: { resolve: () => void, reject: (err: Error) => void } | null = null

  constructor (req: TargetRequest) {
    this.signal = req.signal
    this.idleMs = req.idleTimeoutMs ?? 0
    this.head = new Promise((resolve, reject) => {
      this.resolveHead = resolve
      this.rejectHead = reject
    })
    const headersMs = req.headersTimeoutMs ?? 0
    if (headersMs > 0) this.timer = setTimeout(onHeadersTimeout, headersMs, this, headersMs).unref()
    this.signal?.addEventListener('abort', this.onAbort)
  }

  /** A header's value as one string ('' when absent). */
  header (name: string): string {
    const value = this.headers[name]
    return value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value
  }

  // --- the dispatch handler (http/h1-connection.ts calls these) ---

  onRequestStart (controller: Dispatcher.DispatchController): void {
    this.controller = controller
  }

  onResponseStart (_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[]>): void {
    this.statusCode = statusCode
    this.headers = headers
    this.headIn = true
    this.clearTimer()
    if (this.idleMs > 0) this.timer = setTimeout(onIdleTimeout, this.idleMs, this, this.idleMs).unref()
    this.resolveHead(this)
  }

  onResponseData (_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.timer?.refresh()
    if (this.sink !== null) {
      this.sink(chunk, false)
      return
    }
    (this.early ??= []).push(Buffer.from(chunk))
    this.earlyBytes += chunk.length
    if (this.earlyBytes > EARLY_LIMIT_BYTES && !this.held) {
      this.held = true
      this.controller?.pause()
    }
  }

  onResponseEnd (): void {
    this.ended = true
    this.done()
    this.settle?.resolve()
  }

  onResponseError (_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.ended || this.error !== null) return
    this.error = err
    this.done()
    if (!this.headIn) this.rejectHead(err)
    else this.settle?.reject(err)
  }

  /** Every chunk given was copied or read before its callback returned. */
  chunkReleased (): boolean {
    return true
  }

  // --- reading the body (once) ---

  /** Hands each chunk of the body to `onChunk` (lent: valid until it returns); resolves at the end. */
  each (onChunk: Sink): Promise<void> {
    return new Promise((resolve, reject) => {
      const early = this.early
      this.early = null
      this.sink = onChunk
      try {
        if (early !== null) for (const chunk of early) onChunk(chunk, true)
      } catch (err) {
        this.destroy(err as Error)
        reject(err as Error)
        return
      }
      if (this.error !== null) reject(this.error)
      else if (this.ended) resolve()
      else {
        this.settle = { resolve, reject }
        if (this.held) {
          this.held = false
          this.controller?.resume()
        }
      }
    })
  }

  /** The whole body, within `limit` bytes: past it (or a Content-Length past it) the call is cut and this rejects. */
  async whole (limit: number, what = 'an answer'): Promise<Buffer> {
    if (Number(this.headers['content-length'] ?? NaN) > limit) {
      const err = messageTooLarge(what, limit)
      this.destroy(err)
      throw err
    }
    if (this.ended && this.sink === null) {
      // All in already (a short answer comes in the read that brought its head): the kept copies are the body.
      const early = this.early ?? []
      this.early = null
      if (this.earlyBytes > limit) throw messageTooLarge(what, limit)
      return early.length === 1 ? early[0]! : Buffer.concat(early, this.earlyBytes)
    }
    const chunks: Buffer[] = []
    let size = 0
    await this.each((chunk, owned) => {
      size += chunk.length
      if (size > limit) throw messageTooLarge(what, limit)
      chunks.push(owned ? chunk : Buffer.from(chunk))
    })
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
  }

  /** Reads and drops the body (a 202's, an unwanted one); past DUMP_LIMIT_BYTES the connection is cut instead. */
  async dump (): Promise<void> {
    let size = 0
    await this.each(chunk => {
      size += chunk.length
      if (size > DUMP_LIMIT_BYTES) this.destroy()
    }).catch(() => {})
  }

  /** Stops the answer here: the connection is cut, the body's reader (if any) rejects with `err`. */
  destroy (err: Error = new PorticoError('PORTICO_MCP_ABORTED', 'the answer was not read to its end')): void {
    if (this.ended || this.error !== null) return
    if (this.controller !== null) this.controller.abort(err)
    else this.onResponseError(null as unknown as Dispatcher.DispatchController, err)
  }

  /** Stops reading until `resume` (backpressure: the connection stops reading the socket). */
  pause (): void {
    this.controller?.pause()
  }

  resume (): void {
    this.controller?.resume()
  }

  private readonly onAbort = (): void => {
    this.destroy((this.signal?.reason as Error | undefined) ?? new PorticoError('PORTICO_MCP_ABORTED'))
  }

  private done (): void {
    this.clearTimer()
    this.sink = null
    this.signal?.removeEventListener('abort', this.onAbort)
  }

  private clearTimer (): void {
    if (this.timer === null) return
    clearTimeout(this.timer)
    this.timer = null
  }

  timedOut (err: PorticoError): void {
    this.timer = null
    this.destroy(err)
  }
}

function onHeadersTimeout (answer: TargetAnswer, ms: number): void {
  answer.timedOut(new PorticoError('PORTICO_UPSTREAM_HEADERS_TIMEOUT', `no answer headers from the target within ${ms} ms`))
}

function onIdleTimeout (answer: TargetAnswer, ms: number): void {
  answer.timedOut(new PorticoError('PORTICO_STREAM_IDLE_TIMEOUT', `the target's answer was idle for ${ms} ms`))
}

/**
 * The error an answer with an unexpected status becomes: the status, the URL (credentials
 * redacted) and the start of the body, read within MAX_ERROR_TEXT_BYTES.
 */
export async function httpStatusError (res: TargetAnswer, url: URL): Promise<Error> {
  const text = await readStart(res, MAX_ERROR_TEXT_BYTES)
  return new PorticoError('PORTICO_MCP_UPSTREAM_HTTP', `HTTP ${res.statusCode} from ${redactUrl(url.href)}${text !== '' ? `: ${text.slice(0, 200)}` : ''}`)
}

/** The start of a body as text, within `limit` bytes ('' if it cannot be read). */
function readStart (res: TargetAnswer, limit: number): Promise<string> {
  return res.whole(limit).then(b => b.toString('utf8'), () => '')
}

/** A JSON answer, parsed, within `maxBytes` (a declared length past it fails before reading). */
export async function readJsonAnswer (res: TargetAnswer, maxBytes: number): Promise<unknown> {
  return JSON.parse((await res.whole(maxBytes, 'an answer')).toString('utf8')) as unknown
}

export interface SseReadOptions {
  /** Largest single event accepted; past it the answer is cut and the read rejects. */
  maxEventBytes: number
  /** Each event's id ('' resets it), a priming event's too. */
  onId?(id: string): void
  /** A `retry` field, as the parser reads it. */
  onRetry?(ms: number): void
  /** Each `message` event (or one without a type) with data, parsed as JSON. */
  onMessage(message: unknown): void
  /** An event whose data is not JSON (the read goes on). */
  onBadMessage(err: Error): void
  /** An event of another type (a legacy target's `endpoint`), its data as text; absent: ignored. */
  onOtherEvent?(type: string, data: string): void
  /** Checked after each chunk: true ends the read here (the answer is cut). */
  done?(): boolean
}

/** Ends a read that has what it waited for (never seen outside readSse). */
const ENOUGH = new PorticoError('PORTICO_MCP_ABORTED', 'the stream served its purpose')

/** Reads an SSE answer to its end (or until `done`), each event bounded by maxEventBytes, chunk by chunk as it comes. */
export async function readSse (res: TargetAnswer, options: SseReadOptions): Promise<void> {
  const decoder = new TextDecoder()
  const meter = new SseEventMeter(options.maxEventBytes)
  const parser = createParser({
    onId: options.onId,
    onRetry: options.onRetry,
    onEvent: event => {
      if (event.event !== undefined && event.event !== 'message') {
        options.onOtherEvent?.(event.event, event.data)
        return
      }
      if (event.data === '') return
      let message: unknown
      try {
        message = JSON.parse(event.data)
      } catch (err) {
        options.onBadMessage(err as Error)
        return
      }
      options.onMessage(message)
    }
  })
  let stopped = false
  try {
    await res.each(chunk => {
      if (stopped) return
      if (!meter.feed(chunk)) throw messageTooLarge('an event', options.maxEventBytes)
      parser.feed(decoder.decode(chunk, { stream: true }))
      if (options.done?.() === true) {
        // A stream may be held open by the server after what was awaited: it has served its purpose.
        stopped = true
        res.destroy(ENOUGH)
      }
    })
  } catch (err) {
    if (err !== ENOUGH) throw err
  }
}
