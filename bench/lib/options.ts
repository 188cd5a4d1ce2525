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

function usage (specs: NumberOption[]): string {
  const lines = specs.map(s => `  --${s.flag.padEnd(18)} ${envName(s.flag).padEnd(26)} ${s.help} (default ${s.default})`)
  return `options (flag, or environment variable):\n${lines.join('\n')}\n`
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
