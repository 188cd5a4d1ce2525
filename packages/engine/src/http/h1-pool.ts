/**
 * Keep-alive HTTP/1.1 connections to one backend endpoint (origin), as a dispatcher with
 * undici's interface (`dispatch(options, handler)`, `close`, `destroy`, `stats`), so the
 * endpoint balancer, retries, mirrors and every handler that wraps a call use it as they
 * would an undici Pool. HTTP/2 backends (h2c, h2 by ALPN, gRPC) stay on undici's pools.
 *
 * A call takes the most recently used idle connection (the warmest), else a new one up to
 * `connections`, else waits in order. Connections idle longer than `keepAliveTimeout` (or
 * the server's shorter `Keep-Alive: timeout`, less a second) close. A call whose reused
 * connection turns out closed before a byte of answer came back is sent once more on
 * another connection when that is safe (an idempotent method with no streamed body).
 *
 * Stray bytes. HTTP/1.1 answers carry no request id: bytes a backend sends that nobody asked
 * for (a second response, a body after a HEAD or 204 answer) would be read as the answer to
 * the next request on that connection, and each later request there would get the answer
 * to the one before (issue 49). So a connection is never reused after an answer that was
 * not framed exactly (bytes after it in the same read, an answer delimited by the close,
 * anything the parser flags), an idle connection keeps reading and ends at its first byte
 * (empty lines aside), and one that holds unread bytes when a call takes it is closed. What
 * no HTTP/1.1 client can see is a stray that arrives after the next request went out (one
 * a backend without TCP_NODELAY sends as that request's ACK reaches it, say): once the pool
 * has seen any stray from its backend, it reuses none of its connections for `strayHoldMs`
 * (each carries one call, as with `Connection: close`), so that no later stray, whatever
 * its timing, can answer a request.
 */

import dc from 'node:diagnostics_channel'
import net, { type Socket } from 'node:net'
import tls, { type ConnectionOptions } from 'node:tls'
import type { Duplex } from 'node:stream'
import type { Dispatcher } from 'undici'
import type { PoolCounts, UpstreamDispatcher } from './dispatcher.ts'
import { H1Call, H1Connection, ReadBuffer, type ConnectionOwner } from './h1-connection.ts'
import { PorticoError } from '../util/errors.ts'

/** Published when a connection is ready (TLS included): proxy/src/connect-timing.ts reads it. */
export const CONNECTED_CHANNEL = dc.channel('portico:upstream:connected')
/** Published when a pool first sees stray bytes from its backend (once per hold): `{ origin, holdMs }`. */
export const STRAY_CHANNEL = dc.channel('portico:upstream:stray')

/** How long a pool reuses no connection after its backend sent stray bytes (ms). */
export const STRAY_HOLD_MS = 60_000

export interface H1PoolOptions {
  /** Max connections; null = unlimited. */
  connections?: number | null
  connectTimeout?: number
  keepAliveTimeout?: number
  /** How long a call waits for the response head (ms); 0: no limit (the caller keeps its own clock). */
  headersTimeout?: number
  /** tls.connect options for an https origin (CA, client certificate, servername, identity check). */
  connect?: ConnectionOptions
  /** How long no connection is reused after the backend sent stray bytes (ms); default STRAY_HOLD_MS. */
  strayHold?: number
  /**
   * Opens each connection as a stream through this tunnel instead of TCP (an HBONE CONNECT to
   * a mesh workload, mesh/hbone-pool.ts); the callback gets the stream once it carries bytes.
   * An https origin's TLS then runs inside it.
   */
  tunnel?: (callback: (err: Error | null, stream?: Duplex) => void) => void
}

export class H1Pool implements UpstreamDispatcher, ConnectionOwner {
  readonly host: string
  readonly headersTimeoutMs: number
  readonly keepAliveMs: number
  private readonly hostname: string
  private readonly port: number
  private readonly secure: boolean
  private readonly maxConnections: number
  private readonly connectTimeoutMs: number
  private readonly tlsOptions: ConnectionOptions | undefined
  private readonly tunnel: H1PoolOptions['tunnel']
  /** Tunnels being opened (counted against `connections` with `all`). */
  private tunnelsOpening = 0
  private readonly all = new Set<H1Connection>()
  /** Idle connections, the most recently used last. */
  private readonly idle: H1Connection[] = []
  private queue: H1Call[] = []
  /** Calls waiting for the connection being opened for them. */
  private readonly opening = new Map<H1Connection, H1Call>()
  private closing: { resolve: () => void, promise: Promise<void> } | null = null
  private destroyed = false
  private readonly strayHoldMs: number
  /** Until when (Date.now() ms) no connection is reused, the backend having sent stray bytes; 0: none. */
  private strayUntil = 0

  constructor (origin: string, options: H1PoolOptions = {}) {
    const url = new URL(origin)
    this.secure = url.protocol === 'https:'
    this.hostname = url.hostname.replace(/^\[|\]$/g, '')
    this.port = url.port === '' ? (this.secure ? 443 : 80) : Number(url.port)
    this.host = url.host
    this.maxConnections = options.connections ?? Infinity
    this.connectTimeoutMs = options.connectTimeout ?? 10_000
    this.keepAliveMs = options.keepAliveTimeout ?? 4_000
    this.headersTimeoutMs = options.headersTimeout ?? 300_000
    this.tlsOptions = options.connect
    this.strayHoldMs = options.strayHold ?? STRAY_HOLD_MS
    this.tunnel = options.tunnel
  }

  get stats (): PoolCounts & { size: number } {
    const running = this.all.size - this.idle.length - this.opening.size
    const opening = this.opening.size + this.tunnelsOpening
    return { connected: this.all.size - this.opening.size, free: this.idle.length, pending: this.queue.length + opening, running, size: running + this.queue.length + opening }
  }

  dispatch (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // A string or typed-array body (undici takes them too) is sent as the bytes it is.
    const body = options.body
    if (typeof body === 'string' || (body instanceof Uint8Array && !Buffer.isBuffer(body))) options = { ...options, body: typeof body === 'string' ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength) }
    const call = new H1Call(this, options, handler)
    handler.onRequestStart?.(call, {})
    if (call.finished) return true
    if (this.closing !== null || this.destroyed) {
      call.fail(new PorticoError('PORTICO_POOL_CLOSED'))
      return true
    }
    this.assign(call)
    return true
  }

  private assign (call: H1Call): void {
    if (!this.fitsIdle(call)) return
    let conn = this.idle.pop()
    while (conn !== undefined && (!conn.idle || conn.unsolicited() || !tunnelReusable(conn))) {
      if (conn.idle && !tunnelReusable(conn)) conn.socket.destroy()
      else if (conn.idle) {
        // Bytes it holds unread: never reused.
        conn.socket.destroy()
        this.stray(conn)
      }
      conn = this.idle.pop()
    }
    if (conn !== undefined) {
      conn.run(call)
      return
    }
    if (this.all.size + this.tunnelsOpening < this.maxConnections) {
      this.open(call)
      return
    }
    this.queue.push(call)
  }

  /**
   * An upgrade needs a connection whose socket reads as a stream (ReadBuffer in
   * h1-connection.ts): idle connections that read into their own buffer do not fit it. It
   * takes the most recent idle one that does, else a new connection (in place of the oldest
   * idle one when the pool is full). False when it was placed here; true: assign as usual.
   */
  private fitsIdle (call: H1Call): boolean {
    if (typeof call.options.upgrade !== 'string' || this.idle.every(c => c.fits(call))) return true
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const conn = this.idle[i]!
      if (conn.fits(call) && conn.idle && !conn.unsolicited() && tunnelReusable(conn)) {
        this.idle.splice(i, 1)
        conn.run(call)
        return false
      }
    }
    if (this.all.size + this.tunnelsOpening < this.maxConnections) this.open(call)
    else {
      // Full: the oldest idle connection closes, and `closed` opens one for the queue's head.
      this.queue.unshift(call)
      this.idle.shift()?.socket.destroy()
    }
    return false
  }

  private open (call: H1Call): void {
    if (this.tunnel !== undefined) {
      this.openTunnel(call, this.tunnel)
      return
    }
    let socket: Socket
    // Plain TCP reads into a buffer of the connection's own (h1-connection.ts ReadBuffer),
    // but for an upgrade, whose socket goes on as a stream.
    const reads = this.secure || typeof call.options.upgrade === 'string' ? null : new ReadBuffer()
    try {
      socket = this.secure
        ? tls.connect({ ...this.tlsOptions, host: this.hostname, port: this.port, servername: this.tlsOptions?.servername ?? serverName(call.options.headers, this.hostname), ALPNProtocols: ['http/1.1'] })
        : net.connect({ host: this.hostname, port: this.port, allowHalfOpen: true, ...(reads !== null ? { onread: reads.onread } : {}) })
    } catch (err) {
      call.fail(err as Error)
      return
    }
    const conn = new H1Connection(this, socket, reads)
    this.all.add(conn)
    this.opening.set(conn, call)
    const timer = setTimeout(() => {
      const err = new PorticoError('PORTICO_UPSTREAM_CONNECT_TIMEOUT', `connect timeout (${this.host}, ${this.connectTimeoutMs} ms)`)
      conn.error ??= err
      socket.destroy(err)
    }, this.connectTimeoutMs)
    socket.once(this.secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer)
      socket.setNoDelay(true)
      socket.setKeepAlive(true, 60_000)
      conn.connecting = false
      if (CONNECTED_CHANNEL.hasSubscribers) CONNECTED_CHANNEL.publish({ connectParams: { hostname: this.hostname, port: this.port, protocol: this.secure ? 'https:' : 'http:' }, socket })
      const waiting = this.opening.get(conn)!
      this.opening.delete(conn)
      if (waiting.finished) this.released(conn)
      else conn.run(waiting)
    })
    socket.once('close', () => clearTimeout(timer))
  }

  /**
   * A connection through the tunnel: the call waits for the tunnel (the tunnel keeps its own
   * connect clock), then for TLS inside it when the origin is https.
   */
  private openTunnel (call: H1Call, tunnel: NonNullable<H1PoolOptions['tunnel']>): void {
    this.tunnelsOpening++
    tunnel((err, stream) => {
      this.tunnelsOpening--
      if (err !== null || stream === undefined || this.destroyed) {
        stream?.destroy()
        call.fail(err ?? new PorticoError('PORTICO_POOL_CLOSED'))
        this.afterTunnelFailed()
        return
      }
      const socket = this.secure
        ? tls.connect({ ...this.tlsOptions, socket: stream, servername: this.tlsOptions?.servername ?? serverName(call.options.headers, this.hostname), ALPNProtocols: ['http/1.1'] })
        : stream as unknown as Socket
      const conn = new H1Connection(this, socket)
      this.all.add(conn)
      const ready = (): void => {
        conn.connecting = false
        if (CONNECTED_CHANNEL.hasSubscribers) CONNECTED_CHANNEL.publish({ connectParams: { hostname: this.hostname, port: this.port, protocol: this.secure ? 'https:' : 'http:' }, socket })
        if (call.finished) this.released(conn)
        else conn.run(call)
      }
      if (!this.secure) {
        ready()
        return
      }
      this.opening.set(conn, call)
      socket.once('secureConnect', () => {
        this.opening.delete(conn)
        ready()
      })
    })
  }

  /** A tunnel that failed frees its place: a queued call gets a new connection. */
  private afterTunnelFailed (): void {
    if (this.queue.length > 0 && this.all.size + this.tunnelsOpening < this.maxConnections && !this.destroyed) this.open(this.queue.shift()!)
    this.checkClosed()
  }

  released (conn: H1Connection): void {
    if (!conn.idle) return
    // A tunnel whose HBONE connection is retired (the mesh certificate rotated): the next
    // request goes on a new tunnel, made with the new certificate.
    if (!tunnelReusable(conn)) {
      conn.socket.destroy()
      return
    }
    if (this.strayUntil !== 0) {
      // The backend sent stray bytes lately: one call per connection (see the top of this file).
      if (Date.now() < this.strayUntil) {
        conn.socket.destroy()
        return
      }
      this.strayUntil = 0
    }
    const next = this.queue[0]
    if (next !== undefined) {
      if (!conn.fits(next)) {
        // An upgrade waits for a connection that reads as a stream: this one closes, and
        // `closed` opens one in its place.
        conn.socket.destroy()
        return
      }
      this.queue.shift()
      conn.run(next)
      return
    }
    if (this.closing !== null || this.destroyed) {
      conn.socket.destroy()
      return
    }
    this.idle.push(conn)
  }

  closed (conn: H1Connection): void {
    if (!this.all.delete(conn)) return
    const i = this.idle.indexOf(conn)
    if (i !== -1) this.idle.splice(i, 1)
    const waiting = this.opening.get(conn)
    if (waiting !== undefined) {
      // The connection never opened: the call it was for fails with why.
      this.opening.delete(conn)
      waiting.fail(conn.error ?? new PorticoError('PORTICO_UPSTREAM_CLOSED', 'the connection closed while it was being opened'))
    }
    // Calls waiting for a free connection get a new one in its place.
    if (this.queue.length > 0 && this.all.size + this.tunnelsOpening < this.maxConnections && !this.destroyed) this.open(this.queue.shift()!)
    this.checkClosed()
  }

  stray (_conn: H1Connection): void {
    if (this.strayHoldMs <= 0) return
    const now = Date.now()
    const first = now >= this.strayUntil
    this.strayUntil = now + this.strayHoldMs
    // Idle connections close now; busy ones close when their calls end (`released`).
    for (const conn of this.idle.splice(0)) conn.socket.destroy()
    if (first && STRAY_CHANNEL.hasSubscribers) STRAY_CHANNEL.publish({ origin: `${this.secure ? 'https' : 'http'}://${this.host}`, holdMs: this.strayHoldMs })
  }

  retry (call: H1Call): void {
    if (this.destroyed || this.closing !== null) {
      call.fail(new PorticoError('PORTICO_POOL_CLOSED'))
      return
    }
    this.assign(call)
  }

  dequeue (call: H1Call): void {
    const i = this.queue.indexOf(call)
    if (i !== -1) this.queue.splice(i, 1)
  }

  /** Stops taking calls; resolves once those under way are done and every connection is closed. */
  async close (): Promise<void> {
    if (this.closing === null) {
      let resolve!: () => void
      const promise = new Promise<void>(r => { resolve = r })
      this.closing = { resolve, promise }
      for (const conn of this.idle.splice(0)) conn.socket.destroy()
      this.checkClosed()
    }
    await this.closing.promise
  }

  /** Ends every call and connection now. */
  async destroy (): Promise<void> {
    this.destroyed = true
    const queued = this.queue
    this.queue = []
    for (const call of queued) call.fail(new PorticoError('PORTICO_POOL_CLOSED'))
    for (const conn of [...this.all]) conn.socket.destroy(new PorticoError('PORTICO_POOL_CLOSED'))
    if (this.all.size > 0) await this.close()
  }

  private checkClosed (): void {
    if (this.closing === null || this.all.size > 0 || this.queue.length > 0 || this.tunnelsOpening > 0) return
    this.closing.resolve()
  }
}

/** False for a tunnel whose HBONE connection was retired (mesh/hbone-pool.ts `reusable`); true for sockets. */
function tunnelReusable (conn: H1Connection): boolean {
  return (conn.socket as { reusable?: () => boolean }).reusable?.() !== false
}

/**
 * The TLS server name for a new connection: the request's Host (as undici does), else the
 * origin's host name; never an IP address (SNI carries names only).
 */
function serverName (headers: Dispatcher.DispatchOptions['headers'], hostname: string): string | undefined {
  const host = (headers as Record<string, string | string[] | undefined> | null | undefined)?.host
  const value = typeof host === 'string' ? host : Array.isArray(host) ? host[0] : undefined
  const name = value === undefined ? hostname : value.startsWith('[') ? '' : value.replace(/:\d+$/, '')
  return name === '' || net.isIP(name) !== 0 ? undefined : name
}
