/**
 * One keep-alive HTTP/1.1 connection to a backend and the call running on it (http/h1-pool.ts
 * owns both). A call writes its head (and body: a Buffer at once, a stream with backpressure,
 * by Content-Length or chunked), reads the answer with the strict parser
 * (http/h1-response-parser.ts) and hands it to its dispatch handler as undici does --
 * onRequestStart, onResponseStart, onResponseData, onResponseEnd or onResponseError,
 * onRequestUpgrade for a 101 -- so everything that wraps a backend call works unchanged.
 *
 * Why not undici's client: on a small proxied request it was about a quarter of Portico's
 * CPU (its request object, header arrays re-parsed into objects, llhttp in WebAssembly fed
 * through copies, timers per request). Here a request is one string write, a response one
 * slice of the socket's chunk, and the only timers are one per connection, refreshed.
 */

import type { Socket } from 'node:net'
import type { Readable } from 'node:stream'
import type { Dispatcher } from 'undici'
import { H1ResponseParser, type ResponseEvents, type ResponseHead, type ResponseHeaders } from './h1-response-parser.ts'
import { Framing, requestHead } from './h1-request.ts'
import { PorticoError } from '../util/errors.ts'

/** What a connection needs of its pool. */
export interface ConnectionOwner {
  /** `host` header when the caller gives none. */
  readonly host: string
  readonly headersTimeoutMs: number
  /** How long an idle connection is kept (a server's shorter `Keep-Alive: timeout` wins). */
  readonly keepAliveMs: number
  /** The connection finished a call and can take the next (or idles). */
  released(conn: H1Connection): void
  /** The connection is gone. */
  closed(conn: H1Connection): void
  /** A call that never reached the backend (a reused connection closed under it): run it again. */
  retry(call: H1Call): void
  /** A call aborted while it waited for a connection. */
  dequeue(call: H1Call): void
  /**
   * Bytes nobody asked for came on the connection (while it was idle, or after an answer
   * was complete): the backend's other connections are in doubt too.
   */
  stray(conn: H1Connection): void
}

/**
 * A dispatch handler that may be given chunks lent from the connection's read buffer
 * (`ReadBuffer`): a chunk passed to its onResponseData is valid until that call returns
 * unless the handler says otherwise. After each socket read, `chunkReleased()` answers
 * whether the handler let go of every chunk it got in that read (it copied what it keeps, or
 * kept nothing): true lets the connection read the next bytes into the same buffer; false
 * (or a handler without the method) gives the kept chunk that buffer, and the connection
 * reads on into a new one. Handlers that wrap others and may keep chunks (trace capture,
 * response interceptors, LLM usage, retries) do not have the method: they get buffers of
 * their own, as before.
 */
export interface LendingHandler extends Dispatcher.DispatchHandler {
  chunkReleased?(): boolean
}

/**
 * Bytes a plain TCP backend connection reads into one buffer of its own (net's `onread`),
 * reused while nothing keeps what was read, instead of Node's fresh 64 KiB allocation per
 * read: on a 64 KiB answer that was 5-10 % of the CPU per request (bench/README.md). A
 * reader that keeps a chunk (a paused call's held bytes, a head split across reads, a
 * handler that queued it: see LendingHandler) takes the buffer with it and the connection
 * allocates another. TLS and tunnelled connections, and connections opened for an upgrade
 * (whose socket is handed on as a stream), read as Node does.
 */
export const READ_BUFFER_SIZE = 64 * 1024

export class ReadBuffer {
  buffer: Buffer = Buffer.allocUnsafeSlow(READ_BUFFER_SIZE)
  conn: H1Connection | null = null
  /** net.connect's `onread` option: the buffer for the next read, and the read's callback. */
  readonly onread = {
    buffer: (): Buffer => this.buffer,
    callback: (nread: number, buf: Buffer): boolean => {
      this.conn?.onRead(this, nread, buf)
      return true
    }
  }
}

/** Methods safe to send again when a reused connection turned out to be closed (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE'])

/** A dispatched request: its options, its handler, and the controller the handler gets. */
export class H1Call implements Dispatcher.DispatchController {
  readonly options: Dispatcher.DispatchOptions
  readonly handler: Dispatcher.DispatchHandler
  readonly owner: ConnectionOwner
  conn: H1Connection | null = null
  aborted = false
  paused = false
  reason: Error | null = null
  /** The handler got its last callback. */
  finished = false
  retried = false

  constructor (owner: ConnectionOwner, options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
    this.owner = owner
    this.options = options
    this.handler = handler
  }

  abort (reason: Error): void {
    if (this.finished) return
    this.aborted = true
    this.reason = reason
    if (this.conn !== null) this.conn.drop(this)
    else this.owner.dequeue(this)
    this.fail(reason)
  }

  pause (): void {
    if (this.paused) return
    this.paused = true
    this.conn?.pauseReading()
  }

  resume (): void {
    if (!this.paused) return
    this.paused = false
    this.conn?.resumeReading()
  }

  /** Ends the call with an error (once; nothing after the handler's last callback). */
  fail (err: Error): void {
    if (this.finished) return
    this.finished = true
    this.handler.onResponseError?.(this, err)
  }
}

export class H1Connection implements ResponseEvents {
  readonly socket: Socket
  private readonly owner: ConnectionOwner
  private readonly parser: H1ResponseParser
  call: H1Call | null = null
  connecting = true
  /** Requests this connection has carried. */
  private requests = 0
  private reused = false
  /** Bytes of the current call's answer received. */
  private received = 0
  private ended: ResponseHeaders | null = null
  private reusable = true
  private executing = false
  /** Bytes read while the call was paused. */
  private held: Buffer | null = null
  private headersTimer: NodeJS.Timeout | null = null
  private idleTimer: NodeJS.Timeout | null = null
  private idleTimerMs = 0
  /** The server's keep-alive timeout less a second, in ms (Infinity: it named none). */
  private hintMs = Infinity
  /** The connection ended while a paused call held a close-delimited body's last bytes. */
  private eofPending = false
  private head: ResponseHead | null = null
  /** Why the socket failed, if it did. */
  error: Error | null = null
  // The request body being streamed, when it is a stream.
  private body: Readable | null = null
  private bodyFraming: Framing = Framing.None
  private bodyLeft = 0
  private bodyDone = true
  private waitingForDrain = false
  /** The socket reads into this buffer (net's `onread`), null when it reads as Node does. */
  private readonly reads: ReadBuffer | null
  /** The handler given a chunk of the read in progress (lent from `reads`). */
  private borrower: LendingHandler | null = null

  constructor (owner: ConnectionOwner, socket: Socket, reads: ReadBuffer | null = null) {
    this.owner = owner
    this.socket = socket
    this.reads = reads
    this.parser = new H1ResponseParser(this)
    if (reads !== null) reads.conn = this
    else socket.on('data', chunk => this.onSocketData(chunk as Buffer))
    socket.on('end', () => this.onSocketEnd())
    socket.on('error', err => { this.error ??= err })
    socket.on('close', () => this.onSocketClose())
    socket.on('drain', () => this.onSocketDrain())
  }

  get idle (): boolean {
    return this.call === null && !this.connecting && !this.socket.destroyed
  }

  /**
   * Bytes came while it was idle that the 'data' listener has not seen (held in the stream's
   * buffer, were the socket paused): it must not carry another request. (Its end needs no
   * check: the 'end' listener destroys it.) A socket reading into its own buffer keeps no
   * stream buffer: stopped, it leaves what came in the kernel, where nothing can count it, so
   * a stopped one counts as holding bytes.
   */
  unsolicited (): boolean {
    return this.socket.readableLength !== 0 || (this.reads !== null && this.socket.isPaused())
  }

  /** Whether this connection can carry `call`: an upgrade needs a socket that reads as a stream. */
  fits (call: H1Call): boolean {
    return this.reads === null || typeof call.options.upgrade !== 'string'
  }

  /** Runs a call: writes its request, reads its answer. */
  run (call: H1Call): void {
    let built
    try {
      built = requestHead(call.options, this.owner.host)
    } catch (err) {
      call.fail(err as Error)
      this.owner.released(this)
      return
    }
    this.call = call
    call.conn = this
    this.reused = this.requests++ > 0
    this.received = 0
    this.ended = null
    this.reusable = true
    this.held = null
    this.eofPending = false
    const upgrade = typeof call.options.upgrade === 'string'
    this.parser.expect(call.options.method, upgrade)
    if (this.owner.headersTimeoutMs <= 0) {
      // No pool limit: the call's own clock (http/call-timers.ts) bounds the wait.
    } else if (this.headersTimer === null) this.headersTimer = setTimeout(onHeadersTimeout, this.owner.headersTimeoutMs, this).unref()
    else this.headersTimer.refresh()
    this.socket.ref()
    if (call.paused) this.pauseReading()

    const socket = this.socket
    const body = call.options.body as Buffer | Readable | null | undefined
    if (built.framing === Framing.None || body == null) {
      this.bodyDone = true
      socket.write(built.head, 'latin1')
    } else if (Buffer.isBuffer(body)) {
      this.bodyDone = true
      socket.cork()
      socket.write(built.head, 'latin1')
      if (body.length > 0) socket.write(body)
      socket.uncork()
    } else {
      socket.write(built.head, 'latin1')
      this.streamBody(body, built.framing, built.length)
    }
  }

  // --- the request body ---

  private streamBody (body: Readable, framing: Framing, length: number): void {
    this.body = body
    this.bodyFraming = framing
    this.bodyLeft = length
    this.bodyDone = false
    this.waitingForDrain = false
    body.on('data', this.onBodyData)
    body.on('end', this.onBodyEnd)
    body.on('error', this.onBodyError)
    body.on('close', this.onBodyClose)
    // A stream that already ended or broke emits nothing more: settle it now.
    if (body.readableEnded) this.onBodyEnd()
    else if (body.destroyed) this.onBodyClose()
    else body.resume()
  }

  private readonly onBodyData = (chunk: Buffer | string): void => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    if (data.length === 0) return
    const socket = this.socket
    let ok: boolean
    if (this.bodyFraming === Framing.Length) {
      this.bodyLeft -= data.length
      if (this.bodyLeft < 0) {
        this.failCall(new PorticoError('PORTICO_REQUEST_LENGTH_MISMATCH', 'request body longer than its content-length'))
        return
      }
      ok = socket.write(data)
    } else {
      socket.cork()
      socket.write(data.length.toString(16) + '\r\n', 'latin1')
      socket.write(data)
      ok = socket.write('\r\n', 'latin1')
      socket.uncork()
    }
    if (!ok && !this.waitingForDrain) {
      this.waitingForDrain = true
      this.body?.pause()
    }
  }

  private onSocketDrain (): void {
    if (!this.waitingForDrain) return
    this.waitingForDrain = false
    this.body?.resume()
  }

  private readonly onBodyEnd = (): void => {
    if (this.bodyFraming === Framing.Length && this.bodyLeft !== 0) {
      this.failCall(new PorticoError('PORTICO_REQUEST_LENGTH_MISMATCH', `request body ${this.bodyLeft} bytes shorter than its content-length`))
      return
    }
    if (this.bodyFraming === Framing.Chunked) this.socket.write('0\r\n\r\n', 'latin1')
    this.bodyDone = true
    this.detachBody()
    if (this.ended !== null) this.finishCall()
  }

  private readonly onBodyError = (err: Error): void => {
    this.failCall(err)
  }

  private readonly onBodyClose = (): void => {
    if (this.bodyDone) return
    // A plain Error on purpose: it carries Node's own code, as a stream's premature close does, so call-failure.ts classifies both alike.
    const err = new Error('the request body ended before it was complete') as Error & { code: string }
    err.code = 'ERR_STREAM_PREMATURE_CLOSE'
    this.failCall(err)
  }

  private detachBody (): void {
    const body = this.body
    if (body === null) return
    this.body = null
    body.off('data', this.onBodyData)
    body.off('end', this.onBodyEnd)
    body.off('error', this.onBodyError)
    body.off('close', this.onBodyClose)
    // An error after this must not be unhandled.
    body.on('error', noop)
    this.waitingForDrain = false
  }

  // --- the response ---

  pauseReading (): void {
    this.parser.paused = true
    this.socket.pause()
  }

  resumeReading (): void {
    this.parser.paused = false
    this.socket.resume()
    if (this.executing) return
    const call = this.call
    if (this.held !== null) {
      const held = this.held
      this.held = null
      this.feed(held)
    }
    // The connection ended while paused: a close-delimited body is complete once its held bytes are out.
    if (this.eofPending && call !== null && this.call === call && this.held === null && !this.parser.paused && this.parser.finish()) this.finishCall()
  }

  /**
   * A read into `reads` (net's `onread`): the bytes are handled as a 'data' chunk would be,
   * then the buffer is kept for the next read unless something holds on to them.
   */
  onRead (reads: ReadBuffer, nread: number, buf: Buffer): void {
    this.borrower = null
    this.onSocketData(buf.subarray(0, nread))
    const borrower = this.borrower as LendingHandler | null
    this.borrower = null
    if (this.held !== null || this.parser.holdsBytes || (borrower !== null && borrower.chunkReleased?.() !== true)) {
      reads.buffer = Buffer.allocUnsafeSlow(READ_BUFFER_SIZE)
    }
  }

  private onSocketData (chunk: Buffer): void {
    const call = this.call
    if (call === null) {
      // Empty lines may be dropped (RFC 9112 §9.2: some servers end an answer with one more).
      if (onlyCrlf(chunk, 0)) return
      // Bytes nobody asked for (the socket is read while idle so that they are seen): whatever
      // comes next on this connection is suspect, and so are the backend's other connections.
      this.socket.destroy()
      this.owner.stray(this)
      return
    }
    this.received += chunk.length
    if (this.held !== null) {
      this.held = Buffer.concat([this.held, chunk])
      return
    }
    if (call.paused) {
      this.held = chunk
      return
    }
    this.feed(chunk)
  }

  private feed (chunk: Buffer): void {
    const call = this.call!
    let at: number
    this.executing = true
    try {
      at = this.parser.execute(chunk)
    } catch (err) {
      this.executing = false
      if (this.call === call) this.failCall(err as Error)
      return
    }
    this.executing = false
    if (this.call !== call) return
    if (this.parser.upgraded) {
      this.upgrade(call, chunk.subarray(at))
      return
    }
    if (this.ended !== null) {
      if (at < chunk.length && !onlyCrlf(chunk, at)) {
        // Bytes after a complete answer in the same read (other than empty lines, RFC 9112
        // §9.2): the answer is passed on (as nginx and Envoy do), the connection is not
        // reused, and the backend is in doubt.
        this.reusable = false
        this.owner.stray(this)
      }
      this.finishCall()
      return
    }
    if (at < chunk.length) this.held = chunk.subarray(at)
  }

  onHead (head: ResponseHead): void {
    const call = this.call!
    if (head.keepAliveHint !== null) this.hintMs = head.keepAliveHint * 1000 - 1000
    if (this.parser.upgraded) {
      this.head = head
      return
    }
    try {
      call.handler.onResponseStart?.(call, head.statusCode, head.headers, head.statusMessage)
    } catch (err) {
      this.parser.paused = true
      this.failCall(err as Error)
    }
    if (this.call !== call) this.parser.paused = true
  }

  onData (chunk: Buffer): void {
    const call = this.call!
    this.borrower = call.handler
    try {
      call.handler.onResponseData?.(call, chunk)
    } catch (err) {
      this.parser.paused = true
      this.failCall(err as Error)
    }
    if (this.call !== call) this.parser.paused = true
  }

  onEnd (trailers: ResponseHeaders): void {
    this.ended = trailers
  }

  private upgrade (call: H1Call, rest: Buffer): void {
    const head = this.head!
    this.head = null
    const socket = this.socket
    this.call = null
    call.conn = null
    call.finished = true
    socket.removeAllListeners('data')
    socket.removeAllListeners('end')
    socket.removeAllListeners('close')
    socket.removeAllListeners('drain')
    socket.removeAllListeners('error')
    if (this.headersTimer !== null) clearTimeout(this.headersTimer)
    if (this.idleTimer !== null) clearTimeout(this.idleTimer)
    this.owner.closed(this)
    // Paused, so the bytes after the head wait for the new owner (who resumes, e.g. by piping).
    socket.pause()
    if (rest.length > 0) socket.unshift(rest)
    try {
      call.handler.onRequestUpgrade?.(call, head.statusCode, head.headers, socket)
    } catch (err) {
      socket.destroy(err as Error)
    }
  }

  /** The answer is complete: the connection goes back to the pool (or closes), then the handler hears. */
  private finishCall (): void {
    const call = this.call!
    const trailers = this.ended!
    if (!this.bodyDone) {
      // The backend answered before taking the whole body (a 413, say): the rest is not sent
      // and the connection cannot carry another request.
      this.detachBody()
      this.reusable = false
      this.bodyDone = true
    }
    this.call = null
    call.conn = null
    call.finished = true
    this.release(this.reusable && this.parser.reusable)
    try {
      call.handler.onResponseEnd?.(call, trailers)
    } catch {}
  }

  private release (reusable: boolean): void {
    this.ended = null
    this.held = null
    if (!reusable || this.socket.destroyed) {
      this.socket.destroy()
      return
    }
    this.socket.unref()
    this.parser.paused = false
    this.socket.resume()
    this.armIdle()
    this.owner.released(this)
  }

  private armIdle (): void {
    const ms = Math.min(this.owner.keepAliveMs, this.hintMs)
    if (ms <= 0) {
      this.socket.destroy()
      return
    }
    if (this.idleTimer !== null && this.idleTimerMs === ms) {
      // One timer per connection, re-armed: it may fire while the connection is busy, and then does nothing.
      this.idleTimer.refresh()
      return
    }
    if (this.idleTimer !== null) clearTimeout(this.idleTimer)
    this.idleTimerMs = ms
    this.idleTimer = setTimeout(onIdleTimeout, ms, this).unref()
  }

  /** The caller aborted its call: the connection is cut (the rest of the answer would be in the way). */
  drop (call: H1Call): void {
    if (this.call !== call) return
    this.call = null
    call.conn = null
    this.parser.paused = true
    this.detachBody()
    this.socket.destroy()
  }

  private failCall (err: Error): void {
    const call = this.call
    if (call === null) return
    this.call = null
    call.conn = null
    this.parser.paused = true
    this.detachBody()
    this.socket.destroy()
    call.fail(err)
  }

  private onSocketEnd (): void {
    const call = this.call
    if (call !== null && this.parser.untilClose) {
      // A body delimited by the connection's end.
      if (this.executing || this.held !== null || call.paused) {
        this.eofPending = true
        return
      }
      this.parser.finish()
      this.reusable = false
      this.finishCall()
      return
    }
    this.socket.destroy()
  }

  private onSocketClose (): void {
    if (this.headersTimer !== null) clearTimeout(this.headersTimer)
    if (this.idleTimer !== null) clearTimeout(this.idleTimer)
    const call = this.call
    if (call !== null) {
      this.call = null
      call.conn = null
      this.detachBody()
      if (this.reused && this.received === 0 && !call.retried && !call.aborted && IDEMPOTENT.has(call.options.method) && isReplayable(call.options.body) && typeof call.options.upgrade !== 'string') {
        // The backend closed a kept-alive connection as this request went out on it: the
        // request never reached it, and sending it again is safe.
        call.retried = true
        this.owner.closed(this)
        this.owner.retry(call)
        return
      }
      call.fail(this.error ?? new PorticoError('PORTICO_UPSTREAM_CLOSED', this.received === 0 ? 'backend closed the connection without answering' : 'backend closed the connection before the response was complete'))
    }
    this.owner.closed(this)
  }

  /**
   * The headers timeout fired. The timer is re-armed when each call starts, so it fires
   * `headersTimeoutMs` after the current call's start: the call fails if it still has no head.
   */
  checkHeadersTimeout (): void {
    const call = this.call
    if (call === null || this.parser.headRead) return
    const limit = this.owner.headersTimeoutMs
    this.failCall(new PorticoError('PORTICO_UPSTREAM_HEADERS_TIMEOUT', `no response headers from the backend within ${limit} ms`))
  }

  idleTimeout (): void {
    if (this.idle) this.socket.destroy()
  }
}

function onHeadersTimeout (conn: H1Connection): void {
  conn.checkHeadersTimeout()
}

function onIdleTimeout (conn: H1Connection): void {
  conn.idleTimeout()
}

function isReplayable (body: unknown): boolean {
  return body == null || Buffer.isBuffer(body)
}

function noop (): void {}

/** `buf` from `from` holds only CR and LF bytes (empty lines). */
function onlyCrlf (buf: Buffer, from: number): boolean {
  for (let i = from; i < buf.length; i++) {
    const c = buf[i]
    if (c !== 13 && c !== 10) return false
  }
  return true
}
