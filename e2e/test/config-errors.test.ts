/**
 * The binary's handling of bad config files: `portico -f BAD` exits 1 with one
 * `<file>:<line>:<col>: <path>: <message>` line per problem on stderr (unknown keys get a
 * did-you-mean), `--validate` exits 0 for a good file and 1 for a bad one, and reports every
 * problem of a file in one run in the user's own terms (issue 49).
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { freePort, makeTempDir, runPortico } from '@portico/testkit/portico'

/** `file:line:col: path: message` */
const DIAGNOSTIC = /^(.+):(\d+):(\d+): (\S+): (.+)$/

const TYPO_CONFIG = `gateways:
  default:
    port: 18080
    address: 127.0.0.1
routes:
  - name: app
    backends:
      - hots: 127.0.0.1:8080
    polices:
      timeout: { requestTimeout: 1s }
`

const SEVERAL_PROBLEMS = `gateways:
  default:
    port: "18080"
    protocol: HTTP2
routes:
  - name: a
    matches:
      - path: { pathPrefix: no-slash }
    backends:
      - host: 127.0.0.1:8080
        weight: -1
`

const VALID = `gateways:
  default: { port: 18080, protocol: HTTP, address: 127.0.0.1 }
routes:
  - name: hello
    matches: [{ path: { exact: /hello } }]
    policies:
      directResponse: { status: 200, body: "hi" }
  - name: app
    backends:
      - host: 127.0.0.1:8080
`

describe('config errors', () => {
  let dir: string
  const file = (name: string, text: string): string => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }

  before(() => {
    dir = makeTempDir('portico-e2e-config-')
  })

  after(() => {
    rmSync(dir, { recursive: true, force: true })
  })

  /** The stderr lines, minus the closing "<file>: N errors" summary. */
  function diagnostics (stderr: string, path: string): string[] {
    const lines = stderr.split('\n').filter(l => l !== '')
    const summary = lines.at(-1)
    assert.match(summary ?? '', new RegExp(`^${escape(path)}: \\d+ errors?$`), `stderr:\n${stderr}`)
    return lines.slice(0, -1)
  }

  test('an unknown key stops start-up with exit 1 and a positioned did-you-mean', { timeout: 15_000 }, async () => {
    const path = file('typo.yaml', TYPO_CONFIG)
    const run = await runPortico(['-f', path])
    assert.equal(run.code, 1, run.stderr)
    const lines = diagnostics(run.stderr, path)
    assert.deepEqual(lines, [
      `${path}:8:9: routes[0].backends[0].hots: unknown field "hots"; did you mean "host"?`,
      `${path}:9:5: routes[0].polices: unknown field "polices"; did you mean "policies"?`
    ])
    assert.doesNotMatch(run.stdout, /portico started/)
  })

  test('every schema problem in the file is reported, each as file:line:col: path: message', { timeout: 15_000 }, async () => {
    const path = file('several.yaml', SEVERAL_PROBLEMS)
    const run = await runPortico(['-f', path])
    assert.equal(run.code, 1, run.stderr)
    const lines = diagnostics(run.stderr, path)
    assert.equal(lines.length, 4, `want the 4 problems reported, got:\n${run.stderr}`)
    const textLines = SEVERAL_PROBLEMS.split('\n')
    for (const line of lines) {
      const m = DIAGNOSTIC.exec(line)
      assert.ok(m !== null, `not in file:line:col: path: message form: ${line}`)
      assert.equal(m[1], path)
      const lineNo = Number(m[2])
      assert.ok(lineNo >= 1 && lineNo <= textLines.length, `line ${lineNo} is outside the file`)
    }
    const byPath = new Map(lines.map(l => { const m = DIAGNOSTIC.exec(l)!; return [m[4], `${m[2]}:${m[3]}`] }))
    assert.equal(byPath.get('gateways.default.port'), '3:5')
    assert.equal(byPath.get('gateways.default.protocol'), '4:5')
    assert.equal(byPath.get('routes[0].matches[0].path.pathPrefix'), '8:17')
    assert.equal(byPath.get('routes[0].backends[0].weight'), '11:9')
  })

  test('semantic errors (duplicate names, a host without a port) are positioned too', { timeout: 15_000 }, async () => {
    const path = file('semantic.yaml', `gateways:
  default: { port: 18080 }
routes:
  - name: a
    backends: [{ host: "127.0.0.1:8080" }]
  - name: a
    backends:
      - host: "127.0.0.1"
`)
    const run = await runPortico(['-f', path])
    assert.equal(run.code, 1, run.stderr)
    const lines = diagnostics(run.stderr, path)
    assert.ok(lines.some(l => l.startsWith(`${path}:6:5: routes[1].name: duplicate route name "a"`)), run.stderr)
    assert.ok(lines.some(l => l.startsWith(`${path}:8:9: routes[1].backends[0].host: `) && l.includes('needs a port')), run.stderr)
  })

  test('a YAML syntax error is reported with its position', { timeout: 15_000 }, async () => {
    const path = file('syntax.yaml', 'gateways:\n  default:\n    port: 18080\n   bad-indent: [\n')
    const run = await runPortico(['-f', path])
    assert.equal(run.code, 1, run.stderr)
    const first = run.stderr.split('\n')[0]!
    assert.match(first, new RegExp(`^${escape(path)}:\\d+:\\d+: YAML syntax: `))
  })

  test('a missing config file exits 1 and says so', { timeout: 15_000 }, async () => {
    const path = join(dir, 'does-not-exist.yaml')
    const run = await runPortico(['-f', path])
    assert.equal(run.code, 1)
    assert.match(run.stderr, new RegExp(`^${escape(path)}: cannot read config file: ENOENT`, 'm'))
  })

  test('a listener port already in use exits 1', { timeout: 15_000 }, async () => {
    const port = await freePort()
    const blocker: Server = createServer()
    await new Promise<void>(resolve => blocker.listen({ host: '127.0.0.1', port }, () => resolve()))
    try {
      const path = file('busy.yaml', `gateways:\n  default: { port: ${port}, address: 127.0.0.1 }\n`)
      const run = await runPortico(['-f', path])
      assert.equal(run.code, 1)
      assert.match(run.stdout + run.stderr, /EADDRINUSE/)
    } finally {
      await new Promise(resolve => blocker.close(resolve))
    }
  })

  test('--validate exits 0 for a valid file without starting anything', { timeout: 15_000 }, async () => {
    const path = file('valid.yaml', VALID)
    const run = await runPortico(['--validate', '-f', path])
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stdout, new RegExp(`^${escape(path)}: valid \\(1 listener port, 2 route attachments, 1 backend\\)$`, 'm'))
    assert.equal(run.stderr, '')
  })

  test('--validate exits 1 for an invalid file, with the same positioned errors', { timeout: 15_000 }, async () => {
    const path = file('typo-validate.yaml', TYPO_CONFIG)
    const run = await runPortico(['--validate', '-f', path])
    assert.equal(run.code, 1)
    assert.equal(diagnostics(run.stderr, path)[0], `${path}:8:9: routes[0].backends[0].hots: unknown field "hots"; did you mean "host"?`)
  })

  test('--validate reports every problem in one run, each in the user\'s terms at file:line:col (issue 49)', { timeout: 15_000 }, async () => {
    // A copy of a shadow file where an htpasswd file belongs: its lines are secrets.
    writeFileSync(join(dir, 'shadow-copy'), 'root:$6$s4lt$H4shOfRootPassword/x:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n')
    const text = `gateways:
  default:
    port: 18443
    protocol: HTTPS
    tls: { cert: missing-cert.pem, key: missing-key.pem, root: missing-ca.pem }
    timeout: { http: { requestHeadersTimeout: 99999999999h } }
routes:
  - name: app
    policies:
      timeout: { requestTimeout: 99999999999999h }
      authorization:
        rules: ['request.path + 1']
      basicAuth:
        htpasswd: { file: shadow-copy }
    backends: [{ host: "127.0.0.1:8080" }]
`
    const path = file('every-error.yaml', text)
    const run = await runPortico(['--validate', '-f', path])
    assert.equal(run.code, 1, run.stderr)
    const lines = diagnostics(run.stderr, path)
    const expected: Array<[string, string, RegExp]> = [
      ['5:12', 'gateways.default.tls.cert', /cannot read \S+missing-cert\.pem: ENOENT/],
      ['5:36', 'gateways.default.tls.key', /cannot read \S+missing-key\.pem: ENOENT/],
      ['5:58', 'gateways.default.tls.root', /cannot read \S+missing-ca\.pem: ENOENT/],
      // The gateway cannot be installed without its certificate, but the rest of it is checked.
      ['6:24', 'gateways.default.timeout.http.requestHeadersTimeout', /must be between 0ms and 596h/],
      ['10:18', 'routes[0].policies.timeout.requestTimeout', /must be between 0ms and 596h/],
      ['12:17', 'routes[0].policies.authorization.rules[0]', /invalid CEL expression "request\.path \+ 1": found no matching overload for '_\+_' applied to \(string, int\)/],
      ['14:21', 'routes[0].policies.basicAuth.htpasswd.file', /\S+shadow-copy is not an htpasswd file: lines 1, 2 are not user:hash/]
    ]
    assert.equal(lines.length, expected.length, `want ${expected.length} problems, got:\n${run.stderr}`)
    for (const [i, [at, field, message]] of expected.entries()) {
      const m = DIAGNOSTIC.exec(lines[i]!)
      assert.ok(m !== null && `${m[2]}:${m[3]}` === at && m[4] === field && message.test(m[5]!), `line ${i + 1}: want ${at} ${field} ${String(message)}, got: ${lines[i]}`)
    }
    // No internal IR path, and nothing of the shadow file's lines.
    assert.doesNotMatch(run.stderr, /binds\[|in the translated config/)
    assert.doesNotMatch(run.stderr, /root:\$|"root"|daemon|\$6\$|H4sh|19000/)
  })

  test('bad arguments exit 2 with the usage', { timeout: 15_000 }, async () => {
    const noFile = await runPortico([])
    assert.equal(noFile.code, 2)
    assert.match(noFile.stderr, /usage: portico -f FILE/)
    const unknown = await runPortico(['--frobnicate'])
    assert.equal(unknown.code, 2)
    assert.match(unknown.stderr, /usage: portico -f FILE/)
  })
})

function escape (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
