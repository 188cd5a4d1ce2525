/**
 * The data path of one event loop: the engine that serves requests, the listeners that feed
 * it, what each request, connection and UDP flow ends with (metrics, the access log and its
 * OTLP export), the mesh identity and the watchers behind the connect metrics. A data-plane
 * worker (workers/worker-main.ts) runs one and nothing else; the primary's Portico
 * (portico.ts) runs one too -- it serves its share of the connections beside the workers
 * (config.workers counts it), and what workers hand over (MCP sessions) -- and adds the config sources, the worker pool and the
 * admin, metrics and readiness servers around it. Workers import this module, never
 * portico.ts: what a worker loads is the data path only.
 */

import type { Logger } from 'pino'
import { applyAccessLogFields, compileCelFields, Engine, setPublicHeaders, type ProxyIR, type RequestContext, type RequestTracing, type StaticMeshIdentity, type StreamConnectionRecord, type UdpFlowRecord, type InboundRequest, type InboundResponse } from '@portico/engine/serving'
import type { Logs } from '@portico/ops'
import type { Settings } from './settings.ts'
import { accessLogFields, connectionLogFields, flowLogFields } from './access-log.ts'
import { ListenerManager } from './listeners.ts'
import { ProxyMetrics } from './metrics.ts'
import type { OtlpLogs } from './otlp-logs.ts'
import { watchUpstreamConnects } from './connect-timing.ts'
import { watchStrayBytes } from './stray-bytes.ts'
import { watchHbone } from './hbone-metrics.ts'
import { meshIdentityFor } from './mesh-identity.ts'

/** Tracing of one event loop, from settings.tracing and settings.accessLog.otlp (startTracing). */
export interface Tracing {
  /** OpenTelemetry tracing, started from settings.tracing. */
  otel?: RequestTracing
  /** The access log's OTLP export, started from settings.accessLog.otlp. */
  otlpLogs?: OtlpLogs
}

/**
 * The tracer of `settings.tracing`, or undefined when it is off: the OpenTelemetry SDK and
 * its exporters load only then. `relay` (a data-plane worker): its spans and OTLP access-log
 * records go to the primary, which exports them, rather than to an export thread of its
 * own -- a `Worker` made in a thread that serves requests costs each of its requests
 * (docs/tracing-cost-log.md, eighth round), and one exporter serves the process.
 */
export async function startTracing (settings: Settings, logs: Logs, relay?: (kind: 'spans' | 'logs', records: unknown[]) => void): Promise<Tracing> {
  const out: Tracing = {}
  if (settings.tracing !== null) {
    const { createRequestTracing } = await import('@portico/engine/otel-sdk')
    const log = logs.for('tracing')
    // Spans that cannot be exported are lost; the proxy says so at most once a minute.
    out.otel = await createRequestTracing({
      ...settings.tracing,
      onExportError: message => log.warn({ err: message }, 'spans not exported'),
      ...(relay !== undefined ? { relay: (records: unknown[]) => relay('spans', records) } : {})
    })
  }
  if (settings.accessLog.otlp !== null) {
    const { startOtlpLogs } = await import('./otlp-logs.ts')
    const log = logs.for('request')
    out.otlpLogs = startOtlpLogs(settings.accessLog.otlp, {
      onError: message => log.warn({ err: message }, 'access log records not exported'),
      ...(relay !== undefined ? { relay: (records: unknown[]) => relay('logs', records) } : {})
    })
  }
  return out
}

/** A child process the proxy runs (MCP stdio servers), for /debug/tasks. */
export interface ChildProcessInfo {
  pid: number | undefined
  command: string
  purpose: string
  startedAt: string
}

export interface DataPlaneOptions extends Tracing {
  settings: Settings
  logs: Logs
  /** `env` on trace snapshots (cluster mode); `{}` standalone. */
  env?: Record<string, string>
  /** The key every thread mints and reads MCP session ids and cookies with (default settings.sessionKey). */
  sessionKey?: string
  /** The backend state table the threads share (workers/slot-table.ts), when there are workers. */
  sharedBackends?: SharedArrayBuffer
  /**
   * This data plane is data-plane worker `index` of a primary: it hands MCP requests over with
   * `handoff`, and takes connections from the primary (`intake`) or binds with SO_REUSEPORT.
   */
  worker?: { index: number, handoff: (req: InboundRequest, res: InboundResponse, bindKey: string) => void, intake: boolean }
  /**
   * A primary with workers (config.workers > 1) serves as one of the event loops:
   * `reuseport`, its listeners share every port with the workers' (SO_REUSEPORT); `intake`,
   * they listen nowhere and serve the connections the primary's distributor keeps for itself
   * (WORKER_ACCEPT=primary). Unset: this loop listens alone (one event loop).
   */
  sharedPorts?: 'reuseport' | 'intake'
}

/** How this loop's listeners take their connections (ListenerManager's options). */
function listenerSharing (options: DataPlaneOptions): { reusePort: boolean, intake: boolean } {
  const intake = options.worker !== undefined ? options.worker.intake : options.sharedPorts === 'intake'
  const shared = options.worker !== undefined || options.sharedPorts !== undefined
  return { reusePort: shared && !intake, intake }
}

export class DataPlane {
  readonly engine: Engine
  /** The data-plane listeners of this event loop (a primary's too: it serves its share). */
  readonly listeners: ListenerManager
  readonly metrics: ProxyMetrics
  /**
   * The gateway's mesh identity (mesh-identity.ts): from files (config.mesh.certificate), from
   * the mesh CA (config.mesh.ca; in a worker, the certificates the primary hands over), or null.
   */
  readonly meshIdentity: StaticMeshIdentity | null
  private readonly settings: Settings
  private readonly accessLog: Logger
  /** Writes an access-log line (Logs.infoLine: the access log's own fast JSON). */
  private readonly writeAccessLine: (fields: Record<string, unknown>, msg: string) => void
  private readonly otlpLogs: OtlpLogs | null
  private readonly childProcesses = new Set<ChildProcessInfo>()
  /** Backend endpoints (host:port) -> backend name, for the connect metrics; rebuilt per config. */
  private endpointBackends = new Map<string, string>()
  private readonly unwatchConnects: () => void
  private readonly unwatchStrays: () => void
  private readonly unwatchHbone: () => void
  private closing: Promise<void> | undefined

  constructor (options: DataPlaneOptions) {
    const { settings, logs } = options
    this.settings = settings
    this.accessLog = logs.for('request')
    this.writeAccessLine = logs.infoLine('request')
    this.otlpLogs = options.otlpLogs ?? null
    const configLog = logs.for('engine')
    const mcpLog = logs.for('mcp')
    setPublicHeaders(settings.publicHeaders)
    this.metrics = new ProxyMetrics({ dataPlane: options.worker !== undefined, workers: settings.workers, meshCa: settings.meshCa !== null })
    if (options.otel !== undefined) options.otel.onSpans = (result, count) => this.metrics.observeSpans(result, count)
    const sessionKey = options.sessionKey ?? settings.sessionKey
    this.meshIdentity = meshIdentityFor(settings, options.worker !== undefined, logs.for('portico/mesh'), this.metrics)
    this.engine = new Engine({
      env: options.env ?? {},
      tracing: settings.debugTrace,
      traceBodyLimit: settings.traceBodyLimit,
      ...(options.sharedBackends !== undefined ? { shared: { backends: options.sharedBackends } } : {}),
      ...(options.worker !== undefined ? { handoff: options.worker.handoff } : {}),
      ...(options.otel !== undefined ? { otel: options.otel } : {}),
      ...(options.otel !== undefined && settings.tracing?.fields !== undefined ? { otelFields: compileCelFields(settings.tracing.fields) } : {}),
      mcp: {
        ...(sessionKey !== undefined ? { sessionKey } : {}),
        sessionTtlMs: settings.mcpSessionTtlMs,
        logger: {
          debug: (fields, message) => mcpLog.debug(fields, message),
          info: (fields, message) => mcpLog.info(fields, message),
          warn: (fields, message) => mcpLog.warn(fields, message)
        }
      },
      ...(this.meshIdentity !== null ? { pools: { mesh: this.meshIdentity, hboneMaxStreams: settings.hbone.maxStreams, hboneIdleTimeout: settings.hbone.idleTimeoutMs } } : {}),
      onRequestEnd: ctx => this.onRequestEnd(ctx),
      streams: { onConnectionEnd: c => this.onConnectionEnd(c) },
      udp: { onFlowOpen: f => this.metrics.udpFlowOpened(f), onFlowCounts: c => this.metrics.udpFlowCounts(c), onFlowEnd: r => this.onFlowEnd(r) },
      onInternalError: (err, ctx) => configLog.error({ err, route: ctx.routeKey, path: ctx.originalPath }, 'request failed inside the proxy')
    })
    this.listeners = new ListenerManager(this.engine, logs.for('listeners'), (bind, protocol) => this.metrics.connectionOpened(bind, protocol), listenerSharing(options))
    const log = logs.for('portico')
    this.unwatchConnects = watchUpstreamConnects((host, port) => this.endpointBackends.get(`${host}:${port}`) ?? 'unknown', (b, tcp, tls) => this.metrics.observeConnect(b, tcp, tls))
    this.unwatchHbone = watchHbone(e => this.metrics.observeHbone(e.peer, e.tunnel === true, e.result))
    this.unwatchStrays = watchStrayBytes((origin, holdMs) => log.warn({ endpoint: origin, holdSeconds: holdMs / 1000 }, `backend ${origin} sent bytes nobody asked for: none of its connections is reused for ${holdMs / 1000} s`))
  }

  /** Which backend an endpoint belongs to, for the connect-timing metrics (the first that names it). */
  noteEndpoints (ir: ProxyIR): void {
    const endpoints = new Map<string, string>()
    for (const b of ir.backends) for (const e of b.endpoints) if (!endpoints.has(`${e.host}:${e.port}`)) endpoints.set(`${e.host}:${e.port}`, b.name)
    this.endpointBackends = endpoints
  }

  /** Registers a child process for /debug/tasks; returns the function that forgets it. */
  trackChild (info: ChildProcessInfo): () => void {
    this.childProcesses.add(info)
    return () => this.childProcesses.delete(info)
  }

  children (): ChildProcessInfo[] {
    const mcp = this.engine.mcpChildren().map(c => ({ pid: c.pid, command: c.target, purpose: `mcp stdio target ${c.target} of ${c.backend}`, startedAt: c.startedAt }))
    return [...this.childProcesses, ...mcp]
  }

  /**
   * Stops taking new work, lets in-flight requests finish up to the drain deadline, closes
   * upstream pools, the OTLP log export, the watchers and the mesh identity. `drain` drains
   * wherever the connections are: this loop's listeners, or a primary's workers. Idempotent.
   */
  close (drain: (deadlineMs: number) => Promise<void> = ms => this.listeners.drain(ms)): Promise<void> {
    this.closing ??= (async () => {
      this.engine.beginDrain()
      await drain(this.settings.drainTimeoutMs)
      await this.engine.close()
      await this.otlpLogs?.shutdown()
      this.unwatchConnects()
      this.unwatchStrays()
      this.unwatchHbone()
      const mesh = this.meshIdentity as { unwatch?: () => void, stop?: () => void } | null
      mesh?.unwatch?.()
      mesh?.stop?.()
    })()
    return this.closing
  }

  private onRequestEnd (ctx: RequestContext): void {
    this.metrics.observeRequest(ctx)
    if (!this.accessLog.isLevelEnabled('info')) return
    const fields = accessLogFields(ctx)
    const configured = this.settings.accessLog.fields
    if (configured !== null && !applyAccessLogFields(configured, ctx, fields)) return
    this.writeAccessLine(fields, 'request')
    this.otlpLogs?.emit('request', fields, ctx.span)
  }

  private onConnectionEnd (c: StreamConnectionRecord): void {
    this.metrics.observeConnection(c)
    if (this.accessLog.isLevelEnabled('info')) this.writeAccessLine(connectionLogFields(c), 'connection')
  }

  private onFlowEnd (r: UdpFlowRecord): void {
    this.metrics.udpFlowEnded(r)
    if (this.accessLog.isLevelEnabled('info')) this.writeAccessLine(flowLogFields(r), 'flow')
  }
}
