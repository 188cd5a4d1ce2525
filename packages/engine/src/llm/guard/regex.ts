/**
 * Regex guards: the rules of one `regex` guard compiled on the linear-time engine
 * (util/linear-regex.ts), matched over a whole text or over a streamed one.
 *
 * A stream is masked as it goes without ever sending a piece of a match: the scanner holds
 * back the last `holdBack` characters (the longest match any rule can make, plus one
 * character of lookahead for `\b` and the detectors' checks) and sends everything before
 * them, masked. A match that starts before the held tail is complete in what is held, since
 * no match is longer than the bound; one that starts inside it waits for more text or the
 * end of the block. So at most `holdBack` characters are ever held, whatever the provider
 * sends. The bound is each rule's `maxLength` (builtins: their own, e.g. 601 for Email; a
 * pattern: 256 unless set): a longer match is not seen (the engine drops candidates past
 * the cap), so a pattern that could match more than its `maxLength` is masked up to that.
 */

import type { PromptGuardIR } from '../../ir/types.ts'
import { compileLinearRegex, type LinearRegex } from '../../util/linear-regex.ts'
import { DETECTORS } from './detectors.ts'

export type RegexGuardIR = Extract<PromptGuardIR, { kind: 'regex' }>

interface CompiledRule {
  re: LinearRegex
  maxLength: number
  /** `<NAME>`, what a mask writes. */
  mask: string
  /** The rule as traces name it: the builtin, or the pattern's name (or `pattern`). */
  label: string
  check?: (text: string, start: number, end: number) => boolean
}

/** One match of a rule: [start, end) in the text, and the rule's label and mask. */
export interface GuardHit {
  start: number
  end: number
  label: string
  mask: string
}

export interface CompiledRegexGuard {
  readonly action: 'reject' | 'mask'
  /** The most a streamed block holds back (characters). */
  readonly holdBack: number
  /** Every match from `from` on (earlier text is context), non-overlapping, in order. */
  scan (text: string, from?: number): GuardHit[]
}

const COMPILED = new WeakMap<RegexGuardIR, CompiledRegexGuard>()

/** The guard compiled once per IR object (the config checked its patterns at load). */
export function compileRegexGuard (guard: RegexGuardIR): CompiledRegexGuard {
  let compiled = COMPILED.get(guard)
  if (compiled !== undefined) return compiled
  const rules: CompiledRule[] = guard.rules.map(rule => {
    if ('builtin' in rule) {
      const d = DETECTORS[rule.builtin]
      return { re: compileLinearRegex(d.pattern), maxLength: d.maxLength, mask: `<${d.name}>`, label: rule.builtin, ...(d.check !== undefined ? { check: d.check } : {}) }
    }
    const name = rule.name?.toUpperCase().replace(/-/g, '_')
    return { re: compileLinearRegex(rule.pattern), maxLength: rule.maxLength, mask: name !== undefined ? `<${name}>` : '<MASKED>', label: rule.name ?? 'pattern' }
  })
  const holdBack = Math.max(...rules.map(r => r.maxLength)) + 1
  compiled = {
    action: guard.action,
    holdBack,
    scan: (text, from = 0) => {
      const hits: GuardHit[] = []
      for (const rule of rules) {
        for (const [start, end] of rule.re.findAll(text, from, rule.maxLength)) {
          if (end === start) continue
          if (rule.check !== undefined && !rule.check(text, start, end)) continue
          hits.push({ start, end, label: rule.label, mask: rule.mask })
        }
      }
      if (hits.length < 2) return hits
      // Rules may overlap (an API key that also looks like a phone number): the earliest
      // start wins, then the longest; a hit inside one kept is dropped.
      hits.sort((a, b) => a.start - b.start || b.end - a.end)
      const kept: GuardHit[] = []
      for (const h of hits) {
        const last = kept.at(-1)
        if (last !== undefined && h.start < last.end) {
          if (h.end > last.end) last.end = h.end
          continue
        }
        kept.push({ ...h })
      }
      return kept
    }
  }
  COMPILED.set(guard, compiled)
  return compiled
}

/** `text[from, to)` with each hit inside it replaced by its mask. */
export function applyMasks (text: string, hits: GuardHit[], from = 0, to = text.length): string {
  let out = ''
  let at = from
  for (const h of hits) {
    if (h.start < from || h.start >= to) continue
    out += text.slice(at, h.start) + h.mask
    at = h.end
  }
  return out + text.slice(at, Math.max(at, to))
}

/** What scanning gave: the text to send now, and the matches in it. */
export interface ScanStep {
  text: string
  hits: GuardHit[]
}

/** Characters of already-sent text kept before the held tail: what `\b` and the detectors' checks look back at. */
const CONTEXT = 8

/**
 * One streamed text block (a text or reasoning block of an answer) through a guard: `push`
 * each delta and send what it returns; `end` at the block's end gives the rest. With
 * action `reject`, the caller stops at the first hit (nothing of it was sent).
 */
export class StreamScanner {
  private readonly guard: CompiledRegexGuard
  private held = ''
  private context = ''

  constructor (guard: CompiledRegexGuard) {
    this.guard = guard
  }

  /** Characters held now (never more than `guard.holdBack` after a push returns). */
  get heldLength (): number {
    return this.held.length
  }

  push (delta: string): ScanStep {
    this.held += delta
    if (this.held.length <= this.guard.holdBack) return { text: '', hits: [] }
    const buf = this.context + this.held
    const from = this.context.length
    let cut = buf.length - this.guard.holdBack
    // Never split a surrogate pair between what is sent and what is held.
    const c = buf.charCodeAt(cut - 1)
    if (c >= 0xd800 && c <= 0xdbff) cut--
    // Matches starting before the cut are complete (none is longer than the hold-back); a
    // match that starts before the cut and ends after it is sent whole (masked).
    const hits = this.guard.scan(buf, from).filter(h => h.start < cut)
    const end = Math.max(cut, hits.at(-1)?.end ?? 0)
    return this.emit(buf, from, end, hits)
  }

  end (): ScanStep {
    const buf = this.context + this.held
    const from = this.context.length
    const hits = this.guard.scan(buf, from)
    return this.emit(buf, from, buf.length, hits)
  }

  private emit (buf: string, from: number, end: number, hits: GuardHit[]): ScanStep {
    const text = applyMasks(buf, hits, from, end)
    this.context = buf.slice(Math.max(0, end - CONTEXT), end)
    this.held = buf.slice(end)
    // Hits relative to the text returned are not needed by callers; they report labels.
    return { text, hits }
  }
}
