/**
 * Issue 14 item 5: the admin server against a hostile web page. A page on another site can
 * make the victim's browser send "simple" requests (a POST with `Content-Type: text/plain`,
 * no preflight) to 127.0.0.1:15000, and a DNS-rebinding page can even read the answers,
 * because the browser then thinks the admin is `evil.example`. So: state-changing requests
 * whose Origin is another site's (or whose Sec-Fetch-Site says cross-site/same-site) are
 * refused, and every request whose Host is a DNS name other than localhost (or one the
 * operator allowed) is refused. curl and porticoctl (no Origin, Host = the address they
 * dialled) keep working.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { rawExchange } from '@portico/testkit/client'
import { ctl } from '@portico/testkit/porticoctl'

let backend: Backend
let portico: PorticoProcess
let adminPort: number
let admin: string

before(async () => {
  backend = await startBackend((_req, res) => res.end('ok'))
  adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, LOG_LEVEL: 'info' },
    config: port => ({
      config: { adminAllowedHosts: ['portico-admin.internal'] },
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'app', backends: [{ host: backend.host }] }]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

async function call (path: string, options: { method?: string, headers?: Record<string, string>, body?: string } = {}) {
  const res = await request(`${admin}${path}`, { method: (options.method ?? 'GET') as 'GET', headers: options.headers, body: options.body })
  return { status: res.statusCode, text: await res.body.text() }
}

async function gatewayServes (): Promise<void> {
  const res = await request(`${portico.url}/x`)
  assert.equal(res.statusCode, 200)
  assert.equal(await res.body.text(), 'ok')
}

async function logLevel (): Promise<string> {
  return (await call('/logging')).text
}

test('a cross-site POST /quitquitquit (a form or fetch from another site) is refused and the gateway keeps serving', async () => {
  const attempts: Array<Record<string, string>> = [
    { origin: 'http://evil.example', 'content-type': 'text/plain' },
    { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
    { origin: 'null', 'content-type': 'text/plain' },
    // Another port of the same host is another origin.
    { origin: 'http://127.0.0.1:1', 'content-type': 'text/plain' },
    // No Origin, but the browser says where it came from.
    { 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
    { 'sec-fetch-site': 'same-site', 'content-type': 'text/plain' }
  ]
  for (const headers of attempts) {
    const r = await call('/quitquitquit', { method: 'POST', headers, body: 'x' })
    assert.equal(r.status, 403, JSON.stringify(headers))
    assert.match(r.text, /cross-(site|origin)/, JSON.stringify(headers))
  }
  assert.equal(portico.exit, null, 'the process is still running')
  await gatewayServes()
})

test('a cross-site POST /logging, /debug/trace or /api write changes nothing', async () => {
  const before = await logLevel()
  const r = await call('/logging?level=debug', { method: 'POST', headers: { origin: 'http://evil.example', 'content-type': 'text/plain' } })
  assert.equal(r.status, 403)
  assert.equal(await logLevel(), before)
  const site = await call('/logging?level=debug', { method: 'POST', headers: { 'sec-fetch-site': 'cross-site' } })
  assert.equal(site.status, 403)
  assert.equal(await logLevel(), before)
  const trace = await call('/debug/trace', { method: 'POST', headers: { origin: 'http://evil.example' } })
  assert.equal(trace.status, 403)
  const api = await call('/api/logging', { method: 'POST', headers: { origin: 'http://evil.example', 'content-type': 'application/json' }, body: '{"level":"debug"}' })
  assert.equal(api.status, 403)
  assert.equal(await logLevel(), before)
})

test('same-origin and non-browser writes still work (curl, porticoctl, the UI)', async () => {
  // A browser on the admin's own page.
  const same = await call('/logging?level=info', { method: 'POST', headers: { origin: admin, 'sec-fetch-site': 'same-origin' } })
  assert.equal(same.status, 200, same.text)
  const viaLocalhost = await request(`http://localhost:${adminPort}/logging?level=info`, { method: 'POST', headers: { origin: `http://localhost:${adminPort}` } })
  assert.equal(viaLocalhost.statusCode, 200)
  await viaLocalhost.body.text()
  // Typed in the address bar / a bookmark.
  assert.equal((await call('/logging?level=info', { method: 'POST', headers: { 'sec-fetch-site': 'none' } })).status, 200)
  // curl -X POST: no Origin, no Sec-Fetch-*.
  assert.equal((await call('/logging?level=info', { method: 'POST' })).status, 200)
  // porticoctl: POST /logging and POST /debug/trace.
  const local = ['--local', '--admin-addr', `127.0.0.1:${adminPort}`]
  const set = await ctl(['proxy', 'log', ...local, '--level', 'info'])
  assert.equal(set.code, 0, set.stderr)
  const traced = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'http://example.test/x'])
  assert.equal(traced.code, 0, traced.stderr)
  assert.match(traced.stdout, /requestFinished/)
  const config = await ctl(['proxy', 'config', 'all', ...local, '-o', 'json'])
  assert.equal(config.code, 0, config.stderr)
})

test('a Host that is not the admin\'s own (DNS rebinding) is refused on every path, reads included', async () => {
  for (const path of ['/config_dump', '/debug/trace', '/memory', '/debug/tasks', '/logging', '/ui/', '/api/overview', '/', '/no-such-path']) {
    for (const host of ['evil.example', `evil.example:${adminPort}`, 'localhost.evil.example', '127.0.0.1.nip.io']) {
      const r = await call(path, { headers: { host } })
      assert.equal(r.status, 403, `${path} Host: ${host}`)
      assert.match(r.text, /DNS rebinding/, `${path} Host: ${host}`)
      assert.ok(!r.text.includes('"routes"'), 'no config in the answer')
    }
  }
  // Nor can a rebinding page post.
  const quit = await call('/quitquitquit', { method: 'POST', headers: { host: 'evil.example' } })
  assert.equal(quit.status, 403)
  assert.equal(portico.exit, null)
})

test('localhost names, IP literals and configured names are accepted as Host, with any port', async () => {
  for (const host of [`127.0.0.1:${adminPort}`, '127.0.0.1', `localhost:${adminPort}`, 'localhost:8080', 'LOCALHOST', `[::1]:${adminPort}`, 'portico-admin.internal:15000', '10.0.0.7:15000']) {
    const r = await call('/memory', { headers: { host } })
    assert.equal(r.status, 200, `Host: ${host}: ${r.text}`)
  }
  const dump = await call('/config_dump', { headers: { host: `localhost:${adminPort}` } })
  assert.equal(dump.status, 200)
  assert.deepEqual(JSON.parse(dump.text).config.adminAllowedHosts, ['portico-admin.internal'])
})

test('two Host lines or an absolute-form target are a 400 that closes the connection, as on the listeners', async () => {
  const requests: Record<string, string> = {
    // The guard read the first Host (Node keeps only that one in headers.host).
    'two Host lines, the allowed one first': 'GET /config_dump HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n',
    'two Host lines, both allowed': 'GET /config_dump HTTP/1.1\r\nHost: localhost\r\nHost: 127.0.0.1\r\n\r\n',
    // A target whose authority the Host check never sees.
    'an absolute-form target': 'GET http://evil.example/config_dump HTTP/1.1\r\nHost: localhost\r\n\r\n',
    'an absolute-form POST /quitquitquit': 'POST http://localhost/quitquitquit HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n',
    'asterisk-form': 'OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n'
  }
  for (const [name, head] of Object.entries(requests)) {
    // A second request pipelined behind it is not served: the connection closes.
    const answer = await rawExchange(adminPort, head + 'GET /memory HTTP/1.1\r\nHost: localhost\r\n\r\n')
    assert.match(answer, /^HTTP\/1\.1 400 /, `${name}: ${JSON.stringify(answer)}`)
    assert.match(answer, /\r\nconnection: close\r\n/i, `${name}: ${JSON.stringify(answer)}`)
    assert.equal(answer.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `${name}: ${JSON.stringify(answer)}`)
    assert.ok(!answer.includes('"routes"') && !answer.includes('heap'), `${name}: an admin answer leaked`)
  }
  assert.equal(portico.exit, null)
})

test('a refusal is logged at debug, not at info', async () => {
  // The default level (info) prints nothing for refused requests.
  assert.ok(!portico.stdout.includes('admin request refused'), 'nothing at info')
  const set = await call('/logging?level=info,admin=debug', { method: 'POST' })
  assert.equal(set.status, 200, set.text)
  const from = portico.stdout.length
  await call('/memory', { headers: { host: 'evil.example' } })
  await portico.waitForOutput('admin request refused', { fromStdout: from })
  await call('/logging?level=info', { method: 'POST' })
})

test('a same-origin POST /quitquitquit still shuts the gateway down', async () => {
  const r = await call('/quitquitquit', { method: 'POST', headers: { origin: admin } })
  assert.equal(r.status, 200)
  const exit = await portico.waitForExit(15_000)
  assert.equal(exit.code, 0)
})
