/**
 * Config push over delta xDS between the controller's server and a real portico process in
 * cluster mode: the first config and readiness, updates and removals, a NACK that leaves the
 * proxy on its last good config, the controller going away and coming back, and each of the
 * plaintext, tls and either modes.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { Server } from '@grpc/grpc-js'
import { XdsServer, startXdsListener, createCa, createServingCert, type XdsListener, type XdsMode } from '@portico/controller'
import { loadConfigText, type ProxyIR } from '@portico/engine'
import { freePort, type PorticoProcess, startClusterPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'

const cleanup: Array<() => Promise<void> | void> = []
after(async () => {
  for (const fn of cleanup.reverse()) await fn()
})

function ir (port: number, routes: string): ProxyIR {
  const result = loadConfigText(`gateways: {default: {port: ${port}, address: 127.0.0.1}}\nroutes:\n${routes}`, { baseDir: '/' })
  assert.ok(result.ok, JSON.stringify(!result.ok && result.diagnostics))
  return result.config.ir
}

async function controller (mode: XdsMode, port = 0, tls?: { cert: string, key: string }) {
  const acks: string[] = []
  const nacks: string[] = []
  const xds = new XdsServer({ onAck: (_p, v) => acks.push(v), onNack: (_p, _v, message) => nacks.push(message) })
  const listener: XdsListener = await startXdsListener({
    mode,
    host: '127.0.0.1',
    port,
    ...(tls !== undefined ? { tls: () => tls } : {}),
    register: (server: Server) => xds.register(server)
  })
  return { xds, listener, acks, nacks }
}

async function get (port: number, path: string): Promise<{ status: number, body: string }> {
  const res = await request(`http://127.0.0.1:${port}${path}`)
  return { status: res.statusCode, body: await res.body.text() }
}

async function eventually (check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail('condition not met in time')
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

async function proxyFor (address: string, extraEnv: Record<string, string> = {}): Promise<PorticoProcess> {
  const p = await startClusterPortico({ XDS_ADDRESS: address, POD_NAME: 'proxy-0', NAMESPACE: 'infra', GATEWAY: 'web', ...extraEnv })
  cleanup.push(async () => { await p.stop() })
  return p
}

let backend: Backend
before(async () => {
  backend = await startEchoBackend('app')
  cleanup.push(() => backend.close())
})

test('plaintext: first config, readiness, updates and removals, NACK keeps the last good config, reconnect', async () => {
  const [gwPort, readyPort] = [await freePort(), await freePort()]
  // The controller takes a port of the system's choosing (a port probed free can be taken by a
  // parallel test before it binds), and comes back on that same port below.
  let c = await controller('plaintext')
  const xdsPort = c.listener.port
  // Closes whichever controller is current when the test ends, passed or not: an open gRPC
  // server would keep this test file's process alive.
  cleanup.push(() => c.listener.close())
  c.xds.setConfig('infra/web', ir(gwPort, `  - {name: app, matches: [{path: {pathPrefix: /app}}], backends: [{host: "${backend.host}"}]}\n`))
  const proxy = await proxyFor(`http://127.0.0.1:${xdsPort}`, { READINESS_ADDR: `127.0.0.1:${readyPort}` })
  await eventually(async () => (await get(readyPort, '/healthz/ready').catch(() => ({ status: 0 }))).status === 200)
  assert.equal((await get(gwPort, '/app/x')).status, 200)
  assert.equal(c.acks.length, 1)

  // An update: a new route.
  c.xds.setConfig('infra/web', ir(gwPort, `  - {name: app, matches: [{path: {pathPrefix: /app}}], backends: [{host: "${backend.host}"}]}\n  - {name: hello, matches: [{path: {exact: /hello}}], policies: {directResponse: {status: 200, body: hi}}}\n`))
  await eventually(async () => (await get(gwPort, '/hello')).body === 'hi')
  // With data-plane workers the new version serves from the switch; the ACK follows once
  // every worker has committed it, a moment later.
  await eventually(async () => c.acks.length === 2)
  assert.equal(c.acks.length, 2)

  // A config the proxy cannot install (a regex the engine cannot compile) is NACKed.
  const bad = ir(gwPort, `  - {name: hello, matches: [{path: {exact: /hello}}], policies: {directResponse: {status: 200, body: bye}}}\n`)
  bad.binds[0]!.listeners[0]!.routes[0]!.matches[0]!.path = { kind: 'regex', value: '([' }
  bad.version = 'broken'
  c.xds.setConfig('infra/web', bad)
  await eventually(async () => c.nacks.length === 1)
  assert.match(c.nacks[0]!, /Invalid regular expression|invalid/i)
  assert.equal((await get(gwPort, '/hello')).body, 'hi', 'the last good config keeps serving')
  await proxy.waitForOutput('rejected (NACK)')

  // A CORS origin the engine cannot parse (as a translation could produce it) is refused as the
  // YAML path refuses it — NACKed naming its IR path — instead of silently dropped.
  const badCors = ir(gwPort, `  - {name: hello, matches: [{path: {exact: /hello}}], policies: {directResponse: {status: 200, body: bye}}}\n`)
  badCors.binds[0]!.listeners[0]!.routes[0]!.policies.cors = { allowOrigins: ['example.com'], allowMethods: ['GET'], allowHeaders: [], exposeHeaders: [], allowCredentials: false }
  badCors.version = 'bad-cors'
  c.xds.setConfig('infra/web', badCors)
  await eventually(async () => c.nacks.length === 2)
  assert.match(c.nacks[1]!, /routes\[0\]\.policies\.cors\.allowOrigins\[0\]: "example\.com" is not an origin/)
  assert.equal((await get(gwPort, '/hello')).body, 'hi', 'the last good config keeps serving')

  // The controller goes away: the proxy keeps serving; it comes back with a new config.
  const lostFrom = proxy.stdout.length
  await c.listener.close()
  await proxy.waitForOutput('xDS stream lost', { fromStdout: lostFrom, timeoutMs: 10_000 })
  assert.equal((await get(gwPort, '/app/y')).status, 200)
  c = await controller('plaintext', xdsPort)
  c.xds.setConfig('infra/web', ir(gwPort, `  - {name: only, matches: [{path: {exact: /only}}], policies: {directResponse: {status: 201, body: back}}}\n`))
  await eventually(async () => (await get(gwPort, '/only')).status === 201, 15_000)
  assert.equal((await get(gwPort, '/app/x')).status, 404, 'removed routes are gone')
})

test('tls and either: the proxy verifies the controller with the CA; either also takes plaintext', async () => {
  const ca = await createCa()
  const serving = await createServingCert(ca, ['portico-controller.portico-system.svc'])
  const dir = mkdtempSync(join(tmpdir(), 'xds-tls-'))
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'ca.crt'), ca.cert)

  for (const mode of ['tls', 'either'] as const) {
    const gwPort = await freePort()
    const c = await controller(mode, 0, serving)
    cleanup.push(() => c.listener.close())
    c.xds.setConfig('infra/web', ir(gwPort, `  - {name: hello, policies: {directResponse: {status: 200, body: ${mode}}}}\n`))
    const p = await proxyFor(`https://127.0.0.1:${c.listener.port}`, { XDS_ROOT_CA: join(dir, 'ca.crt') })
    await eventually(async () => (await get(gwPort, '/').catch(() => ({ status: 0, body: '' }))).body === mode).catch(err => {
      throw new Error(`${(err as Error).message}\n${p.output}`)
    })
    if (mode === 'either') {
      const plainPort = await freePort()
      c.xds.setConfig('infra/plain', ir(plainPort, `  - {name: hello, policies: {directResponse: {status: 200, body: plain}}}\n`))
      await proxyFor(`http://127.0.0.1:${c.listener.port}`, { GATEWAY: 'plain' })
      await eventually(async () => (await get(plainPort, '/').catch(() => ({ status: 0, body: '' }))).body === 'plain')
    }
  }
})

test('a stream that does not name its gateway is refused; a proxy that does not trust the certificate gets nothing', async () => {
  const ca = await createCa()
  const other = await createCa('someone-else')
  const serving = await createServingCert(ca, ['x'])
  const dir = mkdtempSync(join(tmpdir(), 'xds-bad-'))
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'other.crt'), other.cert)
  const c = await controller('tls', 0, serving)
  cleanup.push(() => c.listener.close())
  const p = await proxyFor(`https://127.0.0.1:${c.listener.port}`, { XDS_ROOT_CA: join(dir, 'other.crt'), GATEWAY: 'web2' })
  await p.waitForOutput('xDS stream lost')
  assert.equal(c.acks.length, 0)

  const plain = await controller('plaintext')
  cleanup.push(() => plain.listener.close())
  const { protocol } = await import('@portico/xds')
  const { credentials } = await import('@grpc/grpc-js')
  const Client = protocol().client as unknown as new (target: string, creds: unknown) => { DeltaAggregatedResources(): NodeJS.EventEmitter & { write(m: unknown): void }, close(): void }
  const client = new Client(`127.0.0.1:${plain.listener.port}`, credentials.createInsecure())
  const stream = client.DeltaAggregatedResources()
  const error = new Promise<{ code: number, details: string }>(resolve => stream.on('error', resolve))
  stream.write({ node: { id: 'x' }, typeUrl: 'type.googleapis.com/portico.config.v1.Resource' })
  const e = await error
  assert.equal(e.code, 3, 'INVALID_ARGUMENT')
  assert.match(e.details, /node.metadata.role/)
  client.close()
})
