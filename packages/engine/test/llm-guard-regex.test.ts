/**
 * promptGuard regex guards (llm/guard/): the builtin detectors (the Luhn check included),
 * masking of whole texts and of streamed text split at every point, the hold-back bound,
 * and the linear-time engine's positions (util/linear-regex.ts findAll) on inputs that make
 * a backtracking engine explode.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { luhnValid } from '../src/llm/guard/detectors.ts'
import { applyMasks, compileRegexGuard, StreamScanner, type RegexGuardIR } from '../src/llm/guard/regex.ts'
import { compileLinearRegex } from '../src/util/linear-regex.ts'

const guard = (rules: RegexGuardIR['rules'], action: 'mask' | 'reject' = 'mask'): RegexGuardIR => ({ kind: 'regex', action, rules, rejection: { status: 403 } })
const all = guard([{ builtin: 'Email' }, { builtin: 'PhoneNumber' }, { builtin: 'CreditCard' }, { builtin: 'Ssn' }, { builtin: 'ApiKey' }])

function maskWhole (g: RegexGuardIR, text: string): string {
  const c = compileRegexGuard(g)
  return applyMasks(text, c.scan(text))
}

test('Luhn: valid test card numbers pass, one changed digit fails', () => {
  for (const n of ['4111111111111111', '5500005555555559', '378282246310005', '6011111111111117', '4012888888881881', '79927398713']) assert.equal(luhnValid(n), true, n)
  for (const n of ['4111111111111112', '5500005555555558', '79927398710', '', '12a4']) assert.equal(luhnValid(n), false, n)
})

test('builtins find what they name and leave look-alikes', () => {
  const cases: Array<[string, string]> = [
    ['write to john.doe+x@mail.example.co.uk today', 'write to <EMAIL_ADDRESS> today'],
    ['a@b is not an address', 'a@b is not an address'],
    ['call (555) 234-5678 or +1 555 234 5678 or +44 20 7946 0958', 'call <PHONE_NUMBER> or <PHONE_NUMBER> or <PHONE_NUMBER>'],
    ['order 12345678901234567890 is long', 'order 12345678901234567890 is long'],
    ['card 4111 1111 1111 1111 and 4111-1111-1111-1112', 'card <CREDIT_CARD> and 4111-1111-1111-1112'],
    ['amex 378282246310005.', 'amex <CREDIT_CARD>.'],
    ['ssn 123-45-6789, not 000-12-3456 nor 666-12-3456 nor 123-45 6789', 'ssn <SSN>, not 000-12-3456 nor 666-12-3456 nor 123-45 6789'],
    ['keys sk-proj-abcdefghijklmnopqrstuvwxyz123456 sk-ant-api03-abcdefghijklmnopqrstuvwxyz AKIAIOSFODNN7EXAMPLE', 'keys <API_KEY> <API_KEY> <API_KEY>'],
    ['ghp_abcdefghijklmnopqrstuvwxyz0123456789 xoxb-1234567890-abcdef AIzaSyA1234567890abcdefghijklmnopqrstuv', '<API_KEY> <API_KEY> <API_KEY>'],
    ['task-manager is no key, nor sk-short', 'task-manager is no key, nor sk-short']
  ]
  for (const [input, want] of cases) assert.equal(maskWhole(all, input), want, input)
})

test('a pattern rule masks with its name; without one <MASKED>', () => {
  assert.equal(maskWhole(guard([{ pattern: '(?i)project\\s+titan', name: 'codename', maxLength: 64 }]), 'about Project  Titan.'), 'about <CODENAME>.')
  assert.equal(maskWhole(guard([{ pattern: 'secret[0-9]+', maxLength: 64 }]), 'x secret42 y'), 'x <MASKED> y')
})

function streamed (g: RegexGuardIR, pieces: string[]): { text: string, maxHeld: number } {
  const s = new StreamScanner(compileRegexGuard(g))
  let text = ''
  let maxHeld = 0
  for (const p of pieces) {
    text += s.push(p).text
    maxHeld = Math.max(maxHeld, s.heldLength)
  }
  return { text: text + s.end().text, maxHeld }
}

test('a streamed text is masked the same whatever the split (every split point, and every pair of them)', () => {
  const sample = 'Mail me at jane.roe@example.com, or call 555-234-5678; card 4111 1111 1111 1111, ssn 123-45-6789, key sk-ant-abcdefghijklmnopqrstuvwxyz0123. Bye é😀 done.'
  const want = maskWhole(all, sample)
  assert.match(want, /<EMAIL_ADDRESS>.*<PHONE_NUMBER>.*<CREDIT_CARD>.*<SSN>.*<API_KEY>/)
  assert.equal(streamed(all, [sample]).text, want)
  for (let i = 0; i <= sample.length; i++) {
    assert.equal(streamed(all, [sample.slice(0, i), sample.slice(i)]).text, want, `split at ${i}`)
  }
  for (let i = 0; i <= sample.length; i += 3) {
    for (let j = i; j <= sample.length; j += 5) assert.equal(streamed(all, [sample.slice(0, i), sample.slice(i, j), sample.slice(j)]).text, want, `split at ${i}, ${j}`)
  }
  // One character at a time.
  assert.equal(streamed(all, [...sample]).text, want)
})

test('split points also fall where text is already being sent (texts longer than the hold-back)', () => {
  // The sample is shorter than the detectors' hold-back (602): with filler around it, and
  // with a guard of short detectors (hold-back 39), the cut between sent and held text
  // passes through every part of every match.
  const filler = 'lorem ipsum dolor sit amet '.repeat(30)
  const long = `${filler}Mail jane.roe@example.com now. ${filler}`
  const emailOnly = guard([{ builtin: 'Email' }])
  const wantLong = maskWhole(emailOnly, long)
  assert.ok(wantLong.includes('Mail <EMAIL_ADDRESS> now.'))
  for (let i = 0; i <= long.length; i++) {
    assert.equal(streamed(emailOnly, [long.slice(0, i), long.slice(i)]).text, wantLong, `split at ${i}`)
  }
  const short = guard([{ builtin: 'CreditCard' }, { builtin: 'Ssn' }])
  assert.equal(compileRegexGuard(short).holdBack, 39)
  const text = 'first 4111 1111 1111 1111 then 123-45-6789 and 5500-0055-5555-5559 and 4111111111111112, then 078-05-1120 end with some more words after it'
  const want = maskWhole(short, text)
  assert.equal(want, 'first <CREDIT_CARD> then <SSN> and <CREDIT_CARD> and 4111111111111112, then <SSN> end with some more words after it')
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) {
      const r = streamed(short, [text.slice(0, i), text.slice(i, j), text.slice(j)])
      assert.equal(r.text, want, `split at ${i}, ${j}`)
      assert.ok(r.maxHeld <= 39 + j - i + i)
    }
  }
  assert.equal(streamed(short, [...text]).text, want)
  let held = 0
  const s = new StreamScanner(compileRegexGuard(short))
  for (const ch of text) {
    s.push(ch)
    held = Math.max(held, s.heldLength)
  }
  assert.ok(held <= 39, `held ${held}`)
})

test('a stream holds back at most the hold-back bound, and sends the rest as it comes', () => {
  const g = guard([{ builtin: 'Email' }])
  const c = compileRegexGuard(g)
  assert.equal(c.holdBack, 602)
  const s = new StreamScanner(c)
  let sent = ''
  for (let i = 0; i < 5000; i++) {
    sent += s.push('word ').text
    assert.ok(s.heldLength <= c.holdBack)
  }
  assert.equal(sent.length, 5000 * 5 - s.heldLength)
  assert.equal(sent + s.end().text, 'word '.repeat(5000))
  // A text without a break longer than the bound: still bounded.
  const t = new StreamScanner(c)
  for (let i = 0; i < 100; i++) {
    t.push('x'.repeat(1000))
    assert.ok(t.heldLength <= c.holdBack)
  }
})

test('findAll gives Perl/RE2 leftmost-first positions', () => {
  const f = (p: string, s: string) => compileLinearRegex(p).findAll(s).map(([a, b]) => s.slice(a, b))
  assert.deepEqual(f('\\b[0-9]{3}\\b', 'a123 x1234 é456 789'), ['456', '789'])
  assert.deepEqual(f('a|ab', 'xxab ab'), ['a', 'a'])
  assert.deepEqual(f('ab|a', 'xxab ab'), ['ab', 'ab'])
  assert.deepEqual(f('a+', 'baaab aa'), ['aaa', 'aa'])
  assert.deepEqual(f('a.c', 'a😀c abc'), ['a😀c', 'abc'])
  assert.deepEqual(f('(?i)secret', 'A SeCrEt and secret'), ['SeCrEt', 'secret'])
  assert.deepEqual(compileLinearRegex('\\b\\d+\\b').findAll('ab12 34', 2), [[5, 7]])
  assert.deepEqual(compileLinearRegex('a+').findAll('aaaaaa', 0, 4), [[0, 4], [4, 6]])
})

test('linear time: patterns that make a backtracking engine explode take time proportional to the input', () => {
  const time = (p: string, s: string): number => {
    const re = compileLinearRegex(p)
    const t0 = performance.now()
    re.findAll(s, 0, 256)
    return performance.now() - t0
  }
  // (a+)+$ against a…a! is exponential for V8's engine; (a|a)*b too; x*y over x…x quadratic for a naive find-all.
  for (const [p, unit] of [['(a+)+$', 'a'], ['(a|a)*b', 'a'], ['(x+x+)+y', 'x'], ['[0-9a-z]+@[0-9a-z]+\\.com', 'a']] as const) {
    const small = time(p, unit.repeat(20_000) + '!')
    const large = time(p, unit.repeat(80_000) + '!')
    assert.ok(large < 2000, `${p}: ${large}ms on 80k`)
    // Four times the input: not more than about four times the time (generous for a shared CPU).
    assert.ok(large < small * 12 + 50, `${p}: ${small}ms on 20k, ${large}ms on 80k`)
  }
  // A text with many matches (each search restarts where the last match ended).
  const many = 'a@b.co '.repeat(20_000)
  const t0 = performance.now()
  assert.equal(compileRegexGuard(guard([{ builtin: 'Email' }])).scan(many).length, 20_000)
  assert.ok(performance.now() - t0 < 5000)
})
