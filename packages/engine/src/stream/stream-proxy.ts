/**
 * Connections on TCP and TLS listeners (Gateway API TCPRoute / TLSRoute): a route and a
 * backend are chosen per connection and the bytes are copied both ways.
 *
 *   TCP          the listener's first route takes every connection.
 *   TLS          the client hello is read (not consumed: it is replayed) and its SNI name picks
 *                the listener and the route, most specific hostname first; then
 *     Passthrough  the encrypted bytes go to the backend as they came, hello included;
 *     Terminate    Portico completes the handshake with the listener's certificate (and
 *                  checks a client certificate when asked) and forwards the plaintext.
 *
 * A connection nothing serves is closed without a word, as Envoy does when no filter chain
 * matches (and as the Gateway API conformance suite expects of a TLS client: a reset or end
 * of stream, not a TLS alert); the access log and the trace say why. Half-closes are passed on (a client that shuts its write side still
 * gets the rest of the answer); a connection quiet for the idle timeout is cut; a client that
 * takes too long to send its hello is dropped. The bytes are copied by relays (relay.ts), one
 * per direction; backpressure is the sockets' own: a slow reader pauses the writer on the
 * other side.
 */

import net, { type Socket } from 'node:net'
import tls from 'node:tls'
import type { BackendIR, EndpointIR, TlsMode } from '../ir/types.ts'
import type { CompiledBind, CompiledListener, CompiledStreamRoute } from '../request/compiled.ts'
import type { TraceHub } from '../trace/hub.ts'
import type { TraceRecorder } from '../trace/recorder.ts'
import { streamPlacement, type StreamRecordBase } from './stream-record.ts'
import { EndpointRotation } from './endpoint-rotation.ts'
import { hostnameMatches, servedHostnameSpecificity } from '../routing/hostname.ts'
import { backendTlsConnectOptions } from '../http/upstream-pools.ts'
import { hostPort, plainAddress } from '../util/host-port.ts'
import { MAX_CLIENT_HELLO_BYTES, parseClientHello } from './client-hello.ts'
import { serverSecureContext } from './server-tls.ts'
import { adoptAccepted, Relay } from './relay.ts'
import { closeWhenFlushed } from './pair-close.ts'
import { Sweeper } from './sweeper.ts'
import { performance } from '../util/clock.ts'
import type { HbonePool } from '../mesh/hbone-pool.ts'
import { PorticoError } from '../util/errors.ts'

export const DEFAULT_STREAM_CONNECT_TIMEOUT_MS = 10_000
/** Envoy's tcp_proxy idle timeout: a connection with no byte either way for this long is cut. */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 60 * 60_000
/** How long a TLS client has to send its whole hello. */
export const DEFAULT_CLIENT_HELLO_TIMEOUT_MS = 10_000

/** Why a connection ended: `Done`, or what refused or cut it (access log `reason`, metrics). */
export type StreamReason =
  | 'Done'
  | 'NoRoute'
  | 'NoBackend'
  | 'UpstreamConnectFailed'
  | 'UpstreamReset'
  | 'ClientReset'
  | 'IdleTimeout'
  | 'ClientHelloTimeout'
  | 'ClientHelloInvalid'
  | 'HandshakeFailed'
  | 'ClientCertificateRequired'

/** One finished connection, for the access log and metrics. */
export interface StreamConnectionRecord extends StreamRecordBase<StreamReason> {
  protocol: 'tcp' | 'tls'
  serverName: string | null
  mode: TlsMode | null
  bytesFromClient: number
  bytesToClient: number
}

export interface StreamProxyOptions {
  connectTimeoutMs?: number
  idleTimeoutMs?: number
  clientHelloTimeoutMs?: number
  onConnectionEnd?: (record: StreamConnectionRecord) => void
  /** The HBONE tunnels for backends whose endpoints are mesh workloads (null: no mesh identity). */
  hbone?: () => HbonePool | null
}

interface Conn {
  client: Socket
  /** The client's bytes on their way to the backend. */
  up: Relay
  /** Whether `client` reads through `up` (`onread`) rather than the stream API. */
  adopted: boolean
  /** The client's address, read while the socket is open (a closed one no longer says). */
  source: { address: string, port: number }
  /** What runs at `deadline` (performance.now()): a hello, handshake or connect not done in time; null when none is due. */
  expire: (() => void) | null
  deadline: number
  /** Once bytes flow: the two sockets (their reads count every byte either way), and what cuts the pair when they stop. */
  pair: { upstream: Socket, downstream: Socket, idle: () => void, tunnelRead: { bytes: number } | null } | null
  /** Bytes read by the pair at the last sweep that saw them change, and when that was. */
  bytesSeen: number
  quietSince: number
  bind: CompiledBind
  listener: CompiledListener | null
  route: CompiledStreamRoute | null
  backend: BackendIR | null
  target: string | null
  serverName: string | null
  mode: TlsMode | null
  started: number
  tracer: TraceRecorder | null
  reason: StreamReason | null
  error: string | null
  ended: boolean
}

export class StreamProxy {
  private readonly hub: TraceHub
  private readonly connectTimeoutMs: number
  private readonly idleTimeoutMs: number
  private readonly helloTimeoutMs: number
  private readonly onEnd: ((record: StreamConnectionRecord) => void) | undefined
  private readonly hbone: () => HbonePool | null
  private readonly endpoints = new EndpointRotation()
  /** Every connection's deadlines and idle timeout, on one timer. */
  private readonly clock: Sweeper<Conn>

  constructor (hub: TraceHub, options: StreamProxyOptions = {}) {
    this.hub = hub
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_STREAM_CONNECT_TIMEOUT_MS
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS
    this.helloTimeoutMs = options.clientHelloTimeoutMs ?? DEFAULT_CLIENT_HELLO_TIMEOUT_MS
    this.hbone = options.hbone ?? (() => null)
    // A sixteenth of the shortest limit (at most a second): deadlines are met up to that late.
    const period = Math.max(5, Math.min(1000, Math.min(this.connectTimeoutMs, this.idleTimeoutMs, this.helloTimeoutMs) / 16))
    this.clock = new Sweeper(period, (conn, now) => this.check(conn, now))
    this.onEnd = options.onConnectionEnd
  }

  /**
   * Takes a freshly accepted connection of a TCP or TLS bind (in the server's 'connection'
   * listener, before it has read anything) and returns the socket that carries it from now
   * on: the accepted one re-made to read through a relay (relay.ts `adoptAccepted`), or the
   * accepted one itself where that cannot be done.
   */
  handle (bind: CompiledBind, accepted: Socket): Socket {
    const up = new Relay()
    const adopted = adoptAccepted(accepted, up)
    const client = adopted ?? accepted
    const conn: Conn = { client, up, adopted: adopted !== null, source: sourceOf(client), expire: null, deadline: 0, pair: null, bytesSeen: -1, quietSince: 0, bind, listener: null, route: null, backend: null, target: null, serverName: null, mode: null, started: performance.now(), tracer: this.hub.armed ? this.hub.begin() : null, reason: null, error: null, ended: false }
    conn.tracer?.emit({ type: 'requestStarted' })
    client.setNoDelay(true)
    client.once('close', () => this.finish(conn))
    client.on('error', err => this.fail(conn, 'ClientReset', err))
    this.clock.add(conn)
    if (bind.ir.protocol === 'TLS') this.readHello(conn)
    else {
      // Nothing is read until the backend is connected (a socket read through the stream
      // API buffers up to its high-water mark meanwhile, as before).
      if (conn.adopted) client.pause()
      this.route(conn, bind.selectListener(''), null)
    }
    return client
  }

  private readHello (conn: Conn): void {
    const { client } = conn
    let buffered: Buffer = Buffer.alloc(0)
    const stop = (): void => {
      conn.expire = null
      if (conn.adopted) conn.up.collect = null
      else client.off('data', onData)
    }
    this.due(conn, this.helloTimeoutMs, () => {
      stop()
      this.refuse(conn, 'ClientHelloTimeout', 'no complete client hello in time')
    })
    /** Takes the next bytes of the hello; false once it is complete (reading then pauses). */
    const onChunk = (chunk: Buffer): boolean => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk])
      const hello = buffered.length > MAX_CLIENT_HELLO_BYTES + 5 * 8
        ? { kind: 'invalid' as const, reason: 'client hello too large' }
        : parseClientHello(buffered)
      if (hello.kind === 'incomplete') return true
      stop()
      if (hello.kind === 'invalid') {
        this.refuse(conn, 'ClientHelloInvalid', hello.reason)
        return false
      }
      conn.serverName = hello.serverName
      const listener = conn.bind.selectListener(hello.serverName ?? '')
      this.route(conn, listener, buffered, hello.alpn)
      return false
    }
    const onData = (chunk: Buffer): void => {
      if (!onChunk(chunk)) client.pause()
    }
    if (conn.adopted) conn.up.collect = onChunk
    else client.on('data', onData)
  }

  /** Chooses the route and backend, then passes the connection through or terminates it. */
  private route (conn: Conn, listener: CompiledListener, hello: Buffer | null, alpn: string[] = []): void {
    const tlsBind = conn.bind.ir.protocol === 'TLS'
    conn.listener = listener
    if (tlsBind) conn.mode = listener.ir.tlsMode ?? null
    const tracer = conn.tracer
    if (tracer !== null) {
      tracer.emit({
        type: 'connectionStarted',
        protocol: tlsBind ? 'tls' : 'tcp',
        listener: listener.ir.key,
        ...(tlsBind ? { serverName: conn.serverName, alpn, ...(conn.mode !== null ? { mode: conn.mode } : {}) } : {}),
        source: conn.source
      })
    }
    const route = selectStreamRoute(listener, conn.serverName)
    conn.route = route
    if (tracer !== null) {
      tracer.emit({ type: 'routeSelection', selectedRoute: route?.ir.key ?? null, evaluatedRoutes: listener.streamRoutes.map(r => r.ir.key) }, { severity: route === null ? 'error' : 'info' })
      this.hub.claim(tracer, { method: tlsBind ? 'TLS' : 'TCP', host: conn.serverName ?? '', path: '', route: route?.ir.key ?? null, headers: {} })
    }
    if (route === null) {
      this.refuse(conn, 'NoRoute', conn.serverName === null ? 'no route for this connection' : `no route for SNI name ${conn.serverName}`)
      return
    }
    const picked = route.backends.pick()
    const backend = picked?.backend
    if (backend === undefined || backend.kind === 'invalid' || backend.endpoints.length === 0) {
      this.refuse(conn, 'NoBackend', backend?.invalidReason ?? (picked === null ? 'the route has no backend with weight' : 'backend not found'))
      return
    }
    conn.backend = backend
    if (conn.mode === 'Terminate') this.terminate(conn, listener, hello!, backend)
    else this.connect(conn, conn.client, backend, hello)
  }

  /** Completes the TLS handshake with the listener's certificate, then forwards the plaintext. */
  private terminate (conn: Conn, listener: CompiledListener, hello: Buffer, backend: BackendIR): void {
    const serverTls = listener.ir.tls ?? conn.bind.ir.tls
    if (serverTls === undefined) {
      this.refuse(conn, 'HandshakeFailed', 'no certificate to terminate with')
      return
    }
    const validation = serverTls.clientValidation ?? conn.bind.ir.tls?.clientValidation
    const { client } = conn
    // The hello was read off the socket: put it back for the TLS layer to read first.
    client.unshift(hello)
    const secure = new tls.TLSSocket(client, {
      isServer: true,
      secureContext: serverSecureContext(serverTls, validation?.caCerts),
      requestCert: validation !== undefined,
      rejectUnauthorized: false
    })
    this.due(conn, this.helloTimeoutMs, () => {
      this.fail(conn, 'HandshakeFailed', new PorticoError('PORTICO_STREAM_FAILED', 'handshake not completed in time'))
      secure.destroy()
    })
    let established = false
    secure.on('error', err => {
      conn.expire = null
      this.fail(conn, established ? 'ClientReset' : 'HandshakeFailed', err)
      client.destroy()
    })
    secure.once('secure', () => {
      established = true
      conn.expire = null
      const refusal = validation?.mode === 'AllowValidOnly' ? clientCertificateProblem(secure) : null
      if (refusal !== null) {
        this.fail(conn, 'ClientCertificateRequired', new PorticoError('PORTICO_STREAM_FAILED', `client certificate refused: ${refusal}`))
        secure.destroy()
        client.destroy()
        return
      }
      this.connect(conn, secure, backend, null)
    })
  }

  /** Connects to an endpoint of `backend`, replays `first`, and copies bytes both ways. */
  private connect (conn: Conn, downstream: Socket, backend: BackendIR, first: Buffer | null): void {
    const endpoint = this.endpoints.pick(backend)
    const target = hostPort(endpoint.host, endpoint.port)
    conn.target = target
    if (endpoint.mesh !== undefined) {
      this.connectTunnel(conn, downstream, backend, endpoint, endpoint.mesh, first)
      return
    }
    conn.tracer?.emit({ type: 'backendCallStart', target })
    const callStart = conn.tracer?.now() ?? 0
    // The backend's bytes are read through a relay (`onread`, for TLS backends too).
    const down = new Relay()
    const options = { host: endpoint.host, port: endpoint.port, allowHalfOpen: true, noDelay: true, onread: down }
    const upstream: Socket = backend.tls !== undefined
      ? tls.connect({ ...options, servername: net.isIP(endpoint.host) === 0 ? endpoint.host : undefined, ...backendTlsConnectOptions(backend.tls) })
      : net.connect(options)
    let connected = false
    this.due(conn, this.connectTimeoutMs, () => {
      this.fail(conn, 'UpstreamConnectFailed', new PorticoError('PORTICO_STREAM_FAILED', `no connection to ${target} after ${this.connectTimeoutMs} ms`))
      upstream.destroy()
      downstream.destroy()
    })
    upstream.once(backend.tls !== undefined ? 'secureConnect' : 'connect', () => {
      connected = true
      conn.expire = null
      conn.tracer?.emit({ type: 'backendCallResult', status: null, error: null }, { eventStart: callStart })
      if (first !== null) upstream.write(first)
      // The client's bytes: through its relay when it reads through it (`onread`), else (the
      // plaintext of a terminated connection, or a socket that could not be adopted)
      // through 'data' events.
      if (conn.adopted && downstream === conn.client) conn.up.forward(downstream, upstream)
      else conn.up.forwardStream(downstream, upstream)
      down.forward(upstream, downstream)
      conn.pair = this.pairOf(conn, upstream, downstream, null)
    })
    upstream.on('error', err => {
      conn.expire = null
      if (!connected) {
        conn.tracer?.emit({ type: 'backendCallResult', status: null, error: err.message }, { severity: 'error', eventStart: callStart })
        this.fail(conn, 'UpstreamConnectFailed', err)
      } else this.fail(conn, 'UpstreamReset', err)
      downstream.destroy()
    })
    // Either side closing ends the pair (each half-close was passed on by its relay already);
    // bytes the other side still holds are written first, within the idle timeout (the
    // connection leaves the idle clock when the client's side closes, so it is passed here).
    upstream.once('close', () => closeWhenFlushed(downstream, this.idleTimeoutMs))
    downstream.once('close', () => closeWhenFlushed(upstream, this.idleTimeoutMs))
  }

  /**
   * To a mesh workload: the bytes go through an HBONE tunnel (mesh/hbone-pool.ts), with
   * backendTLS inside it when set. The tunnel is read through the stream API (it is no TCP
   * socket for `onread`), its bytes counted for the idle clock.
   */
  private connectTunnel (conn: Conn, downstream: Socket, backend: BackendIR, endpoint: EndpointIR, mesh: NonNullable<EndpointIR['mesh']>, first: Buffer | null): void {
    const target = conn.target!
    conn.tracer?.emit({ type: 'backendCallStart', target, mesh: 'hbone', peerIdentity: mesh.identity })
    const callStart = conn.tracer?.now() ?? 0
    const failed = (err: Error): void => {
      conn.expire = null
      conn.tracer?.emit({ type: 'backendCallResult', status: null, error: err.message, mesh: 'hbone' }, { severity: 'error', eventStart: callStart })
      this.fail(conn, 'UpstreamConnectFailed', err)
      downstream.destroy()
    }
    const hbone = this.hbone()
    if (hbone === null) {
      failed(new PorticoError('PORTICO_MESH_NO_IDENTITY', `endpoint ${target} is a mesh workload (${mesh.identity}) and the gateway has no mesh identity (config mesh.certificate)`))
      return
    }
    let gone = false
    this.due(conn, this.connectTimeoutMs, () => {
      gone = true
      failed(new PorticoError('PORTICO_STREAM_FAILED', `no tunnel to ${target} after ${this.connectTimeoutMs} ms`))
    })
    hbone.open({ host: endpoint.host, port: endpoint.port, identity: mesh.identity, hbonePort: mesh.hbonePort }, (err, stream) => {
      if (gone || downstream.destroyed || conn.reason !== null) {
        stream?.destroy()
        return
      }
      if (err !== null || stream === undefined) {
        failed(err ?? new PorticoError('PORTICO_HBONE_FAILED'))
        return
      }
      const upstream = (backend.tls !== undefined
        ? tls.connect({ socket: stream, servername: net.isIP(endpoint.host) === 0 ? endpoint.host : undefined, ...backendTlsConnectOptions(backend.tls) })
        : stream) as unknown as Socket
      const tunnelRead = { bytes: 0 }
      const ready = (): void => {
        conn.expire = null
        conn.tracer?.emit({ type: 'backendCallResult', status: null, error: null, mesh: 'hbone', peerIdentity: mesh.identity }, { eventStart: callStart })
        if (first !== null) upstream.write(first)
        if (conn.adopted && downstream === conn.client) conn.up.forward(downstream, upstream)
        else conn.up.forwardStream(downstream, upstream)
        upstream.on('data', (chunk: Buffer) => { tunnelRead.bytes += chunk.length })
        new Relay().forwardStream(upstream, downstream)
        conn.pair = this.pairOf(conn, upstream, downstream, tunnelRead)
      }
      let connected = backend.tls === undefined
      if (connected) ready()
      else upstream.once('secureConnect', () => { connected = true; ready() })
      upstream.on('error', e => {
        if (!connected) failed(e)
        else {
          this.fail(conn, 'UpstreamReset', e)
          downstream.destroy()
        }
      })
      upstream.once('close', () => closeWhenFlushed(downstream, this.idleTimeoutMs))
      downstream.once('close', () => closeWhenFlushed(upstream, this.idleTimeoutMs))
    })
  }

  /** Runs `expire` unless the connection moves on (clearing `conn.expire`) within `ms`. */
  private due (conn: Conn, ms: number, expire: () => void): void {
    conn.deadline = performance.now() + ms
    conn.expire = expire
  }

  /** The pair of a connection once bytes flow; cut, when idle, as an IdleTimeout of both sockets. */
  private pairOf (conn: Conn, upstream: Socket, downstream: Socket, tunnelRead: { bytes: number } | null): NonNullable<Conn['pair']> {
    return {
      upstream,
      downstream,
      idle: () => {
        this.fail(conn, 'IdleTimeout', new PorticoError('PORTICO_STREAM_FAILED', `no bytes either way for ${this.idleTimeoutMs} ms`))
        upstream.destroy()
        downstream.destroy()
      },
      tunnelRead
    }
  }

  /** The clock's round: a deadline passed, or a pair that moved no byte for the idle timeout. */
  private check (conn: Conn, now: number): void {
    if (conn.expire !== null) {
      if (now < conn.deadline) return
      const expire = conn.expire
      conn.expire = null
      expire()
      return
    }
    const pair = conn.pair
    if (pair === null) return
    // Every byte either way is read by one of the two sockets.
    const bytes = (pair.tunnelRead !== null ? pair.tunnelRead.bytes : pair.upstream.bytesRead) + pair.downstream.bytesRead
    if (bytes !== conn.bytesSeen) {
      conn.bytesSeen = bytes
      conn.quietSince = now
    } else if (now - conn.quietSince >= this.idleTimeoutMs) {
      conn.pair = null
      pair.idle()
    }
  }

  /** Ends a connection nothing will serve (the record keeps why). */
  private refuse (conn: Conn, reason: StreamReason, message: string): void {
    this.fail(conn, reason, new PorticoError('PORTICO_STREAM_FAILED', message))
    conn.client.destroy()
  }

  /** Records the first reason a connection failed (later errors are its consequences). */
  private fail (conn: Conn, reason: StreamReason, err: Error): void {
    if (conn.reason !== null) return
    conn.reason = reason
    conn.error = err.message
  }

  private finish (conn: Conn): void {
    if (conn.ended) return
    conn.ended = true
    this.clock.delete(conn)
    const reason = conn.reason ?? 'Done'
    const record: StreamConnectionRecord = {
      protocol: conn.bind.ir.protocol === 'TLS' ? 'tls' : 'tcp',
      ...streamPlacement(conn.bind, conn.listener, conn.route, conn.backend, conn.target),
      serverName: conn.serverName,
      mode: conn.mode,
      source: conn.source,
      bytesFromClient: conn.client.bytesRead,
      bytesToClient: conn.client.bytesWritten,
      durationMs: performance.now() - conn.started,
      reason,
      error: conn.error
    }
    if (conn.tracer !== null) {
      if (!conn.tracer.claimed) this.hub.claim(conn.tracer, { method: record.protocol.toUpperCase(), host: conn.serverName ?? '', path: '', route: record.route, headers: {} })
      conn.tracer.emit({ type: 'requestFinished', stream: { bytesFromClient: record.bytesFromClient, bytesToClient: record.bytesToClient, reason } }, { severity: reason === 'Done' ? 'info' : 'error' })
    }
    this.onEnd?.(record)
  }
}

/**
 * The route a connection takes: on TLS the one whose hostnames match the SNI name most
 * specifically (ranked by the route's own hostname: StreamRouteIR.hostnameOrigins; a route
 * without hostnames matches any name, least specifically), ties going
 * to the earlier route; on TCP the first.
 */
export function selectStreamRoute (listener: CompiledListener, serverName: string | null): CompiledStreamRoute | null {
  let best: CompiledStreamRoute | null = null
  let bestScore = -1
  for (const route of listener.streamRoutes) {
    let score = -1
    if (route.ir.hostnames.length === 0) score = 0
    else if (serverName !== null) {
      route.ir.hostnames.forEach((h, i) => {
        if (hostnameMatches(h, serverName)) score = Math.max(score, servedHostnameSpecificity(route.ir.hostnames, route.ir.hostnameOrigins, i))
      })
    }
    if (score > bestScore) {
      best = route
      bestScore = score
    }
  }
  return best
}

/**
 * Why the client's certificate does not verify against the CAs asked for, or null when it does.
 * A TLSSocket made outside a tls.Server is not told (tls.Server fills `authorized` in its
 * own connection handler), so this asks the handle as that handler does; a Node without that
 * method fails closed.
 */
function clientCertificateProblem (socket: tls.TLSSocket): string | null {
  const handle = (socket as tls.TLSSocket & { _handle?: { verifyError?: () => (Error & { code?: string }) | null } })._handle
  if (typeof handle?.verifyError !== 'function') return 'cannot verify'
  if (Object.keys(socket.getPeerCertificate()).length === 0) return 'none sent'
  const err = handle.verifyError()
  return err === null || err === undefined ? null : (err.code ?? err.message)
}

function sourceOf (socket: Socket): { address: string, port: number } {
  return { address: plainAddress(socket.remoteAddress ?? ''), port: socket.remotePort ?? 0 }
}
