/**
 * A small gRPC client for ONE bidirectional-streaming method over node:http2: what the
 * ext_proc client (traffic/ext-proc-grpc.ts, the extProc policy and an InferencePool's
 * endpoint picker) needs per request, without @grpc/grpc-js. grpc-js runs every call through
 * a resolving call, a retrying call (which keeps a copy of each message sent), a load-balancing
 * call, a filter stack and a Metadata object turned into HTTP/2 headers: measured on
 * bench/inference-pool.ts it was the largest part of the ~460 µs of CPU an endpoint pick cost
 * (bench/README.md). Here a call is one HTTP/2 stream with its headers written once, each
 * message a 5-byte length prefix and the encoded bytes, and the status read from the trailers.
 *
 * - One HTTP/2 session per channel, opened on first use and again after it closed, failed,
 *   was sent GOAWAY or used up its stream ids. With `fallbackTargets` it is gRPC's pick_first:
 *   the addresses are tried in order, the first that connects serves every call until its
 *   session ends, and the next connection walks the list from the start again. A connection
 *   not up within CONNECT_TIMEOUT_MS is given up. Calls made while connecting wait for the
 *   connection (their messages, half-close and cancel held) and start on it, so an address
 *   that refuses fails none of them when another one answers. When every address failed,
 *   they fail with UNAVAILABLE and so do all calls for RETRY_AFTER_MS (as grpc-js's first
 *   backoff step), then the next call connects again — so a service that is down (or a host
 *   that drops packets) costs a request no wait beyond the first ones, and one that comes
 *   back is used within a second.
 * - A status as grpc-js reports one: the trailers' grpc-status and grpc-message (or the
 *   trailers-only headers'); an HTTP status other than 200, an RST_STREAM or a broken
 *   connection mapped as gRPC's HTTP/2 spec maps them; a message larger than
 *   `maxReceiveBytes` fails the call with RESOURCE_EXHAUSTED before it is buffered.
 * - The session keeps the process alive only while calls are in flight.
 */

import * as http2 from 'node:http2'
import { PorticoError } from '../util/errors.ts'

/** gRPC status names by code. */
export const GRPC_STATUS_NAMES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS',
  'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE',
  'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'
] as const

export const GRPC_STATUS = {
  OK: 0, CANCELLED: 1, UNKNOWN: 2, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14,
  PERMISSION_DENIED: 7, UNAUTHENTICATED: 16
} as const

export interface GrpcStatus { code: number, details: string }

export interface GrpcCodec<Req, Res> {
  /** The encoded message with gRPC's 5-byte prefix in front (`framed` adds it to encoded bytes). */
  frame (message: Req): Buffer
  /** One message's bytes (without the prefix). */
  decode (bytes: Buffer): Res
}

export interface GrpcChannelOptions {
  /** `host:port`. */
  target: string
  /**
   * More `host:port`s of the same service, tried in order when connecting to the one before
   * fails (gRPC's pick_first over an address list: the first that connects serves every call
   * until its connection ends, then the list is walked again from `target`).
   */
  fallbackTargets?: string[]
  /** Null: plaintext (h2c). `{}`: TLS verified with Node's roots; `ca` instead of them; `insecureSkipVerify` accepts any certificate. */
  tls: { ca?: string | Buffer, insecureSkipVerify?: boolean } | null
  userAgent: string
  /** Largest message accepted from the service (grpc-js's default is 4 MiB). */
  maxReceiveBytes?: number
}

export interface CallHandlers<Res> {
  message (m: Res): void
  /** Flow control lets more messages through (after `write` returned false). */
  drain (): void
  /** The call is over: null when the service ended it with OK, its status otherwise. Called once. */
  end (status: GrpcStatus | null): void
}

export interface GrpcCall<Req> {
  /** Sends one message; false when flow control asks to wait for `drain`. */
  write (message: Req): boolean
  /** Half-closes the call (no more messages). */
  end (): void
  /** Ends the call now (RST_STREAM CANCEL); `end` gets CANCELLED unless the call was over. */
  cancel (): void
}

const DEFAULT_MAX_RECEIVE = 4 * 1024 * 1024
/** How long a connection may take to come up (grpc-js's minimum connect timeout). */
const CONNECT_TIMEOUT_MS = 20_000
/** After a connection failed, how long calls fail at once before the next one connects again. */
const RETRY_AFTER_MS = 1_000
/** Streams opened on one session before a fresh one is used (HTTP/2 stream ids run out at 2^30 client streams). */
const MAX_STREAMS_PER_SESSION = 1_000_000_000

const {
  HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE, NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM,
  NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_INADEQUATE_SECURITY
} = http2.constants

/** A call started while no session was connected: what it asked for, held until one is (or none can be). */
interface QueuedCall<Req, Res> {
  headers: http2.OutgoingHttpHeaders
  h: CallHandlers<Res>
  /** Messages written before the call had a stream, sent in order once it has one. */
  messages: Req[]
  ended: boolean
  /** The call on a stream, once the session connected. */
  inner: GrpcCall<Req> | null
  /** Started on a stream, or ended (cancelled, failed): no longer queued. */
  settled: boolean
  timer: NodeJS.Timeout | undefined
}

export class GrpcStreamChannel<Req, Res> {
  private readonly options: GrpcChannelOptions
  private readonly path: string
  private readonly codec: GrpcCodec<Req, Res>
  /** `target`, then `fallbackTargets`: pick_first's address list, walked in this order. */
  private readonly targets: string[]
  private readonly authorities: string[]
  private readonly connectOptions: http2.SecureClientSessionOptions
  private readonly maxReceive: number
  /** The connected session every call goes to (pick_first's choice, kept until it closes). */
  private session: http2.ClientHttp2Session | null = null
  /** Its index in `targets`. */
  private sessionTarget = 0
  private sessionStreams = 0
  /** The session being connected (one address of the walk), and the calls waiting for it. */
  private attempt: http2.ClientHttp2Session | null = null
  private queue: Array<QueuedCall<Req, Res>> = []
  /** Date.now() until which calls fail at once, and why (the last connection's failure). */
  private failedUntil = 0
  private lastError = ''
  private active = 0
  private closed = false

  constructor (options: GrpcChannelOptions, path: string, codec: GrpcCodec<Req, Res>) {
    this.options = options
    this.path = path
    this.codec = codec
    this.maxReceive = options.maxReceiveBytes ?? DEFAULT_MAX_RECEIVE
    this.targets = [options.target, ...(options.fallbackTargets ?? [])]
    this.authorities = this.targets.map(t => `${options.tls === null ? 'http' : 'https'}://${t}`)
    const tls = options.tls
    this.connectOptions = {
      // As grpc-js: the session's memory is not what bounds a call (maxReceiveBytes and the callers' limits do).
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      settings: { enablePush: false },
      ...(tls?.ca !== undefined ? { ca: tls.ca } : {}),
      ...(tls?.insecureSkipVerify === true ? { rejectUnauthorized: false, checkServerIdentity: () => undefined } : {})
    }
  }

  /** The address whose connection serves calls now (null while none is connected): for tests and debugging. */
  get connectedTarget (): string | null {
    const s = this.session
    return s === null || s.closed || s.destroyed ? null : this.targets[this.sessionTarget]!
  }

  /** Starts a call with `metadata` (header name → value) as its initial metadata. */
  call (metadata: Readonly<Record<string, string>> | null, h: CallHandlers<Res>): GrpcCall<Req> {
    const headers: http2.OutgoingHttpHeaders = {
      ':method': 'POST',
      ':path': this.path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'user-agent': this.options.userAgent
    }
    if (metadata !== null) for (const name in metadata) headers[name] = metadata[name]
    if (this.closed) return failedCall(h, 'Channel has been shut down')
    // The usual case: a connected session, the stream opened on it at once.
    const current = this.session
    if (current !== null && !current.closed && !current.destroyed && this.sessionStreams < MAX_STREAMS_PER_SESSION) {
      this.acquire()
      return this.open(current, headers, h)
    }
    if (this.attempt === null && Date.now() < this.failedUntil) return failedCall(h, `No connection established. Last error: ${this.lastError}`)
    this.acquire()
    return this.enqueue(headers, h)
  }

  /**
   * Holds a call until a session connects: one stream cannot move to another connection, so a
   * call is only put on a session known to be up — the first address refusing does not fail
   * the calls made meanwhile, they go to the address that answers. Bounded by the connect
   * timeout; its messages are the caller's (whose own limits bound them).
   */
  private enqueue (headers: http2.OutgoingHttpHeaders, h: CallHandlers<Res>): GrpcCall<Req> {
    const q: QueuedCall<Req, Res> = { headers, h, messages: [], ended: false, inner: null, settled: false, timer: undefined }
    this.queue.push(q)
    q.timer = setTimeout(() => {
      this.unqueue(q, { code: GRPC_STATUS.UNAVAILABLE, details: `No connection established within ${CONNECT_TIMEOUT_MS}ms. Last error: ${this.lastError === '' ? 'none' : this.lastError}` })
    }, CONNECT_TIMEOUT_MS).unref()
    if (this.attempt === null) this.walk(0)
    return {
      write: (message: Req): boolean => {
        if (q.inner !== null) return q.inner.write(message)
        if (!q.settled && !q.ended) q.messages.push(message)
        return true
      },
      end: (): void => {
        if (q.inner !== null) q.inner.end()
        else q.ended = true
      },
      cancel: (): void => {
        if (q.inner !== null) q.inner.cancel()
        else this.unqueue(q, { code: GRPC_STATUS.CANCELLED, details: 'Cancelled on client' })
      }
    }
  }

  /** Ends a queued call that never got a stream. */
  private unqueue (q: QueuedCall<Req, Res>, status: GrpcStatus): void {
    if (q.settled) return
    q.settled = true
    clearTimeout(q.timer)
    const at = this.queue.indexOf(q)
    if (at >= 0) this.queue.splice(at, 1)
    q.messages = []
    this.release()
    process.nextTick(() => q.h.end(status))
  }

  /**
   * pick_first: connects to `targets[index]`; the first address that connects serves every
   * call until its session closes, fails or is sent GOAWAY (the next call then walks the list
   * from the start again). When the last address fails too, the queued calls fail with its
   * error and calls fail at once for RETRY_AFTER_MS.
   */
  private walk (index: number): void {
    const target = this.targets[index]!
    let session: http2.ClientHttp2Session
    try {
      session = http2.connect(this.authorities[index]!, this.connectOptions)
    } catch (err) {
      return this.walked(index, `connection to ${target} failed: ${(err as Error).message}`)
    }
    this.attempt = session
    if (this.active === 0) session.unref()
    let connected = false
    let failed = false
    const timer = setTimeout(() => {
      session.destroy(new PorticoError('PORTICO_GRPC_CONNECT', `connection to ${target} not established within ${CONNECT_TIMEOUT_MS}ms`))
    }, CONNECT_TIMEOUT_MS).unref()
    const fail = (err: Error): void => {
      if (connected || failed) return
      failed = true
      clearTimeout(timer)
      if (!session.destroyed) session.destroy()
      // The channel was closed meanwhile (its queue already failed).
      if (this.attempt !== session) return
      this.attempt = null
      this.walked(index, err.message)
    }
    session.once('connect', () => {
      if (failed) return
      connected = true
      clearTimeout(timer)
      if (this.attempt !== session) {
        session.close()
        return
      }
      this.attempt = null
      this.adopt(session, index)
    })
    // Each call reports the failure of its own stream; the session's error is not thrown.
    session.on('error', fail)
    session.on('close', () => {
      fail(new PorticoError('PORTICO_GRPC_CONNECT', `connection to ${target} closed before it was established`))
      if (this.session === session) this.session = null
    })
    session.on('goaway', () => {
      fail(new PorticoError('PORTICO_GRPC_CONNECT', `connection to ${target} sent GOAWAY before it was established`))
      if (this.session === session) this.session = null
      // Calls in flight below the last stream id finish; then it closes.
      if (!session.closed && !session.destroyed) session.close()
    })
  }

  /** Connecting to `targets[index]` failed: the next address, or — the list walked — the queued calls fail. */
  private walked (index: number, error: string): void {
    this.lastError = error
    if (index + 1 < this.targets.length) return this.walk(index + 1)
    this.failedUntil = Date.now() + RETRY_AFTER_MS
    const queue = this.queue
    this.queue = []
    const status = { code: GRPC_STATUS.UNAVAILABLE, details: `No connection established. Last error: ${error}` }
    for (const q of queue) this.unqueue(q, status)
  }

  /** The session that connected serves from now on: the queued calls start on it, in order. */
  private adopt (session: http2.ClientHttp2Session, index: number): void {
    const old = this.session
    // One used up its stream ids: its calls in flight finish on it.
    if (old !== null && !old.closed && !old.destroyed) old.close()
    this.session = session
    this.sessionTarget = index
    this.sessionStreams = 0
    const queue = this.queue
    this.queue = []
    for (const q of queue) {
      if (q.settled) continue
      q.settled = true
      clearTimeout(q.timer)
      const inner = this.open(session, q.headers, q.h)
      q.inner = inner
      for (const m of q.messages) inner.write(m)
      q.messages = []
      if (q.ended) inner.end()
    }
  }

  /** The call on a stream of `session` (the call already counted in `active`). */
  private open (session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, h: CallHandlers<Res>): GrpcCall<Req> {
    let status: GrpcStatus | null | undefined
    let reported = false
    let stream: http2.ClientHttp2Stream | null = null
    const report = (): void => {
      if (reported) return
      reported = true
      this.release()
      h.end(status === undefined || status === null || status.code === GRPC_STATUS.OK ? null : status)
    }
    /** The call's status once known (the first one found wins). */
    const settle = (s: GrpcStatus): void => { if (status === undefined) status = s }

    try {
      this.sessionStreams++
      stream = session.request(headers, { endStream: false })
    } catch (err) {
      // A session that went away between the check and the request.
      settle({ code: GRPC_STATUS.UNAVAILABLE, details: `No connection established. Last error: ${(err as Error).message}` })
      process.nextTick(report)
      return { write: () => true, end: () => {}, cancel: () => {} }
    }
    const s = stream
    /** Bytes received and not yet a whole message: concatenated only once a message is complete (linear in its size). */
    let held: Buffer[] = []
    let heldBytes = 0
    let readEnded = false
    let trailersSeen = false
    let cancelled = false

    const fail = (code: number, details: string): void => {
      settle({ code, details })
      if (!s.closed && !s.destroyed) s.close(NGHTTP2_CANCEL)
    }
    const onData = (chunk: Buffer): void => {
      if (status !== undefined) return
      held.push(chunk)
      heldBytes += chunk.length
      while (heldBytes >= 5) {
        if (held[0]!.length < 5) held = [Buffer.concat(held, heldBytes)]
        const head = held[0]!
        const length = head.readUInt32BE(1)
        if (length > this.maxReceive) return fail(GRPC_STATUS.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs. ${this.maxReceive})`)
        if (heldBytes < 5 + length) return
        if (head[0] !== 0) return fail(GRPC_STATUS.INTERNAL, 'Compressed message received without grpc-encoding')
        const buf = held.length === 1 ? head : Buffer.concat(held, heldBytes)
        const bytes = buf.subarray(5, 5 + length)
        const rest = buf.subarray(5 + length)
        held = rest.length > 0 ? [rest] : []
        heldBytes = rest.length
        let m: Res
        try {
          m = this.codec.decode(bytes)
        } catch (err) {
          return fail(GRPC_STATUS.INTERNAL, `Failed to parse server response: ${(err as Error).message}`)
        }
        h.message(m)
        if (status !== undefined) return
      }
    }
    s.on('response', (hs, flags) => {
      const http = Number(hs[HTTP2_HEADER_STATUS])
      if (http !== 200) return settle({ code: httpStatusCode(http), details: `Received HTTP status code ${http}` })
      const type = String(hs[HTTP2_HEADER_CONTENT_TYPE] ?? '')
      if (!type.startsWith('application/grpc')) return settle({ code: GRPC_STATUS.UNKNOWN, details: `Received invalid content-type ${type}` })
      // Trailers-only: the status is in the headers.
      if ((flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0 || hs['grpc-status'] !== undefined) {
        trailersSeen = true
        settle(statusOf(hs))
      }
    })
    s.on('data', onData)
    s.on('trailers', hs => {
      trailersSeen = true
      settle(statusOf(hs))
    })
    s.on('end', () => {
      readEnded = true
      if (heldBytes > 0) settle({ code: GRPC_STATUS.INTERNAL, details: 'Received an incomplete message' })
      if (!trailersSeen) settle({ code: GRPC_STATUS.INTERNAL, details: 'Received no status' })
      // The service ended the call: the client's side ends too (no RST_STREAM for a finished call).
      if (!s.writableEnded && !s.destroyed) s.end()
      report()
    })
    s.on('drain', () => { if (!reported) h.drain() })
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (status !== undefined) return
      settle(err.code === 'ERR_HTTP2_STREAM_ERROR' ? rstStatus(s.rstCode) : { code: GRPC_STATUS.UNAVAILABLE, details: `No connection established. Last error: ${err.message}` })
    })
    s.on('close', () => {
      if (!readEnded) settle(s.rstCode === NGHTTP2_CANCEL && cancelled ? { code: GRPC_STATUS.CANCELLED, details: 'Cancelled on client' } : rstStatus(s.rstCode))
      report()
    })
    return {
      write: (message: Req): boolean => {
        if (s.closed || s.destroyed || s.writableEnded) return true
        return s.write(this.codec.frame(message))
      },
      end: (): void => { if (!s.writableEnded && !s.destroyed) s.end() },
      cancel: (): void => {
        if (reported) return
        cancelled = true
        settle({ code: GRPC_STATUS.CANCELLED, details: 'Cancelled on client' })
        if (!s.closed && !s.destroyed) s.close(NGHTTP2_CANCEL)
      }
    }
  }

  /** The session is referenced (keeps the process alive) only while calls are in flight. */
  private acquire (): void {
    if (this.active++ === 0) {
      this.session?.ref()
      this.attempt?.ref()
    }
  }

  private release (): void {
    if (--this.active === 0) {
      this.session?.unref()
      this.attempt?.unref()
    }
  }

  /** Closes the channel: calls in flight finish, queued and new calls fail. */
  close (): void {
    this.closed = true
    const s = this.session
    this.session = null
    if (s !== null && !s.closed && !s.destroyed) s.close()
    const attempt = this.attempt
    this.attempt = null
    const queue = this.queue
    this.queue = []
    for (const q of queue) this.unqueue(q, { code: GRPC_STATUS.UNAVAILABLE, details: 'Channel has been shut down' })
    attempt?.destroy()
  }
}

/** A call that failed before it started: its end (UNAVAILABLE) comes on the next tick, as a stream's would. */
function failedCall<Req> (h: CallHandlers<unknown>, details: string): GrpcCall<Req> {
  process.nextTick(() => h.end({ code: GRPC_STATUS.UNAVAILABLE, details }))
  return { write: () => true, end: () => {}, cancel: () => {} }
}

/** Encoded bytes with gRPC's length prefix (uncompressed). */
export function framed (bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + bytes.length)
  out[0] = 0
  out.writeUInt32BE(bytes.length, 1)
  out.set(bytes, 5)
  return out
}

function statusOf (hs: http2.IncomingHttpHeaders): GrpcStatus {
  const raw = hs['grpc-status']
  const code = raw === undefined ? NaN : Number(raw)
  if (!Number.isInteger(code) || code < 0 || code > 16) return { code: GRPC_STATUS.UNKNOWN, details: `Received invalid status code from server: ${String(raw)}` }
  const message = hs['grpc-message']
  let details = ''
  if (typeof message === 'string') {
    try {
      details = decodeURIComponent(message)
    } catch {
      details = message
    }
  }
  return { code, details }
}

/** gRPC's mapping of an HTTP status without a gRPC status (doc/http-grpc-status-mapping.md). */
function httpStatusCode (http: number): number {
  switch (http) {
    case 400: return GRPC_STATUS.INTERNAL
    case 401: return GRPC_STATUS.UNAUTHENTICATED
    case 403: return GRPC_STATUS.PERMISSION_DENIED
    case 404: return GRPC_STATUS.UNIMPLEMENTED
    case 429: case 502: case 503: case 504: return GRPC_STATUS.UNAVAILABLE
    default: return GRPC_STATUS.UNKNOWN
  }
}

/** A stream reset by the service (or the connection lost), as grpc-js reports it. */
function rstStatus (code: number | undefined): GrpcStatus {
  switch (code) {
    case NGHTTP2_REFUSED_STREAM: return { code: GRPC_STATUS.UNAVAILABLE, details: 'Stream refused by server' }
    case NGHTTP2_CANCEL: return { code: GRPC_STATUS.CANCELLED, details: 'Call cancelled' }
    case NGHTTP2_ENHANCE_YOUR_CALM: return { code: GRPC_STATUS.RESOURCE_EXHAUSTED, details: 'Bandwidth exhausted or memory limit exceeded' }
    case NGHTTP2_INADEQUATE_SECURITY: return { code: GRPC_STATUS.PERMISSION_DENIED, details: 'Protocol not secure enough' }
    default: return { code: GRPC_STATUS.INTERNAL, details: `Received RST_STREAM with code ${code ?? 'unknown'}` }
  }
}
