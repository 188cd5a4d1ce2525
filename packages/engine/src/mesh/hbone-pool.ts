/**
 * HBONE tunnels to mesh (ambient) workloads: each upstream connection becomes an HTTP/2
 * CONNECT stream over mTLS to the pod's port 15008, `:authority` = `podIP:targetPort`; the
 * HTTP/1.1 client (http/h1-pool.ts) and undici's HTTP/2 pools (http/h2-pool.ts) speak their
 * plain protocol inside it as they would on a TCP socket.
 *
 * Connection reuse as ztunnel's pool does it (istio/ztunnel src/proxy/pool.rs): one HTTP/2
 * connection per (destination address, peer identity, own certificate) carries many CONNECT
 * streams; a connection full by the peer's SETTINGS_MAX_CONCURRENT_STREAMS gets a sibling;
 * a connection without streams closes after `idleTimeoutMs` (ztunnel's
 * pool_unused_release_timeout, 5 minutes by default). Streams are only opened on a
 * connection once its TLS handshake verified the peer and the peer's SETTINGS arrived, so
 * the stream limit is known and nothing is sent to a peer of the wrong identity.
 *
 * Trust: the peer's chain must end in the mesh root(s) of the gateway's own identity, and
 * its leaf must carry the expected SPIFFE ID as URI SAN (an exact match; Istio's
 * `spiffe://<trust domain>/ns/<ns>/sa/<sa>`). The client certificate is the gateway's
 * current workload certificate; a rotation (MeshIdentity 'rotated') keys new connections by
 * the new certificate, and the older ones close once their last stream ends — no drops.
 *
 * Headers: only `:method CONNECT` and `:authority`. ztunnel also sends `baggage` (the
 * source workload's labels, for telemetry) and `forwarded` (the original client address);
 * both are optional to the receiving ztunnel and are not sent.
 */

import dc from 'node:diagnostics_channel'
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2'
import type { PeerCertificate } from 'node:tls'
import { PorticoError } from '../util/errors.ts'
import { hostPort } from '../util/host-port.ts'
import { spiffeIdIn, type MeshCertificate, type MeshIdentity } from './identity.ts'

/**
 * Published for each HBONE connection when it is ready or failed:
 * `{ peer, address, result: 'opened' | 'failed', code? }`; and for each CONNECT stream:
 * `{ peer, address, tunnel: true, result: 'ok' | 'refused' | 'failed', status? }`.
 * proxy/src/metrics.ts counts them (portico_upstream_hbone_*).
 */
export const HBONE_CHANNEL = dc.channel('portico:upstream:hbone')

/** Istio's HBONE port on every ambient pod (ztunnel listens on it in the pod's network namespace). */
export const HBONE_PORT = 15008

/** Where a tunnel goes: the pod address and target port, the peer's SPIFFE ID, the HBONE port. */
export interface HboneTarget {
  host: string
  port: number
  identity: string
  hbonePort?: number
}

export interface HbonePoolOptions {
  /** Connect (TCP + TLS + the peer's SETTINGS) timeout in ms; default 10 s. */
  connectTimeoutMs?: number
  /** An HBONE connection with no stream closes after this long (ms); default 5 minutes, as ztunnel. */
  idleTimeoutMs?: number
  /** Most streams per connection whatever the peer allows (ztunnel caps at 100 as well). */
  maxStreamsPerConnection?: number
}

/** A CONNECT stream: a Duplex the HTTP clients use as their socket (ref/unref as a socket has). */
export type HboneStream = ClientHttp2Stream & {
  ref(): HboneStream
  unref(): HboneStream
  setNoDelay(): HboneStream
  setKeepAlive(): HboneStream
  hbonePeer: string
  /** False once its HBONE connection takes no new streams (a rotated certificate, GOAWAY): an idle client connection on it closes rather than carry another request. */
  reusable(): boolean
}

interface Waiter { target: HboneTarget, callback: (err: Error | null, stream?: HboneStream) => void }

/** One mTLS HTTP/2 connection to a peer. */
interface Connection {
  session: ClientHttp2Session
  key: string
  generation: number
  /** Streams open or reserved. */
  active: number
  /** The peer's stream limit (min of its SETTINGS and ours); our cap until its SETTINGS came. */
  maxStreams: number
  /** Its SETTINGS came after a verified handshake: streams may be opened. */
  ready: boolean
  /** No new streams (GOAWAY, error, an older certificate). */
  draining: boolean
  /** Streams that keep the event loop alive (ref'd, as a socket in use is). */
  refs: number
  waiters: Waiter[]
  idleTimer: NodeJS.Timeout | null
  error: Error | null
}

export class HbonePool {
  private readonly identity: MeshIdentity
  private readonly connectTimeoutMs: number
  private readonly idleTimeoutMs: number
  private readonly maxStreams: number
  private readonly connections = new Map<string, Connection[]>()
  private closed = false
  private readonly onRotated = (cert: MeshCertificate): void => this.retireBefore(cert.generation)

  constructor (identity: MeshIdentity, options: HbonePoolOptions = {}) {
    this.identity = identity
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000
    this.idleTimeoutMs = options.idleTimeoutMs ?? 300_000
    this.maxStreams = options.maxStreamsPerConnection ?? 100
    identity.on('rotated', this.onRotated)
  }

  /**
   * HBONE connections open (or opening), the CONNECT streams on them (open or reserved), and
   * how many of those connections take no new stream (GOAWAY, an older certificate).
   */
  stats (): { connections: number, streams: number, draining: number } {
    let connections = 0
    let streams = 0
    let draining = 0
    for (const list of this.connections.values()) {
      for (const c of list) {
        connections++
        streams += c.active
        if (c.draining) draining++
      }
    }
    return { connections, streams, draining }
  }

  /**
   * Opens a CONNECT stream to `target`; `callback` gets it once the peer answered 200, or a
   * typed error (PORTICO_MESH_NO_IDENTITY, PORTICO_MESH_PEER_IDENTITY, PORTICO_HBONE_FAILED,
   * PORTICO_HBONE_CONNECT_REFUSED). Called at most once.
   */
  open (target: HboneTarget, callback: (err: Error | null, stream?: HboneStream) => void): void {
    if (this.closed) {
      queueMicrotask(() => callback(new PorticoError('PORTICO_POOL_CLOSED')))
      return
    }
    const cert = this.identity.current()
    if (cert === null) {
      queueMicrotask(() => callback(new PorticoError('PORTICO_MESH_NO_IDENTITY')))
      return
    }
    const hbonePort = target.hbonePort ?? HBONE_PORT
    const key = `${hostPort(target.host, hbonePort)}\0${target.identity}\0${cert.generation}`
    let list = this.connections.get(key)
    if (list === undefined) this.connections.set(key, list = [])
    // A connection still connecting takes waiters up to our own cap: the peer's limit is
    // unknown until its SETTINGS, when waiters beyond it go to a sibling (flush).
    const conn = list.find(c => !c.draining && c.active < c.maxStreams) ?? this.connect(key, list, target, hbonePort, cert)
    conn.active++
    if (conn.idleTimer !== null) {
      clearTimeout(conn.idleTimer)
      conn.idleTimer = null
    }
    if (conn.ready) this.request(conn, { target, callback })
    else conn.waiters.push({ target, callback })
  }

  private connect (key: string, list: Connection[], target: HboneTarget, hbonePort: number, cert: MeshCertificate): Connection {
    const expected = target.identity
    const address = hostPort(target.host, hbonePort)
    const session = http2.connect(`https://${address}`, {
      key: cert.key,
      cert: cert.certChain,
      ca: cert.roots,
      ALPNProtocols: ['h2'],
      // The peer is named by its SPIFFE ID, not by a host name (an IP has no SNI anyway).
      checkServerIdentity: (_host: string, peer: PeerCertificate) => {
        const got = spiffeIdIn(peer.subjectaltname ?? '')
        if (got === expected) return undefined
        return new PorticoError('PORTICO_MESH_PEER_IDENTITY', `mesh peer ${address} presented ${got ?? 'no SPIFFE ID'}, expected ${expected}`)
      },
      // Our side allows the peer nothing it would push; the streams are ours.
      settings: { enablePush: false }
    })
    const conn: Connection = { session, key, generation: cert.generation, active: 0, maxStreams: this.maxStreams, ready: false, draining: false, refs: 0, waiters: [], idleTimer: null, error: null }
    list.push(conn)
    session.unref()
    const timer = setTimeout(() => {
      conn.error ??= new PorticoError('PORTICO_HBONE_FAILED', `HBONE connection to ${address} (${expected}) not ready in ${this.connectTimeoutMs} ms`)
      session.destroy()
    }, this.connectTimeoutMs).unref()
    session.once('remoteSettings', settings => {
      clearTimeout(timer)
      conn.maxStreams = Math.max(1, Math.min(this.maxStreams, settings.maxConcurrentStreams ?? this.maxStreams))
      conn.ready = true
      publish({ peer: expected, address, result: 'opened' })
      this.flush(conn, list, target, hbonePort, cert)
    })
    session.on('error', err => {
      conn.error ??= hboneError(err, address, expected)
    })
    session.on('goaway', () => this.drain(conn))
    session.once('close', () => {
      clearTimeout(timer)
      if (conn.idleTimer !== null) clearTimeout(conn.idleTimer)
      conn.draining = true
      const i = list.indexOf(conn)
      if (i !== -1) list.splice(i, 1)
      if (list.length === 0 && this.connections.get(key) === list) this.connections.delete(key)
      const err = conn.error ?? new PorticoError('PORTICO_HBONE_FAILED', `HBONE connection to ${address} (${expected}) closed`)
      if (!conn.ready) publish({ peer: expected, address, result: 'failed', code: (err as NodeJS.ErrnoException).code })
      for (const w of conn.waiters.splice(0)) w.callback(err)
    })
    return conn
  }

  /** The peer's SETTINGS came: waiters within its stream limit get streams; the rest go to a sibling connection. */
  private flush (conn: Connection, list: Connection[], target: HboneTarget, hbonePort: number, cert: MeshCertificate): void {
    const waiters = conn.waiters.splice(0)
    const over = Math.max(0, conn.active - conn.maxStreams)
    const here = waiters.slice(0, waiters.length - over)
    const moved = waiters.slice(waiters.length - over)
    conn.active -= moved.length
    for (const w of here) this.request(conn, w)
    for (const w of moved) {
      const next = list.find(c => c !== conn && !c.draining && c.active < c.maxStreams) ?? this.connect(conn.key, list, target, hbonePort, cert)
      next.active++
      if (next.ready) this.request(next, w)
      else next.waiters.push(w)
    }
  }

  private request (conn: Connection, w: Waiter): void {
    const { target, callback } = w
    const authority = hostPort(target.host, target.port)
    let done = false
    const finish = (err: Error | null, stream?: HboneStream): void => {
      if (done) return
      done = true
      callback(err, stream)
    }
    let stream: ClientHttp2Stream
    try {
      stream = conn.session.request({ ':method': 'CONNECT', ':authority': authority }, { endStream: false })
    } catch (err) {
      this.release(conn)
      finish(hboneError(err as Error, authority, target.identity))
      return
    }
    const s = asSocketLike(stream, conn, target.identity)
    // A peer that takes the stream and never answers it: bounded by the connect timeout too.
    const timer = setTimeout(() => {
      publish({ peer: target.identity, address: authority, tunnel: true, result: 'failed' })
      finish(new PorticoError('PORTICO_HBONE_FAILED', `the mesh peer ${target.identity} did not answer the HBONE CONNECT to ${authority} in ${this.connectTimeoutMs} ms`))
      stream.close(http2.constants.NGHTTP2_CANCEL)
    }, this.connectTimeoutMs).unref()
    stream.once('close', () => {
      clearTimeout(timer)
      this.release(conn)
      if (s.refd) s.unref()
      if (!done) {
        publish({ peer: target.identity, address: authority, tunnel: true, result: 'failed' })
        finish(conn.error ?? new PorticoError('PORTICO_HBONE_FAILED', `HBONE CONNECT to ${authority} (${target.identity}) closed before an answer (code ${stream.rstCode ?? 'none'})`))
      }
    })
    stream.on('error', err => {
      if (!done) finish(conn.error ?? hboneError(err, authority, target.identity))
    })
    stream.once('response', headers => {
      clearTimeout(timer)
      const status = Number(headers[':status'])
      if (status === 200) {
        publish({ peer: target.identity, address: authority, tunnel: true, result: 'ok', status })
        finish(null, s)
        return
      }
      publish({ peer: target.identity, address: authority, tunnel: true, result: 'refused', status })
      finish(new PorticoError('PORTICO_HBONE_CONNECT_REFUSED', `the mesh peer ${target.identity} answered the HBONE CONNECT to ${authority} with ${status}`))
      stream.close(http2.constants.NGHTTP2_CANCEL)
    })
  }

  private release (conn: Connection): void {
    conn.active--
    if (conn.active > 0 || conn.session.destroyed) return
    // No stream left: a retired connection (older certificate, GOAWAY) closes now, a current one when idle long enough.
    if (conn.draining) {
      conn.session.close()
      return
    }
    conn.idleTimer = setTimeout(() => {
      conn.draining = true
      conn.session.close()
    }, this.idleTimeoutMs).unref()
  }

  private drain (conn: Connection): void {
    conn.draining = true
    if (conn.active === 0 && !conn.session.destroyed) conn.session.close()
  }

  /** A rotation: connections made with an older certificate take no new stream and close once idle. */
  private retireBefore (generation: number): void {
    for (const list of this.connections.values()) {
      for (const c of list) if (c.generation < generation) this.drain(c)
    }
  }

  /** Closes every connection (their streams end first: session.close is graceful). */
  close (): void {
    this.closed = true
    this.identity.off('rotated', this.onRotated)
    for (const list of this.connections.values()) for (const c of list) this.drain(c)
  }

  /** Ends every connection now. */
  destroy (): void {
    this.close()
    for (const list of this.connections.values()) for (const c of [...list]) c.session.destroy()
  }
}

/**
 * Gives the stream what the HTTP clients call on a socket: ref/unref (kept per connection,
 * whose socket is the one that holds the event loop), setNoDelay/setKeepAlive (the TCP
 * socket under the connection has its own settings), and the peer identity for traces.
 */
function asSocketLike (stream: ClientHttp2Stream, conn: Connection, peer: string): HboneStream & { refd: boolean } {
  const s = stream as HboneStream & { refd: boolean }
  s.refd = false
  s.hbonePeer = peer
  s.ref = () => {
    if (!s.refd) {
      s.refd = true
      if (conn.refs++ === 0 && !conn.session.destroyed) conn.session.ref()
    }
    return s
  }
  s.unref = () => {
    if (s.refd) {
      s.refd = false
      if (--conn.refs === 0 && !conn.session.destroyed) conn.session.unref()
    }
    return s
  }
  s.setNoDelay = () => s
  s.setKeepAlive = () => s
  s.reusable = () => !conn.draining
  return s
}

/** A failure of the HBONE connection as a typed error that says which peer and why. */
function hboneError (err: Error, address: string, peer: string): Error {
  if (err instanceof PorticoError) return err
  const code = (err as NodeJS.ErrnoException).code
  return new PorticoError('PORTICO_HBONE_FAILED', `HBONE connection to ${address} (${peer}) failed: ${code !== undefined ? `${code}: ` : ''}${err.message}`, { cause: err })
}

function publish (message: Record<string, unknown>): void {
  if (HBONE_CHANNEL.hasSubscribers) HBONE_CHANNEL.publish(message)
}
