/**
 * What `portico` does once its arguments are parsed (cli.ts): validate a file, run the
 * gateway on one, or run in cluster mode with the config from the controller.
 */

import { DEFAULT_MAX_CONFIG_BYTES, formatByteSize, formatDiagnostic, loadConfigFile, parseByteSize, releaseValidator, type FileLoadResult, type StaticConfig } from '@portico/engine'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http from '@portico/engine/node-http'
import { Logs } from '@portico/ops'
import type { Portico } from './portico.ts'
import { resolveSettings, type Settings } from './settings.ts'
import { version } from './version.ts'
import { SAME_STOP_MS, wireStopRequests } from './stop-requests.ts'
import { collectStartupGarbage } from './startup-gc.ts'
import { startIdleTrim } from './idle-trim.ts'

export interface FileRunOptions {
  file: string
  /** Check the file and exit (0 valid, 1 with errors). */
  validate: boolean
  /** --max-config-size as given, if given. */
  maxConfigSize: string | undefined
}

/** `portico -f FILE` and `portico --validate -f FILE`. */
export async function runFile (options: FileRunOptions): Promise<void> {
  const { file } = options
  const maxConfigBytes = configSizeLimit(options.maxConfigSize, process.env.MAX_CONFIG_SIZE)
  const result = loadConfigFile(file, { maxBytes: maxConfigBytes })
  if (!result.ok) {
    printErrors(file, result)
    process.exit(1)
  }
  const { config } = result
  if (options.validate) {
    const routes = config.ir.binds.reduce((n, b) => n + b.listeners.reduce((m, l) => m + l.routes.length, 0), 0)
    process.stdout.write(`${file}: valid (${config.ir.binds.length} listener port${config.ir.binds.length === 1 ? '' : 's'}, ${routes} route attachment${routes === 1 ? '' : 's'}, ${config.ir.backends.length} backend${config.ir.backends.length === 1 ? '' : 's'})\n`)
    return
  }

  const setup = startLogging(config.staticConfig)
  // The servers (metrics: prom-client) load only to run, not to validate; the admin app
  // (Fastify) only with the first admin request (admin/server.ts).
  const { Portico, startTracing } = await import('./portico.ts')
  const portico = new Portico({ settings: setup.settings, logs: setup.logs, configPath: file, maxConfigBytes, onQuit: () => process.exit(0), ...await startTracing(setup.settings, setup.logs) })
  await run(portico, setup.logs, async () => {
    await portico.start(config, result.text)
  }, { config: config.ir.version })
  // The config and the settings are validated: the schema validator (~9 MiB of V8 heap with
  // its source and code) goes until a reload loads it again — now, with start-up's garbage.
  releaseValidator()
  const startLog = setup.logs.for('portico')
  collectStartupGarbage(report => startLog.debug(report, 'start-up collection'))
  if (process.stdout.isTTY === true) {
    const { readySummary } = await import('./ready-summary.ts')
    const { settings } = setup
    process.stdout.write(readySummary({
      ir: config.ir,
      listeners: portico.listeners.addresses(),
      admin: settings.adminAddr === null ? null : { host: settings.adminAddr.host, port: portico.ports.admin },
      adminWrites: settings.adminWrites
    }))
  }
}

/**
 * The config size limit: --max-config-size, else MAX_CONFIG_SIZE, else the default. Read
 * before the file (it bounds reading it), so it cannot come from the file itself.
 */
function configSizeLimit (flag: string | undefined, env: string | undefined): number {
  const [text, source] = flag !== undefined ? [flag, '--max-config-size'] : env !== undefined && env !== '' ? [env, 'MAX_CONFIG_SIZE'] : [undefined, '']
  if (text === undefined) return DEFAULT_MAX_CONFIG_BYTES
  const bytes = parseByteSize(text)
  if (bytes === undefined) {
    process.stderr.write(`portico: ${source}: "${text}" is not a size (bytes, or a number with KiB, MiB or GiB; default ${formatByteSize(DEFAULT_MAX_CONFIG_BYTES)})\n`)
    process.exit(2)
  }
  return bytes
}

/** Settings and logs, exiting with a clear message when either is invalid. */
function startLogging (file: StaticConfig): { settings: Settings, logs: Logs } {
  let settings: Settings
  try {
    settings = resolveSettings(file, process.env, process.stdout.isTTY === true)
  } catch (err) {
    process.stderr.write(`portico: ${(err as Error).message}\n`)
    process.exit(1)
  }
  try {
    // With data-plane workers every thread writes stdout: whole lines, in pipe-atomic writes.
    return { settings, logs: new Logs({ level: settings.logLevel, format: settings.logFormat, sharedOutput: settings.workers > 1 }) }
  } catch (err) {
    process.stderr.write(`portico: LOG_LEVEL / config.logging.level: ${(err as Error).message}\n`)
    process.exit(1)
  }
}

/**
 * Cluster mode: no file; the proxy's Gateway (GATEWAY, NAMESPACE, POD_NAME) gets its
 * config from the controller over xDS. The same engine runs; traces carry `env`.
 */
export async function runClusterMode (): Promise<void> {
  const env = process.env
  const missing = ['POD_NAME', 'NAMESPACE', 'GATEWAY'].filter(k => env[k] === undefined || env[k] === '')
  if (missing.length > 0) {
    process.stderr.write(`portico: cluster mode needs ${missing.join(', ')}\n`)
    process.exit(2)
  }
  const setup = startLogging({})
  const identity = { podName: env.POD_NAME!, namespace: env.NAMESPACE!, gateway: env.GATEWAY! }
  const { Portico, startTracing } = await import('./portico.ts')
  const portico = new Portico({ settings: setup.settings, logs: setup.logs, env: identity, onQuit: () => process.exit(0), ...await startTracing(setup.settings, setup.logs) })
  const tokenFile = env.XDS_TOKEN_FILE ?? (existsSync(DEFAULT_TOKEN_FILE) ? DEFAULT_TOKEN_FILE : undefined)
  // gRPC and the xDS protos load only here: a standalone gateway never needs them.
  const { XdsClient } = await import('./xds-client.ts')
  const xds = new XdsClient({
    address: env.XDS_ADDRESS!,
    ...(env.XDS_ROOT_CA !== undefined && env.XDS_ROOT_CA !== '' ? { caFile: env.XDS_ROOT_CA } : {}),
    ...(tokenFile !== undefined ? { tokenFile } : {}),
    ...identity,
    // The mesh CA identity's state goes to the controller (the Gateway's Mesh condition).
    watchMeshState: listener => portico.onMeshState(listener),
    apply: ir => portico.applyIR(ir),
    log: setup.logs.for('xds')
  })
  await run(portico, setup.logs, async () => {
    portico.useConfigSource(xds)
    xds.start()
  }, { xds: env.XDS_ADDRESS, gateway: `${identity.namespace}/${identity.gateway}` })
}

/**
 * `portico --warm-cache`: runs a gateway for a moment so Node's compile cache
 * (NODE_COMPILE_CACHE) holds every module a running one loads — two data-plane workers, the
 * admin, metrics and readiness servers, MCP and the LLM code (a config using each), one
 * proxied request, one admin request (the admin app loads with the first) — and cluster
 * mode's xDS client
 * (loaded, not run), then stops it as a SIGTERM would. The image runs it at build time, as
 * the user and with the command line its pods run with (Node keys the cache by both): a pod's
 * proxy then takes its modules stripped and compiled from the cache, and Node's TypeScript
 * compiler (~13 MB of RSS) never loads (docs/multicore.md).
 */
export async function warmCompileCache (): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'portico-warm-'))
  const port = await freeLoopbackPort()
  const adminPort = await freeLoopbackPort()
  const file = join(dir, 'config.yaml')
  // Plain routes, an MCP backend, an AI backend and a model: the engine loads MCP and the LLM
  // code only for configs that use them (each thread, when it compiles such a config), so the
  // warm-up config uses each — nothing is contacted (the addresses refuse), only loaded.
  writeFileSync(file, [
    'gateways:',
    `  default: { port: ${port}, address: 127.0.0.1, protocol: HTTP }`,
    'routes:',
    '  - { name: mcp, matches: [{ path: { pathPrefix: /mcp } }], backends: [{ mcp: { targets: [{ name: t, mcp: { host: "http://127.0.0.1:9/mcp" } }] } }] }',
    '  - { name: ai, matches: [{ path: { pathPrefix: /ai } }], backends: [{ ai: { name: a, provider: { openAI: {} }, hostOverride: "http://127.0.0.1:9" } }] }',
    '  - backends: [{ host: 127.0.0.1:9 }]',
    'models:',
    '  - { name: m, match: { model: m-* }, provider: { openAI: {} }, baseURL: "http://127.0.0.1:9/v1" }',
    ''
  ].join('\n'))
  Object.assign(process.env, { WORKERS: '2', ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: '127.0.0.1:0', READINESS_ADDR: '127.0.0.1:0', LOG_LEVEL: 'warn', DRAIN_TIMEOUT: '1s' })
  await runFile({ file, validate: false, maxConfigSize: undefined })
  rmSync(dir, { recursive: true, force: true })
  // One request through the data plane (its backend refuses: a 503 is as good as a 200 here),
  // and one to the admin server, which builds its app (Fastify) on its first request.
  const get = (port: number): Promise<void> => new Promise<void>(resolve => {
    http.get({ host: '127.0.0.1', port, path: '/' }, res => { res.resume(); res.on('end', resolve) }).on('error', () => resolve())
  })
  await get(port)
  await get(adminPort)
  await import('./xds-client.ts')
  process.kill(process.pid, 'SIGTERM')
}

/** A port nothing listens on at 127.0.0.1 (as the OS hands one out). */
function freeLoopbackPort (): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const probe = http.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    }).on('error', reject)
  })
}

/** Where Kubernetes mounts the projected service-account token the deployer asks for. */
const DEFAULT_TOKEN_FILE = '/var/run/secrets/portico/xds-token'

/** Starts the servers, then the config source; logs where it listens; wires signals. */
async function run (portico: Portico, logs: Logs, startConfig: () => Promise<void>, startedFields: Record<string, unknown>): Promise<void> {
  const log = logs.for('portico')
  // Nothing a client or backend does may take the process down; a bug is logged, not fatal.
  process.on('uncaughtException', err => log.error({ err }, 'uncaught exception'))
  process.on('unhandledRejection', err => log.error({ err }, 'unhandled rejection'))
  try {
    await portico.startServers()
    await startConfig()
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'cannot start')
    logs.flush()
    process.exit(1)
  }
  // Signals are wired before the line below: whoever waits for it (a supervisor, the tests)
  // may signal at once, and a SIGTERM before the handler would kill the process undrained.
  // The first stop request drains; a wrapper's copy of the same Ctrl-C is not a second one
  // (stop-requests.ts).
  wireStopRequests({
    stop: reason => { portico.shutdown(reason).then(() => process.exit(0), () => process.exit(1)) },
    stopNow: signal => {
      log.warn({ signal }, 'second signal: exiting now')
      logs.flush()
      process.exit(1)
    },
    onSameStop: signal => log.info({ signal, withinMs: SAME_STOP_MS }, 'signal taken as part of the stop already under way (a wrapper passing Ctrl-C on)')
  })
  // Node's default for SIGHUP is to exit at once (no log, no drain). A terminal closing or
  // an operator asking for a reload must not stop the gateway: re-read the config instead.
  process.on('SIGHUP', signal => {
    portico.reloadOnSignal(signal).catch(err => log.error({ err }, `${signal}: reload failed`))
  })
  for (const l of portico.addresses()) {
    const scheme = l.protocol.toLowerCase()
    log.info({ address: `${scheme}://${l.address}:${l.port}` }, `listening on ${scheme}://${l.address}:${l.port}`)
  }
  log.info({ version, ...startedFields }, 'portico started')
  // Malloc's freed pages back to the kernel once the process goes idle after work (idle-trim.ts).
  startIdleTrim({ onTrim: report => log.debug(report, 'idle malloc trim') })
  // Out now, not at the next batched write (up to 250 ms later): whoever starts the process
  // (an operator, a supervisor, the tests) waits for this line.
  logs.flush()
}

function printErrors (file: string, result: Extract<FileLoadResult, { ok: false }>): void {
  for (const d of result.diagnostics) process.stderr.write(formatDiagnostic(file, d) + '\n')
  process.stderr.write(`${file}: ${result.diagnostics.length} error${result.diagnostics.length === 1 ? '' : 's'}\n`)
}
