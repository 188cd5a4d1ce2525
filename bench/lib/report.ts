/** Plain-text tables and number formatting for benchmark output. */

export function table (header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => (r[i] ?? '').length)))
  const line = (cells: string[]) => cells.map((c, i) => i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)).join('  ')
  return [line(header), widths.map(w => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

/** Fixed decimals, or `n/a` for NaN. */
export function fmt (n: number, decimals = 2): string {
  return Number.isFinite(n) ? n.toFixed(decimals) : 'n/a'
}

export function ratio (a: number, b: number): number {
  return b === 0 ? NaN : a / b
}

/** Rounds every number of a (nested) figure object, for the JSON summary line. */
export function rounded<T> (value: T, decimals = 3): T {
  if (typeof value === 'number') return (Number.isFinite(value) ? Number(value.toFixed(decimals)) : null) as T
  if (Array.isArray(value)) return value.map(v => rounded(v, decimals)) as T
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rounded(v, decimals)])) as T
  }
  return value
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * `items` in the order of round `round` of interleaved runs: starting `round` places later,
 * wrapping around, so a drift in the machine's load favours no target.
 */
export function rotated<T> (items: readonly T[], round: number): T[] {
  const at = round % items.length
  return [...items.slice(at), ...items.slice(0, at)]
}
