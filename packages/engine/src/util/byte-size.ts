/**
 * Byte sizes as people write them in flags and environment variables (`8MiB`, `512KiB`,
 * `1048576`) and as messages print them (`8 MiB`). Units are binary (K = 1024).
 */

const UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, ki: 1024, kib: 1024, kb: 1024, m: 1024 ** 2, mi: 1024 ** 2, mib: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gi: 1024 ** 3, gib: 1024 ** 3, gb: 1024 ** 3 }

/** `8MiB` -> 8388608; undefined when the text is not a size. */
export function parseByteSize (text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text)
  if (m === null) return undefined
  const unit = UNITS[m[2]!.toLowerCase()]
  if (unit === undefined) return undefined
  const bytes = Math.floor(Number(m[1]) * unit)
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined
}

/** 8388608 -> `8 MiB`; 9437185 -> `9.0 MiB`; 700 -> `700 bytes`. */
export function formatByteSize (bytes: number): string {
  for (const [unit, size] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= size) return bytes % size === 0 ? `${bytes / size} ${unit}` : `${(bytes / size).toFixed(1)} ${unit}`
  }
  return `${bytes} bytes`
}
