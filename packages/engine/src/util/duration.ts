import { PorticoError } from './errors.ts'

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** The duration syntax of config files: `250ms`, `10s`, `1.5m`, `2h`; also `1m30s`. */
/** The longest timer Node runs as asked (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 2_147_483_647

export const DURATION_PATTERN = '^(\\d+(\\.\\d+)?(ms|s|m|h))+$'

/**
 * Reports `ms` at `path` when it cannot be a timer: below `min`, or longer than Node can time.
 * The YAML front end calls it where it reads each timer field, so the error carries the
 * field's file:line:col; validateIR's own check (IR paths, for every config source) then
 * never has to speak for a YAML file.
 */
export function checkTimerMs<P> (ms: number | undefined, path: P, report: (path: P, message: string) => void, min = 0): void {
  if (ms !== undefined && !(Number.isFinite(ms) && ms >= min && ms <= MAX_TIMER_MS)) report(path, `must be between ${min}ms and 596h (the longest timer Node runs)`)
}

/** Parses a duration such as `1m30s` into milliseconds. */
export function parseDuration (text: string): number {
  let total = 0
  let rest = text
  if (rest.length === 0) throw new PorticoError('PORTICO_BAD_DURATION', `invalid duration "${text}"`)
  while (rest.length > 0) {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(rest)
    if (m === null) throw new PorticoError('PORTICO_BAD_DURATION', `invalid duration "${text}" (use e.g. 500ms, 10s, 1m)`)
    total += Number(m[1]) * UNIT_MS[m[2]!]!
    rest = rest.slice(m[0].length)
  }
  return total
}

/** Seconds with an `s` suffix, as trace snapshots report durations: `0.001234s`. */
export function formatSeconds (ms: number): string {
  return `${(ms / 1000).toFixed(6)}s`
}

