/**
 * The data-plane sockets: one HTTP or HTTPS server per bind of the IR. A config change opens
 * new binds before the engine switches config (so a port that cannot be bound rejects the
 * change and nothing moves), keeps unchanged binds and their connections, and drains binds
 * that went away.
 */

import type * as Http from 'node:http'
import http from '@portico/engine/node-http'
import https from 'node:https'
import http2 from 'node:http2'
import tls from 'node:tls'
import net, { type Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type Dgram from 'node:dgram'
import type { Logger } from 'pino'
import type { BindIR, Engine, InboundResponse, ListenerIR, ProxyIR } from '@portico/engine/serving'
import { PorticoError, hostnameMatches, hostnameSpecificity, requestHeadersTimeoutMs, serverContextOptions, serverSecureContext } from '@portico/engine/serving'
import { H2_SERVER_SETTINGS, adaptHttp2, guardPrematureResets, sniffPreface } from './http2.ts'
import { H1Server } from './h1-server.ts'
import { assumeAddresses } from './workers/intake.ts'
import { performance } from '@portico/engine/clock'
import { SlotSet } from '@portico/engine/slot-set'

/** A connection that has sent nothing for this long is not about to: a drain closes it. */
const UNUSED_CONNECTION_GRACE_MS = 1_000

/** How often Node checks request-head deadlines (a limit fires up to this much late). */
const HEADERS_CHECK_INTERVAL_MS = 250

function clientErrorStatus (code: string | undefined): [string, string] {
  if (code === 'HPE_HEADER_OVERFLOW') return ['431 Request Header Fields Too Large', 'request header fields too large']
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return ['408 Request Timeout', 'request timeout']
  return ['400 Bad Request', 'bad request']
}

function clientErrorResponse (code: string | undefined): string {
  const [status, body] = clientErrorStatus(code)
  return `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`
}

/** An HTTP/2 connection with no stream open for this long is closed (as keepAliveTimeout does for HTTP/1.1). */
const H2_IDLE_TIMEOUT_MS = 65_000

/** The bind's certificate and, with client certificate validation, the CAs clients must chain to. */
function serverTlsOptions (bind: BindIR): tls.SecureContextOptions {
  return bind.tls === undefined ? {} : serverContextOptions(bind.tls, verifyingCa(bind))
}

/**
 * The CAs OpenSSL checks client certificates against: AllowValidOnly only. In
 * AllowInsecureFallback every client is served whatever it sends, and a failed check there
 * is not harmless: a certificate whose issuer has the name of a trusted CA but another key
 * fails its signature check, and Node leaves that error in OpenSSL's queue, where the next
 * read finds it (ERR_SSL_INVALID_PADDING) and the first request gets a 400. So fallback asks
 * for a certificate without naming or checking CAs.
 */
function verifyingCa (bind: BindIR): string | undefined {
  const v = bind.tls?.clientValidation
  return v?.mode === 'AllowValidOnly' ? v.caCerts : undefined
}

/**
 * Whether the handshake asks for a client certificate, and fails without a valid one
 * (AllowValidOnly; Node then ends the connection after a handshake whose certificate did not
 * verify). AllowInsecureFallback asks but serves every client.
 */
function clientCertOptions (bind: BindIR): { requestCert: boolean, rejectUnauthorized: boolean } {
  const v = bind.tls?.clientValidation
  return { requestCert: v !== undefined, rejectUnauthorized: v?.mode === 'AllowValidOnly' }
}

function sameTlsOptions (a: BindIR, b: BindIR): boolean {
  return a.tls?.minVersion === b.tls?.minVersion && a.tls?.maxVersion === b.tls?.maxVersion && (a.tls?.ciphers ?? []).join(':') === (b.tls?.ciphers ?? []).join(':')
}

/** Whether a bind can keep its server across a config change (same protocol, same HTTP/2 setting). */
function sameServerKind (a: BindIR, b: BindIR): boolean {
  return a.protocol === b.protocol && (a.http2 ?? true) === (b.http2 ?? true)
}

function sameClientValidation (a: BindIR, b: BindIR): boolean {
  const x = a.tls?.clientValidation
  const y = b.tls?.clientValidation
  return x?.caCerts === y?.caCerts && x?.mode === y?.mode
}

/**
 * A client connection as its listener tracks it: its place in `sockets` (a SlotSet, not a
 * Set: connections come and go all the time, util/slot-set.ts says why that matters) and
 * when it was accepted, so a drain can tell unused ones apart.
 */
type TrackedSocket = Socket & { [LISTENER_SLOT]: number, [OPENED_AT]: number }
const LISTENER_SLOT = Symbol('portico.listenerSlot')
const OPENED_AT = Symbol('portico.openedAt')

function trackedSockets (): SlotSet<TrackedSocket> {
  return new SlotSet<TrackedSocket>({ get: s => s[LISTENER_SLOT], set: (s, slot) => { s[LISTENER_SLOT] = slot } })
}

interface BoundServer {
  bind: BindIR
  server: Http.Server
  /** Open client connections, for draining and for /debug/tasks. */
  sockets: SlotSet<TrackedSocket>
  /** Open HTTP/2 sessions (h2 and h2c), which a drain ends with a GOAWAY. */
  sessions: Set<http2.ServerHttp2Session>
  /** An HTTP or HTTPS bind's HTTP/1.1 connections (h1-server.ts); null for TCP, TLS and UDP binds. */
  h1: H1Server | null
}

/** Binds `prepare` opened for a config not yet in force. */
export interface PreparedBinds {
  ir: ProxyIR
  opened: BoundServer[]
}

export interface ListenerSnapshot {
  key: string
  address: string
  port: number
  protocol: string
  connections: number
}

export class ListenerManager {
  private readonly servers = new Map<string, BoundServer>()
  private readonly engine: Engine
  private readonly log: Logger
  /** Told of each accepted connection; returns what to call when it closes (metrics). */
  private readonly onConnection: ((bind: string, protocol: string) => () => void) | undefined

  /** SO_REUSEPORT: several serving loops (the primary and its workers, config.workers) listen on the same ports. */
  private readonly reusePort: boolean
  /**
   * The servers listen nowhere: the primary accepts their connections and hands them over
   * (`accept`: a worker's through workers/intake.ts, the primary's own share directly;
   * WORKER_ACCEPT=primary).
   */
  private readonly intake: boolean
  /** Servers `prepare` opened, by bind key, until `commit` or `abort` (intake: handed-over connections may arrive before the commit). */
  private readonly preparing = new Map<string, BoundServer>()

  constructor (engine: Engine, log: Logger, onConnection?: (bind: string, protocol: string) => () => void, options: { reusePort?: boolean, intake?: boolean } = {}) {
    this.engine = engine
    this.log = log
    this.onConnection = onConnection
    this.reusePort = options.reusePort === true
    this.intake = options.intake === true
  }

  /**
   * A connection the primary accepted for bind `key` (intake mode): served as if this bind's
   * server had accepted it. It arrives paused, with the client's addresses.
   */
  accept (key: string, socket: Socket): void {
    const entry = this.servers.get(key) ?? this.preparing.get(key)
    if (entry === undefined) {
      socket.destroy()
      return
    }
    entry.server.emit('connection', socket)
    // An HTTP server reads the socket through its stream (which pause() stopped). An HTTPS
    // server's TLS socket reads the handle itself: resuming this one too would race it for
    // the bytes. A TCP or TLS bind's server was made with pauseOnConnect: the engine starts
    // reading.
    if (entry.bind.protocol === 'HTTP') socket.resume()
  }

  /**
   * Opens the binds of `ir` that are not open yet, then calls `commit` (which installs the
   * config), then closes binds `ir` no longer has. If a new bind fails (or `commit` throws),
   * the ones just opened are closed again and the error is thrown: the old config keeps serving.
   */
  async apply (ir: ProxyIR, commit: () => void): Promise<void> {
    const prepared = await this.prepare(ir)
    try {
      commit()
    } catch (err) {
      await this.abort(prepared)
      throw err
    }
    this.commit(prepared)
  }

  /**
   * The first half of `apply`: opens the binds `ir` adds (a bind that cannot be opened closes
   * the others just opened and throws). Nothing else changes until `commit` or `abort`.
   */
  async prepare (ir: ProxyIR): Promise<PreparedBinds> {
    const opened: BoundServer[] = []
    try {
      for (const bind of ir.binds) {
        const existing = this.servers.get(bind.key)
        if (existing !== undefined && sameServerKind(existing.bind, bind)) continue
        if (existing !== undefined) {
          // Another kind of server on the same port (HTTP -> TCP, HTTPS -> HTTP, ...): the old
          // one must let go of the port before the new one can take it.
          this.servers.delete(bind.key)
          this.log.info({ bind: bind.key, from: existing.bind.protocol, to: bind.protocol }, 'listener changes protocol: reopening')
          await this.closeServer(existing, 0)
        }
        const entry = await this.open(bind)
        opened.push(entry)
        this.preparing.set(bind.key, entry)
      }
    } catch (err) {
      for (const s of opened) this.preparing.delete(s.bind.key)
      await Promise.all(opened.map(s => this.closeServer(s, 0)))
      throw err
    }
    return { ir, opened }
  }

  /** A refused reload: closes what `prepare` opened. */
  async abort (prepared: PreparedBinds): Promise<void> {
    for (const s of prepared.opened) this.preparing.delete(s.bind.key)
    await Promise.all(prepared.opened.map(s => this.closeServer(s, 0)))
  }

  /** The second half of `apply`, once the config is in force: binds that went away drain, the rest take the new settings. */
  commit (prepared: PreparedBinds): void {
    const { ir, opened } = prepared
    const wanted = new Map(ir.binds.map(b => [b.key, b]))
    for (const s of opened) {
      this.preparing.delete(s.bind.key)
      this.servers.set(s.bind.key, s)
    }
    for (const [key, s] of this.servers) {
      const bind = wanted.get(key)
      if (bind === undefined) {
        this.servers.delete(key)
        this.log.info({ bind: key }, 'closing listener removed from config')
        void this.closeServer(s, 30_000)
        continue
      }
      const headersTimeout = requestHeadersTimeoutMs(bind)
      if (s.server.headersTimeout !== headersTimeout) s.server.headersTimeout = headersTimeout
      if (bind.protocol === 'HTTPS' && bind.tls !== undefined && (s.bind.tls?.cert !== bind.tls.cert || s.bind.tls?.key !== bind.tls.key || !sameClientValidation(s.bind, bind) || !sameTlsOptions(s.bind, bind))) {
        const server = s.server as https.Server & { requestCert?: boolean, rejectUnauthorized?: boolean }
        server.setSecureContext(serverTlsOptions(bind))
        // Each new connection's TLS socket copies these from the server (node:_tls_wrap);
        // connections already open keep what they were accepted with.
        server.requestCert = clientCertOptions(bind).requestCert
        server.rejectUnauthorized = clientCertOptions(bind).rejectUnauthorized
      }
      s.bind = bind
    }
  }

  private async open (bind: BindIR): Promise<BoundServer> {
    const entry: BoundServer = { bind, server: null as unknown as Http.Server, sockets: trackedSockets(), sessions: new Set(), h1: null }
    if (bind.protocol === 'UDP') {
      await this.openUdp(entry)
      return entry
    }
    if (bind.protocol === 'TCP' || bind.protocol === 'TLS') {
      // Whole connections: the engine picks a route per connection and copies the bytes.
      // allowHalfOpen: a client that shuts its write side still reads the rest of the answer.
      // pauseOnConnect: nothing is read before the engine has the socket (it may re-make it
      // to read through its own buffers); what it returns is the connection's socket.
      const server = net.createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true })
      entry.server = server as unknown as Http.Server
      const handle = this.engine.streamHandler(bind.key)
      server.on('connection', (socket: Socket) => this.track(entry, handle(socket)))
      await this.listen(entry)
      return entry
    }
    const options: Http.ServerOptions = {
      // Bodies may stream for a long time (uploads, SSE): a whole-request limit would cut
      // them. Slow request heads are cut (requestHeadersTimeout), and so are streamed bodies
      // that go quiet (requestBodyIdleTimeout, in the backend call).
      requestTimeout: 0,
      headersTimeout: requestHeadersTimeoutMs(bind),
      // Node checks the head deadline on this period (30 s by default, far coarser than a
      // 10 s limit); the check walks a list in C++ and costs little.
      connectionsCheckingInterval: HEADERS_CHECK_INTERVAL_MS,
      keepAliveTimeout: 65_000,
      // Leave header size policing to Node's default (16 KiB); parse errors get a 400.
      noDelay: true,
      // Only upgrades the listener allows (WebSocket by default) leave the HTTP parser; any
      // other (h2c, ...) is served as a plain request and its Upgrade headers are dropped.
      shouldUpgradeCallback: (req: Http.IncomingMessage) => this.engine.upgradeAllowed(entry.bind.key, req)
    }
    const h2 = bind.http2 !== false
    const tlsOptions = { ...serverTlsOptions(bind), ...clientCertOptions(bind), SNICallback: (servername: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void) => cb(null, this.contextForSni(entry, servername)) }
    let server: Http.Server
    if (bind.protocol === 'HTTPS' && h2) {
      // ALPN picks h2 or http/1.1; HTTP/1.1 connections then run Node's own HTTP/1.1 server
      // code (the same parser, head deadline, keep-alive and upgrade handling as https).
      const secure = http2.createSecureServer({ ...options, ...tlsOptions, allowHTTP1: true, settings: H2_SERVER_SETTINGS }) as unknown as Http.Server & { shouldUpgradeCallback: (req: Http.IncomingMessage) => boolean }
      // Http2SecureServer replaces the option with "any 'upgrade' listener": set it again.
      secure.shouldUpgradeCallback = options.shouldUpgradeCallback!
      // It also reports failed handshakes as 'clientError', which would answer an HTTP 400
      // on a connection that never spoke HTTP: like https, let such a socket just be destroyed.
      secure.removeAllListeners('tlsClientError')
      server = secure
    } else {
      server = bind.protocol === 'HTTPS' ? https.createServer({ ...options, ...tlsOptions }) : http.createServer(options)
    }
    entry.server = server
    const handle = this.engine.handler(bind.key)
    const onUpgrade = this.engine.upgradeHandler(bind.key)
    const onClientError = (err: NodeJS.ErrnoException, socket: Socket | Duplex): void => {
      const inPipeline = (socket as Socket & { _httpMessage?: InboundResponse | null })._httpMessage
      if (socket.writable && !inPipeline) {
        // Malformed requests get a 400 and never reach the pipeline; oversized headers (a
        // 64 KiB token, say) and a head that took too long get the status naming the problem.
        socket.end(clientErrorResponse(err.code))
      } else if (!(socket.writable && inPipeline !== null && inPipeline !== undefined && this.engine.clientError(inPipeline, err))) {
        // The request is in the pipeline and its body broke (a bad chunk size): the engine
        // answers 400 unless the response has started, when closing is all that is left.
        socket.destroy()
      }
      this.log.debug({ bind: bind.key, err: err.code ?? err.message }, err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request head timeout' : 'malformed request')
    }
    // HTTP/1.1 runs on Portico's own server side (h1-server.ts: Node's parser, lighter
    // request and response objects); Node's server stays the listening socket (and TLS), and
    // its HTTP/1.1 connection listener is replaced by this one.
    const h1 = new H1Server({
      headersTimeoutMs: () => server.headersTimeout,
      keepAliveTimeoutMs: options.keepAliveTimeout!,
      onRequest: handle,
      shouldUpgrade: req => this.engine.upgradeAllowed(entry.bind.key, req),
      onUpgrade,
      onClientError,
      server
    })
    entry.h1 = h1
    /** Node's own listener for `event` (one per server: http's, https's or http2's connectionListener). */
    const nodeListener = (event: 'connection' | 'secureConnection'): (socket: Socket) => void => {
      const listener = server.listeners(event)[0] as (socket: Socket) => void
      server.off(event, listener)
      return listener
    }
    if (!h2) {
      const event = bind.protocol === 'HTTPS' ? 'secureConnection' : 'connection'
      nodeListener(event)
      server.on(event, (socket: Socket) => h1.serve(socket))
    } else {
      const handleAny = (req: Http.IncomingMessage, res: Http.ServerResponse): void => {
        adaptHttp2(req, res)
        handle(req, res)
      }
      const onSession = (session: http2.ServerHttp2Session): void => {
        entry.sessions.add(session)
        guardPrematureResets(session, detail => this.log.warn({ bind: bind.key, ...detail }, 'http2 session ended: streams reset before their answer (rapid reset)'))
        session.setTimeout(H2_IDLE_TIMEOUT_MS, () => session.close())
        session.once('close', () => entry.sessions.delete(session))
      }
      const onSessionError = (err: NodeJS.ErrnoException): void => {
        this.log.debug({ bind: bind.key, err: err.code ?? err.message }, 'http2 session error')
      }
      if (bind.protocol === 'HTTPS') {
        server.on('request', handleAny)
        server.on('session', onSession)
        server.on('sessionError', onSessionError)
        // ALPN chose h2: Node's HTTP/2 session; http/1.1, or no ALPN: HTTP/1.1 here.
        const http2Listener = nodeListener('secureConnection')
        server.on('secureConnection', (socket: tls.TLSSocket) => {
          if (socket.alpnProtocol === 'h2') http2Listener.call(server, socket)
          else h1.serve(socket)
        })
      } else {
        // h2c with prior knowledge: a connection that opens with the HTTP/2 preface goes to
        // an HTTP/2 server that never listens itself; every other one to HTTP/1.1 here (its
        // first bytes are put back before it reads).
        const h2c = http2.createServer({ settings: H2_SERVER_SETTINGS })
        h2c.on('request', handleAny)
        h2c.on('session', onSession)
        h2c.on('sessionError', onSessionError)
        nodeListener('connection')
        server.on('connection', (socket: Socket) => {
          sniffPreface(socket, requestHeadersTimeoutMs(entry.bind), isH2 => {
            if (isH2) h2c.emit('connection', socket)
            else {
              h1.serve(socket)
              socket.resume()
            }
          }, () => socket.end(clientErrorResponse('ERR_HTTP_REQUEST_TIMEOUT')))
        })
      }
    }
    server.on('upgrade', onUpgrade)
    server.on(bind.protocol === 'HTTPS' ? 'secureConnection' : 'connection', (socket: Socket) => this.track(entry, socket))
    server.on('clientError', onClientError)
    await this.listen(entry)
    return entry
  }

  /**
   * A UDP bind: one socket whose datagrams the engine forwards per client flow
   * (stream/udp-proxy.ts). Workers each bind the port with SO_REUSEPORT (the kernel keeps a
   * client address:port on one socket, so a flow stays in one worker), in intake mode too:
   * the primary hands over TCP connections only.
   */
  private async openUdp (entry: BoundServer): Promise<void> {
    const { bind } = entry
    // node:dgram only for a config with a UDP bind (issue 54: HTTP gateways do not load it).
    const dgram = process.getBuiltinModule('node:dgram') as typeof Dgram
    const socket = dgram.createSocket({ type: net.isIPv6(bind.address) ? 'udp6' : 'udp4', ...(this.reusePort || this.intake ? { reusePort: true } : {}) })
    const key = bind.key
    const flows = this.engine.udp
    // The shape the rest of this class uses of a server: close, address, error events.
    entry.server = {
      close: (cb?: () => void) => {
        flows.closeBind(key)
        try { socket.close(cb) } catch { cb?.() }
      },
      address: () => socket.address(),
      closeIdleConnections: () => {}
    } as unknown as Http.Server
    // A reply for a flow whose listener just closed has nowhere to go: dropped, not thrown.
    socket.on('message', this.engine.udpHandler(key, { send: (msg, port, address) => { try { socket.send(msg, port, address) } catch {} } }))
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        reject(new PorticoError('PORTICO_BIND_FAILED', `cannot listen on ${key} (udp): ${err.code ?? err.message}`, { cause: err }))
      }
      socket.once('error', onError)
      socket.bind({ address: bind.address, port: bind.port }, () => {
        socket.off('error', onError)
        socket.on('error', err => this.log.error({ err, bind: key }, 'udp listener error'))
        resolve()
      })
    })
  }

  /** Counts a client connection for drains, /debug/tasks and the connection metrics. */
  private track (entry: BoundServer, socket: Socket): void {
    // A TLS socket over a handed-over connection asks its own (addressless) handle who the
    // client is: it gets the addresses the connection was given (workers/intake.ts).
    const parent = (socket as Socket & { _parent?: Socket })._parent
    if (this.intake && parent != null && Object.hasOwn(parent, 'remoteAddress')) assumeAddresses(socket, parent as Socket & { remoteFamily: string })
    const tracked = socket as TrackedSocket
    tracked[LISTENER_SLOT] = -1
    tracked[OPENED_AT] = performance.now()
    entry.sockets.add(tracked)
    const closed = this.onConnection?.(entry.bind.key, entry.bind.protocol)
    socket.once('close', () => {
      entry.sockets.delete(tracked)
      closed?.()
    })
  }

  private async listen (entry: BoundServer): Promise<void> {
    const { server, bind } = entry
    if (this.intake) {
      // Never listening itself, the server still needs what Node sets up when it starts to:
      // the connection list behind closeIdleConnections (drains) and the timer that enforces
      // headersTimeout (http's setupConnectionsTracking runs on 'listening').
      server.emit('listening')
      return
    }
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        reject(new PorticoError('PORTICO_BIND_FAILED', `cannot listen on ${bind.key}: ${err.code ?? err.message}`, { cause: err }))
      }
      server.once('error', onError)
      server.listen({ host: bind.address, port: bind.port, ...(this.reusePort ? { reusePort: true } : {}) }, () => {
        server.off('error', onError)
        server.on('error', err => this.log.error({ err, bind: bind.key }, 'listener error'))
        resolve()
      })
    })
  }

  /**
   * The certificate for a TLS client hello: the listener of this bind whose hostname matches
   * the SNI name and that has its own certificate; else the bind's default (undefined).
   */
  private contextForSni (entry: BoundServer, servername: string): tls.SecureContext | undefined {
    const name = servername.toLowerCase()
    // The most specific hostname wins (api.example.com over *.example.com), as for routing.
    let listener: ListenerIR | undefined
    for (const l of entry.bind.listeners) {
      if (l.tls === undefined || l.hostname === undefined || !hostnameMatches(l.hostname, name)) continue
      if (listener === undefined || hostnameSpecificity(l.hostname) > hostnameSpecificity(listener.hostname)) listener = l
    }
    if (listener?.tls === undefined) return undefined
    // The verification of a client certificate uses the CA of the context SNI picked; the
    // versions and suites are the port's (they are settled before SNI is read).
    return serverSecureContext({ ...listener.tls, minVersion: entry.bind.tls?.minVersion, maxVersion: entry.bind.tls?.maxVersion, ciphers: entry.bind.tls?.ciphers }, verifyingCa(entry.bind))
  }

  /** Stops accepting, lets in-flight requests finish for up to `deadlineMs`, then cuts the rest. */
  private async closeServer (s: BoundServer, deadlineMs: number): Promise<void> {
    // A server that never listened (intake) is done when its last connection is; close()
    // still stops its timers (and reports, harmlessly, that it was not listening).
    const closed = this.intake && s.bind.protocol !== 'UDP'
      ? new Promise<void>(resolve => {
        s.server.close(() => {})
        const check = (): void => { if (s.sockets.size === 0) resolve(); else setTimeout(check, 50).unref() }
        check()
      })
      : new Promise<void>(resolve => s.server.close(() => resolve()))
    // A TCP or TLS bind's connections carry no requests to wait for the end of: they run
    // until they close or the deadline cuts them (as Envoy's tcp_proxy on drain).
    const stream = s.bind.protocol === 'TCP' || s.bind.protocol === 'TLS' || s.bind.protocol === 'UDP'
    const closeIdle = () => {
      if (stream) return
      s.server.closeIdleConnections()
      s.h1?.closeIdleConnections()
      // HTTP/2: a GOAWAY; the session closes once its open streams are answered.
      for (const session of s.sessions) if (!session.closed) session.close()
      // Node counts a connection that has not sent a request yet as busy, so one that was
      // opened and left unused (a preconnect, a spare in a client pool) would hold the drain
      // until its deadline. Once it has been quiet for a moment it is idle too.
      const now = performance.now()
      s.sockets.forEach(socket => {
        if (socket.bytesRead === 0 && now - socket[OPENED_AT] >= UNUSED_CONNECTION_GRACE_MS) socket.destroy()
      })
    }
    closeIdle()
    // Keep-alive connections that become idle after their last response are closed too.
    const sweep = setInterval(closeIdle, 100)
    const deadline = new Promise<void>(resolve => setTimeout(resolve, deadlineMs).unref())
    await Promise.race([closed, deadline])
    clearInterval(sweep)
    s.h1?.close()
    // Http2SecureServer lacks closeAllConnections though it tracks HTTP/1.1 connections the
    // same way; the sockets are destroyed below anyway.
    if (!stream) http.Server.prototype.closeAllConnections.call(s.server)
    for (const socket of s.sockets.toArray()) socket.destroy()
    await closed
  }

  /** Stops accepting on every bind and drains (SIGTERM, /quitquitquit). */
  async drain (deadlineMs: number): Promise<void> {
    const all = [...this.servers.values()]
    this.servers.clear()
    await Promise.all(all.map(s => this.closeServer(s, deadlineMs)))
  }

  snapshot (): ListenerSnapshot[] {
    return [...this.servers.values()].map(s => ({
      key: s.bind.key,
      address: s.bind.address,
      port: s.bind.port,
      protocol: s.bind.protocol,
      // A UDP bind has flows (a client address:port each) rather than connections.
      connections: s.bind.protocol === 'UDP' ? this.engine.udp.flowCount(s.bind.key) : s.sockets.size
    }))
  }

  /** Actual bound ports (useful when a config asked for port 0 in tests). */
  addresses (): Array<{ key: string, protocol: string, address: string, port: number }> {
    return [...this.servers.values()].map(s => {
      const a = s.server.address()
      return { key: s.bind.key, protocol: s.bind.protocol, address: s.bind.address, port: typeof a === 'object' && a !== null ? a.port : s.bind.port }
    })
  }
}
