/**
 * The engine: holds the compiled config, the upstream pools and the trace hub, and hands out
 * request handlers per bind. Config sources (the YAML file, the controller's push) call
 * `apply(ir)`; listeners call `handler(bindKey)`. Nothing else differs between the modes.
 */

import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'
import type { ProxyIR } from '../ir/types.ts'
import { formatIrDiagnostic, validateIR } from '../ir/validate.ts'
import { compileConfig } from './compiled.ts'
import type { CompiledConfig } from '../request/compiled.ts'
import { TraceHub } from '../trace/hub.ts'
import { UpstreamPools, type UpstreamPoolOptions } from '../http/upstream-pools.ts'
import { handleRequest, type PipelineRuntime } from '../pipeline/run.ts'
import { handleUpgrade } from '../pipeline/run.ts'
import { upgradeAllowed } from '../http/frontend.ts'
import { respondLocal } from '../pipeline/respond.ts'
import { hostOnly } from '../routing/hostname.ts'
import type { RequestContext } from '../request/context.ts'
import { PorticoError } from '../util/errors.ts'
import { BackendStats } from './backend-stats.ts'
import { InFlightRequests } from './in-flight.ts'
import { McpGateway, type McpGatewayOptions } from '../mcp/gateway.ts'
import { PolicyServices } from '../policy/services.ts'
import { StreamProxy, type StreamProxyOptions } from '../stream/stream-proxy.ts'
import type { RequestTracing } from '../trace/otel.ts'

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
  /** OpenTelemetry tracing (trace/otel-sdk.ts createRequestTracing); absent = off. */
  otel?: RequestTracing
}

export const DEFAULT_TRACE_BODY_LIMIT = 64 * 1024

export class Engine implements PipelineRuntime {
  readonly hub: TraceHub
  readonly pools: UpstreamPools
  readonly mcp: McpGateway
  /** TCP and TLS listeners' connections. */
  readonly streams: StreamProxy
  readonly env: Record<string, string>
  readonly traceBodyLimit: number
  readonly otel: RequestTracing | null
  readonly backendStats = new BackendStats()
  /** Resources policies share across reloads (JWKS caches, ...). */
  readonly policyServices: PolicyServices
  /** Requests in progress (for /debug/tasks). */
  readonly inFlight = new InFlightRequests<RequestContext>()
  onRequestEnd: (ctx: RequestContext) => void
  onInternalError: ((err: unknown, ctx: RequestContext) => void) | null
  private compiled: CompiledConfig | null = null

  constructor (options: EngineOptions = {}) {
    this.env = options.env ?? {}
    this.hub = new TraceHub(options.tracing ?? true)
    this.traceBodyLimit = options.traceBodyLimit ?? DEFAULT_TRACE_BODY_LIMIT
    this.otel = options.otel ?? null
    this.pools = new UpstreamPools(options.pools)
    this.backendStats.endpointHealth = key => this.pools.endpointHealth(key)
    // Cookie keys (oidc) derive from the same process session key as MCP session ids.
    this.policyServices = new PolicyServices(options.mcp?.sessionKey !== undefined ? { sessionKey: options.mcp.sessionKey } : {})
    this.mcp = new McpGateway(options.mcp)
    this.streams = new StreamProxy(this.hub, { connectTimeoutMs: options.pools?.connectTimeout, ...options.streams })
    const hook = options.onRequestEnd
    this.onRequestEnd = ctx => {
      this.inFlight.remove(ctx)
      this.backendStats.record(ctx)
      hook?.(ctx)
    }
    this.onInternalError = options.onInternalError ?? null
  }

  /** The config in force, or null before the first `apply`. */
  get config (): CompiledConfig | null {
    return this.compiled
  }

  /**
   * Checks, compiles and installs a new config. Requests already running keep the version
   * they started with. Throws PORTICO_INVALID_IR (and changes nothing) if the IR fails
   * ir/validate.ts — every config source gets the same semantic checks — or cannot compile.
   */
  apply (ir: ProxyIR): CompiledConfig {
    const problems = validateIR(ir)
    if (problems.length > 0) {
      throw new PorticoError('PORTICO_INVALID_IR', `config ${ir.version} rejected: ${problems.map(formatIrDiagnostic).join('; ')}`)
    }
    let next: CompiledConfig
    try {
      next = compileConfig(ir, this.policyServices)
    } catch (err) {
      throw new PorticoError('PORTICO_INVALID_IR', `config ${ir.version} rejected: ${(err as Error).message}`, { cause: err })
    }
    this.compiled = next
    this.pools.sync(ir.backends.filter(b => b.kind !== 'mcp'))
    this.mcp.sync(ir.backends)
    this.backendStats.retain(new Set(ir.backends.map(b => b.key)))
    return next
  }

  /** The request listener for one bind; it resolves the bind's current config per request. */
  handler (bindKey: string): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      const bind = this.compiled?.binds.get(bindKey)
      if (bind === undefined) {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('listener not found')
        return
      }
      handleRequest(this, bind, req, res)
    }
  }

  /**
   * The connection listener for a TCP or TLS bind; it resolves the bind's current config per
   * connection. Call it in the server's 'connection' listener: it returns the socket that
   * carries the connection from then on (StreamProxy.handle), which may not be the one given.
   */
  streamHandler (bindKey: string): (socket: Socket) => Socket {
    return socket => {
      const bind = this.compiled?.binds.get(bindKey)
      if (bind === undefined) return socket.destroy()
      return this.streams.handle(bind, socket)
    }
  }

  /** The `upgrade` listener for one bind (WebSocket and other HTTP/1.1 upgrades). */
  upgradeHandler (bindKey: string): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
    return (req, socket, head) => {
      const bind = this.compiled?.binds.get(bindKey)
      if (bind === undefined) {
        socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 18\r\nconnection: close\r\n\r\nlistener not found')
        return
      }
      handleUpgrade(this, bind, req, socket, head)
    }
  }

  /**
   * Whether a request with an `Upgrade` header is an upgrade the listener its Host selects
   * passes on (http/frontend.ts); the listener calls it before Node detaches the socket from
   * its HTTP parser, so a refused upgrade is served as a plain request.
   */
  upgradeAllowed (bindKey: string, req: IncomingMessage): boolean {
    const bind = this.compiled?.binds.get(bindKey)
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
  clientError (res: ServerResponse, err: NodeJS.ErrnoException): boolean {
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
    this.mcp.endStreams()
  }

  async close (): Promise<void> {
    await Promise.all([this.pools.close(), this.mcp.close(), this.policyServices.close(), this.otel?.shutdown()])
  }
}
