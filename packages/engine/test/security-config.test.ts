/**
 * Config input hardening at the loader (issue 14, items 4 and 9): no gateways, header
 * names and values HTTP cannot carry, map keys the schema's patterns must really check, YAML
 * alias bombs, the size limit — each a positioned diagnostic, never an exception.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { formatByteSize, formatDiagnostic, isPorticoError, loadConfigText, parseByteSize, readConfigText } from '../src/index.ts'
import { validateAgainstSchema } from '../src/config/validate.ts'

const GATEWAY = 'gateways:\n  default: { port: 3000 }\n'

function load (yaml: string, options: { maxBytes?: number } = {}): string[] {
  const result = loadConfigText(yaml, { baseDir: '/cfg', ...options })
  return result.ok ? [] : result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
}

function route (policies: string): string {
  return `${GATEWAY}routes:\n  - name: r\n    policies:\n${policies}\n    backends: [{ host: "127.0.0.1:8080" }]\n`
}

test('a config without gateways is refused, wherever it comes from', () => {
  for (const text of ['', '\n  \n', '# only a comment\n', '{}', 'config: { drainTimeout: 1s }\n']) {
    const errors = load(text)
    assert.equal(errors.length, 1, `${JSON.stringify(text)}: ${errors.join('\n')}`)
    assert.match(errors[0]!, /^c\.yaml:1:1: no gateways: /)
  }
  assert.match(load('config: {}\ngateways: {}\n').join('\n'), /^c\.yaml:2:1: gateways: no gateways: /)
})

test('header names in map keys are checked (patternProperties alone let any key through)', () => {
  const cases: Array<[string, string]> = [
    ['      requestHeaderModifier:\n        set: { "x bad": v }', 'routes[0].policies.requestHeaderModifier.set["x bad"]'],
    ['      requestHeaderModifier:\n        add: { "x:y": v }', 'routes[0].policies.requestHeaderModifier.add["x:y"]'],
    ['      responseHeaderModifier:\n        set: { "é": v }', 'routes[0].policies.responseHeaderModifier.set["é"]'],
    ['      directResponse:\n        status: 200\n        headers: { "a b": v }', 'routes[0].policies.directResponse.headers["a b"]'],
    ['      transformation:\n        response:\n          add: { "a\\tb": "\'v\'" }', 'routes[0].policies.transformation.response.add["a\\tb"]']
  ]
  for (const [policies, path] of cases) {
    const errors = load(route(policies))
    assert.ok(errors.some(e => /^c\.yaml:\d+:\d+: /.test(e) && e.includes(`: ${path}: invalid name `) && e.includes('HTTP header name')), `${path}:\n${errors.join('\n')}`)
  }
})

test('other keyed maps check their keys too: gateway names, stdio env names', () => {
  assert.match(load('gateways:\n  "bad name": { port: 3000 }\n').join('\n'), /c\.yaml:2:3: gateways\["bad name"\]: invalid name "bad name": must be a gateway name/)
  const mcp = `${GATEWAY}routes:\n  - backends:\n      - mcp:\n          targets:\n            - name: t\n              stdio: { cmd: x, env: { "BAD-NAME": "1" } }\n`
  assert.match(load(mcp).join('\n'), /stdio\.env\.BAD-NAME: invalid name "BAD-NAME": must be an environment variable name/)
})

test('header values HTTP cannot carry are refused; ordinary ones load', () => {
  for (const value of ['a\\r\\nx-injected: 1', 'a\\nb', 'a\\rb', 'a\\0b', 'a\\x01b', 'a\\x7fb', ' lead', 'trail ', '\\tx', 'euro \\u20ac']) {
    const errors = load(route(`      requestHeaderModifier:\n        set: { x-v: "${value}" }`))
    assert.ok(errors.some(e => e.includes(': routes[0].policies.requestHeaderModifier.set.x-v: invalid value ') && e.includes('HTTP header value')), `${value}:\n${errors.join('\n')}`)
  }
  for (const value of ['', 'plain', 'a b\\tc', 'caf\\u00e9', 'list, of; q=0.5', '*']) {
    assert.deepEqual(load(route(`      requestHeaderModifier:\n        set: { x-v: "${value}" }\n      responseHeaderModifier:\n        add: { x-v: "${value}" }`)), [], value)
  }
})

test('header names given as plain fields are checked: token locations, header matches', () => {
  const jwt = '      jwtAuth:\n        issuer: https://i\n        audiences: [a]\n        jwks: { url: "https://i/j" }\n        location: { header: "x token" }'
  assert.match(load(route(jwt)).join('\n'), /routes\[0\]\.policies\.jwtAuth\.location\.header: invalid value "x token"/)
  const apiKey = '      apiKey:\n        keys: [{ key: "0123456789" }]\n        location: { header: "x:key" }'
  assert.match(load(route(apiKey)).join('\n'), /routes\[0\]\.policies\.apiKey\.location\.header: invalid value "x:key"/)
  const match = `${GATEWAY}routes:\n  - matches:\n      - headers: [{ name: "x tenant", value: { exact: a } }]\n    backends: [{ host: "127.0.0.1:8080" }]\n`
  assert.match(load(match).join('\n'), /routes\[0\]\.matches\[0\]\.headers\[0\]\.name: invalid value "x tenant"/)
})

test('strings sent in a Location header or request line: no whitespace or control characters', () => {
  assert.match(load(route('      requestRedirect:\n        path: { full: "/a\\r\\nb" }')).join('\n'), /requestRedirect\.path\.full: invalid value/)
  assert.match(load(route('      urlRewrite:\n        path: { prefix: "/a b" }')).join('\n'), /urlRewrite\.path\.prefix: invalid value/)
  assert.match(load(route('      basicAuth:\n        htpasswd: "u:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M="\n        realm: "a\\nb"')).join('\n'), /basicAuth\.realm: invalid value/)
  assert.deepEqual(load(route('      urlRewrite:\n        path: { full: "/caf%C3%A9/x" }')), [])
})

test('a YAML alias bomb is a positioned diagnostic, not a thrown ReferenceError', () => {
  const lines = ['x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
  let prev = 'a'
  for (const name of 'bcdefghi') {
    lines.push(`x-${name}: &${name} [${Array(9).fill(`*${prev}`).join(',')}]`)
    prev = name
  }
  const started = performance.now()
  const errors = load(lines.join('\n') + '\n' + GATEWAY)
  assert.ok(performance.now() - started < 5_000, 'the bomb was expanded')
  assert.deepEqual(errors, ['c.yaml:2:10: YAML: aliases expand too much (aliases of nodes that hold aliases, as in a "billion laughs" document; the limit is 100 expanded nodes per anchor)'])
  // Ordinary reuse of a block still works.
  const reuse = `x-h: &h { x-team: a }\n${GATEWAY}routes:\n  - policies: { requestHeaderModifier: { set: *h } }\n    backends: [{ host: "127.0.0.1:1" }]\n  - policies: { requestHeaderModifier: { set: *h } }\n    name: b\n    backends: [{ host: "127.0.0.1:1" }]\n`
  assert.deepEqual(load(reuse).filter(e => !e.includes('x-h')), [])
})

test('the size limit: a text over it is refused with the limit and the knob named', () => {
  const text = `${GATEWAY}# ${'x'.repeat(2048)}\n`
  assert.deepEqual(load(text, { maxBytes: 1024 }), [`c.yaml: the config is ${formatByteSize(Buffer.byteLength(text))}, over the 1 KiB limit (raise it with --max-config-size or MAX_CONFIG_SIZE)`])
  assert.deepEqual(load(text, { maxBytes: 4096 }), [])
  // Multi-byte characters count as the bytes they take.
  assert.equal(load(`${GATEWAY}# ${'é'.repeat(600)}\n`, { maxBytes: 1024 }).length, 1)
})

test('readConfigText refuses a file over the limit without reading it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-sec-config-'))
  try {
    const file = join(dir, 'big.yaml')
    writeFileSync(file, 'x'.repeat(10_000))
    assert.equal(readConfigText(file, 10_000).length, 10_000)
    assert.throws(() => readConfigText(file, 9_999), (err: unknown) => isPorticoError(err, 'PORTICO_CONFIG_TOO_LARGE') && /9\.8 KiB, over the 9\.8 KiB limit/.test(err.message))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('byte sizes: parse and format', () => {
  assert.equal(parseByteSize('8MiB'), 8 * 1024 * 1024)
  assert.equal(parseByteSize('16Mi'), 16 * 1024 * 1024)
  assert.equal(parseByteSize('512 KiB'), 512 * 1024)
  assert.equal(parseByteSize('1048576'), 1048576)
  assert.equal(parseByteSize('1.5GiB'), 1.5 * 1024 ** 3)
  for (const bad of ['', 'lots', '-1', '0', '5 parsecs']) assert.equal(parseByteSize(bad), undefined, bad)
  assert.equal(formatByteSize(8 * 1024 * 1024), '8 MiB')
  assert.equal(formatByteSize(700), '700 bytes')
  assert.equal(formatByteSize(1536), '1.5 KiB')
})

test('schema errors are collapsed in linear time (was a scan of every union error per other error)', () => {
  // Every route fails an anyOf (gateways: 5) and has an unknown field: 2n diagnostics, from
  // 3n union branch errors and n others. 16,000 such routes took 8 s before, 0.7 s after.
  // Counted, not timed (a timing ratio flaked on a loaded CI machine): the collapse matches
  // schema paths with startsWith, once per (error, union path) pair — n × (distinct union
  // paths) now, n × 3n before — so 4x the routes must cost about 4x the calls, not 16x.
  const value = (n: number) => ({
    gateways: { default: { port: 3000 } },
    routes: Array.from({ length: n }, (_, i) => ({ name: `r${i}`, gateways: 5, bogus: 1 }))
  })
  const calls = (n: number): number => {
    const v = value(n)
    const startsWith = String.prototype.startsWith
    let count = 0
    String.prototype.startsWith = function (this: string, search: string, position?: number) { count++; return startsWith.call(this, search, position) }
    try {
      assert.equal(validateAgainstSchema(v).length, 2 * n)
    } finally {
      String.prototype.startsWith = startsWith
    }
    return count
  }
  calls(100)
  const small = calls(1_000)
  const large = calls(4_000)
  assert.ok(large / small < 5, `4x the errors made ${(large / small).toFixed(1)}x the startsWith calls (${small} → ${large})`)
})
