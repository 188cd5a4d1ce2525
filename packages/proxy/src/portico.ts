/**
 * One running Portico: its data plane (data-plane.ts) + config source + worker pool + servers +
 * shutdown. The CLI builds one from arguments; tests build one in-process the same way.
 * Data-plane workers do not: they run a DataPlane alone (workers/worker-main.ts).
 */

import type { Logger } from 'pino'
import { DEFAULT_MAX_CONFIG_BYTES, formatDiagnostic, isPorticoError, readConfigText, releaseValidator, renewEmitterInit, type ConfigDiagnostic, type Engine, type LoadedConfig, type MeshIdentityStatus, type ProxyIR, type StaticMeshIdentity } from '@portico/engine'
import { loadConfigOffThread } from './config-loader.ts'
import type { ListenerManager } from './listeners.ts'
import { watchConfigFile, type FileWatch } from './file-source.ts'
import type { Logs } from '@portico/ops'
import type { Settings } from './settings.ts'
import { dirname, resolve } from 'node:path'
import type { ProxyMetrics } from './metrics.ts'
import { startMetricsServer, startReadinessServer, type RunningServer } from './ops-servers.ts'
import { formatAddress } from './settings.ts'
import { randomBytes } from 'node:crypto'
import { WorkerPool } from './workers/pool.ts'
import { SlotTable } from './workers/slot-table.ts'
import type { ListenerAddress } from './workers/protocol.ts'
import { caIdentity, meshPem, meshStatus } from './mesh-identity.ts'
import { DataPlane, type ChildProcessInfo, type Tracing } from './data-plane.ts'
import type { AdminView, ReloadRecord } from './admin/view.ts'

export type { ReloadRecord } from './admin/view.ts'
export type { ChildProcessInfo } from './data-plane.ts'
// start.ts loads this module alone (lazily): the tracing it starts comes with it.
export { startTracing } from './data-plane.ts'

export interface PorticoOptions extends Tracing {
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
}

/**
 * The process's primary event loop: a data plane (data-plane.ts) that serves its share of
 * the traffic -- all of it with settings.workers 1, one loop's share beside settings.workers - 1
 * data-plane workers otherwise -- plus what only the primary runs: the config file or
 * controller source and its reloads, the workers, and the admin, metrics and readiness
 * servers. The admin server sees it through AdminView (admin/view.ts) only.
 */
export class Portico implements AdminView {
  /** This loop's engine, listeners, metrics and mesh identity, as workers run them too. */
  readonly dataPlane: DataPlane
  readonly engine: Engine
  /** The data-plane listeners of this event loop (it serves beside its workers, if any). */
  readonly listeners: ListenerManager
  /** The settings.workers - 1 data-plane workers when there are (settings.workers > 1), else null. */
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
  private readonly configPath: string | undefined
  private watcher: FileWatch | undefined
  private applying: Promise<unknown> = Promise.resolve()
  private shuttingDown: Promise<void> | undefined
  private readonly servers: Array<{ close(): Promise<void> }> = []
  private readonly onQuit: (() => void) | undefined
  private readonly maxConfigBytes: number | undefined
  /**
   * The gateway's mesh identity (mesh-identity.ts): from files (config.mesh.certificate), from
   * the mesh CA (config.mesh.ca), or null.
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
    this.configPath = options.configPath === undefined ? undefined : resolve(options.configPath)
    const primary = options.settings.workers > 1
    // Every thread must mint and read the same session ids and cookies: without a configured
    // key, the primary makes one for the process (still random per process).
    const sessionKey = options.settings.sessionKey ?? (primary ? randomBytes(32).toString('hex') : undefined)
    const backends = primary ? new SlotTable() : null
    this.dataPlane = new DataPlane({
      settings: options.settings,
      logs: options.logs,
      ...(options.env !== undefined ? { env: options.env } : {}),
      ...(sessionKey !== undefined ? { sessionKey } : {}),
      ...(backends !== null ? { sharedBackends: backends.buffer } : {}),
      // With workers the primary is one of the serving loops: it shares the ports with them,
      // or (WORKER_ACCEPT=primary) serves the share its distributor keeps.
      ...(primary ? { sharedPorts: options.settings.workerAccept === 'primary' ? 'intake' as const : 'reuseport' as const } : {}),
      ...(options.otel !== undefined ? { otel: options.otel } : {}),
      ...(options.otlpLogs !== undefined ? { otlpLogs: options.otlpLogs } : {})
    })
    const { engine, listeners, metrics, meshIdentity } = this.dataPlane
    this.engine = engine
    this.listeners = listeners
    this.metrics = metrics
    this.meshIdentity = meshIdentity
    this.pool = backends === null
      ? null
      : new WorkerPool({
        // config.workers counts serving loops: the primary is one of them.
        count: options.settings.workers - 1,
        settings: options.settings,
        logs: options.logs,
        engine,
        listeners,
        metrics,
        sessionKey: sessionKey!,
        env: options.env ?? {},
        backends,
        // The workers' spans and OTLP access-log records, exported (and counted) here.
        onRecords: (kind, records) => {
          if (kind === 'spans') options.otel?.acceptRelayed(records)
          else options.otlpLogs?.acceptRelayed(records)
        }
      })
    this.onQuit = options.onQuit
    this.maxConfigBytes = options.maxConfigBytes
  }

  /**
   * The mesh CA identity (main thread): each certificate goes to the workers and the
   * expiry gauge; the first request goes out now (its result comes later: the gateway serves
   * meanwhile, mesh backends failing with PORTICO_MESH_NO_IDENTITY until it is in).
   */
  private startMeshCa (): void {
    const mesh = caIdentity(this.meshIdentity)
    if (mesh === null) return
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
    const mesh = caIdentity(this.meshIdentity)
    if (mesh === null) return null
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
      log.info({ workers: settings.workers }, `${settings.workers} serving event loops: the primary and ${settings.workers - 1} data-plane worker${settings.workers === 2 ? '' : 's'}`)
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
        view: this,
        log: this.logs.for('admin'),
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

  /** Where the data plane listens (with WORKER_ACCEPT=primary: the distributor's ports). */
  addresses (): ListenerAddress[] {
    return this.pool?.addresses() ?? this.listeners.addresses()
  }

  /** Registers a child process for /debug/tasks; returns the function that forgets it. */
  trackChild (info: ChildProcessInfo): () => void {
    return this.dataPlane.trackChild(info)
  }

  children (): ChildProcessInfo[] {
    return this.dataPlane.children()
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
      // Validated: the schema validator goes again until the next reload (start.ts).
      releaseValidator()
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
      this.dataPlane.noteEndpoints(ir)
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

  /**
   * Graceful shutdown: stop accepting, let in-flight requests finish up to the drain
   * deadline, close upstream pools. Idempotent.
   */
  shutdown (reason: string): Promise<void> {
    this.shuttingDown ??= (async () => {
      this.log.info({ reason, drainTimeoutMs: this.settings.drainTimeoutMs }, 'shutting down: draining in-flight requests')
      this.watcher?.close()
      this.configSource?.close()
      // Every loop drains at once: the primary's own listeners and, with workers, theirs.
      await this.dataPlane.close(async ms => { await Promise.all([this.listeners.drain(ms), this.pool?.drain(ms)]) })
      await Promise.allSettled(this.servers.map(s => s.close()))
      this.log.info('shutdown complete')
      this.logs.flush()
    })()
    return this.shuttingDown
  }
}
