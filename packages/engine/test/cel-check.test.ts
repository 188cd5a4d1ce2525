/**
 * CEL expressions that can never evaluate are refused when they compile (issue 49): the
 * conservative checker in src/cel/check.ts. Each refused expression is also shown to fail at
 * run time (so the checker refuses nothing that could work), and the expressions the docs and
 * tests use keep compiling.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { compileCel, CEL_VARIABLES, RESPONSE_CEL_VARIABLES } from '../src/cel/expression.ts'
import { isPorticoError } from '../src/util/errors.ts'
import { loadConfigText } from '../src/config/load.ts'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

/** What cel/vars.ts builds for a request (shapes matter, values do not). */
const VARS = {
  request: { method: 'GET', path: '/a', pathAndQuery: '/a?x=1', host: 'example.com', scheme: 'https', headers: { 'x-team': 'blue' } },
  source: { address: '10.0.0.1', port: 5000 },
  jwt: { sub: 'alice', groups: ['admin'], n: 3 },
  apiKey: { name: 'k', metadata: { team: 'blue' } },
  basicAuth: { username: 'alice' },
  mcp: { method: 'tools/call', tool: { name: 'echo', target: 't' } },
  response: { code: 200n, headers: { 'content-type': 'text/plain' } }
}

function refusal (expression: string, options: { expectBool?: boolean } = {}): string | null {
  try {
    compileCel(expression, RESPONSE_CEL_VARIABLES, options)
    return null
  } catch (err) {
    assert.ok(isPorticoError(err, 'PORTICO_BAD_CEL'), String(err))
    return err.message
  }
}

test('expressions that can never type-check are refused at compile time, and do fail at run time', () => {
  const never: Array<[string, RegExp]> = [
    ['request.path + 1', /no matching overload for '_\+_' applied to \(string, int\)/],
    ['request.headers["x-team"] + 1', /\(string, int\)/],
    ['request.pth == "/a"', /request has no field "pth"/],
    ['request.path > 1', /'_>_' applied to \(string, int\)/],
    ['request.path && true', /'_&&_'/],
    ['!request.method', /'!_'/],
    ['"a" * 2', /'_\*_'/],
    ['1 + 1.0', /\(int, double\)/],
    ['size(1)', /'size'/],
    ['request.path.x', /cannot select field "x" from a string/],
    ['request.path[0]', /'_\[_\]'/],
    ['request.method.startsWith(1)', /'startsWith'/],
    ['response.code.startsWith("2")', /'startsWith'/],
    ['request.path.all(c, c == "a")', /cannot iterate over a string/],
    ['request.headers.exists(h, h + 1 > 0)', /\(string, int\)/],
    ['[1, 2].all(x, x + "a" == "b")', /\(int, string\)/],
    ['has(request.nope)', /no field "nope"/]
  ]
  const problems: string[] = []
  for (const [expression, message] of never) {
    const refused = refusal(expression)
    if (refused === null || !message.test(refused)) problems.push(`${expression}: ${refused ?? 'accepted'}`)
  }
  assert.deepEqual(problems, [])
  // The checker is right about them: with the checker out of the way, each fails at run time.
  for (const [expression] of never) {
    const value = evaluateUnchecked(expression)
    assert.ok(value instanceof Error || (typeof value === 'boolean' && expression.startsWith('has(')), `${expression} evaluated to ${String(value)}`)
  }
})

test('comparisons that can never hold, and decisions that are not bools, are refused', () => {
  assert.match(refusal('request.path == 1') ?? '', /== compares a string with an int: never true/)
  assert.match(refusal('response.code != "200"') ?? '', /always true/)
  assert.match(refusal('request.path', { expectBool: true }) ?? '', /it yields a string, not a bool/)
  assert.match(refusal('size(request.path)', { expectBool: true }) ?? '', /yields an int/)
  assert.equal(refusal('request.path'), null, 'a value expression (a header to set) may be a string')
})

test('what can work at run time is accepted: dyn claims, numbers across kinds, macros, conversions', () => {
  const fine = [
    'request.path.startsWith("/admin")',
    'request.headers["x-team"] == "blue"',
    "'x-team' in request.headers && request.headers['x-team'] == 'blue'",
    'jwt.sub == "alice"',
    'jwt.n + 1 > 2',
    '"admin" in jwt.groups',
    'jwt.groups.exists(g, g == "admin")',
    'has(jwt.sub)',
    'apiKey != null && apiKey.metadata.team == "blue"',
    'basicAuth.username == "alice"',
    'mcp != null && mcp.tool.name == "echo"',
    'has(mcp.tool) && mcp.tool.name.matches("^ec")',
    'source.port > 1024',
    'source.address.startsWith("10.")',
    'response.code >= 500',
    'response.code == 200.0',
    'int(source.port) + 1 > 0',
    'string(response.code) + "x"',
    'size(request.path) > 1',
    'request.path.size() > 1',
    'request.headers.all(k, k.startsWith("x-") || true)',
    '[1, 2, 3].map(x, x * 2)[0] == 2',
    '[1, 2].filter(x, x > 1).size() == 1',
    '{"a": 1}["a"] == 1',
    'request.method in ["GET", "HEAD"]',
    'request.method == "GET" ? "read" : "write"',
    'timestamp("2024-01-01T00:00:00Z") + duration("1h") > timestamp("2024-01-01T00:00:00Z")',
    'dyn(request.path) + 1 == 2'
  ]
  const refused = fine.map(e => [e, refusal(e)] as const).filter(([, r]) => r !== null)
  assert.deepEqual(refused, [])
})

test('at load: an authorization rule that can never type-check is a positioned config error, not a 403 at run time', () => {
  const text = `gateways: {default: {port: 3000}}
routes:
  - name: app
    policies:
      authorization:
        rules:
          - 'request.path.startsWith("/a")'
          - 'request.path + 1'
          - deny: 'request.headers["x"] > 1'
    backends: [{host: "127.0.0.1:1"}]
`
  const result = loadConfigText(text, { baseDir: '/' })
  assert.equal(result.ok, false)
  const got = !result.ok ? result.diagnostics.map(d => `${d.line}:${d.col}: ${d.path.join('.')}: ${d.message}`) : []
  assert.equal(got.length, 2, got.join('\n'))
  assert.match(got[0]!, /^8:13: routes\.0\.policies\.authorization\.rules\.1: invalid CEL expression "request\.path \+ 1": found no matching overload/)
  assert.match(got[1]!, /^9:13: routes\.0\.policies\.authorization\.rules\.2: invalid CEL expression/)
})

/** Evaluates without the checker (@bufbuild/cel alone), to show a refused expression fails at run time too. */
function evaluateUnchecked (expression: string): unknown {
  const cel = require('@bufbuild/cel') as typeof import('@bufbuild/cel')
  const program = cel.plan(cel.celEnv(), cel.parse(expression))
  const value = program(VARS as never)
  return cel.isCelError(value) ? new Error(String((value as { message?: string }).message)) : value
}
