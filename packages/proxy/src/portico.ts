/**
 * One running Portico: engine + data-plane listeners + config source + logs + shutdown.
 * The CLI builds one from arguments; tests build one in-process the same way.
 */

import type { Logger } from 'pino'
import { applyAccessLogFields, compileCelFields, DEFAULT_MAX_CONFIG_BYTES, Engine, formatDiagnostic, IstioCaIdentity, isPorticoError, readConfigText, renewEmitterInit, setPublicHeaders, type ConfigDiagnostic, type LoadedConfig, type ProxyIR, type RequestContext, type RequestTracing, type StreamConnectionRecord, type UdpFlowRecord } from '@portico/engine'
import { loadConfigOffThread } from './config-loader.ts'
import { ListenerManager } from './listeners.ts'
import { watchConfigFile, type FileWatch } from './file-source.ts'
import type { Logs } from '@portico/ops'
import type { Settings } from './settings.ts'
import { accessLogFields, connectionLogFields, flowLogFields } from './access-log.ts'
import { dirname, resolve } from 'node:path'
import { ProxyMetrics } from './metrics.ts'
import { startMetricsServer, startReadinessServer, type RunningServer } from './ops-servers.ts'
import { formatAddress } from './settings.ts'
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { WorkerPool } from './workers/pool.ts'
import { SlotTable } from './workers/slot-table.ts'
import type { ListenerAddress } from './workers/protocol.ts'
import type { OtlpLogs } from './otlp-logs.ts'
import { watchUpstreamConnects } from './connect-timing.ts'
import { watchStrayBytes } from './stray-bytes.ts'
import { watchHbone } from './hbone-metrics.ts'
import { meshIdentityFor, meshPem, meshStatus } from './mesh-identity.ts'
import type { MeshIdentityStatus, StaticMeshIdentity } from '@portico/engine'

export interface ReloadRecord {
  at: string
  ok: boolean
  version?: string
  errors?: string[]
}

export interface PorticoOptions {
  settings: Settings
  logs: Logs
  /** Path of the config file to watch (standalone mode). */
  configPath?: string
  /** `env` on trace snapshots (cluster mode); `{}` standalone. */
  env?: Record<string, string>
  /** Called when /quitquitquit asks the process to stop (the CLI exits after shutdown). */
  onQuit?: () => void
  /** Largest config file a reload reads (bytes); default the engine's DEFAULT_MAX_CONFIG_BYTES. */
  maxConfigBytes?: number
  /**
   * This Portico is data-plane worker `index` of a primary (workers/worker-main.ts): its
   * engine shares state through `backends` and hands MCP requests over with `handoff`.
   * Without it, `settings.workers` > 1 makes this Portico the primary of that many workers.
   */
  worker?: { index: number, backends: SharedArrayBuffer, handoff: (req: IncomingMessage, res: ServerResponse, bindKey: string) => void, intake: boolean }
  /** OpenTelemetry tracing, started from settings.tracing (startTracing). */
  otel?: RequestTracing
  /** The access log's OTLP export, started from settings.accessLog.otlp (startTracing). */
  otlpLogs?: OtlpLogs
}

/**
 * The tracer of `settings.tracing`, or undefined when it is off: the OpenTelemetry SDK and
 * its exporters load only then. `relay` (a data-plane worker): its spans and OTLP access-log
 * records go to the primary, which exports them, rather than to an export thread of its
 * own — a `Worker` made in a thread that serves requests costs each of its requests
 * (docs/tracing-cost-log.md, eighth round), and one exporter serves the process.
 */
export async function startTracing (settings: Settings, logs: Logs, relay?: (kind: 'spans' | 'logs', records: unknown[]) => void): Promise<Pick<PorticoOptions, 'otel' | 'otlpLogs'>> {
  const out: Pick<PorticoOptions, 'otel' | 'otlpLogs'> = {}
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

export class Portico {
  readonly engine: Engine
  /** The data-plane listeners of this event loop (none on a primary: its workers listen). */
  readonly listeners: ListenerManager
  /** The data-plane workers when this is their primary (settings.workers > 1), else null. */
  readonly pool: WorkerPool | null
  readonly settings: Settings
  readonly logs: Logs
  readonly metrics: ProxyMetrics
  readonly startedAt = new Date()
  /** Ports the admin, metrics and readiness servers actually listen on (0 = off). */
  readonly ports = { admin: 0, stats: 0, readiness: 0 }
  /** Most recent first, capped. */
  readonly reloads: ReloadRecord[] = []
  private readonly log: Logger
  private readonly accessLog: Logger
  /** Writes an access-log line (Logs.infoLine: the access log's own fast JSON). */
  private readonly writeAccessLine: (fields: Record<string, unknown>, msg: string) => void
  private readonly otlpLogs: OtlpLogs | null
  private readonly configPath: string | undefined
  private watcher: FileWatch | undefined
  private applying: Promise<unknown> = Promise.resolve()
  private shuttingDown: Promise<void> | undefined
  private readonly servers: Array<{ close(): Promise<void> }> = []
  private readonly onQuit: (() => void) | undefined
  private readonly maxConfigBytes: number | undefined
  private readonly childProcesses = new Set<ChildProcessInfo>()
  /** Backend endpoints (host:port) → backend name, for the connect metrics; rebuilt per config. */
  private endpointBackends = new Map<string, string>()
  private readonly unwatchConnects: () => void
  private readonly unwatchStrays: () => void
  private readonly unwatchHbone: () => void
  /**
   * The gateway's mesh identity (mesh-identity.ts): from files (config.mesh.certificate), from
   * the mesh CA (config.mesh.ca; in a worker, the certificates the primary hands over), or null.
   */
  readonly meshIdentity: StaticMeshIdentity | null
  /** The last config that loaded; /config_dump shows its static part. */
  loaded: LoadedConfig | undefined
  /** Cluster mode's config source (readiness waits for its first config). */
  private configSource: { synced: boolean, close(): void } | undefined

  useConfigSource (source: { synced: boolean, close(): void }): void {
    this.configSource = source
  }

  constructor (options: PorticoOptions) {
    this.settings = options.settings
    this.logs = options.logs
    this.log = options.logs.for('portico')
    this.accessLog = options.logs.for('request')
    this.writeAccessLine = options.logs.infoLine('request')
    this.otlpLogs = options.otlpLogs ?? null
    this.configPath = options.configPath === undefined ? undefined : resolve(options.configPath)
    const configLog = options.logs.for('engine')
    const mcpLog = options.logs.for('mcp')
    setPublicHeaders(options.settings.publicHeaders)
    const primary = options.worker === undefined && options.settings.workers > 1
    this.metrics = new ProxyMetrics({ dataPlane: options.worker !== undefined, workers: options.settings.workers, meshCa: options.settings.meshCa !== null })
    if (options.otel !== undefined) options.otel.onSpans = (result, count) => this.metrics.observeSpans(result, count)
    // Every thread must mint and read the same session ids and cookies: without a configured
    // key, the primary makes one for the process (still random per process).
    const sessionKey = options.settings.sessionKey ?? (primary ? randomBytes(32).toString('hex') : undefined)
    const backends = primary ? new SlotTable() : null
    const shared = backends?.buffer ?? options.worker?.backends
    this.meshIdentity = meshIdentityFor(options.settings, options.worker !== undefined, options.logs.for('portico/mesh'), this.metrics)
    this.engine = new Engine({
      env: options.env ?? {},
      tracing: options.settings.debugTrace,
      traceBodyLimit: options.settings.traceBodyLimit,
      ...(shared !== undefined ? { shared: { backends: shared } } : {}),
      ...(options.worker !== undefined ? { handoff: options.worker.handoff } : {}),
      ...(options.otel !== undefined ? { otel: options.otel } : {}),
      ...(options.otel !== undefined && options.settings.tracing?.fields !== undefined ? { otelFields: compileCelFields(options.settings.tracing.fields) } : {}),
      mcp: {
        ...(sessionKey !== undefined ? { sessionKey } : {}),
        sessionTtlMs: options.settings.mcpSessionTtlMs,
        logger: {
          debug: (fields, message) => mcpLog.debug(fields, message),
          info: (fields, message) => mcpLog.info(fields, message),
          warn: (fields, message) => mcpLog.warn(fields, message)
        }
      },
      ...(this.meshIdentity !== null ? { pools: { mesh: this.meshIdentity, hboneMaxStreams: options.settings.hbone.maxStreams, hboneIdleTimeout: options.settings.hbone.idleTimeoutMs } } : {}),
      onRequestEnd: ctx => this.onRequestEnd(ctx),
      streams: { onConnectionEnd: c => this.onConnectionEnd(c) },
      udp: { onFlowOpen: f => this.metrics.udpFlowOpened(f), onFlowCounts: c => this.metrics.udpFlowCounts(c), onFlowEnd: r => this.onFlowEnd(r) },
      onInternalError: (err, ctx) => configLog.error({ err, route: ctx.routeKey, path: ctx.originalPath }, 'request failed inside the proxy')
    })
    this.listeners = new ListenerManager(this.engine, options.logs.for('listeners'), (bind, protocol) => this.metrics.connectionOpened(bind, protocol), { reusePort: options.worker !== undefined && !options.worker.intake, intake: options.worker?.intake === true })
    this.pool = backends === null
      ? null
      : new WorkerPool({
        count: options.settings.workers,
        settings: options.settings,
        logs: options.logs,
        engine: this.engine,
        metrics: this.metrics,
        sessionKey: sessionKey!,
        env: options.env ?? {},
        backends,
        // The workers' spans and OTLP access-log records, exported (and counted) here.
        onRecords: (kind, records) => {
          if (kind === 'spans') options.otel?.acceptRelayed(records)
          else this.otlpLogs?.acceptRelayed(records)
        }
      })
    this.onQuit = options.onQuit
    this.maxConfigBytes = options.maxConfigBytes
    this.unwatchConnects = watchUpstreamConnects((host, port) => this.endpointBackends.get(`${host}:${port}`) ?? 'unknown', (b, tcp, tls) => this.metrics.observeConnect(b, tcp, tls))
    this.unwatchHbone = watchHbone(e => this.metrics.observeHbone(e.peer, e.tunnel === true, e.result))
    this.unwatchStrays = watchStrayBytes((origin, holdMs) => this.log.warn({ endpoint: origin, holdSeconds: holdMs / 1000 }, `backend ${origin} sent bytes nobody asked for: none of its connections is reused for ${holdMs / 1000} s`))
  }

  /**
   * The mesh CA identity (main thread): each certificate goes to the workers and the
   * expiry gauge; the first request goes out now (its result comes later: the gateway serves
   * meanwhile, mesh backends failing with PORTICO_MESH_NO_IDENTITY until it is in).
   */
  private startMeshCa (): void {
    const mesh = this.meshIdentity
    if (!(mesh instanceof IstioCaIdentity)) return
    const log = this.logs.for('portico/mesh')
    mesh.on('rotated', cert => {
      this.pool?.setMeshCertificate(meshPem(cert))
      this.metrics.meshCertificateExpiry(mesh.state().notAfter)
    })
    mesh.on('state', state => {
      this.metrics.meshCertificateExpiry(state.notAfter)
      if (state.state === 'failed') log.error({ state: state.state, reason: state.reason }, `mesh identity ${mesh.spiffeId} failed: ${state.reason ?? ''}`)
      else log.info({ state: state.state, reason: state.reason, notAfter: state.notAfter }, `mesh identity ${mesh.spiffeId} ${state.state}${state.reason !== undefined ? `: ${state.reason}` : ''}`)
    })
    log.info({ spiffeId: mesh.spiffeId, ca: mesh.settings.address, serverName: mesh.settings.serverName, clusterId: mesh.settings.clusterId }, `mesh identity ${mesh.spiffeId}: asking the mesh CA ${mesh.settings.address}`)
    mesh.start()
  }

  /**
   * The mesh CA identity's state now and at each change (for the Gateway's status, relayed to
   * the controller); null and never called when the identity is not from the CA. Returns the
   * unsubscribe function.
   */
  onMeshState (listener: (state: MeshIdentityStatus) => void): (() => void) | null {
    const mesh = this.meshIdentity
    if (!(mesh instanceof IstioCaIdentity)) return null
    mesh.on('state', listener)
    listener(mesh.state())
    return () => { mesh.off('state', listener) }
  }

  /** The mesh identity's state (/config_dump, /debug/mesh): never the key or the token. */
  meshStatus (): Record<string, unknown> {
    return meshStatus(this.settings, this.meshIdentity)
  }

  /**
   * Starts the metrics and readiness servers (readiness answers 503 until a config is
   * installed) and the admin server. Each can be turned off with its address `off`.
   */
  async startServers (): Promise<void> {
    const { settings } = this
    const log = this.log
    if (this.pool !== null) {
      await this.pool.start()
      log.info({ workers: settings.workers }, `${settings.workers} data-plane workers`)
    }
    this.startMeshCa()
    if (settings.statsAddr !== null) {
      const s: RunningServer = await startMetricsServer(settings.statsAddr, this.metrics, this.pool)
      this.servers.push(s)
      this.ports.stats = s.port
      log.info(`metrics on http://${formatAddress({ ...settings.statsAddr, port: s.port })}/metrics`)
    }
    if (settings.readinessAddr !== null) {
      const s = await startReadinessServer(settings.readinessAddr, () => this.pending())
      this.servers.push(s)
      this.ports.readiness = s.port
    }
    if (settings.adminAddr !== null) {
      // Loaded here, not at import: data-plane workers build a Portico too and never serve admin.
      const { startAdminServer } = await import('./admin/server.ts')
      const admin = await startAdminServer({
        portico: this,
        address: settings.adminAddr,
        onQuit: () => {
          void this.shutdown('/quitquitquit').then(() => this.onQuit?.())
        }
      })
      this.servers.push(admin)
      this.ports.admin = admin.port
      log.info(`admin on http://${formatAddress({ ...settings.adminAddr, port: admin.port })}/ (UI at /ui)`)
    }
  }

  /** What readiness still waits for; empty when ready. */
  pending (): string[] {
    const out: string[] = []
    if (this.configSource !== undefined && !this.configSource.synced) out.push('xds')
    else if (this.engine.config === null) out.push('config')
    else if (this.addresses().length < this.engine.config.ir.binds.length) out.push('listeners')
    if (this.pool !== null && this.engine.config !== null) out.push(...this.pool.pending())
    if (this.shuttingDown !== undefined) out.push('shutting down')
    return out
  }

  /** Where the data plane listens (a primary: where its workers listen). */
  addresses (): ListenerAddress[] {
    return this.pool?.addresses() ?? this.listeners.addresses()
  }

  /** Registers a child process for /debug/tasks; returns the function that forgets it. */
  trackChild (info: ChildProcessInfo): () => void {
    this.childProcesses.add(info)
    return () => this.childProcesses.delete(info)
  }

  children (): ChildProcessInfo[] {
    const mcp = this.engine.mcp.children().map(c => ({ pid: c.pid, command: c.target, purpose: `mcp stdio target ${c.target} of ${c.backend}`, startedAt: c.startedAt }))
    return [...this.childProcesses, ...mcp]
  }

  /** Binds listeners for the first config. Throws (nothing left open) if a port cannot be bound. */
  async start (initial: LoadedConfig, initialText?: string): Promise<void> {
    await this.install(initial)
    if (this.configPath !== undefined) {
      this.watcher = watchConfigFile({
        path: this.configPath,
        ...(this.maxConfigBytes !== undefined ? { maxBytes: this.maxConfigBytes } : {}),
        onChange: text => { void this.reloadText(text) },
        onError: err => {
          // Over the size limit: the file was not read, but it is a refused reload all the same.
          if (isPorticoError(err, 'PORTICO_CONFIG_TOO_LARGE')) this.rejectReload([{ path: [], message: err.message }], 'rejected')
          else this.log.warn({ err: err.message, file: this.configPath }, 'cannot read config file; keeping the current config')
        }
      })
      if (initialText !== undefined) this.watcher.setCurrent(initialText)
    }
    // Start-up has built its servers, listeners and watcher: from here on Node's
    // EventEmitter.init keeps feedback only for what serving builds (engine util/emitter-init.ts).
    renewEmitterInit()
  }

  /**
   * SIGHUP: read the config file again and apply it, as a file change would (the signal
   * operators send to make a daemon reload). Without a file (cluster mode: the controller
   * pushes config) there is nothing to read: it is logged and ignored. Never exits.
   */
  async reloadOnSignal (signal: string): Promise<void> {
    if (this.configPath === undefined) {
      this.log.info({ signal }, `${signal} ignored: the config comes from the controller`)
      return
    }
    if (this.shuttingDown !== undefined) return
    this.log.info({ signal, file: this.configPath }, `${signal}: reloading ${this.configPath}`)
    let text: string
    try {
      // Bounded as the file watcher reads it: an oversized file is refused unread.
      text = readConfigText(this.configPath, this.maxConfigBytes ?? DEFAULT_MAX_CONFIG_BYTES, { regularOnly: true })
    } catch (err) {
      if (isPorticoError(err, 'PORTICO_CONFIG_TOO_LARGE')) {
        this.rejectReload([{ path: [], message: err.message }], 'rejected')
        return
      }
      this.log.error({ signal, err: (err as Error).message, file: this.configPath }, `${signal}: cannot read the config file; keeping version ${this.engine.config?.ir.version ?? 'none'}`)
      return
    }
    this.watcher?.setCurrent(text)
    const before = this.engine.config?.ir.version
    const result = await this.reloadText(text)
    if (result.ok && this.engine.config?.ir.version === before) this.log.info({ signal, version: before }, `${signal}: config unchanged (version ${before ?? 'none'})`)
  }

  /**
   * Applies a new version of the config file's text; the current config stays on any error.
   * Never rejects: whatever the text (or a bug), the outcome is logged and returned.
   */
  reloadText (text: string): Promise<{ ok: boolean, diagnostics: ConfigDiagnostic[] }> {
    const file = this.configPath ?? 'config'
    const reject = (diagnostics: ConfigDiagnostic[], why: 'rejected' | 'failed') => this.rejectReload(diagnostics, why)
    const run = async () => {
      // Parsed, validated and translated off the event loop when large (config-loader.ts).
      const result = await loadConfigOffThread(text, {
        baseDir: dirname(file),
        ...(this.maxConfigBytes !== undefined ? { maxBytes: this.maxConfigBytes } : {})
      })
      if (!result.ok) return reject(result.diagnostics, 'rejected')
      // The loader refuses a config without gateways; this guards the listeners themselves:
      // a reload never leaves the process listening nowhere.
      if (result.config.ir.binds.length === 0 && this.addresses().length > 0) {
        return reject([{ path: ['gateways'], message: 'this config would close every listener; refused (the running config keeps serving)' }], 'rejected')
      }
      if (result.config.ir.version === this.engine.config?.ir.version) return { ok: true, diagnostics: [] }
      try {
        await this.install(result.config)
      } catch (err) {
        const message = (err as Error).message
        this.recordReload({ ok: false, errors: [message] })
        this.metrics.configLoaded(false)
        this.log.error({ err: message }, 'config reload failed; keeping the current config')
        return { ok: false, diagnostics: [{ path: [], message }] }
      }
      this.log.info({ version: result.config.ir.version }, 'config reloaded')
      return { ok: true, diagnostics: [] }
    }
    const guarded = async () => {
      try {
        return await run()
      } catch (err) {
        return reject([{ path: [], message: `cannot reload: ${(err as Error).message ?? String(err)}` }], 'failed')
      }
    }
    // Reloads apply one at a time, in order.
    const next = this.applying.then(guarded, guarded)
    this.applying = next
    return next
  }

  /** Logs and records a refused reload; the running config stays. */
  private rejectReload (diagnostics: ConfigDiagnostic[], why: 'rejected' | 'failed'): { ok: false, diagnostics: ConfigDiagnostic[] } {
    const errors = diagnostics.map(d => formatDiagnostic(this.configPath ?? 'config', d))
    this.recordReload({ ok: false, errors })
    this.metrics.configLoaded(false)
    this.log.error({ errors }, `config reload ${why} (${errors.length} error${errors.length === 1 ? '' : 's'}); keeping version ${this.engine.config?.ir.version ?? 'none'}\n${errors.join('\n')}`)
    return { ok: false, diagnostics }
  }

  /** Installs an IR from any source (file or, in cluster mode, the controller). */
  async applyIR (ir: ProxyIR): Promise<void> {
    try {
      if (this.pool !== null) await this.pool.apply(ir)
      else await this.listeners.apply(ir, () => this.engine.apply(ir))
      this.noteEndpoints(ir)
    } catch (err) {
      if (this.configSource !== undefined) {
        this.recordReload({ ok: false, errors: [(err as Error).message] })
        this.metrics.configLoaded(false)
      }
      throw err
    }
    if (this.configSource !== undefined) {
      this.recordReload({ ok: true, version: ir.version })
      this.metrics.configLoaded(true)
      // The controller's first config has built the listeners: as at the end of start().
      renewEmitterInit()
    }
  }

  /** Which backend an endpoint belongs to, for the connect-timing metrics (the first that names it). */
  noteEndpoints (ir: ProxyIR): void {
    const endpoints = new Map<string, string>()
    for (const b of ir.backends) for (const e of b.endpoints) if (!endpoints.has(`${e.host}:${e.port}`)) endpoints.set(`${e.host}:${e.port}`, b.name)
    this.endpointBackends = endpoints
  }

  private async install (config: LoadedConfig): Promise<void> {
    await this.applyIR(config.ir)
    this.loaded = config
    this.recordReload({ ok: true, version: config.ir.version })
    this.metrics.configLoaded(true)
  }

  private recordReload (r: Omit<ReloadRecord, 'at'>): void {
    this.reloads.unshift({ at: new Date().toISOString(), ...r })
    if (this.reloads.length > 20) this.reloads.length = 20
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

  /**
   * Graceful shutdown: stop accepting, let in-flight requests finish up to the drain
   * deadline, close upstream pools. Idempotent.
   */
  shutdown (reason: string): Promise<void> {
    this.shuttingDown ??= (async () => {
      this.log.info({ reason, drainTimeoutMs: this.settings.drainTimeoutMs }, 'shutting down: draining in-flight requests')
      this.watcher?.close()
      this.configSource?.close()
      this.engine.beginDrain()
      await (this.pool ?? this.listeners).drain(this.settings.drainTimeoutMs)
      await this.engine.close()
      await this.otlpLogs?.shutdown()
      this.unwatchConnects()
      this.unwatchStrays()
      this.unwatchHbone()
      const mesh = this.meshIdentity as { unwatch?: () => void, stop?: () => void } | null
      mesh?.unwatch?.()
      mesh?.stop?.()
      await Promise.allSettled(this.servers.map(s => s.close()))
      this.log.info('shutdown complete')
      this.logs.flush()
    })()
    return this.shuttingDown
  }
}
