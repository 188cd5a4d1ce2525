/**
 * Regular expressions from the config run in linear time (RE2 semantics): a route regex that a
 * backtracking engine takes minutes on (`/(a+)+$` against 40 `a`s and a `!`) answers at once,
 * and while it is being matched every other route keeps answering. Header and query regexes
 * and CEL's `matches()` in an authorization rule are tried the same way. A pattern only a
 * backtracking engine can run (lookaround, backreferences) is a config error naming the field.
 *
 * Every request carries a timeout: on a backtracking engine the event loop is blocked for
 * minutes, so the test fails on the timeout instead of hanging.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ConfigFile } from '@portico/engine'
import { gateway, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { newAgent, send } from '@portico/testkit/client'

type Route = NonNullable<ConfigFile['routes']>[number]

/** Generous: a linear engine answers in milliseconds; a backtracking one takes minutes. */
const TIMEOUT_MS = 5_000

const HOSTILE = 'a'.repeat(40) + '!'

function answers (name: string, matches: Route['matches'], policies: Route['policies'] = {}): Route {
  return { name, matches, policies: { ...policies, directResponse: { status: 200, body: name } } }
}

describe('security: linear-time regular expressions', () => {
  let portico: PorticoProcess
  const agent = newAgent()

  before(async () => {
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port) },
        routes: [
          answers('nested-plus', [{ path: { regex: '/(a+)+$' } }]),
          answers('header-alternation', [{ path: { pathPrefix: '/h' }, headers: [{ name: 'x-token', value: { regex: '(a|aa)+$' } }] }]),
          answers('query-repeat', [{ path: { pathPrefix: '/q' }, query: [{ name: 'v', value: { regex: '(.*a){20}' } }] }]),
          answers('cel', [{ path: { pathPrefix: '/cel' } }], {
            authorization: { rules: [{ allow: "request.path.matches('^/cel/(a+)+$')" }] }
          }),
          answers('cors', [{ path: { pathPrefix: '/cors' } }], { cors: { allowOrigins: ['https://*.*.*.example.com'] } }),
          answers('hello', [{ path: { exact: '/hello' } }])
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
  })

  test('a catastrophic path regex answers promptly, and another route answers meanwhile', { timeout: 30_000 }, async () => {
    const hostile = send(agent, `${portico.url}/${HOSTILE}`, { timeoutMs: TIMEOUT_MS })
    // Sent while the hostile request is being matched (on a backtracking engine: while the
    // event loop is stuck in it).
    await new Promise(resolve => setTimeout(resolve, 50))
    const other = send(agent, `${portico.url}/hello`, { timeoutMs: TIMEOUT_MS })
    const [h, o] = await Promise.all([hostile, other])
    assert.equal(h.status, 404, h.text)
    assert.equal(o.status, 200)
    assert.equal(o.text, 'hello')
    // The regex still matches what it should.
    const ok = await send(agent, `${portico.url}/${'a'.repeat(40)}`, { timeoutMs: TIMEOUT_MS })
    assert.equal(ok.text, 'nested-plus')
  })

  test('catastrophic header and query regexes answer promptly', { timeout: 30_000 }, async () => {
    const h = await send(agent, `${portico.url}/h`, { headers: { 'x-token': 'a'.repeat(60) + '!' }, timeoutMs: TIMEOUT_MS })
    assert.equal(h.status, 404)
    const hOk = await send(agent, `${portico.url}/h`, { headers: { 'x-token': 'a'.repeat(60) }, timeoutMs: TIMEOUT_MS })
    assert.equal(hOk.text, 'header-alternation')
    const q = await send(agent, `${portico.url}/q?v=${'a'.repeat(19)}${'b'.repeat(200)}`, { timeoutMs: TIMEOUT_MS })
    assert.equal(q.status, 404)
    const qOk = await send(agent, `${portico.url}/q?v=${'a'.repeat(20)}`, { timeoutMs: TIMEOUT_MS })
    assert.equal(qOk.text, 'query-repeat')
  })

  test('a CORS origin with several wildcards answers promptly on a long Origin', { timeout: 30_000 }, async () => {
    // [^/:]+ per wildcard: a backtracking engine is cubic in the Origin's length here (a minute for 8 KB).
    const hostile = send(agent, `${portico.url}/cors`, { headers: { origin: 'https://' + 'a.'.repeat(4000) + 'x' }, timeoutMs: TIMEOUT_MS })
    await new Promise(resolve => setTimeout(resolve, 50))
    const other = send(agent, `${portico.url}/hello`, { timeoutMs: TIMEOUT_MS })
    const [h, o] = await Promise.all([hostile, other])
    assert.equal(h.status, 200)
    assert.equal(h.headers['access-control-allow-origin'], undefined)
    assert.equal(o.text, 'hello')
    const ok = await send(agent, `${portico.url}/cors`, { headers: { origin: 'https://a.b.c.example.com' }, timeoutMs: TIMEOUT_MS })
    assert.equal(ok.headers['access-control-allow-origin'], 'https://a.b.c.example.com')
  })

  test('CEL matches() in an authorization rule answers promptly', { timeout: 30_000 }, async () => {
    const denied = await send(agent, `${portico.url}/cel/${'a'.repeat(5000)}!`, { timeoutMs: TIMEOUT_MS })
    assert.equal(denied.status, 403)
    const allowed = await send(agent, `${portico.url}/cel/${'a'.repeat(5000)}`, { timeoutMs: TIMEOUT_MS })
    assert.equal(allowed.status, 200)
    assert.equal(allowed.text, 'cel')
  })
})

describe('security: regexes a linear engine cannot run are config errors', () => {
  let dir: string
  before(() => { dir = makeTempDir() })
  after(() => rmSync(dir, { recursive: true, force: true }))

  test('--validate names each field: lookaround, backreference, CEL matches() with lookbehind', { timeout: 30_000 }, async () => {
    const file = join(dir, 'bad.yaml')
    writeFileSync(file, [
      'gateways: {default: {port: 18080}}',
      'routes:',
      '  - name: a',
      '    matches:',
      '      - path: {regex: "/(?=admin).*"}',
      '        headers: [{name: x-a, value: {regex: "(a)\\\\1"}}]',
      '    policies:',
      '      authorization:',
      '        rules:',
      "          - allow: \"request.path.matches('(?<!x)y')\"",
      '      directResponse: {status: 200}',
      ''
    ].join('\n'))
    const result = await runPortico(['--validate', '-f', file])
    assert.equal(result.code, 1, result.stdout + result.stderr)
    const lines = result.stderr.trim().split('\n')
    assert.ok(lines.some(l => l.startsWith(`${file}:5:16: routes[0].matches[0].path.regex: `) && /lookahead/.test(l)), result.stderr)
    assert.ok(lines.some(l => l.startsWith(`${file}:6:39: routes[0].matches[0].headers[0].value.regex: `) && /backreference/.test(l)), result.stderr)
    assert.ok(lines.some(l => l.startsWith(`${file}:10:13: routes[0].policies.authorization.rules[0]`) && /lookbehind/.test(l)), result.stderr)
  })
})
