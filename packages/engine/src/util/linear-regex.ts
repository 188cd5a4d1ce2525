/**
 * Every regular expression that comes from a config (route path, header and query matches,
 * CEL's `matches()`, CORS origin wildcards) runs here, on an RE2 engine (@bufbuild/re2, the
 * one @bufbuild/cel already uses): matching takes time linear in the input whatever the
 * pattern, so no request can hold the event loop with an input that makes a backtracking
 * engine explode (`/(a+)+$` against `/aaaa...a!` takes V8 minutes). The syntax is RE2's, as in
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
  /**
   * Every match in `input` from `from` on, left to right, not overlapping, each the one
   * Perl/RE2 semantics pick (leftmost, then first alternative, greedy as written), as
   * [start, end) UTF-16 offsets. `maxLength` caps a match's length (a longer one is not
   * seen): it bounds the work per position, so the whole search is O(input × maxLength ×
   * pattern) at worst and linear in the input for a given pattern and cap. Offsets before
   * `from` are context only (`\b`, `^` see the character before `from`).
   */
  findAll(input: string, from?: number, maxLength?: number): Array<[number, number]>
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
    return {
      source,
      matchesWhole: input => input === source,
      find: input => input.includes(source),
      findAll: (input, from = 0, maxLength = Infinity) => {
        const out: Array<[number, number]> = []
        if (source === '' || source.length > maxLength) return out
        for (let i = input.indexOf(source, from); i !== -1; i = input.indexOf(source, i + source.length)) out.push([i, i + source.length])
        return out
      }
    }
  }
  // Every match starts with RE2's literal prefix of the pattern (empty when there is none, or
  // when it would be case-folded): a whole-input match on an input without it is refused
  // without running the engine, which is most of a route table's regexes for most requests.
  const prefix = re.re2().prefix
  const whole = prefix === '' ? (input: string) => re.testExact(input) : (input: string) => input.startsWith(prefix) && re.testExact(input)
  return {
    source,
    matchesWhole: whole,
    find: input => re.test(input),
    // The engine's own search is a DFA that tells only whether there is a match: it runs
    // first (fast, and most texts have none), and positions come from a Pike VM over the
    // same compiled program (below) only when there is one.
    findAll: (input, from = 0, maxLength = Infinity) => re.test(input) ? pikeFindAll(re.re2().prog as unknown as Prog, input, from, maxLength) : []
  }
}

/**
 * The parts of @bufbuild/re2's compiled program the VM reads (its Prog and Inst classes are
 * not exported; these are their fields, pinned by the package version in the lock file and
 * covered by test/linear-regex-find.test.ts).
 */
interface Inst { op: number, out: number, arg: number, matchRune (r: number): boolean }
interface Prog { start: number, numInst (): number, getInst (pc: number): Inst }
const ALT = 1
const ALT_MATCH = 2
const CAPTURE = 3
const EMPTY_WIDTH = 4
const MATCH = 6
const NOP = 7
const RUNE_ANY = 10
const RUNE_ANY_NOT_NL = 11
const EMPTY_BEGIN_LINE = 0x01
const EMPTY_END_LINE = 0x02
const EMPTY_BEGIN_TEXT = 0x04
const EMPTY_END_TEXT = 0x08
const EMPTY_WORD_BOUNDARY = 0x10
const EMPTY_NO_WORD_BOUNDARY = 0x20

function isWordRune (r: number): boolean {
  return (r >= 0x61 && r <= 0x7a) || (r >= 0x41 && r <= 0x5a) || (r >= 0x30 && r <= 0x39) || r === 0x5f
}

/** The zero-width assertions true between runes r1 and r2 (-1: the start or end of the text), as RE2 defines them. */
function emptyContext (r1: number, r2: number): number {
  let op = 0
  if (r1 < 0) op |= EMPTY_BEGIN_TEXT | EMPTY_BEGIN_LINE
  if (r1 === 0x0a) op |= EMPTY_BEGIN_LINE
  if (r2 < 0) op |= EMPTY_END_TEXT | EMPTY_END_LINE
  if (r2 === 0x0a) op |= EMPTY_END_LINE
  op |= isWordRune(r1) !== isWordRune(r2) ? EMPTY_WORD_BOUNDARY : EMPTY_NO_WORD_BOUNDARY
  return op
}

function runeAt (s: string, i: number): number {
  return i < s.length ? s.codePointAt(i)! : -1
}

function runeBefore (s: string, i: number): number {
  if (i <= 0) return -1
  const c = s.charCodeAt(i - 1)
  if (c >= 0xdc00 && c <= 0xdfff && i >= 2) {
    const h = s.charCodeAt(i - 2)
    if (h >= 0xd800 && h <= 0xdbff) return s.codePointAt(i - 2)!
  }
  return c
}

/**
 * Thompson/Pike simulation with each thread's start offset: at most one thread per
 * instruction per position, threads kept in priority order, so the first thread to reach
 * MATCH with no higher-priority thread alive is Perl's leftmost-first match. Time per
 * search is O(scanned length × program size); a thread older than `maxLength` dies, so a
 * search scans at most `maxLength` past the start of its match.
 */
function pikeFindAll (prog: Prog, input: string, from: number, maxLength: number): Array<[number, number]> {
  const n = input.length
  const size = prog.numInst()
  const out: Array<[number, number]> = []
  // Two thread lists (pc and start), and the position each pc was last added at (dedupe).
  let cPc = new Int32Array(size)
  let cStart = new Int32Array(size)
  let nPc = new Int32Array(size)
  let nStart = new Int32Array(size)
  // The generation each pc was last added in: a fresh generation per list built, so no
  // clearing between positions or searches.
  const seen = new Float64Array(size).fill(-1)
  let gen = 0
  const stack: number[] = []
  let pos = from
  while (pos <= n) {
    gen += 2
    let cLen = 0
    let nLen = 0
    let matched: [number, number] | null = null
    // Adds the closure of pc (followed through empty instructions) to the list being built.
    const add = (toPc: Int32Array, toStart: Int32Array, len: number, pc0: number, start: number, ctx: number, mark: number): number => {
      stack.push(pc0)
      while (stack.length > 0) {
        const pc = stack.pop()!
        if (seen[pc] === mark) continue
        seen[pc] = mark
        const inst = prog.getInst(pc)
        switch (inst.op) {
          case ALT:
          case ALT_MATCH:
            // `out` has priority over `arg`: pushed last, taken first.
            stack.push(inst.arg, inst.out)
            break
          case NOP:
          case CAPTURE:
            stack.push(inst.out)
            break
          case EMPTY_WIDTH:
            if ((inst.arg & ~ctx) === 0) stack.push(inst.out)
            break
          default:
            toPc[len] = pc
            toStart[len] = start
            len++
        }
      }
      return len
    }
    let i = pos
    for (;;) {
      const r = runeAt(input, i)
      const ctx = emptyContext(runeBefore(input, i), r)
      const current = gen
      if (matched === null) cLen = add(cPc, cStart, cLen, prog.start, i, ctx, current)
      const width = r > 0xffff ? 2 : 1
      if (cLen === 0) {
        // No thread here (the start's assertions failed): on to the next position.
        if (matched !== null || i >= n) break
        i += width
        gen = current + 2
        continue
      }
      const nextCtx = i < n ? emptyContext(r, runeAt(input, i + width)) : 0
      nLen = 0
      for (let t = 0; t < cLen; t++) {
        const pc = cPc[t]!
        const start = cStart[t]!
        const inst = prog.getInst(pc)
        if (inst.op === MATCH) {
          matched = [start, i]
          // Lower-priority threads cannot win now: cut them.
          break
        }
        if (i >= n || i + width - start > maxLength) continue
        const ok = inst.op === RUNE_ANY ? true : inst.op === RUNE_ANY_NOT_NL ? r !== 0x0a : inst.op > NOP && inst.matchRune(r)
        if (ok) nLen = add(nPc, nStart, nLen, inst.out, start, nextCtx, current + 1)
      }
      if (i >= n) break
      ;[cPc, nPc] = [nPc, cPc]
      ;[cStart, nStart] = [nStart, cStart]
      cLen = nLen
      i += width
      if (cLen === 0 && matched !== null) break
      // The list just built (generation current + 1) is the next position's current list:
      // the start thread added there must not duplicate its threads.
      gen = current + 1
    }
    if (matched === null) break
    out.push(matched)
    pos = matched[1] > matched[0] ? matched[1] : matched[1] + 1
  }
  return out
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
  if (detail.includes('`(?=') || detail.includes('`(?!')) return 'lookahead (?=\u2026), (?!\u2026) is not supported'
  // RE2 reads `(?<` as the start of a named group.
  if (/named capture: `\(\?<[=!]/.test(detail)) return 'lookbehind (?<=\u2026), (?<!\u2026) is not supported'
  if (/`\\[1-9]`/.test(detail)) return 'a backreference (\\1) is not supported'
  if (detail.includes('`\\k`') || source.includes('(?P=')) return 'a named backreference (\\k<name>, (?P=name)) is not supported'
  if (detail.includes('`(?>')) return 'an atomic group (?>\u2026) is not supported'
  if (/nested repetition operator: `[*+?]\+`/.test(detail)) return 'a possessive quantifier (a++, a*+) is not supported'
  if (detail.includes('`\\u`')) return 'the \\uHHHH escape is not supported (write \\x{HHHH})'
  return null
}
