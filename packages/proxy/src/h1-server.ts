/**
 * The server side of HTTP/1.1, on HTTP and HTTPS listeners (after TLS; h2 stays with Node's
 * HTTP/2 server): Node's own parser (llhttp, through the
 * binding node:http's server uses, with the same strictness, lenience flags and 16 KiB head
 * limit), and a request and a response that are only what the engine uses of Node's
 * (`InboundRequest`/`InboundResponse`, @portico/engine's http/inbound.ts).
 *
 * Why: counted per small GET, Node's HTTP/1.1 server (IncomingMessage, ServerResponse, their
 * stream machinery, a timer re-armed per request) ran ~77,000 instructions on the event
 * loop's thread and ~143,000 in all threads, against ~23,000 and ~27,000 for the same parser
 * driven directly (bench/README.md, "the server side's share"). What this keeps of Node's
 * server, each the same as there: the parser fed from the socket's handle in C++ (`consume`),
 * headers joined by IncomingMessage's own rule (`_addHeaderLine`), names and values of the
 * response head checked by node:http's validators, the response head's framing
 * (Content-Length for a body given whole, else chunked; Connection and Keep-Alive as Node
 * writes them), a 400 for an HTTP/1.1 request without Host, `Expect: 100-continue` answered
 * with a 100 and any other expectation with a 417, upgrades handed over with the bytes read
 * past their head, and pipelined requests answered in order.
 *
 * What differs: pipelined requests are served one after another (Node starts them all at
 * once and queues their answers); the head deadline and the keep-alive idle limit are
 * checked by one sweep per listener every HEAD_CHECK_MS (Node: a C++ list checked on the same
 * period, and a socket timer re-armed after each response).
 *
 * An upgrade's own answers (refusals before the backend accepted it) are written by Node's
 * ServerResponse on the handed-over socket (engine http/upgrade.ts).
 */

import dc from 'node:diagnostics_channel'
import { EventEmitter } from 'node:events'
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'
import type { Socket } from 'node:net'
import { Readable } from 'node:stream'
import http from '@portico/engine/node-http'
import { performance } from '@portico/engine/clock'
import { SlotSet } from '@portico/engine/slot-set'
import type { InboundRequest, InboundResponse } from '@portico/engine/serving'

/** The parts of node:_http_common this uses (Node's own parser binding and its rules). */
interface HttpCommon {
  HTTPParser: ParserClass
  methods: string[]
  calculateLenientFlags: (httpValidation: string | undefined, insecure: boolean | undefined) => number
  prepareError: (err: Error, parser: Parser, rawPacket: Buffer | undefined) => void
  continueExpression: RegExp
  chunkExpression: RegExp
  /** node:http's check of a header value, status message or trailer (true: a character it refuses). */
  _checkInvalidHeaderChar: (value: string) => boolean
}

interface ParserClass {
  new (): Parser
  REQUEST: number
  kOnMessageBegin: number
  kOnHeaders: number
  kOnHeadersComplete: number
  kOnBody: number
  kOnMessageComplete: number
  kOnExecute: number
}

interface Parser {
  [callback: number]: unknown
  initialize: (type: number, resource: object, maxHeaderSize: number, lenientFlags: number) => void
  consume: (handle: unknown) => void
  unconsume: () => void
  execute: (data: Buffer) => number | Error
  finish: () => number | Error | undefined
  getCurrentBuffer: () => Buffer
  remove: () => void
  free: () => void
  close: () => void
}

const common = process.getBuiltinModule('_http_common') as unknown as HttpCommon
const { HTTPParser, methods, continueExpression, chunkExpression } = common
const kOnMessageBegin = HTTPParser.kOnMessageBegin | 0
const kOnHeaders = HTTPParser.kOnHeaders | 0
const kOnHeadersComplete = HTTPParser.kOnHeadersComplete | 0
const kOnBody = HTTPParser.kOnBody | 0
const kOnMessageComplete = HTTPParser.kOnMessageComplete | 0
const kOnExecute = HTTPParser.kOnExecute | 0

/** IncomingMessage's rule for a repeated field (joined, the first kept, or Set-Cookie's list). */
const addHeaderLine = (http.IncomingMessage.prototype as unknown as { _addHeaderLine: (this: { joinDuplicateHeaders: boolean }, name: string, value: string, dest: IncomingHttpHeaders) => void })._addHeaderLine
const JOIN_RULE = { joinDuplicateHeaders: false }
/** node:_http_common's MAX_HEADER_PAIRS: entries of the flat name/value list kept (1,000 fields). */
const MAX_HEADER_ENTRIES = 2000
/** How often head deadlines and idle keep-alive connections are checked (as listeners.ts has Node do). */
export const HEAD_CHECK_MS = 250
/** Pipelined requests waiting for their turn before the connection stops reading. */
const MAX_WAITING = 16
/** Node's keepAliveTimeoutBuffer: the connection is kept this much past what Keep-Alive announces. */
const KEEP_ALIVE_BUFFER_MS = 1_000

const RE_CONN_CLOSE = /(?:^|\W)close(?:$|\W)/i
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

/**
 * node:http's server channels (its documented diagnostics_channel names), published as Node's
 * server publishes them, for tools that watch them (APM agents, tests' probes); a check of
 * `hasSubscribers` per request when nobody does.
 */
const requestStart = dc.channel('http.server.request.start')
const responseCreated = dc.channel('http.server.response.created')
const responseFinish = dc.channel('http.server.response.finish')

/** Date header value, computed at most once a second (as Node's utcDate). */
let dateCache: string | undefined
function utcDate (): string {
  if (dateCache === undefined) {
    const d = new Date()
    dateCache = d.toUTCString()
    setTimeout(() => { dateCache = undefined }, 1000 - d.getMilliseconds()).unref()
  }
  return dateCache
}

export interface H1ServerOptions {
  /** The head deadline now (a reload may change it): the 408 after this long without a whole head. */
  headersTimeoutMs: () => number
  /** Keep-alive: an idle connection is closed this long (plus a second) after its last answer; announced in Keep-Alive. */
  keepAliveTimeoutMs: number
  /** The engine's handler: it takes these as any server's request and response (the call proves they fit). */
  onRequest: (req: InboundRequest, res: InboundResponse) => void
  /** Whether an `Upgrade` request leaves HTTP (else it is served as a plain request). */
  shouldUpgrade: (req: InboundRequest) => boolean
  /** An upgrade: the socket, its parser gone, and what the client sent past the head. */
  onUpgrade: (req: InboundRequest, socket: Socket, head: Buffer) => void
  /**
   * A malformed request, a head past its deadline (`ERR_HTTP_REQUEST_TIMEOUT`) or a socket
   * error; `socket._httpMessage` is the response in progress, if any (as with Node's
   * `clientError`).
   */
  onClientError: (err: NodeJS.ErrnoException, socket: Socket) => void
  /** The listening server named in the diagnostics channels' messages. */
  server?: object
}

/** One listener's HTTP/1.1 connections. */
export class H1Server {
  readonly options: H1ServerOptions
  /** Not a Set: connections come and go all the time (util/slot-set.ts says why that matters). */
  readonly connections = new SlotSet<H1Connection>({ get: conn => conn.slot, set: (conn, slot) => { conn.slot = slot } })
  private sweep: NodeJS.Timeout | null = null

  constructor (options: H1ServerOptions) {
    this.options = options
  }

  /** Serves a connection (the listener's, or one handed over); bytes already read and put back are read first. */
  serve (socket: Socket): void {
    const conn = new H1Connection(this, socket)
    this.connections.add(conn)
    this.sweep ??= setInterval(() => this.check(), HEAD_CHECK_MS).unref()
  }

  /** Closes the connections between requests (a drain); those with a request in progress finish it first. */
  closeIdleConnections (): void {
    this.connections.forEach(conn => { if (conn.idleSince >= 0) conn.socket.destroy() })
  }

  close (): void {
    if (this.sweep !== null) clearInterval(this.sweep)
    this.sweep = null
  }

  forget (conn: H1Connection): void {
    this.connections.delete(conn)
    if (this.connections.size === 0 && this.sweep !== null) {
      clearInterval(this.sweep)
      this.sweep = null
    }
  }

  /** The sweep: heads past their deadline get a 408; connections idle past keep-alive are closed. */
  private check (): void {
    const now = performance.now()
    const headDeadline = this.options.headersTimeoutMs()
    const idleDeadline = this.options.keepAliveTimeoutMs + KEEP_ALIVE_BUFFER_MS
    this.connections.forEach(conn => {
      if (conn.headStart >= 0 && headDeadline > 0 && now - conn.headStart >= headDeadline) {
        conn.headStart = -1
        const err = new Error('Request timeout') as NodeJS.ErrnoException
        err.code = 'ERR_HTTP_REQUEST_TIMEOUT'
        conn.clientError(err)
      } else if (conn.idleSince >= 0 && now - conn.idleSince >= idleDeadline) {
        conn.socket.destroy()
      }
    })
  }
}

/** The parser's callbacks, as functions of the parser (`this`) so one set serves every connection. */
function onMessageBegin (this: { conn: H1Connection }): void {
  const conn = this.conn
  conn.headStart = performance.now()
  conn.idleSince = -1
}

function onHeaders (this: { conn: H1Connection }, headers: string[], url: string): void {
  const conn = this.conn
  const room = MAX_HEADER_ENTRIES - conn.partialHeaders.length
  if (room >= headers.length) conn.partialHeaders.push(...headers)
  else if (room > 0) conn.partialHeaders.push(...headers.slice(0, room))
  conn.partialUrl += url
}

function onHeadersComplete (this: { conn: H1Connection }, major: number, minor: number, headers: string[] | undefined, method: number, url: string | undefined, _status: unknown, _message: unknown, upgrade: boolean, keepAlive: boolean): number {
  return this.conn.onHead(major, minor, headers, method, url, upgrade, keepAlive)
}

function onBody (this: { conn: H1Connection }, chunk: Buffer): void {
  const req = this.conn.current
  if (req === null || req.dumped) return
  if (!req.push(chunk)) this.conn.readStop()
}

function onMessageComplete (this: { conn: H1Connection }): void {
  const conn = this.conn
  const req = conn.current
  if (req !== null) {
    req.complete = true
    if (conn.partialHeaders.length > 0) {
      // Trailers: kept raw, as IncomingMessage's rawTrailers (the engine reads none).
      req.rawTrailers = conn.partialHeaders
      conn.partialHeaders = []
      conn.partialUrl = ''
    }
    conn.current = null
    req.push(null)
  }
  if (conn.waiting.length < MAX_WAITING) conn.readStart()
}

function onExecute (this: { conn: H1Connection }, ret: number | Error): void {
  this.conn.afterExecute(ret, undefined)
}

function startNext (conn: H1Connection): void {
  conn.startNext()
}

/** One connection: its parser, the request being read, the response being written, and those waiting. */
export class H1Connection {
  readonly server: H1Server
  readonly socket: Socket
  /** Its place in the server's connections. */
  slot = -1
  private parser: (Parser & { conn: H1Connection }) | null
  /** Whether the parser reads the socket's handle itself (else 'data' events feed it). */
  private consumed = false
  /** The request whose head is parsed and whose body is being read. */
  current: H1Request | null = null
  /** The response that owns the socket. */
  active: H1Response | null = null
  /** An upgrade whose head is parsed, handed over once the parser returns (its message may complete first). */
  private upgrading: H1Request | null = null
  /** Pipelined requests with their responses, in order. */
  readonly waiting: Array<[H1Request, H1Response]> = []
  /** When the head now arriving began (performance.now()), -1 when none is. */
  headStart: number
  /** Since when the connection has been between requests, -1 while one is in progress. */
  idleSince = -1
  partialHeaders: string[] = []
  partialUrl = ''
  /** Upgraded: the socket belongs to the upgrade's handler. */
  private handedOver = false
  /** Its HTTP broke (a malformed request, a head too slow, a socket error): reported once, nothing more is parsed. */
  private broken = false
  private readonly onData = (data: Buffer): void => { this.afterExecute(this.parser === null ? 0 : this.parser.execute(data), data) }
  private readonly onEnd = (): void => this.end()
  private readonly onClose = (): void => this.closed()
  private readonly onError = (err: NodeJS.ErrnoException): void => this.clientError(err)
  private readonly onDrain = (): void => this.active?.drained()

  constructor (server: H1Server, socket: Socket) {
    this.server = server
    this.socket = socket
    // A connection that sends nothing is cut at the head deadline, as one that sends half a head.
    this.headStart = performance.now()
    const parser = new HTTPParser() as Parser & { conn: H1Connection }
    parser.initialize(HTTPParser.REQUEST, {}, 0, common.calculateLenientFlags(undefined, undefined))
    parser.conn = this
    parser[kOnMessageBegin] = onMessageBegin
    parser[kOnHeaders] = onHeaders
    parser[kOnHeadersComplete] = onHeadersComplete
    parser[kOnBody] = onBody
    parser[kOnMessageComplete] = onMessageComplete
    parser[kOnExecute] = onExecute
    this.parser = parser
    // Where the engine looks for the bytes the parser is working through (http/upgrade.ts), as on Node's sockets.
    ;(socket as Socket & { parser?: Parser | null }).parser = parser
    socket.on('data', this.onData)
    socket.on('end', this.onEnd)
    socket.on('close', this.onClose)
    socket.on('error', this.onError)
    socket.on('drain', this.onDrain)
    const handle = (socket as Socket & { _handle?: { isStreamBase?: boolean, _consumed?: boolean } | null })._handle
    if (handle?.isStreamBase === true && handle._consumed !== true) {
      handle._consumed = true
      this.consumed = true
      parser.consume(handle)
    }
  }

  /** A request's head is parsed: 0 to go on, 2 for an upgrade (the parser stops at its head). */
  onHead (major: number, minor: number, headers: string[] | undefined, method: number, url: string | undefined, upgrade: boolean, keepAlive: boolean): number {
    if (headers === undefined) {
      headers = this.partialHeaders
      this.partialHeaders = []
    }
    if (url === undefined) {
      url = this.partialUrl
      this.partialUrl = ''
    }
    this.headStart = -1
    const req = new H1Request(this, major, minor, methods[method] ?? '', url, headers.length > MAX_HEADER_ENTRIES ? headers.slice(0, MAX_HEADER_ENTRIES) : headers)
    this.current = req
    if (upgrade) {
      if (req.method === 'CONNECT' || this.server.options.shouldUpgrade(req)) {
        req.upgrade = true
        this.upgrading = req
        return 2
      }
    }
    const res = new H1Response(this, req, keepAlive)
    if (this.active === null && this.waiting.length === 0) this.start(req, res)
    else {
      this.waiting.push([req, res])
      if (this.waiting.length >= MAX_WAITING) this.readStop()
    }
    return 0
  }

  /** After the parser went through bytes: a parse error, an upgrade to hand over, or an HTTP/2 preface. */
  afterExecute (ret: number | Error, data: Buffer | undefined): void {
    if (this.broken) return
    if (ret instanceof Error) {
      common.prepareError(ret, this.parser!, data)
      this.clientError(ret as NodeJS.ErrnoException)
      return
    }
    const upgrade = this.upgrading
    if (upgrade !== null) {
      this.upgrading = null
      this.handOver(upgrade, ret, data ?? this.parser!.getCurrentBuffer())
      return
    }
    // The HTTP/2 preface read as an HTTP/1.1 request (a listener without h2c): not HTTP/1.1.
    if (this.current?.method === 'PRI') this.socket.destroy()
  }

  /** The request's turn: its response owns the socket. */
  private start (req: H1Request, res: H1Response): void {
    this.active = res
    this.idleSince = -1
    ;(this.socket as Socket & { _httpMessage?: unknown })._httpMessage = res
    if (requestStart.hasSubscribers) requestStart.publish({ request: req, response: res, socket: this.socket, server: this.server.options.server })
    if (req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (Node's requireHostHeader).
      if (req.headers.host === undefined) {
        res.writeHead(400, ['Connection', 'close'])
        res.end()
        return
      }
      const expect = req.headers.expect
      if (expect !== undefined) {
        if (!continueExpression.test(expect)) {
          res.writeHead(417)
          res.end()
          return
        }
        res.expectContinue = true
        res.sent100 = true
        this.socket.write(CONTINUE, 'latin1')
      }
    }
    this.server.options.onRequest(req, res)
  }

  /** A response finished (its last bytes went out): the next request's turn, or the connection rests or closes. */
  finished (res: H1Response): void {
    if (this.active !== res) return
    this.active = null
    ;(this.socket as Socket & { _httpMessage?: unknown })._httpMessage = null
    const req = res.req
    if (responseFinish.hasSubscribers) responseFinish.publish({ request: req, response: res, socket: this.socket, server: this.server.options.server })
    // Answered before its body was all read: the rest is read and dropped (Node's _dump).
    if (!req.complete) {
      req.dumped = true
      this.readStart()
    }
    process.nextTick(emitClose, res)
    if (this.handedOver) return
    if (res.last) {
      this.socket.destroySoon()
      return
    }
    if (this.waiting.length > 0) {
      // After this response's own 'finish' listeners, as Node's next response is served after them.
      process.nextTick(startNext, this)
    } else {
      this.idleSince = performance.now()
    }
  }

  /** The first waiting request's turn. */
  startNext (): void {
    if (this.active !== null || this.socket.destroyed) return
    const next = this.waiting.shift()
    if (next === undefined) return
    if (this.waiting.length < MAX_WAITING) this.readStart()
    this.start(next[0], next[1])
  }

  /** Gives the socket to the upgrade's handler, with the bytes read past the head. */
  private handOver (req: H1Request, parsed: number, data: Buffer): void {
    this.handedOver = true
    this.current = null
    this.idleSince = -1
    this.headStart = -1
    req.complete = true
    req.push(null)
    const socket = this.socket
    socket.off('data', this.onData)
    socket.off('end', this.onEnd)
    socket.off('close', this.onClose)
    socket.off('error', this.onError)
    socket.off('drain', this.onDrain)
    this.freeParser()
    this.server.forget(this)
    if (req.method === 'CONNECT') {
      // No CONNECT handler: as Node without a 'connect' listener.
      socket.destroy()
      return
    }
    ;(socket as Socket & { readableFlowing: boolean | null }).readableFlowing = null
    this.server.options.onUpgrade(req, socket, data.subarray(parsed))
  }

  /** The client shut its sending side: a request cut short is an error; else the connection ends (Node without httpAllowHalfOpen). */
  private end (): void {
    const ret = this.parser?.finish()
    if (ret instanceof Error) {
      this.clientError(ret as NodeJS.ErrnoException)
      return
    }
    this.socket.end()
  }

  /** Anything that breaks the connection's HTTP: reported once, as Node's socketOnError does. */
  clientError (err: NodeJS.ErrnoException): void {
    if (this.broken) return
    this.broken = true
    const socket = this.socket
    socket.off('error', this.onError)
    if (socket.listenerCount('error') === 0) socket.on('error', noop)
    this.headStart = -1
    this.idleSince = -1
    this.server.options.onClientError(err, socket)
  }

  private closed (): void {
    this.freeParser()
    this.server.forget(this)
    const req = this.current
    this.current = null
    if (req !== null && !req.complete) req.destroy(connReset())
    const res = this.active
    this.active = null
    if (res !== null) res.lost()
    for (const [waitingReq, waitingRes] of this.waiting.splice(0)) {
      if (!waitingReq.complete) waitingReq.destroy(connReset())
      waitingRes.lost()
    }
  }

  private freeParser (): void {
    const parser = this.parser
    if (parser === null) return
    this.parser = null
    ;(this.socket as Socket & { parser?: Parser | null }).parser = null
    if (this.consumed) parser.unconsume()
    parser.remove()
    // Deleted once the stack has unwound: this may run inside one of its own callbacks.
    setImmediate(closeParser, parser)
  }

  /** Stops reading (a request body's reader is behind, or too many requests wait). */
  readStop (): void {
    const handle = (this.socket as Socket & { _handle?: { reading?: boolean, readStop: () => number } | null })._handle
    if (this.consumed) {
      if (handle != null && handle.reading === true) {
        handle.reading = false
        handle.readStop()
      }
    } else {
      this.socket.pause()
    }
  }

  readStart (): void {
    if (this.parser === null) return
    const handle = (this.socket as Socket & { _handle?: { reading?: boolean, readStart: () => number } | null })._handle
    if (this.consumed) {
      if (handle != null && handle.reading !== true && !this.socket.destroyed) {
        handle.reading = true
        handle.readStart()
      }
    } else {
      this.socket.resume()
    }
  }
}

function noop (): void {}

function closeParser (parser: Parser): void {
  parser.close()
}

function connReset (): NodeJS.ErrnoException {
  const err = new Error('aborted') as NodeJS.ErrnoException
  err.code = 'ECONNRESET'
  return err
}

function emitClose (res: H1Response): void {
  if (res.closeEmitted) return
  res.closeEmitted = true
  res.destroyed = true
  res.emit('close')
}

/**
 * A client's request: its head as IncomingMessage has it, and its body as a readable stream,
 * fed by the parser (push) and paused at the socket when the reader falls behind.
 */
export class H1Request extends Readable {
  readonly headers: IncomingHttpHeaders = {}
  readonly rawHeaders: string[]
  rawTrailers: string[] = []
  readonly method: string
  readonly url: string
  readonly httpVersion: string
  readonly httpVersionMajor: number
  readonly httpVersionMinor: number
  readonly socket: Socket
  complete = false
  upgrade = false
  aborted = false
  /** Answered already: body bytes still arriving are dropped. */
  dumped = false
  private readonly conn: H1Connection

  constructor (conn: H1Connection, major: number, minor: number, method: string, url: string, rawHeaders: string[]) {
    super({ highWaterMark: conn.socket.readableHighWaterMark })
    this.conn = conn
    this.socket = conn.socket
    this.httpVersionMajor = major
    this.httpVersionMinor = minor
    this.httpVersion = major === 1 && minor === 1 ? '1.1' : `${major}.${minor}`
    this.method = method
    this.url = url
    this.rawHeaders = rawHeaders
    const headers = this.headers
    for (let i = 0; i < rawHeaders.length; i += 2) addHeaderLine.call(JOIN_RULE, rawHeaders[i]!, rawHeaders[i + 1]!, headers)
  }

  override _read (): void {
    this.conn.readStart()
  }

  /** Destroyed before its body was all read: the connection goes too (as IncomingMessage's). */
  override _destroy (err: Error | null, cb: (err?: Error | null) => void): void {
    if (!this.readableEnded || !this.complete) {
      this.aborted = true
      this.emit('aborted')
      if (!this.socket.destroyed) this.socket.destroy()
    }
    // As IncomingMessage: an error is emitted only to a listener that waits for one.
    cb(this.listenerCount('error') > 0 ? err : null)
  }
}

type HeaderValue = string | number | readonly string[]

/**
 * The response to a request: the head built and checked as Node's ServerResponse builds it,
 * then written with the first body bytes (or at the end, with a Content-Length for a body
 * given whole); 'finish' once its last bytes went to the socket, 'close' after (or when the
 * connection closes first), 'drain' when a write that returned false has gone out.
 */
export class H1Response extends EventEmitter {
  statusCode = 200
  statusMessage = ''
  headersSent = false
  destroyed = false
  writableEnded = false
  writableFinished = false
  chunkedEncoding = false
  shouldKeepAlive: boolean
  socket: Socket | null
  readonly req: H1Request
  /** The connection closes after this response. */
  last = false
  expectContinue = false
  sent100 = false
  closeEmitted = false
  private readonly conn: H1Connection
  private hasBody: boolean
  private readonly useChunkedByDefault: boolean
  private outHeaders: Record<string, [string, HeaderValue]> | null = null
  private head: string | null = null
  private contentLength: number | null = null
  private trailer = ''
  private needDrain = false

  constructor (conn: H1Connection, req: H1Request, keepAlive: boolean) {
    super()
    this.conn = conn
    this.req = req
    this.socket = conn.socket
    this.hasBody = req.method !== 'HEAD'
    if (responseCreated.hasSubscribers) responseCreated.publish({ request: req, response: this })
    // llhttp's verdict (an HTTP/1.0 request keeps the connection only with Connection: keep-alive).
    this.shouldKeepAlive = keepAlive
    // HTTP/1.0 has no chunked bodies unless the client says it takes them (TE: chunked).
    this.useChunkedByDefault = req.httpVersionMajor > 1 || (req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) || chunkExpression.test(String(req.headers.te ?? ''))
  }

  get writableLength (): number {
    return this.socket?.writableLength ?? 0
  }

  setHeader (name: string, value: HeaderValue): this {
    if (this.headersSent) throw headersSentError('set')
    http.validateHeaderName(name)
    http.validateHeaderValue(name, value as string)
    ;(this.outHeaders ??= Object.create(null) as Record<string, [string, HeaderValue]>)[name.toLowerCase()] = [name, value]
    return this
  }

  writeHead (statusCode: number, reason?: string | OutgoingHttpHeaders | HeaderValue[], headers?: OutgoingHttpHeaders | HeaderValue[]): this {
    if (this.headersSent) throw headersSentError('write')
    const code = statusCode | 0
    if (code < 100 || code > 999) {
      const err = new RangeError(`Invalid status code: ${statusCode}`) as RangeError & { code: string }
      err.code = 'ERR_HTTP_INVALID_STATUS_CODE'
      throw err
    }
    let fields: OutgoingHttpHeaders | HeaderValue[] | undefined
    if (typeof reason === 'string') {
      this.statusMessage = reason
      fields = headers
    } else {
      this.statusMessage ||= http.STATUS_CODES[code] ?? 'unknown'
      fields = headers ?? reason
    }
    this.statusCode = code
    if (this.outHeaders !== null && fields !== undefined) {
      // Headers set before, then these: a name given here replaces the earlier value.
      if (Array.isArray(fields)) {
        for (let i = 0; i < fields.length; i += 2) delete this.outHeaders[String(fields[i]).toLowerCase()]
        const merged: HeaderValue[] = []
        for (const [name, value] of Object.values(this.outHeaders)) merged.push(name, value as HeaderValue)
        fields = merged.concat(fields)
      } else {
        for (const name of Object.keys(fields)) {
          const value = (fields as OutgoingHttpHeaders)[name]
          if (value !== undefined) this.setHeader(name, value)
        }
        fields = undefined
      }
    }
    if (common._checkInvalidHeaderChar(this.statusMessage)) {
      const err = new TypeError('Invalid character in statusMessage') as TypeError & { code: string }
      err.code = 'ERR_INVALID_CHAR'
      throw err
    }
    if (code === 204 || code === 304 || code < 200) this.hasBody = false
    // A client told to expect 100 Continue that got a final status may send its body anyway.
    if (this.expectContinue && !this.sent100) this.shouldKeepAlive = false
    this.storeHead(`HTTP/1.1 ${code} ${this.statusMessage}\r\n`, fields)
    return this
  }

  /** The head's text, framed as Node's OutgoingMessage._storeHeader frames it. */
  private storeHead (firstLine: string, fields: OutgoingHttpHeaders | HeaderValue[] | undefined): void {
    const state = { head: firstLine, connection: false, contentLength: false, te: false, date: false, trailer: false, keepAliveHeader: false }
    if (fields === undefined) {
      if (this.outHeaders !== null) for (const key in this.outHeaders) { const [name, value] = this.outHeaders[key]!; this.field(state, name, value, false) }
    } else if (Array.isArray(fields)) {
      if (fields.length % 2 !== 0) throw new TypeError('The argument \'headers\' is invalid')
      for (let i = 0; i < fields.length; i += 2) this.field(state, String(fields[i]), fields[i + 1]!, true)
    } else {
      for (const name in fields) {
        if (!Object.hasOwn(fields, name)) continue
        const value = (fields as OutgoingHttpHeaders)[name]
        if (value === undefined) throw invalidValueError(name)
        this.field(state, name, value, true)
      }
    }
    let head = state.head
    if (!state.date) head += 'Date: ' + utcDate() + '\r\n'
    if (this.chunkedEncoding && (this.statusCode === 204 || this.statusCode === 304)) {
      this.chunkedEncoding = false
      this.shouldKeepAlive = false
    }
    if (!state.connection) {
      const keepAlive = this.shouldKeepAlive && (state.contentLength || this.useChunkedByDefault)
      if (keepAlive) {
        head += 'Connection: keep-alive\r\n'
        if (!state.keepAliveHeader) head += `Keep-Alive: timeout=${Math.floor(this.conn.server.options.keepAliveTimeoutMs / 1000)}\r\n`
      } else {
        this.last = true
        head += 'Connection: close\r\n'
      }
    }
    if (!state.contentLength && !state.te) {
      if (!this.hasBody) this.chunkedEncoding = false
      else if (!this.useChunkedByDefault) this.last = true
      else if (!state.trailer && this.contentLength !== null) head += 'Content-Length: ' + this.contentLength + '\r\n'
      else {
        head += 'Transfer-Encoding: chunked\r\n'
        this.chunkedEncoding = true
      }
    }
    if (!this.chunkedEncoding && state.trailer) {
      const err = new Error('Trailers are invalid with this transfer encoding') as Error & { code: string }
      err.code = 'ERR_HTTP_TRAILER_INVALID'
      throw err
    }
    this.head = head + '\r\n'
    this.headersSent = true
  }

  private field (state: { head: string, connection: boolean, contentLength: boolean, te: boolean, date: boolean, trailer: boolean, keepAliveHeader: boolean }, name: string, value: HeaderValue, validate: boolean): void {
    if (validate) http.validateHeaderName(name)
    if (Array.isArray(value)) {
      const values = value as readonly string[]
      if (values.length < 2 || name.toLowerCase() !== 'cookie') {
        for (const v of values) this.fieldLine(state, name, v, validate)
        return
      }
      value = values.join('; ')
    }
    this.fieldLine(state, name, value as string | number, validate)
  }

  private fieldLine (state: { head: string, connection: boolean, contentLength: boolean, te: boolean, date: boolean, trailer: boolean, keepAliveHeader: boolean }, name: string, value: string | number, validate: boolean): void {
    if (validate) http.validateHeaderValue(name, value as string)
    state.head += name + ': ' + value + '\r\n'
    if (name.length < 4 || name.length > 17) return
    switch (name.toLowerCase()) {
      case 'connection':
        state.connection = true
        if (RE_CONN_CLOSE.test(String(value))) this.last = true
        else this.shouldKeepAlive = true
        break
      case 'transfer-encoding':
        state.te = true
        if (chunkExpression.test(String(value))) this.chunkedEncoding = true
        break
      case 'content-length':
        state.contentLength = true
        this.contentLength = +value
        break
      case 'date':
        state.date = true
        break
      case 'trailer':
        state.trailer = true
        break
      case 'keep-alive':
        state.keepAliveHeader = true
        break
    }
  }

  /** The head for a response written or ended without writeHead. */
  private implicitHead (): void {
    if (!this.headersSent) this.writeHead(this.statusCode)
  }

  write (chunk: string | Uint8Array, encoding?: BufferEncoding | ((err?: Error | null) => void), cb?: (err?: Error | null) => void): boolean {
    if (typeof encoding === 'function') {
      cb = encoding
      encoding = undefined
    }
    if (this.writableEnded || this.destroyed) {
      const err = new Error(this.destroyed ? 'Cannot call write after a stream was destroyed' : 'write after end') as Error & { code: string }
      err.code = this.destroyed ? 'ERR_STREAM_DESTROYED' : 'ERR_STREAM_WRITE_AFTER_END'
      if (cb !== undefined) process.nextTick(cb, err)
      return false
    }
    this.implicitHead()
    if (!this.hasBody) {
      if (cb !== undefined) process.nextTick(cb)
      return true
    }
    const ok = this.send(chunk, encoding, false, cb)
    if (!ok) this.needDrain = true
    return ok
  }

  end (chunk?: string | Uint8Array | (() => void), encoding?: BufferEncoding | (() => void), cb?: () => void): this {
    if (typeof chunk === 'function') {
      cb = chunk
      chunk = undefined
    } else if (typeof encoding === 'function') {
      cb = encoding
      encoding = undefined
    }
    const enc = encoding as BufferEncoding | undefined
    if (this.writableEnded) {
      if (cb !== undefined) this.once('finish', cb)
      return this
    }
    if (!this.headersSent) {
      // A body given whole: its length goes in the head (Node's _contentLength).
      this.contentLength = chunk === undefined || chunk === null ? 0 : typeof chunk === 'string' ? Buffer.byteLength(chunk, enc) : chunk.byteLength
      this.implicitHead()
    }
    this.writableEnded = true
    if (cb !== undefined) this.once('finish', cb)
    if (this.destroyed) return this
    this.send(this.hasBody && chunk !== undefined && chunk !== null ? chunk : '', enc, true, undefined)
    return this
  }

  /** Writes the head if not yet written, then `chunk` (framed when chunked), then the end when `last`. */
  private send (chunk: string | Uint8Array, encoding: BufferEncoding | undefined, end: boolean, cb: ((err?: Error | null) => void) | undefined): boolean {
    const socket = this.socket
    if (socket === null || this.conn.active !== this) {
      // Not this response's turn (pipelined): its bytes wait for it; never the case here,
      // where a request starts only once the one before it has finished.
      return true
    }
    const length = typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk.byteLength
    const head = this.head
    this.head = null
    let ok = true
    const onEnd = end ? (err?: Error | null) => this.onFinish(err) : cb
    if (this.chunkedEncoding && this.hasBody) {
      let prefix = head ?? ''
      if (length > 0) prefix += length.toString(16) + '\r\n'
      const suffix = (length > 0 ? '\r\n' : '') + (end ? '0\r\n' + this.trailer + '\r\n' : '')
      if (length === 0) ok = socket.write(prefix + suffix, 'latin1', onEnd)
      // A string all ASCII is the same bytes in every encoding a response uses (utf8 by default).
      else if (typeof chunk === 'string' && (encoding === undefined || encoding === 'utf8' || encoding === 'latin1') && isAscii(chunk)) ok = socket.write(prefix + chunk + suffix, 'latin1', onEnd)
      else {
        socket.cork()
        socket.write(prefix, 'latin1')
        socket.write(chunk, encoding as BufferEncoding)
        ok = socket.write(suffix, 'latin1', onEnd)
        socket.uncork()
      }
    } else if (head !== null && length > 0) {
      socket.cork()
      socket.write(head, 'latin1')
      ok = socket.write(chunk, encoding as BufferEncoding, onEnd)
      socket.uncork()
    } else if (head !== null) {
      ok = socket.write(head, 'latin1', onEnd)
    } else if (length > 0) {
      ok = socket.write(chunk, encoding as BufferEncoding, onEnd)
    } else if (end) {
      // Nothing left to write: finished once what was written has gone out.
      ok = socket.write('', 'latin1', onEnd)
    } else if (cb !== undefined) {
      process.nextTick(cb)
    }
    return ok
  }

  private onFinish (err?: Error | null): void {
    if (err != null || this.socket === null || (this.socket as Socket & { errored?: unknown }).errored != null) return
    this.writableFinished = true
    // The connection lets go of this response before its 'finish' listeners run, as Node's
    // resOnFinish does (engine http/upgrade.ts waits on 'finish' for the socket to be free).
    this.conn.finished(this)
    this.emit('finish')
  }

  flushHeaders (): void {
    this.implicitHead()
    if (this.head !== null && !this.writableEnded) this.send('', undefined, false, undefined)
  }

  addTrailers (headers: OutgoingHttpHeaders | ReadonlyArray<[string, string]>): void {
    let trailer = ''
    const entries: Array<[string, unknown]> = Array.isArray(headers) ? (headers as Array<[string, string]>) : Object.entries(headers)
    for (const [name, value] of entries) {
      (http.validateHeaderName as (name: string, label?: string) => void)(name, 'Trailer name')
      const values = Array.isArray(value) && value.length > 1 ? value as string[] : [Array.isArray(value) ? (value as string[]).join('; ') : String(value)]
      for (const v of values) {
        if (common._checkInvalidHeaderChar(v)) {
          const err = new TypeError(`Invalid character in trailer content ["${name}"]`) as TypeError & { code: string }
          err.code = 'ERR_INVALID_CHAR'
          throw err
        }
        trailer += name + ': ' + v + '\r\n'
      }
    }
    this.trailer = trailer
  }

  destroy (err?: Error): this {
    if (this.destroyed) return this
    this.destroyed = true
    this.conn.socket.destroy(err)
    return this
  }

  /** An upgrade accepted by the backend: the socket leaves this response. */
  detachSocket (_socket: Socket): void {
    this.socket = null
    if (this.conn.active === this) this.conn.finished(this)
  }

  /** The socket's write buffer emptied after a write that returned false. */
  drained (): void {
    if (!this.needDrain) return
    this.needDrain = false
    this.emit('drain')
  }

  /** The connection closed before this response finished. */
  lost (): void {
    this.destroyed = true
    if (!this.closeEmitted) {
      this.closeEmitted = true
      this.emit('close')
    }
  }
}

function isAscii (s: string): boolean {
  // eslint-disable-next-line no-control-regex
  return !/[^\x00-\x7f]/.test(s)
}

function headersSentError (what: string): Error {
  const err = new Error(`Cannot ${what === 'set' ? 'set headers' : 'write headers'} after they are sent to the client`) as Error & { code: string }
  err.code = 'ERR_HTTP_HEADERS_SENT'
  return err
}

function invalidValueError (name: string): TypeError {
  const err = new TypeError(`Invalid value "undefined" for header "${name}"`) as TypeError & { code: string }
  err.code = 'ERR_HTTP_INVALID_HEADER_VALUE'
  return err
}
