/**
 * `config.accessLog`: fields added with CEL (request, response, jwt, mcp, llm variables),
 * built-in fields removed, a filter, in JSON and in text lines; the same through the
 * ACCESS_LOG variable cluster mode uses; a bad expression stops the start with its name.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ConfigFile } from '@portico/engine'
import { gateway, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { startLlmServer, type LlmServer } from '../lib/llm.ts'

const ACCESS_LOG = {
  filter: 'request.path != "/health"',
  fields: {
    add: {
      user: 'request.headers["x-user"]',
      status_class: 'string(response.code / 100) + "xx"',
      tokens: 'llm.inputTokens + llm.outputTokens',
      missing: 'jwt.sub'
    },
    remove: ['src', 'listener']
  }
}

describe('access log fields', () => {
  let echo: Backend
  let llm: LlmServer
  let json: PorticoProcess
  let text: PorticoProcess

  const config = (port: number): ConfigFile => ({
    config: { accessLog: ACCESS_LOG },
    gateways: { default: gateway(port) },
    routes: [
      { name: 'chat', matches: [{ path: { pathPrefix: '/openai' } }], backends: [{ ai: { name: 'llm', provider: { openAI: {} }, hostOverride: llm.host } }] },
      { name: 'echo', backends: [{ host: echo.host }] }
    ]
  })

  before(async () => {
    echo = await startEchoBackend('echo')
    llm = await startLlmServer({ reply: 'one two three' })
    json = await startPortico({ env: { LOG_LEVEL: 'info' }, config })
    text = await startPortico({ env: { LOG_LEVEL: 'info', LOG_FORMAT: 'text' }, config })
  })

  after(async () => {
    await Promise.all([json?.stop(), text?.stop()])
    await Promise.all([echo?.close(), llm?.close()])
  })

  test('JSON lines: CEL fields added, built-in ones removed, a failing expression left out, the filter applied', async () => {
    await (await fetch(`${json.url}/a`, { headers: { 'x-user': 'ada' } })).text()
    await (await fetch(`${json.url}/health`)).text()
    const res = await fetch(`${json.url}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a b c d' }] }) })
    await res.text()
    await json.waitForOutput(/"path":"\/openai\/v1\/chat\/completions"/)
    const lines = json.logs().filter(l => l.msg === 'request')
    const a = lines.find(l => l.path === '/a')!
    assert.equal(a.user, 'ada')
    assert.equal(a.status_class, '2xx')
    assert.ok(!('src' in a) && !('listener' in a), 'removed fields are gone')
    assert.ok(!('missing' in a), 'a field whose expression fails is left out')
    assert.ok(!('tokens' in a), 'llm is null off ai backends')
    assert.equal(a.route, 'echo', 'the other built-in fields stay')
    assert.ok(!lines.some(l => l.path === '/health'), 'the filter drops /health')
    const chat = lines.find(l => l.path === '/openai/v1/chat/completions')!
    assert.equal(chat.tokens, 7)
  })

  test('text lines carry the same fields', async () => {
    await (await fetch(`${text.url}/b`, { headers: { 'x-user': 'grace' } })).text()
    const out = await text.waitForOutput(/user: "grace"/)
    assert.match(out, /status_class: "2xx"/)
  })
})

describe('access log configuration errors', () => {
  test('a bad expression stops the start, naming it', async () => {
    const dir = makeTempDir()
    const file = join(dir, 'portico.yaml')
    writeFileSync(file, JSON.stringify({ config: { accessLog: { fields: { add: { user: 'jwt.sub +' } } } }, gateways: { default: { port: 1, address: '127.0.0.1' } } }))
    const r = await runPortico(['-f', file], { env: { ADMIN_ADDR: 'off', STATS_ADDR: 'off', READINESS_ADDR: 'off' } })
    assert.equal(r.code, 1)
    // Refused where the file is read, with its place: at start and by --validate alike.
    assert.match(r.stderr, /portico\.yaml:1:\d+: config\.accessLog\.fields\.add\.user: invalid CEL expression "jwt\.sub \+"/)
    const check = await runPortico(['--validate', '-f', file])
    assert.equal(check.code, 1, '--validate refuses it too')
    assert.match(check.stderr, /portico\.yaml:1:\d+: config\.accessLog\.fields\.add\.user: invalid CEL expression "jwt\.sub \+"/)
  })

  test('a bad tracing.fields expression is refused the same way', async () => {
    const dir = makeTempDir()
    const file = join(dir, 'portico.yaml')
    writeFileSync(file, 'config:\n  tracing:\n    otlpEndpoint: http://127.0.0.1:4317\n    fields:\n      add:\n        app.user: "jwt.sub +"\ngateways:\n  default: { port: 1, address: 127.0.0.1 }\n')
    const check = await runPortico(['--validate', '-f', file])
    assert.equal(check.code, 1)
    assert.match(check.stderr, /portico\.yaml:6:9: config\.tracing\.fields\.add\["app\.user"\]: invalid CEL expression "jwt\.sub \+"/)
    // TRACING (cluster mode's variable) is checked at start, naming the variable.
    const plain = join(dir, 'plain.yaml')
    writeFileSync(plain, 'gateways:\n  default: { port: 1, address: 127.0.0.1 }\n')
    const r = await runPortico(['-f', plain], { env: { ADMIN_ADDR: 'off', STATS_ADDR: 'off', READINESS_ADDR: 'off', TRACING: '{"otlpEndpoint":"http://127.0.0.1:4317","fields":{"add":{"a":"1 +"}}}' } })
    assert.equal(r.code, 1)
    assert.match(r.stderr, /config\.tracing\.fields \/ TRACING: invalid CEL expression "1 \+"/)
  })

  test('ACCESS_LOG (cluster mode\'s variable) is checked against the schema', async () => {
    const dir = makeTempDir()
    const file = join(dir, 'portico.yaml')
    writeFileSync(file, JSON.stringify({ gateways: { default: { port: 1, address: '127.0.0.1' } } }))
    const r = await runPortico(['-f', file], { env: { ADMIN_ADDR: 'off', STATS_ADDR: 'off', READINESS_ADDR: 'off', ACCESS_LOG: '{"fields":{"drop":["src"]}}' } })
    assert.equal(r.code, 1)
    assert.match(r.stderr, /ACCESS_LOG.*unknown field "drop"/)
  })
})
