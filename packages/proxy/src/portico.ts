/**
 * One running Portico: engine + data-plane listeners + config source + logs + shutdown.
 * The CLI builds one from arguments; tests build one in-process the same way.
 */

import type { Logger } from 'pino'
import { Engine, formatDiagnostic, loadConfigText, type ConfigDiagnostic, type LoadedConfig, type ProxyIR, type RequestContext } from '@portico/engine'
import { ListenerManager } from './listeners.ts'
import { watchConfigFile, type FileWatch } from './file-source.ts'
import type { Logs } from './logging.ts'
import type { Settings } from './settings.ts'
import { accessLogFields } from './access-log.ts'
import { dirname, resolve } from 'node:path'

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
}

export class Portico {
  readonly engine: Engine
  readonly listeners: ListenerManager
  readonly settings: Settings
  readonly logs: Logs
  readonly startedAt = new Date()
  /** Most recent first, capped. */
  readonly reloads: ReloadRecord[] = []
  private readonly log: Logger
  private readonly accessLog: Logger
  private readonly configPath: string | undefined
  private watcher: FileWatch | undefined
  private applying: Promise<unknown> = Promise.resolve()
  private shuttingDown: Promise<void> | undefined
  /** The last config that loaded; /config_dump shows its static part. */
  loaded: LoadedConfig | undefined

  constructor (options: PorticoOptions) {
    this.settings = options.settings
    this.logs = options.logs
    this.log = options.logs.for('portico')
    this.accessLog = options.logs.for('request')
    this.configPath = options.configPath === undefined ? undefined : resolve(options.configPath)
    const configLog = options.logs.for('engine')
    this.engine = new Engine({
      env: options.env ?? {},
      onRequestEnd: ctx => this.onRequestEnd(ctx),
      onInternalError: (err, ctx) => configLog.error({ err, route: ctx.routeKey, path: ctx.originalPath }, 'request failed inside the proxy')
    })
    this.listeners = new ListenerManager(this.engine, options.logs.for('listeners'))
  }

  /** Binds listeners for the first config. Throws (nothing left open) if a port cannot be bound. */
  async start (initial: LoadedConfig, initialText?: string): Promise<void> {
    await this.install(initial)
    if (this.configPath !== undefined) {
      this.watcher = watchConfigFile({
        path: this.configPath,
        onChange: text => { void this.reloadText(text) },
        onError: err => this.log.warn({ err: err.message, file: this.configPath }, 'cannot read config file; keeping the current config')
      })
      if (initialText !== undefined) this.watcher.setCurrent(initialText)
    }
  }

  /** Applies a new version of the config file's text; the current config stays on any error. */
  reloadText (text: string): Promise<{ ok: boolean, diagnostics: ConfigDiagnostic[] }> {
    const run = async () => {
      const file = this.configPath ?? 'config'
      const result = loadConfigText(text, { baseDir: dirname(file) })
      if (!result.ok) {
        const errors = result.diagnostics.map(d => formatDiagnostic(file, d))
        this.recordReload({ ok: false, errors })
        this.log.error({ errors }, `config reload rejected (${errors.length} error${errors.length === 1 ? '' : 's'}); keeping version ${this.engine.config?.ir.version ?? 'none'}\n${errors.join('\n')}`)
        return { ok: false, diagnostics: result.diagnostics }
      }
      if (result.config.ir.version === this.engine.config?.ir.version) return { ok: true, diagnostics: [] }
      try {
        await this.install(result.config)
      } catch (err) {
        const message = (err as Error).message
        this.recordReload({ ok: false, errors: [message] })
        this.log.error({ err: message }, 'config reload failed; keeping the current config')
        return { ok: false, diagnostics: [{ path: [], message }] }
      }
      this.log.info({ version: result.config.ir.version }, 'config reloaded')
      return { ok: true, diagnostics: [] }
    }
    // Reloads apply one at a time, in order.
    const next = this.applying.then(run, run)
    this.applying = next
    return next
  }

  /** Installs an IR from any source (file or, in cluster mode, the controller). */
  async applyIR (ir: ProxyIR): Promise<void> {
    await this.listeners.apply(ir, () => this.engine.apply(ir))
  }

  private async install (config: LoadedConfig): Promise<void> {
    await this.applyIR(config.ir)
    this.loaded = config
    this.recordReload({ ok: true, version: config.ir.version })
  }

  private recordReload (r: Omit<ReloadRecord, 'at'>): void {
    this.reloads.unshift({ at: new Date().toISOString(), ...r })
    if (this.reloads.length > 20) this.reloads.length = 20
  }

  private onRequestEnd (ctx: RequestContext): void {
    if (this.accessLog.isLevelEnabled('info')) this.accessLog.info(accessLogFields(ctx), 'request')
  }

  /**
   * Graceful shutdown: stop accepting, let in-flight requests finish up to the drain
   * deadline, close upstream pools. Idempotent.
   */
  shutdown (reason: string): Promise<void> {
    this.shuttingDown ??= (async () => {
      this.log.info({ reason, drainTimeoutMs: this.settings.drainTimeoutMs }, 'shutting down: draining in-flight requests')
      this.watcher?.close()
      await this.listeners.drain(this.settings.drainTimeoutMs)
      await this.engine.close()
      this.log.info('shutdown complete')
      this.logs.flush()
    })()
    return this.shuttingDown
  }
}
