/**
 * `portico -f FILE` runs the gateway on a config file; `portico --validate -f FILE` checks
 * one and exits (0 valid, 1 invalid). Errors print as `file:line:col: path: problem`.
 */

import { parseArgs } from 'node:util'
import { DEFAULT_MAX_CONFIG_BYTES, formatByteSize, formatDiagnostic, loadConfigFile, parseByteSize, type LoadResult, type StaticConfig } from '@portico/engine'
import { existsSync, readFileSync } from 'node:fs'
import { Logs } from '@portico/ops'
import { Portico } from './portico.ts'
import { resolveSettings, type Settings } from './settings.ts'
import { XdsClient } from './xds-client.ts'
import { version } from './version.ts'

const USAGE = `usage: portico -f FILE            run the gateway on a config file
       portico --validate -f FILE validate a config file and exit
       portico                    cluster mode: config from the controller (XDS_ADDRESS)
options:
  -f, --file FILE   config file (YAML or JSON)
      --validate    check the file and exit: 0 when valid, 1 with errors
      --max-config-size SIZE
                    largest config file accepted, at start and on reload (default 8MiB;
                    env MAX_CONFIG_SIZE), e.g. 16MiB
  -V, --version     print the version
  -h, --help        this help
environment: ADMIN_ADDR, STATS_ADDR, READINESS_ADDR, LOG_LEVEL, LOG_FORMAT, DRAIN_TIMEOUT,
SESSION_KEY, MCP_SESSION_TTL (each overrides the file's config: section)
cluster mode: XDS_ADDRESS (http:// or https://host:port), XDS_ROOT_CA (CA file for https),
XDS_TOKEN_FILE (service-account token), POD_NAME, NAMESPACE, GATEWAY`

export async function main (argv: string[]): Promise<void> {
  let args
  try {
    args = parseArgs({
      args: argv,
      options: {
        file: { type: 'string', short: 'f' },
        validate: { type: 'boolean', default: false },
        'max-config-size': { type: 'string' },
        version: { type: 'boolean', short: 'V', default: false },
        help: { type: 'boolean', short: 'h', default: false }
      },
      strict: true,
      allowPositionals: false
    }).values
  } catch (err) {
    process.stderr.write(`portico: ${(err as Error).message}\n${USAGE}\n`)
    process.exit(2)
  }
  if (args.help) {
    process.stdout.write(USAGE + '\n')
    return
  }
  if (args.version) {
    process.stdout.write(`portico ${version}\n`)
    return
  }
  if (args.file === undefined) {
    if (process.env.XDS_ADDRESS !== undefined && process.env.XDS_ADDRESS !== '' && !args.validate) {
      await runClusterMode()
      return
    }
    process.stderr.write(`portico: a config file is required (-f FILE), or XDS_ADDRESS for cluster mode\n${USAGE}\n`)
    process.exit(2)
  }

  const maxConfigBytes = configSizeLimit(args['max-config-size'], process.env.MAX_CONFIG_SIZE)
  const file = args.file
  const result = loadConfigFile(file, { maxBytes: maxConfigBytes })
  if (!result.ok) {
    printErrors(file, result)
    process.exit(1)
  }
  const { config } = result
  if (args.validate) {
    const routes = config.ir.binds.reduce((n, b) => n + b.listeners.reduce((m, l) => m + l.routes.length, 0), 0)
    process.stdout.write(`${file}: valid (${config.ir.binds.length} listener port${config.ir.binds.length === 1 ? '' : 's'}, ${routes} route attachment${routes === 1 ? '' : 's'}, ${config.ir.backends.length} backend${config.ir.backends.length === 1 ? '' : 's'})\n`)
    return
  }

  const setup = startLogging(config.staticConfig)
  const portico = new Portico({ settings: setup.settings, logs: setup.logs, configPath: file, maxConfigBytes, onQuit: () => process.exit(0) })
  await run(portico, setup.logs, async () => {
    await portico.start(config, readFileSync(file, 'utf8'))
  }, { config: config.ir.version })
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
    return { settings, logs: new Logs({ level: settings.logLevel, format: settings.logFormat }) }
  } catch (err) {
    process.stderr.write(`portico: LOG_LEVEL / config.logging.level: ${(err as Error).message}\n`)
    process.exit(1)
  }
}

/**
 * Cluster mode: no file; the proxy's Gateway (GATEWAY, NAMESPACE, POD_NAME) gets its
 * config from the controller over xDS. The same engine runs; traces carry `env`.
 */
async function runClusterMode (): Promise<void> {
  const env = process.env
  const missing = ['POD_NAME', 'NAMESPACE', 'GATEWAY'].filter(k => env[k] === undefined || env[k] === '')
  if (missing.length > 0) {
    process.stderr.write(`portico: cluster mode needs ${missing.join(', ')}\n`)
    process.exit(2)
  }
  const setup = startLogging({})
  const identity = { podName: env.POD_NAME!, namespace: env.NAMESPACE!, gateway: env.GATEWAY! }
  const portico = new Portico({ settings: setup.settings, logs: setup.logs, env: identity, onQuit: () => process.exit(0) })
  const tokenFile = env.XDS_TOKEN_FILE ?? (existsSync(DEFAULT_TOKEN_FILE) ? DEFAULT_TOKEN_FILE : undefined)
  const xds = new XdsClient({
    address: env.XDS_ADDRESS!,
    ...(env.XDS_ROOT_CA !== undefined && env.XDS_ROOT_CA !== '' ? { caFile: env.XDS_ROOT_CA } : {}),
    ...(tokenFile !== undefined ? { tokenFile } : {}),
    ...identity,
    apply: ir => portico.applyIR(ir),
    log: setup.logs.for('xds')
  })
  await run(portico, setup.logs, async () => {
    portico.useConfigSource(xds)
    xds.start()
  }, { xds: env.XDS_ADDRESS, gateway: `${identity.namespace}/${identity.gateway}` })
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
  for (const l of portico.listeners.addresses()) {
    const scheme = l.protocol === 'HTTPS' ? 'https' : 'http'
    log.info({ address: `${scheme}://${l.address}:${l.port}` }, `listening on ${scheme}://${l.address}:${l.port}`)
  }
  log.info({ version, ...startedFields }, 'portico started')
  let signals = 0
  const onSignal = (signal: NodeJS.Signals) => {
    signals++
    if (signals > 1) {
      log.warn({ signal }, 'second signal: exiting now')
      logs.flush()
      process.exit(1)
    }
    portico.shutdown(signal).then(() => process.exit(0), () => process.exit(1))
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  // Node's default for SIGHUP is to exit at once (no log, no drain). A terminal closing or
  // an operator asking for a reload must not stop the gateway: re-read the config instead.
  process.on('SIGHUP', signal => {
    portico.reloadOnSignal(signal).catch(err => log.error({ err }, `${signal}: reload failed`))
  })
}

function printErrors (file: string, result: Extract<LoadResult, { ok: false }>): void {
  for (const d of result.diagnostics) process.stderr.write(formatDiagnostic(file, d) + '\n')
  process.stderr.write(`${file}: ${result.diagnostics.length} error${result.diagnostics.length === 1 ? '' : 's'}\n`)
}
