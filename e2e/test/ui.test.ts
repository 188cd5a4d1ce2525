/**
 * The admin web UI (/ui) in a real browser (Debian's Chromium through playwright-core)
 * against a real portico process with an HTTP route to a loopback backend and an MCP route
 * to the reference server (server-everything over stdio): every view shows the instance's
 * data, a trace is captured through the UI (a request sent from the UI, and one sent by the
 * test while the UI waits), an MCP tool is called through the generated form, the log level
 * is changed, the CEL playground evaluates a rule against two pasted tokens. A second,
 * read-only instance shows that changes are refused. Screenshots: .artifacts/ui/*.png.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { request } from 'undici'
import { SignJWT } from 'jose'
import type { Page } from 'playwright-core'
import { freePort, type PorticoProcess, REPO_ROOT, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { everythingTarget } from '../lib/mcp.ts'
import { findChromium, launchBrowser, type Browser } from '../lib/browser.ts'

const UI_DIR = join(REPO_ROOT, 'packages/ui')

const chromiumPath = findChromium()
if (chromiumPath === null && process.env.CI === 'true') throw new Error('chromium not found: run ./scripts/test (scripts/test-tools installs it) or set CHROMIUM')
const skip = chromiumPath === null ? 'chromium not found: run ./scripts/test (it installs it) or set CHROMIUM' : false

/** The UI bundle: built by scripts/setup; built here when missing (a test run by hand on a fresh tree). */
function ensureUiBuilt (): void {
  if (existsSync(join(UI_DIR, 'dist/index.html'))) return
  const vite = join(UI_DIR, 'node_modules/vite/bin/vite.js')
  const r = spawnSync(process.execPath, [vite, 'build', '--logLevel', 'warn'], { cwd: UI_DIR, encoding: 'utf8', timeout: 300_000 })
  assert.equal(r.status, 0, `vite build failed:\n${r.stdout}\n${r.stderr}`)
}

function config (port: number, backend: Backend) {
  return {
    gateways: { default: { port, address: '127.0.0.1' } },
    routes: [
      {
        name: 'tools',
        matches: [{ path: { pathPrefix: '/mcp' } }],
        backends: [{ mcp: { targets: [everythingTarget()] } }]
      },
      {
        name: 'app',
        policies: { requestHeaderModifier: { add: { 'x-added-by-route': 'yes' } } },
        backends: [{ host: backend.host }]
      }
    ]
  }
}

async function token (permissions: string[]): Promise<string> {
  return await new SignJWT({ sub: 'alice', permissions })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer('https://idp.example.test/')
    .setIssuedAt()
    .sign(new TextEncoder().encode('a test secret that nobody verifies here'))
}

/** The `message.type` of each row of the trace timeline, in order. */
async function eventTypes (page: Page): Promise<Array<string | null>> {
  return await Promise.all((await page.getByTestId('trace-event').all()).map(row => row.getAttribute('data-type')))
}

async function text (page: Page, testId: string): Promise<string> {
  return (await page.getByTestId(testId).first().textContent()) ?? ''
}

describe('web UI at /ui', { skip }, () => {
  let backend: Backend
  let portico: PorticoProcess
  let readOnly: PorticoProcess
  let admin: string
  let readOnlyAdmin: string
  let browser: Browser
  let page: Page

  before(async () => {
    ensureUiBuilt()
    backend = await startBackend((req, res) => {
      res.setHeader('content-type', 'text/plain')
      res.end(`hello from the backend: ${req.method} ${req.url}`)
    })
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, ADMIN_WRITES: 'true', LOG_LEVEL: 'info' },
      config: port => config(port, backend)
    })
    const roPort = await freePort()
    readOnlyAdmin = `http://127.0.0.1:${roPort}`
    readOnly = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${roPort}` },
      config: port => config(port, backend)
    })
    browser = await launchBrowser(chromiumPath!)
    page = browser.page
    page.setDefaultTimeout(20_000)
  })

  after(async () => {
    await browser?.close()
    await portico?.stop()
    await readOnly?.stop()
    await backend?.close()
  })

  test('GET / sends browsers to /ui/; curl and porticoctl still get the text list', async () => {
    const html = await request(`${admin}/`, { headers: { accept: 'text/html,application/xhtml+xml' } })
    await html.body.text()
    assert.equal(html.statusCode, 302)
    assert.equal(html.headers.location, '/ui/')
    const plain = await request(`${admin}/`)
    assert.match(await plain.body.text(), /^portico admin\n[\s\S]*\/config_dump[\s\S]*\/ui /)
    const forced = await request(`${admin}/?format=text`, { headers: { accept: 'text/html' } })
    assert.equal(forced.statusCode, 200)
    assert.match(await forced.body.text(), /^portico admin/)
  })

  test('overview: version, uptime, listeners and ports, readiness, reload history with the last error', async () => {
    await page.goto(`${admin}/`)
    assert.equal(new URL(page.url()).pathname, '/ui/')
    await page.getByTestId('view-overview').waitFor()
    assert.match(await text(page, 'ov-version'), /^0\.\d+\.\d+/)
    assert.match(await text(page, 'ov-uptime'), /\d+s/)
    assert.equal(await text(page, 'ready-badge'), 'ready')
    assert.equal(await text(page, 'mode-badge'), 'writable')
    assert.equal(await text(page, 'listener-port'), String(portico.port))
    assert.match(await text(page, 'listeners-table'), /default.*tools, app/)
    assert.match(await text(page, 'no-reload-error'), /No rejected config/)

    // A bad edit of the config file is rejected; the overview shows it (the old config serves on).
    const before = portico.stdout.length
    portico.writeConfig('routes:\n  - name: broken\n    backends: [{ hots: 127.0.0.1:1 }]\n')
    await portico.waitForOutput('config reload rejected', { fromStdout: before })
    await page.getByTestId('last-reload-error').waitFor({ timeout: 10_000 })
    assert.match(await text(page, 'last-reload-error'), /hots/)
    assert.match(await text(page, 'reloads-table'), /rejected[\s\S]*applied/)
    await browser.screenshot('overview')
    const restored = portico.stdout.length
    portico.writeConfig(config(portico.port, backend))
    // The same content as before: nothing to reload, the old version keeps serving.
    await new Promise(resolve => setTimeout(resolve, 1200))
    assert.ok(!portico.stdout.slice(restored).includes('rejected'))
  })

  test('routes: matches, policies and backends of each route', async () => {
    await page.getByTestId('nav-routes').click()
    assert.equal(new URL(page.url()).pathname, '/ui/routes')
    await page.getByTestId('route-app').waitFor()
    await page.getByTestId('route-tools').waitFor()
    assert.match(await text(page, 'route-tools'), /prefix \/mcp/)
    assert.match(await text(page, 'route-tools'), /mcp.*everything/)
    assert.match(await text(page, 'route-app'), /127\.0\.0\.1:\d+/)
    await page.getByTestId('route-app').getByTestId('policy-requestHeaderModifier').click()
    assert.match(await text(page, 'route-app'), /x-added-by-route/)
    await browser.screenshot('routes')
    // A reload of the page keeps the view (the admin server answers /ui/<view> with the app).
    await page.reload()
    await page.getByTestId('route-app').waitFor()
  })

  test('backends: health, request counts and latency, live', async () => {
    for (let i = 0; i < 3; i++) await request(`${portico.url}/count-me`).then(r => r.body.text())
    await page.getByTestId('nav-backends').click()
    const row = page.getByTestId(/^backend-127\.0\.0\.1/)
    await row.waitFor()
    await waitUntil(async () => Number(await row.getByTestId('backend-requests').textContent()) >= 3, 10_000, 'the backends view to count 3 requests')
    assert.equal(await row.getByTestId('backend-health').textContent(), '1.00')
    assert.equal(await row.getByTestId('backend-health').getAttribute('class'), 'badge badge-ok', 'green by the shared threshold')
    assert.match(await text(page, 'health-explained'), /share of recent calls .* Green from 0\.95, yellow from 0\.75, red below/)
    assert.match((await row.getByTestId('backend-latency').textContent()) ?? '', /^\d+\.\d\d ms$/)
    // TYPE as porticoctl says it (trace-view backendTypeText), not the dump's kind.
    assert.match(await text(page, 'backends-table'), /MCPeverything \(stdio\)[\s\S]*Backend127\.0\.0\.1/)
    await browser.screenshot('backends')
  })

  test('trace: a request sent from the UI, traced from requestStarted to requestFinished, with the diff between stages', async () => {
    await page.getByTestId('nav-trace').click()
    await page.getByTestId('send-url').fill('http://example.test/hello?from=ui')
    await page.getByTestId('send-headers').fill('x-demo: 1')
    await page.getByTestId('trace-send-button').click()
    await page.locator('[data-testid="trace-event"][data-type="requestFinished"]').waitFor({ timeout: 15_000 })
    const types = await eventTypes(page)
    assert.equal(types[0], 'requestStarted')
    assert.equal(types.at(-1), 'requestFinished')
    for (const t of ['routeSelection', 'policySelection', 'requestSnapshot', 'backendCallStart', 'backendCallResult', 'responseSnapshot']) assert.ok(types.includes(t), `missing ${t} in ${types.join(',')}`)
    assert.match(await text(page, 'fire-status'), /^200$/)
    assert.match(await text(page, 'trace-status'), /→ 200/)
    assert.match(await text(page, 'trace-timeline'), /GET \/hello\?from=ui {2}host=example\.test/)
    assert.match(await text(page, 'trace-timeline'), /selected app/)

    // The route-policies snapshot, diffed against the gateway-policies one: the added header.
    const stage = page.locator('[data-testid="trace-event"][data-type="requestSnapshot"]').filter({ hasText: 'route policies' })
    await stage.click()
    await page.getByTestId('detail-diff').click()
    const diff = await text(page, 'detail-body')
    assert.match(diff, /request snapshot · route policies .* against gateway policies/)
    // The header a route policy added; its value is redacted (policy-set request headers may be credentials).
    assert.match(diff, /\+\s+x-added-by-route: <redacted>/)
    await browser.screenshot('trace-sent')
    await page.getByTestId('detail-snapshot').click()
    assert.match(await text(page, 'detail-body'), /x-demo: "?1"?/)
    // Keyboard: s/e/d switch the detail mode as in porticoctl.
    await page.getByTestId('trace-timeline').press('e')
    assert.match(await text(page, 'detail-body'), /"type": "requestSnapshot"/)
  })

  test('trace: armed from the UI, the next request a client sends (filtered by path) is shown', async () => {
    await page.getByTestId('filter-path').fill('/watched*')
    await page.getByTestId('trace-watch').click()
    await page.getByTestId('trace-status').filter({ hasText: 'waiting for the next request' }).waitFor()
    // Not this one (the path filter), then this one.
    await request(`${portico.url}/other`).then(r => r.body.text())
    await request(`${portico.url}/watched/page`, { headers: { host: 'client.example' } }).then(r => r.body.text())
    await page.locator('[data-testid="trace-event"][data-type="requestFinished"]').waitFor({ timeout: 15_000 })
    const types = await eventTypes(page)
    assert.equal(types[0], 'requestStarted')
    assert.equal(types.at(-1), 'requestFinished')
    assert.match(await text(page, 'trace-timeline'), /GET \/watched\/page {2}host=client\.example/)
    await page.locator('[data-testid="trace-event"][data-type="requestFinished"]').click()
    await browser.screenshot('trace-watched')
    await page.getByTestId('filter-path').fill('')
  })

  test('MCP playground: connect to the MCP route, list tools, prompts and resources, call echo through the form', async () => {
    await page.getByTestId('nav-mcp').click()
    await page.getByTestId('mcp-path').waitFor()
    assert.equal(await page.getByTestId('mcp-path').inputValue(), '/mcp')
    await page.getByTestId('mcp-connect-button').click()
    await page.getByTestId('mcp-connected').waitFor({ timeout: 30_000 })
    assert.match(await text(page, 'mcp-connected'), /connected/)
    await page.getByTestId('tool-echo').waitFor()
    assert.match(await text(page, 'mcp-tab-prompts'), /prompts \([1-9]\d*\)/)
    assert.match(await text(page, 'mcp-tab-resources'), /resources \([1-9]\d*\)/)
    await page.getByTestId('tool-echo').click()
    await page.getByTestId('arg-message').fill('hello from the browser')
    await page.getByTestId('tool-call').click()
    await page.getByTestId('mcp-result-text').waitFor()
    assert.equal(await text(page, 'mcp-result-text'), 'Echo: hello from the browser')
    await browser.screenshot('mcp')

    // A required field left empty is caught by the form, before any call.
    await page.getByTestId('arg-message').fill('')
    await page.getByTestId('tool-call').click()
    await page.getByRole('alert').filter({ hasText: '"message" is required' }).waitFor()

    // Resources: read one.
    await page.getByTestId('mcp-tab-resources').click()
    await page.getByTestId('resource-item').first().click()
    await page.getByTestId('mcp-result').waitFor()
    await page.getByTestId('mcp-disconnect').click()
    await page.getByTestId('mcp-connected').waitFor({ state: 'detached' })
  })

  test('log level: set from the UI, seen by /logging', async () => {
    await page.getByTestId('nav-logging').click()
    await page.getByTestId('log-current').filter({ hasText: 'info' }).waitFor()
    await page.getByTestId('log-global').selectOption('warn')
    await page.getByTestId('log-request').selectOption('debug')
    assert.equal(await page.getByTestId('log-text').inputValue(), 'warn,request=debug')
    await page.getByTestId('log-apply').click()
    await page.getByTestId('log-saved').waitFor()
    assert.equal(await text(page, 'log-current'), 'warn,request=debug')
    const res = await request(`${admin}/logging`)
    assert.equal(await res.body.text(), 'current log level is warn,request=debug\n')
    await browser.screenshot('logging')
    // A bad filter is refused with the proxy's message, changing nothing.
    await page.getByTestId('log-text').fill('verbose')
    await page.getByTestId('log-apply').click()
    await page.getByRole('alert').filter({ hasText: 'unknown level "verbose"' }).waitFor()
    await page.getByTestId('log-text').fill('info')
    await page.getByTestId('log-apply').click()
    await page.getByTestId('log-current').filter({ hasText: /^info$/ }).waitFor()
  })

  test('CEL playground: "read" in jwt.permissions against two pasted tokens', async () => {
    await page.getByTestId('nav-cel').click()
    await page.getByTestId('cel-expression').fill('"read" in jwt.permissions')
    await page.getByTestId('cel-token').fill(await token(['read', 'write']))
    await page.getByTestId('cel-evaluate').click()
    await page.getByTestId('cel-value').filter({ hasText: 'true' }).waitFor()
    assert.equal(await text(page, 'cel-matches'), 'matches')
    assert.match(await text(page, 'cel-claims'), /"sub": "alice"/)
    assert.match(await text(page, 'view-cel'), /not verified/)
    await browser.screenshot('cel')

    await page.getByTestId('cel-token').fill(`Bearer ${await token(['write'])}`)
    await page.getByTestId('cel-evaluate').click()
    await page.getByTestId('cel-value').filter({ hasText: 'false' }).waitFor()
    assert.equal(await text(page, 'cel-matches'), 'does not match')

    // Without a token, jwt is {}: the rule fails to evaluate and does not match, as in the proxy.
    await page.getByTestId('cel-token').fill('')
    await page.getByTestId('cel-evaluate').click()
    await page.getByTestId('cel-error').waitFor()
    assert.match(await text(page, 'cel-matches'), /does not match/)
    // A syntax error is reported as the config loader would.
    await page.getByTestId('cel-expression').fill('jwt.sub ==')
    await page.getByTestId('cel-evaluate').click()
    await page.getByTestId('cel-matches').filter({ hasText: 'invalid expression' }).waitFor()
    // Sample request variables are used too.
    await page.getByTestId('cel-expression').fill('request.method == "GET" && source.address.startsWith("127.")')
    await page.getByTestId('cel-evaluate').click()
    await page.getByTestId('cel-value').filter({ hasText: 'true' }).waitFor()
  })

  test('read-only by default: the UI says so, and the admin server refuses the changes', async () => {
    await page.goto(`${readOnlyAdmin}/ui/trace`)
    await page.getByTestId('readonly-banner').waitFor()
    assert.equal(await text(page, 'mode-badge'), 'read-only')
    assert.equal(await page.getByTestId('trace-send-button').isDisabled(), true)
    assert.equal(await page.getByTestId('trace-watch').isDisabled(), false, 'watching changes nothing: allowed')
    await page.getByTestId('nav-mcp').click()
    assert.equal(await page.getByTestId('mcp-connect-button').isDisabled(), true)
    await page.getByTestId('nav-logging').click()
    await page.getByTestId('log-current').filter({ hasText: 'info' }).waitFor()
    assert.equal(await page.getByTestId('log-apply').isDisabled(), true)
    await browser.screenshot('read-only')

    const post = async (path: string, body: unknown) => {
      const res = await request(`${readOnlyAdmin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      return { status: res.statusCode, body: await res.body.json() as { error: string, message: string } }
    }
    for (const [path, body] of [
      ['/api/trace/fire', { url: 'http://x/', port: readOnly.port }],
      ['/api/mcp/connect', { port: readOnly.port, path: '/mcp' }],
      ['/api/logging', { level: 'debug' }]
    ] as const) {
      const r = await post(path, body)
      assert.equal(r.status, 403, path)
      assert.equal(r.body.error, 'read-only')
      assert.match(r.body.message, /adminWrites/)
    }
    // Reading and trying CEL still work; porticoctl's /logging POST is unchanged.
    assert.equal((await post('/api/cel', { expression: '1 == 1' })).status, 200)
    const ctl = await request(`${readOnlyAdmin}/logging?level=info`, { method: 'POST' })
    assert.equal(ctl.statusCode, 200)
    await ctl.body.text()
  })

  test('same origin only: no CORS headers, cross-origin and rebinding requests refused, fire reaches only own listeners', async () => {
    const preflight = await request(`${admin}/api/trace/fire`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } })
    await preflight.body.text()
    assert.equal(preflight.headers['access-control-allow-origin'], undefined)
    for (const path of ['/ui/', '/api/overview', '/config_dump']) {
      const res = await request(`${admin}${path}`, { headers: { origin: 'http://evil.example' } })
      await res.body.text()
      assert.equal(res.headers['access-control-allow-origin'], undefined, path)
    }
    const cross = await request(`${admin}/api/overview`, { headers: { origin: 'http://evil.example' } })
    assert.equal(cross.statusCode, 403)
    assert.match(await cross.body.text(), /same-origin only/)
    const rebound = await request(`${admin}/api/overview`, { headers: { host: 'evil.example:80' } })
    assert.equal(rebound.statusCode, 403)
    assert.match(await rebound.body.text(), /DNS rebinding/)
    const form = await request(`${admin}/api/trace/fire`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' })
    assert.equal(form.statusCode, 415)
    await form.body.text()
    const ui = await request(`${admin}/ui/`)
    await ui.body.text()
    assert.match(String(ui.headers['content-security-policy']), /default-src 'self'.*connect-src 'self'.*frame-ancestors 'none'/)
    // The fire endpoint reaches this proxy's listeners only, never another port.
    const elsewhere = await request(`${admin}/api/trace/fire`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: 'http://127.0.0.1/', port: backend.port }) })
    assert.equal(elsewhere.statusCode, 400)
    assert.match(await elsewhere.body.text(), /not a listener of this proxy/)
    // Static files: no way out of the bundle's directory; unknown assets are 404s.
    for (const path of ['/ui/..%2f..%2fpackage.json', '/ui/%2e%2e/%2e%2e/package.json', '/ui/assets/nope.js']) {
      const res = await request(`${admin}${path}`)
      const body = await res.body.text()
      assert.ok(!body.includes('"name": "@portico/ui"'), path)
      assert.ok(res.statusCode === 404 || res.statusCode === 400 || body.includes('<div id="root">'), `${path}: ${res.statusCode}`)
    }
  })

  test('the page loaded nothing from elsewhere and logged no errors (CSP included)', () => {
    assert.deepEqual(browser.problems.filter(p => !/403|Failed to load resource/.test(p)), [])
  })
})
