/**
 * Keep-alive connection pools to backends, one per backend: for HTTP/1.1 Portico's own
 * client (http/h1-pool.ts), for HTTP/2 (h2c, h2 by ALPN, gRPC) undici's Pool (http/h2-pool.ts);
 * a backend with several endpoints, or passive health, gets an EndpointBalancer over one pool
 * per endpoint. Each endpoint's pool pins the configured TLS server name itself, so a
 * balanced backend gets it on every endpoint.
 * Pools outlive config versions: a reload that keeps a backend keeps its warm connections;
 * pools of removed backends close gracefully once their in-flight requests finish.
 */

import tls, { checkServerIdentity, type ConnectionOptions, type PeerCertificate } from 'node:tls'
import type { Duplex } from 'node:stream'
import type { Pool } from 'undici'
import type { BackendIR, EndpointMeshIR } from '../ir/types.ts'
import type { BackendTlsIR, BackendTlsSanIR } from '../ir/traffic.ts'
import { EndpointBalancer, type EndpointPool, type EndpointState, type PoolFactory } from './endpoint-balancer.ts'
import { H1Pool } from './h1-pool.ts'
import { H2Pool } from './h2-pool.ts'
import type { UpstreamCaller } from './dispatcher.ts'
import { hostPort } from '../util/host-port.ts'
import type { HbonePool } from '../mesh/hbone-pool.ts'
import type { MeshIdentity } from '../mesh/identity.ts'
import { PorticoError } from '../util/errors.ts'
import { lazyRequire } from '../util/lazy-require.ts'

// HBONE tunnels (node:http2 sessions to mesh workloads) load only with a mesh identity (issue 54).
const hbonePoolModule = lazyRequire<typeof import('../mesh/hbone-pool.ts')>('../mesh/hbone-pool.ts')

/** Concurrent requests on one HTTP/2 connection to a backend (most servers allow 100 or more). */
const H2_STREAMS_PER_CONNECTION = 100

/** Suffix of the entry key of a backend's HTTP/2 pool for gRPC requests. */
const GRPC_POOL = '\0grpc'

export interface UpstreamPoolOptions {
  /** Max connections per endpoint; null = unlimited. */
  connections?: number | null
  /** Connect timeout in ms. */
  connectTimeout?: number
  /** Idle keep-alive timeout in ms (servers' `Keep-Alive: timeout` hints win when shorter). */
  keepAliveTimeout?: number
  /** Passive-health state of an endpoint shared by the data-plane workers; undefined: this pool's own. */
  endpointState?: (backendKey: string, origin: string) => EndpointState | undefined
  /**
   * The gateway's mesh identity: connections to endpoints marked `mesh` are HBONE tunnels
   * made with it. Without one, such endpoints fail with PORTICO_MESH_NO_IDENTITY (never
   * plain text to a mesh workload).
   */
  mesh?: MeshIdentity
  /** An HBONE connection without streams closes after this long (ms); default 5 minutes. */
  hboneIdleTimeout?: number
  /** Most streams on one HBONE connection whatever the peer allows; default 100. */
  hboneMaxStreams?: number
}

interface Entry {
  /** What callers get: one endpoint's pool, or a balancer over several. */
  dispatcher: EndpointPool | EndpointBalancer
  origins: string[]
  /** The TLS settings it was made with: a change (a rotated client certificate, a new CA) needs a new pool. */
  tls: string
}

export interface PoolStats {
  backend: string
  origins: string[]
  connected: number
  free: number
  pending: number
  running: number
}

export class UpstreamPools {
  private readonly entries = new Map<string, Entry>()
  private readonly options: Required<Omit<UpstreamPoolOptions, 'endpointState'>>
  private readonly endpointState: UpstreamPoolOptions['endpointState']
  /** The HBONE tunnels to mesh endpoints (one per gateway process thread), when a mesh identity is set. */
  readonly hbone: HbonePool | null

  constructor (options: UpstreamPoolOptions = {}) {
    this.endpointState = options.endpointState
    this.hbone = options.mesh === undefined ? null : new (hbonePoolModule().HbonePool)(options.mesh, { connectTimeoutMs: options.connectTimeout, idleTimeoutMs: options.hboneIdleTimeout, maxStreamsPerConnection: options.hboneMaxStreams })
    this.options = {
      connections: options.connections ?? null,
      connectTimeout: options.connectTimeout ?? 10_000,
      keepAliveTimeout: options.keepAliveTimeout ?? 4_000
    } as Required<Omit<UpstreamPoolOptions, 'endpointState'>>
  }

  /**
   * The dispatcher for a backend, created on first use. `grpc`: the request is gRPC, which
   * needs HTTP/2 -- a plain `http` backend is then reached over h2c with prior knowledge and a
   * TLS one offers h2 by ALPN, on a pool of its own beside the backend's HTTP/1.1 one.
   */
  get (backend: BackendIR, grpc = false): UpstreamCaller {
    const variant = grpc && backend.h2c !== true && backend.h2 !== true
    const key = variant ? backend.key + GRPC_POOL : backend.key
    const entry = this.entries.get(key)
    if (entry !== undefined) return entry.dispatcher
    return this.create(backend, key, variant).dispatcher
  }

  private create (backend: BackendIR, key: string, grpc: boolean): Entry {
    const origins = originsOf(backend)
    const poolOptions: Pool.Options = {
      connections: this.options.connections,
      pipelining: 1,
      keepAliveTimeout: this.options.keepAliveTimeout,
      connectTimeout: this.options.connectTimeout,
      // The call's clocks (http/call-timers.ts: backendRequestTimeout, streamIdleTimeout) bound
      // the wait for headers and a quiet stream, with defaults and per-route values; a pool
      // limit under them would cut a route that asks for longer.
      headersTimeout: 0,
      bodyTimeout: 0
    }
    // A backend that speaks only h2c (appProtocol kubernetes.io/h2c) gets HTTP/2 with prior knowledge.
    // (undici's Pool reads useH2c at the top level to build its connector; its types list it
    // only under h2Options, which the connector does not see.)
    if ((backend.h2c === true || grpc) && backend.protocol === 'http') Object.assign(poolOptions, { useH2c: true })
    // HTTP/2 multiplexes: a connection carries many requests at once (undici counts streams
    // as pipelined requests; 1 would open a connection per concurrent request).
    if (backend.h2c === true || backend.h2 === true || grpc) poolOptions.pipelining = H2_STREAMS_PER_CONNECTION
    // Several gRPC calls share one HTTP/2 connection (streams), as gRPC clients expect; an
    // `http.version: HTTP2` backend over TLS offers h2 by ALPN too.
    if ((grpc || backend.h2 === true) && backend.protocol === 'https') Object.assign(poolOptions, { allowH2: true })
    const tlsOptions = backend.tls !== undefined ? backendTlsConnectOptions(backend.tls) : undefined
    if (tlsOptions !== undefined) poolOptions.connect = tlsOptions as Pool.Options['connect']
    const http1 = poolOptions.pipelining === 1
    const meshOf = meshEndpoints(backend)
    // undici takes each request's SNI from its Host header over the connect options'
    // servername: each HTTP/2 pool pins a configured server name on every request (the
    // HTTP/1.1 client prefers the configured one itself).
    const makePool: PoolFactory = http1
      ? origin => new H1Pool(origin, { connections: this.options.connections, connectTimeout: this.options.connectTimeout, keepAliveTimeout: this.options.keepAliveTimeout, headersTimeout: 0, connect: tlsOptions, ...this.tunnelOf(origin, meshOf.get(origin)) })
      : origin => new H2Pool(origin, this.h2Tunneled(origin, meshOf.get(origin), poolOptions, tlsOptions), backend.tls?.serverName)
    const dispatcher = !needsBalancer(backend, origins)
      ? makePool(origins[0]!)
      : new EndpointBalancer(origins, backend.health, makePool, Date.now, origin => this.endpointState?.(backend.key, origin))
    const entry: Entry = { dispatcher, origins, tls: transportKey(backend) }
    this.entries.set(key, entry)
    return entry
  }

  /** For a mesh endpoint, the H1Pool option that opens its connections as HBONE tunnels. */
  private tunnelOf (origin: string, mesh: EndpointMeshIR | undefined): { tunnel?: (callback: (err: Error | null, stream?: Duplex) => void) => void } {
    if (mesh === undefined) return {}
    const url = new URL(origin)
    const target = { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : url.port), identity: mesh.identity, hbonePort: mesh.hbonePort }
    const hbone = this.hbone
    if (hbone === null) return { tunnel: callback => queueMicrotask(() => callback(new PorticoError('PORTICO_MESH_NO_IDENTITY', `endpoint ${url.host} is a mesh workload (${mesh.identity}) and the gateway has no mesh identity (config mesh.certificate)`))) }
    return { tunnel: callback => hbone.open(target, callback) }
  }

  /**
   * For a mesh endpoint, undici's options with a connector that hands it an HBONE stream
   * (TLS inside it for an https origin); h2c says it is HTTP/2 as undici's own connector does.
   */
  private h2Tunneled (origin: string, mesh: EndpointMeshIR | undefined, poolOptions: Pool.Options, tlsOptions: ConnectionOptions | undefined): Pool.Options {
    const { tunnel } = this.tunnelOf(origin, mesh)
    if (tunnel === undefined) return poolOptions
    const connect = (opts: { servername?: string | null }, callback: (err: Error | null, socket: Duplex | null) => void): void => {
      tunnel((err, stream) => {
        if (err !== null || stream === undefined) {
          callback(err ?? new PorticoError('PORTICO_HBONE_FAILED'), null)
          return
        }
        if (!origin.startsWith('https:')) {
          Object.assign(stream, { alpnProtocol: 'h2' })
          callback(null, stream)
          return
        }
        const socket = tls.connect({ ...tlsOptions, socket: stream, servername: tlsOptions?.servername ?? opts.servername ?? undefined, ALPNProtocols: ['h2', 'http/1.1'] })
        socket.once('secureConnect', () => callback(null, socket))
        socket.once('error', e => callback(e, null))
      })
    }
    return { ...poolOptions, connect: connect as unknown as Pool.Options['connect'] }
  }

  /**
   * Brings pools in line with a new config: endpoints of multi-endpoint backends are updated
   * in place; pools of backends no longer present close after their in-flight requests.
   */
  sync (backends: Iterable<BackendIR>): void {
    const live = new Map<string, BackendIR>()
    for (const b of backends) live.set(b.key, b)
    for (const [key, entry] of this.entries) {
      // A gRPC variant follows its backend (`<key><GRPC_POOL>`).
      const backend = live.get(key.endsWith(GRPC_POOL) ? key.slice(0, -GRPC_POOL.length) : key)
      const origins = backend === undefined ? [] : originsOf(backend)
      if (backend !== undefined && transportKey(backend) !== entry.tls) {
        this.entries.delete(key)
        entry.dispatcher.close().catch(() => {})
        continue
      }
      const d = entry.dispatcher
      const balanced = d instanceof EndpointBalancer
      if (backend !== undefined && balanced && needsBalancer(backend, origins)) {
        d.update(origins, backend.health)
        entry.origins = origins
        continue
      }
      if (backend !== undefined && !balanced && !needsBalancer(backend, origins) && sameList(origins, entry.origins)) continue
      this.entries.delete(key)
      entry.dispatcher.close().catch(() => {})
    }
  }

  /** False when passive health has ejected every endpoint of the backend. */
  hasHealthyEndpoint (backend: BackendIR): boolean {
    if (backend.health === undefined) return true
    this.get(backend)
    const d = this.entries.get(backend.key)?.dispatcher
    return !(d instanceof EndpointBalancer) || d.healthy > 0
  }

  /** Passive health of a backend's endpoints, or null without it (or before its first call). */
  endpointHealth (backendKey: string): { healthy: number, total: number, ejected: string[] } | null {
    const d = this.entries.get(backendKey)?.dispatcher
    if (!(d instanceof EndpointBalancer) || !d.watchesHealth) return null
    return { healthy: d.healthy, total: d.total, ejected: d.ejected() }
  }

  stats (): PoolStats[] {
    const out: PoolStats[] = []
    for (const [backend, entry] of this.entries) {
      const { connected, free, pending, running } = entry.dispatcher.stats
      out.push({ backend, origins: entry.origins, connected, free, pending, running })
    }
    return out
  }

  async close (): Promise<void> {
    const all = [...this.entries.values()]
    this.entries.clear()
    await Promise.allSettled(all.map(e => e.dispatcher.close()))
    this.hbone?.close()
  }

  /** Ends every connection at once (for shutdown after the drain deadline). */
  async destroy (): Promise<void> {
    const all = [...this.entries.values()]
    this.entries.clear()
    await Promise.allSettled(all.map(e => e.dispatcher.destroy()))
    this.hbone?.destroy()
  }
}

/** Origins of a backend's mesh endpoints -> their mesh settings. */
function meshEndpoints (backend: BackendIR): Map<string, EndpointMeshIR> {
  const out = new Map<string, EndpointMeshIR>()
  for (const e of backend.endpoints) if (e.mesh !== undefined) out.set(`${backend.protocol}://${hostPort(e.host, e.port)}`, e.mesh)
  return out
}

/**
 * With subjectAltNames the certificate must carry one of them, whatever the SNI was (undici
 * passes connect options through to tls.connect; the chain is still verified against ca).
 */
/**
 * backendTLS as `tls.connect` options: trusted roots, SNI and the name verified, client
 * certificate. The HTTP pools and the TCP/TLS stream proxy connect with the same ones.
 */
export function backendTlsConnectOptions (t: BackendTlsIR): ConnectionOptions {
  const connect: ConnectionOptions = {}
  if (t.ca !== undefined) connect.ca = t.ca
  if (t.cert !== undefined) connect.cert = t.cert
  if (t.key !== undefined) connect.key = t.key
  if (t.serverName !== undefined) connect.servername = t.serverName
  if (t.subjectAltNames !== undefined && t.subjectAltNames.length > 0) connect.checkServerIdentity = sanCheck(t.subjectAltNames)
  if (t.insecure === true) connect.rejectUnauthorized = false
  return connect
}

export function sanCheck (sans: BackendTlsSanIR[]): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) => {
    const uris = uriSans(cert.subjectaltname ?? '')
    for (const san of sans) {
      if (san.type === 'Hostname' ? checkServerIdentity(san.value, cert) === undefined : uris.includes(san.value)) return undefined
    }
    // A plain Error on purpose: it carries Node's own code, as tls.checkServerIdentity's does, so call-failure.ts classifies both alike.
    const err = new Error(`backend certificate matches none of the subjectAltNames ${sans.map(s => `${s.type}:${s.value}`).join(', ')} (it has ${cert.subjectaltname ?? 'none'})`) as Error & { code: string }
    err.code = 'ERR_TLS_CERT_ALTNAME_INVALID'
    return err
  }
}

/** URI entries of Node's `subjectaltname` string (values with special characters come JSON-quoted). */
function uriSans (altNames: string): string[] {
  const out: string[] = []
  for (const m of altNames.matchAll(/(?:^|, )URI:("(?:[^"\\]|\\.)*"|[^,]*)/g)) {
    const v = m[1]!
    try {
      out.push(v.startsWith('"') ? JSON.parse(v) as string : v)
    } catch {}
  }
  return out
}

export function originsOf (backend: BackendIR): string[] {
  return backend.endpoints.map(e => `${backend.protocol}://${hostPort(e.host, e.port)}`)
}

/** One endpoint without passive health is called through its pool directly; anything else is balanced. */
function needsBalancer (backend: BackendIR, origins: string[]): boolean {
  return backend.health !== undefined || origins.length !== 1
}

function sameList (a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i])
}

/** What a pool's connections are opened with: a change needs new connections. */
function transportKey (backend: BackendIR): string {
  const mesh = backend.endpoints.some(e => e.mesh !== undefined) ? ' mesh ' + JSON.stringify(backend.endpoints.map(e => e.mesh ?? null)) : ''
  return JSON.stringify(backend.tls ?? null) + (backend.h2c === true ? ' h2c' : '') + (backend.h2 === true ? ' h2' : '') + mesh
}
