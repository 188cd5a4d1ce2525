/**
 * Regular expressions from the config run in linear time: patterns that make a backtracking
 * engine take exponential or polynomial time finish in time proportional to the input, as
 * measured against a plain pattern on the same input (a ratio, not a number of
 * milliseconds); patterns only a backtracking engine can run are config errors naming the
 * field and the construct.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'
import { RouteTable, type MatchInput } from '../src/routing/route-table.ts'
import { compileCel, evalBool } from '../src/cel/expression.ts'
import { compileOrigins } from '../src/request/cors-origins.ts'
import { compileLinearRegex, linearRegexProblem } from '../src/util/linear-regex.ts'
import type { RouteIR, RouteMatchIR } from '../src/ir/types.ts'

/**
 * Mean time of one call, from as many calls as fit in ~20 ms (at least one: a call that
 * blocks for seconds is measured once, so the test fails instead of hanging).
 */
function perCall (fn: () => unknown): number {
  let calls = 0
  const start = performance.now()
  let elapsed = 0
  do {
    fn()
    calls++
    elapsed = performance.now() - start
  } while (elapsed < 20)
  return elapsed / calls
}

/**
 * The lower of a few measurements' ratios, so one GC pause or scheduling hiccup does not
 * count; a first ratio far over the bound is returned at once (a backtracking engine would
 * take seconds per repetition).
 */
function ratio (hostile: () => unknown, plain: () => unknown): number {
  let best = Infinity
  for (let i = 0; i < 3; i++) {
    best = Math.min(best, perCall(hostile) / perCall(plain))
    if (best > 10 * MAX_RATIO) break
  }
  return best
}

/** Generous: linear-time matching of a nested pattern costs a small multiple of a plain one. */
const MAX_RATIO = 50

function table (match: Partial<RouteMatchIR>): RouteTable<{ ir: RouteIR }> {
  const ir: RouteIR = {
    key: 'r',
    name: 'r',
    hostnames: [],
    matches: [{ path: { kind: 'prefix', value: '/' }, headers: [], query: [], ...match }],
    policies: {},
    backends: [],
    order: 0
  }
  return new RouteTable([{ ir }])
}

function selects (t: RouteTable<{ ir: RouteIR }>, input: Partial<MatchInput>): boolean {
  return t.select('h', { method: 'GET', path: '/', query: '', headers: {}, ...input }, false).route !== null
}

// Sizes: a backtracking engine (V8's) takes about a second on each (exponential or
// high-degree polynomial in the length; more would make the test hang rather than fail on
// such an engine); a linear one microseconds.
const CATASTROPHIC: Array<{ name: string, pattern: string, plain: string, hostile: string, matching: string }> = [
  { name: 'nested plus', pattern: '/(a+)+$', plain: '/[a-z]+', hostile: '/' + 'a'.repeat(25) + '!', matching: '/' + 'a'.repeat(25) },
  { name: 'overlapping alternation', pattern: '/(a|aa)+$', plain: '/[a-z]+', hostile: '/' + 'a'.repeat(37) + '!', matching: '/' + 'a'.repeat(37) },
  { name: 'repeated dot-star', pattern: '/(.*a){20}', plain: '/.*a', hostile: '/' + 'a'.repeat(25) + '!', matching: '/' + 'a'.repeat(25) }
]

for (const c of CATASTROPHIC) {
  test(`path regex ${c.pattern} (${c.name}) runs in linear time on a hostile path`, () => {
    const hostile = table({ path: { kind: 'regex', value: c.pattern } })
    const plain = table({ path: { kind: 'regex', value: c.plain } })
    const r = ratio(() => selects(hostile, { path: c.hostile }), () => selects(plain, { path: c.hostile }))
    assert.ok(r < MAX_RATIO, `${c.pattern}: ${r.toFixed(1)}× a plain regex's time`)
    assert.equal(selects(hostile, { path: c.hostile }), false)
    assert.equal(selects(hostile, { path: c.matching }), true, 'the pattern still matches what it should')
  })
}

test('header and query regexes run in linear time on hostile values', () => {
  const header = table({ headers: [{ name: 'x-h', kind: 'regex', value: '(a|aa)+$' }] })
  const headerPlain = table({ headers: [{ name: 'x-h', kind: 'regex', value: '[a-z]+' }] })
  const h = ratio(() => selects(header, { headers: { 'x-h': 'a'.repeat(37) + '!' } }), () => selects(headerPlain, { headers: { 'x-h': 'a'.repeat(37) + '!' } }))
  assert.ok(h < MAX_RATIO, `header: ${h.toFixed(1)}×`)
  const query = table({ query: [{ name: 'q', kind: 'regex', value: '(.*a){20}' }] })
  const queryPlain = table({ query: [{ name: 'q', kind: 'regex', value: '.*a' }] })
  const value = 'a'.repeat(25) + '!'
  const q = ratio(() => selects(query, { query: `q=${value}` }), () => selects(queryPlain, { query: `q=${value}` }))
  assert.ok(q < MAX_RATIO, `query: ${q.toFixed(1)}×`)
})

test('time grows linearly with the input: 10× the input costs about 10×, not 2^n', () => {
  const re = compileLinearRegex('/(a+)+$')
  const short = '/' + 'a'.repeat(500) + '!'
  const long = '/' + 'a'.repeat(5000) + '!'
  const r = ratio(() => re.matchesWhole(long), () => re.matchesWhole(short))
  assert.ok(r < 10 * 5, `10× the input took ${r.toFixed(1)}× the time`)
})

test('CORS origin wildcards run in linear time on a long Origin', () => {
  const origins = compileOrigins(['https://*.*.*.example.com'])
  const plain = compileOrigins(['https://*.example.com'])
  const origin = 'https://' + 'a.'.repeat(2000) + 'x:443'
  assert.equal(origins.test(origin), false)
  assert.equal(origins.test('https://a.b.c.example.com:443'), true)
  const r = ratio(() => origins.test(origin), () => plain.test(origin))
  assert.ok(r < MAX_RATIO, `${r.toFixed(1)}×`)
})

test('CEL matches() runs in linear time, finds the pattern anywhere (RE2 semantics); per-request patterns too', () => {
  const vars = (path: string) => ({ request: { path, headers: {} } })
  const nested = compileCel("request.path.matches('^/(a+)+$')")
  const plain = compileCel("request.path.matches('^/[a-z]+$')")
  const hostile = '/' + 'a'.repeat(5000) + '!'
  assert.deepEqual(evalBool(nested, vars(hostile)), { value: false, error: null })
  assert.deepEqual(evalBool(nested, vars('/aaa')), { value: true, error: null })
  assert.equal(evalBool(compileCel("request.path.matches('b+')"), vars('/abba')).value, true, 'unanchored, as CEL specifies')
  const r = ratio(() => evalBool(nested, vars(hostile)), () => evalBool(plain, vars(hostile)))
  assert.ok(r < MAX_RATIO, `${r.toFixed(1)}×`)
  // A pattern computed per request: compiled on the same engine; a bad one is an evaluation error, not a crash.
  const dynamic = compileCel("request.path.matches(request.headers['x-re'])")
  assert.equal(evalBool(dynamic, { request: { path: '/x', headers: { 'x-re': '^/x$' } } }).value, true)
  const bad = evalBool(dynamic, { request: { path: '/x', headers: { 'x-re': '(?=x)' } } })
  assert.equal(bad.value, false)
  assert.match(bad.error ?? '', /lookahead/)
})

test('the engine keeps the regex semantics routes had: whole match, alternation, Unicode, classes', () => {
  const whole = (p: string, s: string) => compileLinearRegex(p).matchesWhole(s)
  assert.equal(whole('/v[0-9]+', '/v12'), true)
  assert.equal(whole('/v[0-9]+', '/v12/x'), false, 'the whole path, not a prefix')
  assert.equal(whole('/v[0-9]+', 'x/v12'), false)
  assert.equal(whole('1|true', 'true'), true, 'alternation at the top is inside the anchors')
  assert.equal(whole('1|true', '1true'), false)
  assert.equal(whole('(a|ab)(c|bcd)', 'abcd'), true)
  assert.equal(whole('/caf.', '/café'), true, 'a dot is a code point')
  assert.equal(whole('/.', '/😀'), true, 'including astral ones')
  assert.equal(whole('(?i)/admin', '/ADMIN'), true)
  assert.equal(whole('/\\d+/[[:alpha:]]+/\\pL+', '/1/ab/é'), true)
  assert.equal(whole('/a.b', '/a\nb'), false, 'a dot does not match a newline')
  assert.equal(whole('/plain', '/plain'), true)
  assert.equal(whole('/plain', '/plainx'), false)
  assert.equal(compileLinearRegex('plain').find('a plain text'), true)
})

test('constructs only a backtracking engine can run are refused with the reason', () => {
  const cases: Array<[string, RegExp]> = [
    ['/(?=admin).*', /^lookahead .* not supported/],
    ['/(?!admin).*', /^lookahead /],
    ['(?<=a)b', /^lookbehind /],
    ['(?<!a)b', /^lookbehind /],
    ['(a)\\1', /^a backreference/],
    ['(?<n>a)\\k<n>', /^a named backreference/],
    ['(?>a+)b', /^an atomic group/],
    ['a++', /^a possessive quantifier/],
    ['\\u00e9', /\\x\{HHHH\}/],
    ['([', /^invalid regular expression \(RE2 syntax\): missing closing \]/],
    ['a{1001}', /invalid repeat count/]
  ]
  for (const [pattern, why] of cases) {
    const problem = linearRegexProblem(pattern)
    assert.ok(problem !== null, `${pattern} should be refused`)
    assert.match(problem, why, pattern)
    assert.match(problem, /RE2/, 'the message says which syntax applies')
  }
  assert.equal(linearRegexProblem('/(a+)+$'), null)
  assert.equal(linearRegexProblem('(?P<name>x)(?<other>y)'), null, 'named groups are fine')
})

test('config errors name the field: path, header and query regexes, CEL matches() in policies', () => {
  const result = loadConfigText([
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - name: a',
    '    matches:',
    '      - path: {regex: "/(?=admin).*"}',
    '        headers: [{name: x-a, value: {regex: "(a)\\\\1"}}]',
    '        query: [{name: q, value: {regex: "a++"}}]',
    '    policies:',
    '      authorization:',
    "        rules: [\"request.path.matches('(?<!x)y')\"]",
    '      transformation:',
    "        request: {set: {x-t: \"request.path.matches('([') ? 'a' : 'b'\"}}",
    '      directResponse: {status: 200}'
  ].join('\n'), { baseDir: '/cfg' })
  assert.equal(result.ok, false)
  if (result.ok) return
  const lines = result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
  const expect = (prefix: string, why: RegExp) => assert.ok(lines.some(l => l.startsWith(prefix) && why.test(l)), `${prefix} … ${why}\n${lines.join('\n')}`)
  expect('c.yaml:5:16: routes[0].matches[0].path.regex: ', /lookahead .* not supported/)
  expect('c.yaml:6:39: routes[0].matches[0].headers[0].value.regex: ', /backreference/)
  expect('c.yaml:7:35: routes[0].matches[0].query[0].value.regex: ', /possessive/)
  expect('c.yaml:10:17: routes[0].policies.authorization.rules[0]: ', /matches\("\(\?<!x\)y"\): lookbehind/)
  expect('c.yaml:12:25: routes[0].policies.transformation.request.set.x-t: ', /missing closing \]/)
  assert.equal(lines.length, 5, lines.join('\n'))
})
