/**
 * `portico -f FILE` runs the gateway on a config file; `portico --validate -f FILE` checks
 * one and exits (0 valid, 1 invalid). Errors print as `file:line:col: path: problem`.
 */

import { parseArgs } from 'node:util'
import { formatDiagnostic, loadConfigFile, type LoadResult } from '@portico/engine'
import { readFileSync } from 'node:fs'
import { Logs } from './logging.ts'
import { Portico } from './portico.ts'
import { resolveSettings } from './settings.ts'
import { version } from './version.ts'

const USAGE = `usage: portico -f FILE            run the gateway on a config file
       portico --validate -f FILE validate a config file and exit
options:
  -f, --file FILE   config file (YAML or JSON)
      --validate    check the file and exit: 0 when valid, 1 with errors
  -V, --version     print the version
  -h, --help        this help
environment: ADMIN_ADDR, STATS_ADDR, READINESS_ADDR, LOG_LEVEL, LOG_FORMAT, DRAIN_TIMEOUT
(each overrides the file's config: section)`

export async function main (argv: string[]): Promise<void> {
  let args
  try {
    args = parseArgs({
      args: argv,
      options: {
        file: { type: 'string', short: 'f' },
        validate: { type: 'boolean', default: false },
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
    process.stderr.write(`portico: a config file is required (-f FILE)\n${USAGE}\n`)
    process.exit(2)
  }

  const file = args.file
  const result = loadConfigFile(file)
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

  let settings
  try {
    settings = resolveSettings(config.staticConfig, process.env, process.stdout.isTTY === true)
  } catch (err) {
    process.stderr.write(`portico: ${(err as Error).message}\n`)
    process.exit(1)
  }
  let logs: Logs
  try {
    logs = new Logs({ level: settings.logLevel, format: settings.logFormat })
  } catch (err) {
    process.stderr.write(`portico: LOG_LEVEL / config.logging.level: ${(err as Error).message}\n`)
    process.exit(1)
  }
  const log = logs.for('portico')
  const portico = new Portico({ settings, logs, configPath: file, onQuit: () => process.exit(0) })

  // Nothing a client or backend does may take the process down; a bug is logged, not fatal.
  process.on('uncaughtException', err => log.error({ err }, 'uncaught exception'))
  process.on('unhandledRejection', err => log.error({ err }, 'unhandled rejection'))

  try {
    await portico.startServers()
    await portico.start(config, readFileSync(file, 'utf8'))
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'cannot start')
    logs.flush()
    process.exit(1)
  }

  for (const l of portico.listeners.addresses()) {
    const scheme = l.protocol === 'HTTPS' ? 'https' : 'http'
    log.info({ address: `${scheme}://${l.address}:${l.port}` }, `listening on ${scheme}://${l.address}:${l.port}`)
  }
  log.info({ version, config: config.ir.version }, 'portico started')

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
}

function printErrors (file: string, result: Extract<LoadResult, { ok: false }>): void {
  for (const d of result.diagnostics) process.stderr.write(formatDiagnostic(file, d) + '\n')
  process.stderr.write(`${file}: ${result.diagnostics.length} error${result.diagnostics.length === 1 ? '' : 's'}\n`)
}
