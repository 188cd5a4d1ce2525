/**
 * The mesh in the admin web UI (a real Chromium through playwright-core, as e2e/test/ui.test.ts)
 * against real portico processes: one with its mesh identity from `config.mesh.certificate`
 * files (a test CA's, as e2e/test/mesh-hbone.test.ts) and a route to a real HBONE peer, one
 * whose istiod does not answer. The Overview's Mesh card shows the state badge (ready green,
 * failed red), the SPIFFE ID, the certificate's expiry and, when not ready, the reason; the
 * Backends view names the identity a mesh backend's peer must prove, in porticoctl's words.
 * A gateway without a mesh shows no Mesh card (ui.test.ts's instances; asserted here too).
 * Screenshots: .artifacts/ui/mesh-*.png.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { request } from 'undici'
import type { Page } from 'playwright-core'
import { freePort, type PorticoProcess, REPO_ROOT, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { findChromium, launchBrowser, type Browser } from '../lib/browser.ts'
import { makeTestCa, startHbonePeer, type HbonePeer, type TestCa } from '@portico/testkit/hbone-peer'

const chromiumPath = findChromium()
if (chromiumPath === null && process.env.CI === 'true') throw new Error('chromium not found: run ./scripts/test (scripts/test-tools installs it) or set CHROMIUM')
const skip = chromiumPath === null
  ? 'chromium not found: run ./scripts/test (it installs it) or set CHROMIUM'
  : !existsSync(join(REPO_ROOT, 'packages/ui/dist/index.html')) ? 'the UI is not built: run ./scripts/setup' : false

const ECHO_ID = 'spiffe://cluster.local/ns/apps/sa/echo'
const GATEWAY_ID = 'spiffe://cluster.local/ns/gw/sa/portico'

async function text (page: Page, testId: string): Promise<string> {
  return (await page.getByTestId(testId).first().textContent()) ?? ''
}

describe('the mesh in the web UI', { skip }, () => {
  let ca: TestCa
  let echo: http.Server
  let peer: HbonePeer
  let meshed: PorticoProcess
  let failing: PorticoProcess
  let plain: PorticoProcess
  let admin: string
  let failingAdmin: string
  let plainAdmin: string
  let caPort: number
  let browser: Browser
  let page: Page

  before(async () => {
    ca = makeTestCa()
    const gw = ca.issue('gateway', GATEWAY_ID)
    const echoCert = ca.issue('echo', ECHO_ID)
    echo = http.createServer((req, res) => res.end(`echo ${req.url}`))
    await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
    const echoPort = (echo.address() as AddressInfo).port
    peer = await startHbonePeer({ cert: echoCert.cert, key: echoCert.key, root: ca.root })
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    meshed = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: port => ({
        config: { mesh: { certificate: { cert: gw.certFile, key: gw.keyFile, root: join(ca.dir, 'ca.pem') } } },
        gateways: { default: { port, address: '127.0.0.1' } },
        routes: [{ name: 'echo', backends: [{ host: `127.0.0.1:${echoPort}`, mesh: { identity: ECHO_ID, hbonePort: peer.port } }] }]
      })
    })
    caPort = await freePort()
    writeFileSync(join(ca.dir, 'token'), 'not-a-real-token')
    const failingPort = await freePort()
    failingAdmin = `http://127.0.0.1:${failingPort}`
    failing = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${failingPort}` },
      config: port => ({
        config: { mesh: { ca: { address: `127.0.0.1:${caPort}`, serverName: 'istiod.istio-system.svc', namespace: 'gw', serviceAccount: 'portico', tokenFile: join(ca.dir, 'token'), rootFile: join(ca.dir, 'ca.pem') } } },
        gateways: { default: { port, address: '127.0.0.1' } },
        routes: []
      })
    })
    const plainPort = await freePort()
    plainAdmin = `http://127.0.0.1:${plainPort}`
    plain = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${plainPort}` },
      config: port => ({ gateways: { default: { port, address: '127.0.0.1' } }, routes: [] })
    })
    browser = await launchBrowser(chromiumPath!)
    page = browser.page
    page.setDefaultTimeout(20_000)
  })

  after(async () => {
    await browser?.close()
    await meshed?.stop()
    await failing?.stop()
    await plain?.stop()
    await peer?.close()
    echo?.close()
    if (ca !== undefined) rmSync(ca.dir, { recursive: true, force: true })
  })

  test('overview: the Mesh card — ready (green), the gateway\'s SPIFFE ID, when its certificate expires', async () => {
    await page.goto(`${admin}/ui/`)
    await page.getByTestId('card-mesh').waitFor()
    const badge = page.getByTestId('mesh-state').locator('.badge')
    assert.equal(await badge.textContent(), 'ready')
    assert.equal(await badge.getAttribute('class'), 'badge badge-ok')
    assert.equal(await text(page, 'mesh-spiffe-id'), GATEWAY_ID)
    // makeTestCa's certificates live one day.
    assert.match(await text(page, 'mesh-expiry'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z \(in (23h|1d)( \d+m)?\)$/)
    assert.equal(await page.getByTestId('mesh-reason').count(), 0)
    assert.match(await text(page, 'card-mesh'), new RegExp(`files ${join(ca.dir, 'gateway.pem').replace(/[.]/g, '\\.')}`))
    await browser.screenshot('mesh-overview-ready')
  })

  test('backends: a mesh backend\'s target says hbone → the identity its peer must prove, as porticoctl\'s ENDPOINT', async () => {
    const answer = await request(`${meshed.url}/hi`)
    assert.equal(await answer.body.text(), 'echo /hi')
    await page.getByTestId('nav-backends').click()
    const row = page.getByTestId(/^backend-127\.0\.0\.1/)
    await row.waitFor()
    assert.match((await row.getByTestId('backend-target').textContent()) ?? '', new RegExp(`^hbone → ${ECHO_ID} \\(127\\.0\\.0\\.1:\\d+\\)$`))
    await waitUntil(async () => Number(await row.getByTestId('backend-requests').textContent()) >= 1, 10_000, 'the backends view to count the request')
    await browser.screenshot('mesh-backends')
  })

  test('overview: an istiod that does not answer — failed (red) with the reason', async () => {
    await page.goto(`${failingAdmin}/ui/`)
    await page.getByTestId('card-mesh').waitFor()
    // The overview is polled: the state turns failed once the first CA call failed.
    await waitUntil(async () => (await text(page, 'mesh-state')) === 'failed', 20_000, 'the Mesh card to say failed')
    assert.equal(await page.getByTestId('mesh-state').locator('.badge').getAttribute('class'), 'badge badge-bad')
    assert.equal(await text(page, 'mesh-spiffe-id'), GATEWAY_ID)
    assert.equal(await text(page, 'mesh-expiry'), '-')
    assert.match(await text(page, 'mesh-reason'), new RegExp(`^CA unreachable: mesh CA 127\\.0\\.0\\.1:${caPort}: `))
    await browser.screenshot('mesh-overview-failed')
  })

  test('overview: no mesh configured, no Mesh card', async () => {
    await page.goto(`${plainAdmin}/ui/`)
    await page.getByTestId('card-instance').waitFor()
    assert.equal(await page.getByTestId('card-mesh').count(), 0)
  })

  test('the pages logged no errors', () => {
    assert.deepEqual(browser.problems.filter(p => !/403|Failed to load resource/.test(p)), [])
  })
})
