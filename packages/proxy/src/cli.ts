/**
 * `portico -f FILE` runs the gateway on a config file; `portico --validate -f FILE` checks
 * one and exits (0 valid, 1 invalid). Errors print as `file:line:col: path: problem`.
 *
 * This module parses arguments only: `--version`, `--help` and a usage error print without
 * loading the engine (hundreds of modules, about a second). Everything else is in start.ts,
 * imported once the arguments ask for a gateway or a validation.
 */

import { parseArgs } from 'node:util'
import { version } from './version.ts'

export const USAGE = `usage: portico -f FILE            run the gateway on a config file
       portico --validate -f FILE validate a config file and exit
       portico                    cluster mode: config from the controller (XDS_ADDRESS)
       portico --warm-cache       fill Node's compile cache (NODE_COMPILE_CACHE) with the
                                  modules a running gateway loads, and exit (image builds)
options:
  -f, --file FILE   config file (YAML or JSON)
      --validate    check the file and exit: 0 when valid, 1 with errors
      --max-config-size SIZE
                    largest config file accepted, at start and on reload (default 8MiB;
                    env MAX_CONFIG_SIZE), e.g. 16MiB
  -V, --version     print the version
  -h, --help        this help
environment: ADMIN_ADDR, STATS_ADDR, READINESS_ADDR, LOG_LEVEL, LOG_FORMAT, DRAIN_TIMEOUT,
SESSION_KEY, MCP_SESSION_TTL, WORKERS (each overrides the file's config: section)
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
        'warm-cache': { type: 'boolean', default: false },
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
  if (args['warm-cache']) {
    const { warmCompileCache } = await import('./start.ts')
    await warmCompileCache()
    return
  }
  if (args.file === undefined) {
    if (process.env.XDS_ADDRESS !== undefined && process.env.XDS_ADDRESS !== '' && !args.validate) {
      const { runClusterMode } = await import('./start.ts')
      await runClusterMode()
      return
    }
    process.stderr.write(`portico: a config file is required (-f FILE), or XDS_ADDRESS for cluster mode\n${USAGE}\n`)
    process.exit(2)
  }
  const { runFile } = await import('./start.ts')
  await runFile({ file: args.file, validate: args.validate, maxConfigSize: args['max-config-size'] })
}
