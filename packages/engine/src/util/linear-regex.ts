/**
 * Every regular expression that comes from a config (route path, header and query matches,
 * CEL's `matches()`, CORS origin wildcards) runs here, on an RE2 engine (@bufbuild/re2, the
 * one @bufbuild/cel already uses): matching takes time linear in the input whatever the
 * pattern, so no request can hold the event loop with an input that makes a backtracking
 * engine explode (`/(a+)+$` against `/aaaa…a!` takes V8 minutes). The syntax is RE2's, as in
 * Envoy and the Gateway API implementations; constructs only a backtracking engine can run
 * (lookaround, backreferences, possessive quantifiers, atomic groups) do not compile, and the
 * error says which one and why.
 */

import type { RE2JS } from '@bufbuild/re2'
import { PorticoError } from './errors.ts'
import { lazyRequire } from './lazy-require.ts'

/** @bufbuild/re2, loaded when a config first has a pattern (compile time, never per request). */
const re2 = lazyRequire<typeof import('@bufbuild/re2')>('@bufbuild/re2')

export interface LinearRegex {
  readonly source: string
  /** True when the pattern matches the whole input (route path, header and query values). */
  matchesWhole(input: string): boolean
  /** True when the pattern matches anywhere in the input (CEL's `matches()`). */
  find(input: string): boolean
}

/** Compiles a pattern; throws PORTICO_BAD_REGEX with why it cannot run in linear time, or what is wrong. */
export function compileLinearRegex (source: string): LinearRegex {
  let re: RE2JS
  try {
    re = re2().RE2JS.compile(source)
  } catch (err) {
    throw new PorticoError('PORTICO_BAD_REGEX', explain(source, (err as Error).message), { cause: err })
  }
  if (!hasMeta(source)) {
    // A plain literal: a string comparison gives the same answer without the engine.
    return { source, matchesWhole: input => input === source, find: input => input.includes(source) }
  }
  // Every match starts with RE2's literal prefix of the pattern (empty when there is none, or
  // when it would be case-folded): a whole-input match on an input without it is refused
  // without running the engine, which is most of a route table's regexes for most requests.
  const prefix = re.re2().prefix
  const whole = prefix === '' ? (input: string) => re.testExact(input) : (input: string) => input.startsWith(prefix) && re.testExact(input)
  return { source, matchesWhole: whole, find: input => re.test(input) }
}

/** Why `source` is not a usable pattern, or null when it compiles. */
export function linearRegexProblem (source: string): string | null {
  try {
    compileLinearRegex(source)
    return null
  } catch (err) {
    return (err as Error).message
  }
}

/**
 * Compiled patterns by source, for patterns only known at run time (a CEL `matches()` whose
 * argument is an expression). Bounded: when full it starts over, so request-supplied
 * patterns cannot grow it without limit.
 */
export class LinearRegexCache {
  private readonly entries = new Map<string, LinearRegex>()
  private readonly max: number
  constructor (max = 256) {
    this.max = max
  }

  get (source: string): LinearRegex {
    let re = this.entries.get(source)
    if (re === undefined) {
      re = compileLinearRegex(source)
      if (this.entries.size >= this.max) this.entries.clear()
      this.entries.set(source, re)
    }
    return re
  }
}

/** RE2's metacharacters: a pattern without any is a literal. */
function hasMeta (source: string): boolean {
  return /[\\^$.|?*+()[\]{}]/.test(source)
}

/** RE2's parse error, with the backtracking-only construct it refused named. */
function explain (source: string, message: string): string {
  const detail = message.replace(/^error parsing regexp: /, '')
  const refused = backtrackingOnly(source, detail)
  return refused !== null
    ? `${refused}: regexes use RE2 syntax and run in linear time (${detail})`
    : `invalid regular expression (RE2 syntax): ${detail}`
}

function backtrackingOnly (source: string, detail: string): string | null {
  if (detail.includes('`(?=') || detail.includes('`(?!')) return 'lookahead (?=…), (?!…) is not supported'
  // RE2 reads `(?<` as the start of a named group.
  if (/named capture: `\(\?<[=!]/.test(detail)) return 'lookbehind (?<=…), (?<!…) is not supported'
  if (/`\\[1-9]`/.test(detail)) return 'a backreference (\\1) is not supported'
  if (detail.includes('`\\k`') || source.includes('(?P=')) return 'a named backreference (\\k<name>, (?P=name)) is not supported'
  if (detail.includes('`(?>')) return 'an atomic group (?>…) is not supported'
  if (/nested repetition operator: `[*+?]\+`/.test(detail)) return 'a possessive quantifier (a++, a*+) is not supported'
  if (detail.includes('`\\u`')) return 'the \\uHHHH escape is not supported (write \\x{HHHH})'
  return null
}
