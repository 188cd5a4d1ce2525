/**
 * The engine: holds the compiled config, the upstream pools and the trace hub, and hands out
 * request handlers per bind. Config sources (the YAML file, the controller's push) call
 * `apply(ir)`; listeners call `handler(bindKey)`. Nothing else differs between the modes.
 */

import type { InboundRequest, InboundResponse } from '../http/inbound.ts'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'
import type { ProxyIR } from '../ir/types.ts'
import { compileConfig } from './compiled.ts'
import type { CompiledConfig } from '../request/compiled.ts'
import { TraceHub } from '../trace/hub.ts'
import { UpstreamPools, type UpstreamPoolOptions } from '../http/upstream-pools.ts'
import { handleRequest, loadMcpHttp, type PipelineRuntime } from '../pipeline/run.ts'
import { handleUpgrade } from '../pipeline/run.ts'
import { upgradeAllowed } from '../http/frontend.ts'
import { afterPendingResponses } from '../http/upgrade.ts'
import { respondLocal } from '../pipeline/respond.ts'
import { hostOnly } from '../routing/hostname.ts'
import type { RequestContext } from '../request/context.ts'
import { PorticoError } from '../util/errors.ts'
import { BackendStats } from './backend-stats.ts'
import { InFlightRequests } from './in-flight.ts'
import type { McpChildProcess, McpGateway, McpGatewayOptions } from '../mcp/session/gateway.ts'
import { PolicyServices } from '../policy/services.ts'
import type { StreamProxy, StreamProxyOptions } from '../stream/stream-proxy.ts'
import type { UdpProxy, UdpBindSocket, UdpProxyOptions } from '../stream/udp-proxy.ts'
import { RecordArena } from '../util/shared-records.ts'
import { lazyRequire } from '../util/lazy-require.ts'
import { SharedBackendState } from './shared-state.ts'
import type { ClientFacts } from '../request/context.ts'
import type { RequestTracing } from '../trace/otel.ts'
import type { CelFields } from '../pipeline/access-log-fields.ts'
import { inferencePoolModule } from '../pipeline/run.ts'

export interface EngineOptions {
  /** `env` reported on trace snapshots; `{}` standalone. */
  env?: Record<string, string>
  /** Max bytes kept per trace body snapshot (default 64 KiB). */
  traceBodyLimit?: number
  /** /debug/trace can arm taps (default true). */
  tracing?: boolean
  pools?: UpstreamPoolOptions
  /** MCP sessions: the key that encrypts session ids, idle expiry, a logger. */
  mcp?: McpGatewayOptions
  onRequestEnd?: (ctx: RequestContext) => void
  onInternalError?: (err: unknown, ctx: RequestContext) => void
  /** Connections of TCP and TLS listeners: timeouts, and a hook told of each one that ends. */
  streams?: StreamProxyOptions
  /** UDP listeners' flows: hooks told of flows opened, their counts, and flows that end. */
  udp?: UdpProxyOptions
  /** OpenTelemetry tracing (trace/otel-sdk.ts createRequestTracing); absent = off. */
  otel?: RequestTracing
  /** config.tracing.fields, compiled (compileCelFields): server-span attributes added with CEL or removed. */
  otelFields?: CelFields | null
  /**
   * Several data-plane workers share this process (config.workers > 1): rate-limit buckets
   * and backend state live in shared memory (`backends`: the growable buffer of backend
   * records, util/shared-records.ts).
   */
  shared?: { backends: SharedArrayBuffer }
  /**
   * A data-plane worker hands requests for MCP routes to the thread that owns MCP sessions
   * and stdio targets (the request is answered there; nothing of it runs here).
   */
  handoff?: (req: InboundRequest, res: InboundResponse, bindKey: string) => void
}

/** A config checked and compiled, not in force yet (`install`, or `stage` on a worker). */
export interface PreparedConfig {
  compiled: CompiledConfig
  /** Shared mode: the memory of its rate-limit buckets, to give the other threads. */
  buckets: SharedArrayBuffer | null
}

export interface PrepareOptions {
  /** Shared mode on a worker: the buckets the primary made for this config. */
  buckets?: SharedArrayBuffer
  /** Shared mode: the primary's key -> record table of backend state for this config. */
  slots?: Record<string, number>
  /**
   * The IR was checked by ir/validate.ts in this process already: a data-plane worker's
   * prepare, whose primary prepared the same IR before sending it. Its checks are not run
   * again, and a worker never loads them (ir/validate.ts and ir/types.ts: 45 KB of source).
   */
  validated?: boolean
}

export const DEFAULT_TRACE_BODY_LIMIT = 64 * 1024

// The MCP gateway (sessions, targets, the revision bridge: about 30 modules) loads with the
// first config that has an MCP backend (install), not with the engine: a gateway of plain
// routes, and each of its data-plane workers, never pays for it (bench/footprint.ts).
// The IR's checks load with the first prepare that runs them (not a worker's: PrepareOptions.validated).
const irValidation = lazyRequire<typeof import('../ir/validate.ts')>('../ir/validate.ts')
const mcpGatewayModule = lazyRequire<typeof import('../mcp/session/gateway.ts')>('../mcp/session/gateway.ts')
// The same for the TCP/TLS and UDP listeners' proxies (stream/: the relay, the client hello's
// parser, the sweeper, node:dgram): made when a config with such a bind is installed, or when
// first asked for (issue 54: a gateway of HTTP listeners does not load them at start).
const streamProxyModule = lazyRequire<typeof import('../stream/stream-proxy.ts')>('../stream/stream-proxy.ts')
const udpProxyModule = lazyRequire<typeof import('../stream/udp-proxy.ts')>('../stream/udp-proxy.ts')

export class Engine implements PipelineRuntime {
  readonly hub: TraceHub
  readonly pools: UpstreamPools
  /** The MCP gateway, made when a config first has an MCP backend (or when first asked for). */
  private mcpGateway: McpGateway | null = null
  private readonly mcpOptions: McpGatewayOptions | undefined
  private streamProxy: StreamProxy | null = null
  private readonly streamOptions: StreamProxyOptions
  private udpProxy: UdpProxy | null = null
  private readonly udpOptions: UdpProxyOptions | undefined
  readonly env: Record<string, string>
  readonly traceBodyLimit: number
  readonly otel: RequestTracing | null
  readonly otelFields: CelFields | null
  readonly backendStats = new BackendStats()
  /** Resources policies share across reloads (JWKS caches, ...). */
  readonly policyServices: PolicyServices
  /** Requests in progress (for /debug/tasks). */
  readonly inFlight = new InFlightRequests<RequestContext>()
  onRequestEnd: (ctx: RequestContext) => void
  onInternalError: ((err: unknown, ctx: RequestContext) => void) | null
  readonly handoff: ((req: InboundRequest, res: InboundResponse, bindKey: string) => void) | null
  /** Shared mode: backend state every worker sees. */
  readonly sharedBackends: SharedBackendState | null
  private compiled: CompiledConfig | null = null
  /** A prepared config that goes into force once `ready()` says so (see `stage`). */
  private staged: { prepared: PreparedConfig, ready: () => boolean } | null = null

  constructor (options: EngineOptions = {}) {
    this.env = options.env ?? {}
    this.hub = new TraceHub(options.tracing ?? true)
    this.traceBodyLimit = options.traceBodyLimit ?? DEFAULT_TRACE_BODY_LIMIT
    this.otel = options.otel ?? null
    this.otelFields = options.otelFields ?? null
    this.sharedBackends = options.shared !== undefined ? new SharedBackendState(options.shared.backends) : null
    const shared = this.sharedBackends
    this.pools = new UpstreamPools(shared === null ? options.pools : { ...options.pools, endpointState: (key, origin) => shared.endpointState(key, origin) })
    this.backendStats.shared = shared
    this.backendStats.endpointHealth = shared === null
      ? key => this.pools.endpointHealth(key)
      : key => {
        const backend = this.compiled?.backends.get(key)
        return backend === undefined ? null : shared.endpointHealth(backend)
      }
    this.handoff = options.handoff ?? null
    // Cookie keys (oidc) derive from the same process session key as MCP session ids.
    this.policyServices = new PolicyServices(options.mcp?.sessionKey !== undefined ? { sessionKey: options.mcp.sessionKey } : {})
    // A worker serves no MCP session (all go to the primary): stdio targets run once per
    // gateway, so it starts no warm spares either.
    this.mcpOptions = this.handoff === null ? options.mcp : { ...options.mcp, spares: false }
    this.streamOptions = { connectTimeoutMs: options.pools?.connectTimeout, hbone: () => this.pools.hbone, ...options.streams }
    this.udpOptions = options.udp
    const hook = options.onRequestEnd
    this.onRequestEnd = ctx => {
      this.inFlight.remove(ctx)
      this.backendStats.record(ctx)
      hook?.(ctx)
    }
    this.onInternalError = options.onInternalError ?? null
  }

  /**
   * The MCP gateway. `install` makes it for a config with an MCP backend, so a request never
   * loads it; asked for before that (tests, tools), it is made then.
   */
  get mcp (): McpGateway {
    return (this.mcpGateway ??= new (mcpGatewayModule().McpGateway)(this.mcpOptions))
  }

  /** TCP and TLS listeners' connections; `install` makes it for a config with such a bind. */
  get streams (): StreamProxy {
    return (this.streamProxy ??= new (streamProxyModule().StreamProxy)(this.hub, this.streamOptions))
  }

  /** UDP listeners' flows; `install` makes it for a config with a UDP bind. */
  get udp (): UdpProxy {
    return (this.udpProxy ??= new (udpProxyModule().UdpProxy)(this.hub, this.udpOptions))
  }

  /** The stdio MCP servers running now (none before a config had an MCP backend). */
  mcpChildren (): McpChildProcess[] {
    return this.mcpGateway?.children() ?? []
  }

  /** The config in force, or null before the first `apply`. */
  get config (): CompiledConfig | null {
    return this.live()
  }

  /** The config in force, after promoting a staged one whose moment has come. */
  private live (): CompiledConfig | null {
    if (this.staged !== null && this.staged.ready()) this.install(this.staged.prepared)
    return this.compiled
  }

  /**
   * Checks, compiles and installs a new config. Requests already running keep the version
   * they started with. Throws PORTICO_INVALID_IR (and changes nothing) if the IR fails
   * ir/validate.ts -- every config source gets the same semantic checks -- or cannot compile.
   */
  apply (ir: ProxyIR): CompiledConfig {
    const prepared = this.prepare(ir)
    this.install(prepared)
    return prepared.compiled
  }

  /** The checking and compiling half of `apply`: throws PORTICO_INVALID_IR, changes nothing. */
  prepare (ir: ProxyIR, options: PrepareOptions = {}): PreparedConfig {
    if (options.validated !== true) {
      const { validateIR, formatIrDiagnostic } = irValidation()
      const problems = validateIR(ir)
      if (problems.length > 0) {
        throw new PorticoError('PORTICO_INVALID_IR', `config ${ir.version} rejected: ${problems.map(formatIrDiagnostic).join('; ')}`)
      }
    }
    // Records of keys this config adds; the config in force keeps using its own.
    if (this.sharedBackends !== null && options.slots !== undefined) this.sharedBackends.setSlots(options.slots)
    const arena = this.sharedBackends !== null ? new RecordArena(options.buckets) : undefined
    let next: CompiledConfig
    this.policyServices.buckets = arena
    try {
      next = compileConfig(ir, this.policyServices)
      arena?.seal(true)
    } catch (err) {
      throw new PorticoError('PORTICO_INVALID_IR', `config ${ir.version} rejected: ${(err as Error).message}`, { cause: err })
    } finally {
      this.policyServices.buckets = undefined
    }
    return { compiled: next, buckets: arena?.buffer ?? null }
  }

  /** Puts a prepared config in force (synchronous; cannot fail). */
  install (prepared: PreparedConfig): void {
    if (this.staged?.prepared === prepared) this.staged = null
    const ir = prepared.compiled.ir
    this.compiled = prepared.compiled
    // An InferencePool's endpoints are called as backends of their own (pipeline/inference-pool.ts,
    // which loads here with the first config that has a pool, never with a request).
    this.pools.sync(ir.backends.filter(b => b.kind !== 'mcp').flatMap(b => b.inferencePool !== undefined ? [b, ...inferencePoolModule().poolEndpointBackends(b)] : [b]))
    // The TCP/TLS and UDP proxies load and are made with the first config that has such a bind.
    for (const bind of ir.binds) {
      if (bind.protocol === 'TCP' || bind.protocol === 'TLS') void this.streams
      else if (bind.protocol === 'UDP') void this.udp
    }
    // A config with MCP backends loads the gateway and the client-facing listener here, not
    // at its first request; one without leaves them unloaded (or drops the targets of the last).
    if (ir.backends.some(b => b.kind === 'mcp')) {
      loadMcpHttp()
      this.mcp.sync(ir.backends)
    } else this.mcpGateway?.sync(ir.backends)
    this.backendStats.retain(new Set(ir.backends.map(b => b.key)))
  }

  /**
   * A worker's half of an all-workers reload: `prepared` goes into force at the first request
   * (or `config` read) after `ready()` turns true -- the primary flips one shared word for
   * every worker at once -- or at `install`, whichever comes first.
   */
  stage (prepared: PreparedConfig, ready: () => boolean): void {
    this.staged = { prepared, ready }
  }

  /** Drops a staged config (the reload was refused elsewhere). */
  unstage (): void {
    this.staged = null
  }

  /** The request listener for one bind; it resolves the bind's current config per request. */
  handler (bindKey: string): (req: InboundRequest, res: InboundResponse) => void {
    return (req, res) => {
      const bind = (this.staged === null ? this.compiled : this.live())?.binds.get(bindKey)
      if (bind === undefined) {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('listener not found')
        return
      }
      handleRequest(this, bind, req, res)
    }
  }

  /**
   * A request a data-plane worker handed over (an MCP route): the whole pipeline runs here,
   * with the client's addresses as the worker saw them.
   */
  handleHandoff (bindKey: string, req: InboundRequest, res: InboundResponse, facts: ClientFacts): void {
    const bind = this.live()?.binds.get(bindKey)
    if (bind === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('listener not found')
      return
    }
    handleRequest(this, bind, req, res, undefined, facts)
  }

  /**
   * The connection listener for a TCP or TLS bind; it resolves the bind's current config per
   * connection. Call it in the server's 'connection' listener: it returns the socket that
   * carries the connection from then on (StreamProxy.handle), which may not be the one given.
   */
  streamHandler (bindKey: string): (socket: Socket) => Socket {
    return socket => {
      const bind = (this.staged === null ? this.compiled : this.live())?.binds.get(bindKey)
      if (bind === undefined) return socket.destroy()
      return this.streams.handle(bind, socket)
    }
  }

  /**
   * The datagram listener for a UDP bind's socket: each datagram goes to its client's flow,
   * with the bind's current config for a new flow (stream/udp-proxy.ts).
   */
  udpHandler (bindKey: string, socket: UdpBindSocket): (msg: Buffer, rinfo: { address: string, port: number }) => void {
    return (msg, rinfo) => {
      const bind = (this.staged === null ? this.compiled : this.live())?.binds.get(bindKey)
      if (bind === undefined) return
      this.udp.datagram(bind, socket, msg, rinfo)
    }
  }

  /** The `upgrade` listener for one bind (WebSocket and other HTTP/1.1 upgrades). */
  upgradeHandler (bindKey: string): (req: InboundRequest, socket: Duplex, head: Buffer) => void {
    return (req, socket, head) => {
      const bind = (this.staged === null ? this.compiled : this.live())?.binds.get(bindKey)
      if (bind === undefined) {
        socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 18\r\nconnection: close\r\n\r\nlistener not found')
        return
      }
      afterPendingResponses(socket, () => handleUpgrade(this, bind, req, socket, head))
    }
  }

  /**
   * Whether a request with an `Upgrade` header is an upgrade the listener its Host selects
   * passes on (http/frontend.ts); the listener calls it before Node detaches the socket from
   * its HTTP parser, so a refused upgrade is served as a plain request.
   */
  upgradeAllowed (bindKey: string, req: InboundRequest): boolean {
    const bind = (this.staged === null ? this.compiled : this.live())?.binds.get(bindKey)
    if (bind === undefined) return true
    return upgradeAllowed(bind.selectListener(hostOnly(req.headers.host)).frontend, req.headers.upgrade)
  }

  /**
   * Node's parser refused the rest of a request already handed to the pipeline (a bad chunk
   * size in a chunked body, say). While nothing of the response is out, the request gets a
   * 400 like any malformed request and its backend call is cut; the connection then closes.
   * Returns false when the caller must close the connection itself (no such request, or the
   * response has started).
   */
  clientError (res: InboundResponse, err: NodeJS.ErrnoException): boolean {
    if (res.headersSent) return false
    // A linear search: this runs once per malformed request, never on the hot path.
    let ctx: RequestContext | undefined
    for (const c of this.inFlight) if (c.res === res) { ctx = c; break }
    if (ctx === undefined) return false
    ctx.abortUpstream?.()
    respondLocal(this, ctx, 400, 'bad request', 'InvalidRequest', `malformed request: ${err.code ?? err.message}`, { connection: 'close' })
    return true
  }

  /** The process is about to drain: long-lived streams the engine owns are ended. */
  beginDrain (): void {
    this.mcpGateway?.endStreams()
  }

  async close (): Promise<void> {
    await Promise.all([this.pools.close(), this.mcpGateway?.close(), this.policyServices.close(), this.otel?.shutdown()])
  }
}
