/**
 * Benchmark knobs from flags (`--duration 5`) or environment variables (`BENCH_DURATION=5`);
 * a flag wins over the variable, the variable over the default.
 */

import { parseArgs } from 'node:util'

export interface NumberOption {
  /** Flag name without dashes; the variable is BENCH_ + its upper-snake form. */
  flag: string
  default: number
  help: string
}

export function envName (flag: string): string {
  return 'BENCH_' + flag.toUpperCase().replaceAll('-', '_')
}

/** Reads every option; prints usage and exits on `--help` or a value that is not a positive number. */
export function readOptions<K extends string> (specs: Record<K, NumberOption>, argv = process.argv.slice(2), env = process.env): Record<K, number> {
  const entries = Object.entries(specs) as Array<[K, NumberOption]>
  const { values } = parseArgs({
    args: argv,
    options: {
      help: { type: 'boolean', short: 'h' },
      ...Object.fromEntries(entries.map(([, s]) => [s.flag, { type: 'string' as const }]))
    },
    strict: true
  })
  if (values.help === true) {
    process.stdout.write(usage(entries.map(([, s]) => s)))
    process.exit(0)
  }
  const out = {} as Record<K, number>
  for (const [key, spec] of entries) {
    const raw = (values as Record<string, string | undefined>)[spec.flag] ?? env[envName(spec.flag)]
    const value = raw === undefined || raw === '' ? spec.default : Number(raw)
    if (!Number.isFinite(value) || value < 0) {
      process.stderr.write(`--${spec.flag} / ${envName(spec.flag)}: not a non-negative number: ${raw}\n`)
      process.exit(2)
    }
    out[key] = value
  }
  return out
}

/** Usage lines of the string options taken so far (takeStringOption), printed after the numbers'. */
const stringUsage: string[] = []

function usage (specs: NumberOption[]): string {
  const lines = specs.map(s => `  --${s.flag.padEnd(18)} ${envName(s.flag).padEnd(26)} ${s.help} (default ${s.default})`)
  return `options (flag, or environment variable):\n${[...lines, ...stringUsage].join('\n')}\n`
}

/**
 * A string-valued option (`--agentgateway /path/to/bin`, `--agentgateway=...`, or
 * BENCH_AGENTGATEWAY), taken out of `argv` before readOptions parses the numbers: its value
 * (undefined when neither is given) and the arguments left. Call it before readOptions, so
 * `--help` lists it.
 */
export function takeStringOption (flag: string, help: string, argv = process.argv.slice(2), env = process.env): { value: string | undefined, rest: string[] } {
  stringUsage.push(`  --${flag.padEnd(18)} ${envName(flag).padEnd(26)} ${help}`)
  const rest: string[] = []
  let value: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === `--${flag}`) {
      value = argv[++i]
      if (value === undefined) {
        process.stderr.write(`--${flag}: needs a value\n`)
        process.exit(2)
      }
    } else if (arg.startsWith(`--${flag}=`)) {
      value = arg.slice(flag.length + 3)
    } else {
      rest.push(arg)
    }
  }
  const fromEnv = env[envName(flag)]
  return { value: value ?? (fromEnv === '' ? undefined : fromEnv), rest }
}

/**
 * The memory benches' phases (footprint.ts, worker-memory.ts): idle seconds after ready, then
 * keep-alive load, each read from /proc at its end.
 */
export const MEMORY_PHASE_OPTIONS = {
  idle: { flag: 'idle', default: 3, help: 'seconds idle after ready before reading memory' },
  load: { flag: 'load', default: 5, help: 'seconds of keep-alive load before reading memory under load (0: no load phase)' },
  connections: { flag: 'connections', default: 50, help: 'keep-alive connections of the load phase' }
} satisfies Record<string, NumberOption>
