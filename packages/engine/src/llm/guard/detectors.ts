/**
 * The built-in detectors of `promptGuard` regex guards: a pattern (RE2 syntax, run by the
 * linear-time engine like every configured regex), the longest text it can match (which
 * bounds what a streamed answer holds back) and, where a pattern alone matches too much, a
 * check of the candidate (a card number's Luhn digit, an SSN's reserved ranges).
 */

import type { PromptGuardBuiltin } from '../../ir/types.ts'

export interface Detector {
  /** RE2 syntax. */
  pattern: string
  /** The longest match in characters (the pattern's bounded repetitions add up to it). */
  maxLength: number
  /** What a mask writes: `<NAME>`. */
  name: string
  /** Whether the match at [start, end) of `text` really is one (the text around it is there for context). */
  check?: (text: string, start: number, end: number) => boolean
}

const DIGIT = /[0-9]/
const ALNUM = /[0-9A-Za-z]/

/** The Luhn (mod 10) check digit test of payment card numbers (ISO/IEC 7812-1). */
export function luhnValid (digits: string): boolean {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (d < 0 || d > 9) return false
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return digits.length > 0 && sum % 10 === 0
}

export const DETECTORS: Record<PromptGuardBuiltin, Detector> = {
  Email: {
    // Local part (at most 64, RFC 5321), then up to 8 labels of at most 63 and a TLD.
    pattern: '[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.){1,8}[A-Za-z]{2,24}\\b',
    maxLength: 64 + 1 + 8 * 64 + 24,
    name: 'EMAIL_ADDRESS'
  },
  PhoneNumber: {
    // North American numbers ((555) 123-4567, 555-123-4567, +1 555 123 4567) and
    // international ones written with a + (E.164 compact, or groups separated by space, dot or dash).
    pattern: '(?:\\+?1[ .-]?)?(?:\\([2-9][0-9]{2}\\)|[2-9][0-9]{2})[ .-]?[2-9][0-9]{2}[ .-]?[0-9]{4}|\\+[1-9][0-9]{7,14}|\\+[1-9][0-9]{0,2}(?:[ .-][0-9]{1,4}){2,5}',
    maxLength: 4 + 2 + 12 + 25,
    name: 'PHONE_NUMBER',
    check: (text, start, end) => {
      // Not a piece of a longer number or word (a card number, an order id).
      if (start > 0 && ALNUM.test(text[start - 1]!)) return false
      if (end < text.length && DIGIT.test(text[end]!)) return false
      const digits = text.slice(start, end).replace(/[^0-9]/g, '').length
      return digits >= 8 && digits <= 15
    }
  },
  CreditCard: {
    // 13 to 19 digits, optionally grouped by spaces or dashes; the Luhn digit must hold.
    pattern: '\\b(?:[0-9][ -]?){12,18}[0-9]\\b',
    maxLength: 19 * 2,
    name: 'CREDIT_CARD',
    check: (text, start, end) => {
      const digits = text.slice(start, end).replace(/[ -]/g, '')
      return digits.length >= 13 && digits.length <= 19 && luhnValid(digits)
    }
  },
  Ssn: {
    // US Social Security numbers as written: ddd-dd-dddd (or with spaces), never issued
    // ranges excluded (area 000, 666, 900-999; group 00; serial 0000).
    pattern: '\\b[0-9]{3}[- ][0-9]{2}[- ][0-9]{4}\\b',
    maxLength: 11,
    name: 'SSN',
    check: (text, start, end) => {
      const s = text.slice(start, end)
      if (s[3] !== s[6]) return false
      const area = Number(s.slice(0, 3))
      return area !== 0 && area !== 666 && area < 900 && s.slice(4, 6) !== '00' && s.slice(7) !== '0000'
    }
  },
  ApiKey: {
    // Common provider key shapes: Anthropic sk-ant-, OpenAI sk- (sk-proj-, sk-svcacct-,
    // sk-admin-), AWS access key ids, GitHub tokens, Slack tokens, Google API keys.
    pattern: '\\b(?:sk-ant-[A-Za-z0-9_-]{20,200}|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,200}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,251}|xox[abposr]-[A-Za-z0-9-]{10,200}|AIza[0-9A-Za-z_-]{35})',
    maxLength: 255,
    name: 'API_KEY'
  }
}
