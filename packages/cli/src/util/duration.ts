/** Durations as config files write them: `500ms`, `30s`, `1.5m`, `2h`, `1m30s`; null if invalid. */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

export function parseDurationMs (text: string): number | null {
  if (text === '') return null
  let total = 0
  let rest = text
  while (rest.length > 0) {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(rest)
    if (m === null) return null
    total += Number(m[1]) * UNIT_MS[m[2]!]!
    rest = rest.slice(m[0].length)
  }
  return total
}
