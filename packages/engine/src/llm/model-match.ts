/**
 * Which model of a table serves a requested model name (the model API, docs/models.md).
 * Patterns are agentgateway's: an exact name, a prefix `gpt-*`, a suffix `*-latest`, or `*`.
 * An exact match beats a prefix or suffix, a longer literal part beats a shorter one, and `*`
 * comes last. Two patterns of one rank that can match the same name are a tie, refused when
 * the config loads (config/models-to-ir.ts), so the order of the file never decides.
 */

export type ModelPattern =
  | { kind: 'exact', value: string }
  | { kind: 'prefix', value: string }
  | { kind: 'suffix', value: string }
  | { kind: 'any' }

/** Null when the pattern is one of the four forms, else why not. */
export function matchProblem (pattern: string): string | null {
  if (pattern === '*') return null
  const stars = pattern.split('*').length - 1
  if (stars === 0) return null
  if (stars === 1 && (pattern.endsWith('*') || pattern.startsWith('*'))) return null
  return `"${pattern.length > 64 ? `${pattern.slice(0, 64)}...` : pattern}": a wildcard is * alone, a prefix (x-*) or a suffix (*-x)`
}

export function parsePattern (pattern: string): ModelPattern {
  if (pattern === '*') return { kind: 'any' }
  if (pattern.endsWith('*')) return { kind: 'prefix', value: pattern.slice(0, -1) }
  if (pattern.startsWith('*')) return { kind: 'suffix', value: pattern.slice(1) }
  return { kind: 'exact', value: pattern }
}

/** Higher is more specific: exact above every wildcard, wildcards by their literal length, `*` at 0. */
export function patternRank (pattern: string): number {
  const p = parsePattern(pattern)
  if (p.kind === 'exact') return Number.MAX_SAFE_INTEGER
  return p.kind === 'any' ? 0 : p.value.length
}

/** Whether two patterns of the same rank can match one name (a tie no request could settle). */
export function tiesWith (a: string, b: string): boolean {
  if (patternRank(a) !== patternRank(b)) return false
  const pa = parsePattern(a)
  const pb = parsePattern(b)
  if (pa.kind === 'exact' || pa.kind === 'any' || pa.kind === pb.kind) return a === b
  // A prefix p* and a suffix *s of one length both match p + s.
  return true
}

export function patternMatches (p: ModelPattern, model: string): boolean {
  switch (p.kind) {
    case 'exact': return model === p.value
    case 'prefix': return model.startsWith(p.value)
    case 'suffix': return model.endsWith(p.value)
    default: return true
  }
}

/** A table of patterns, most specific first: `select` is a map lookup, then a scan of the wildcards. */
export class ModelMatcher<T> {
  private readonly exact = new Map<string, T>()
  private readonly wildcards: Array<{ pattern: ModelPattern, rank: number, item: T }> = []

  constructor (entries: ReadonlyArray<{ pattern: string, item: T }>) {
    for (const { pattern, item } of entries) {
      const p = parsePattern(pattern)
      if (p.kind === 'exact') {
        if (!this.exact.has(p.value)) this.exact.set(p.value, item)
      } else this.wildcards.push({ pattern: p, rank: patternRank(pattern), item })
    }
    // Stable: among equal ranks (ties the loader refused) the first stays first.
    this.wildcards.sort((a, b) => b.rank - a.rank)
  }

  select (model: string): T | null {
    const hit = this.exact.get(model)
    if (hit !== undefined) return hit
    for (const w of this.wildcards) if (patternMatches(w.pattern, model)) return w.item
    return null
  }
}
