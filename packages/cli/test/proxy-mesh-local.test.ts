/**
 * porticoctl and the mesh against real standalone portico processes: one with its identity
 * from `config.mesh.certificate` files (a test CA's, made with openssl as in
 * e2e/test/mesh-hbone.test.ts) and a route to a real HBONE peer, one whose istiod (CA) does
 * not answer. `proxy mesh` shows state, identity, expiry and reason; `proxy config backends`
 * names the mesh backend's identity; exit codes as every read command.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { X509Certificate } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { request } from 'undici'
import { parse as parseYaml } from 'yaml'
import { freePort, startPortico, type PorticoProcess } from '@portico/testkit/portico'
import { makeTestCa, startHbonePeer, type HbonePeer, type TestCa } from '@portico/testkit/hbone-peer'
import { waitUntil } from '@portico/testkit/wait'
import { ctl } from '@portico/testkit/porticoctl'

const ECHO_ID = 'spiffe://cluster.local/ns/apps/sa/echo'
const GATEWAY_ID = 'spiffe://cluster.local/ns/gw/sa/portico'

let ca: TestCa
let gatewayNotAfter: string
let echo: http.Server
let peer: HbonePeer
let portico: PorticoProcess
let failing: PorticoProcess
let local: string[]
let failingLocal: string[]
let caPort: number

before(async () => {
  ca = makeTestCa()
  const gw = ca.issue('gateway', GATEWAY_ID)
  gatewayNotAfter = new Date(new X509Certificate(gw.cert).validTo).toISOString()
  const echoCert = ca.issue('echo', ECHO_ID)
  echo = http.createServer((req, res) => res.end(`echo ${req.url}`))
  await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
  const echoPort = (echo.address() as AddressInfo).port
  peer = await startHbonePeer({ cert: echoCert.cert, key: echoCert.key, root: ca.root })
  const adminAddr = `127.0.0.1:${await freePort()}`
  local = ['--local', '--admin-addr', adminAddr]
  portico = await startPortico({
    env: { ADMIN_ADDR: adminAddr },
    config: port => ({
      config: { mesh: { certificate: { cert: gw.certFile, key: gw.keyFile, root: join(ca.dir, 'ca.pem') } } },
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'mesh', matches: [{ path: { pathPrefix: '/mesh' } }], backends: [{ host: `127.0.0.1:${echoPort}`, mesh: { identity: ECHO_ID, hbonePort: peer.port } }] },
        { name: 'plain', matches: [{ path: { pathPrefix: '/plain' } }], backends: [{ host: `127.0.0.1:${echoPort}` }] }
      ]
    })
  })
  // A gateway whose mesh CA does not answer (nothing listens on its address).
  caPort = await freePort()
  writeFileSync(join(ca.dir, 'token'), 'not-a-real-token')
  const failingAdmin = `127.0.0.1:${await freePort()}`
  failingLocal = ['--local', '--admin-addr', failingAdmin]
  failing = await startPortico({
    env: { ADMIN_ADDR: failingAdmin },
    config: port => ({
      config: { mesh: { ca: { address: `127.0.0.1:${caPort}`, serverName: 'istiod.istio-system.svc', namespace: 'gw', serviceAccount: 'portico', tokenFile: join(ca.dir, 'token'), rootFile: join(ca.dir, 'ca.pem') } } },
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: []
    })
  })
})

after(async () => {
  await portico?.stop()
  await failing?.stop()
  await peer?.close()
  echo?.close()
  if (ca !== undefined) rmSync(ca.dir, { recursive: true, force: true })
})

test('proxy mesh --local: ready, the gateway\'s SPIFFE ID, the certificate\'s expiry, its files', async () => {
  const r = await ctl(['proxy', 'mesh', ...local])
  assert.equal(r.code, 0, r.stderr)
  const lines = r.stdout.split('\n')
  assert.equal(lines[0], 'STATE:     ready')
  assert.equal(lines[1], `IDENTITY:  ${GATEWAY_ID}`)
  assert.match(lines[2]!, new RegExp(`^EXPIRES: {3}${gatewayNotAfter.replace(/\./g, '\\.')} \\(in (23h|1d)( \\d+m)?\\)$`))
  assert.equal(lines[3], `SOURCE:    files ${join(ca.dir, 'gateway.pem')}`)
  assert.equal(r.stdout.includes('REASON'), false)
  // Never the key: the files' paths only.
  assert.equal(r.stdout.includes('PRIVATE KEY'), false)
})

test('proxy mesh -o json|yaml: /debug/mesh as it is', async () => {
  const json = await ctl(['proxy', 'mesh', ...local, '-o', 'json'])
  assert.equal(json.code, 0, json.stderr)
  const status = JSON.parse(json.stdout) as Record<string, unknown>
  assert.equal(status.source, 'files')
  assert.equal(status.state, 'ready')
  assert.equal(status.spiffeId, GATEWAY_ID)
  assert.equal(status.notAfter, gatewayNotAfter)
  const yaml = await ctl(['proxy', 'mesh', ...local, '-o', 'yaml'])
  assert.deepEqual(parseYaml(yaml.stdout), status)
})

test('proxy config backends: the mesh backend\'s ENDPOINT names the identity its peer must prove; a plain one is unchanged', async () => {
  const answer = await request(`${portico.url}/mesh/hi`)
  assert.equal(await answer.body.text(), 'echo /mesh/hi')
  assert.deepEqual(peer.clients, [GATEWAY_ID])
  const r = await ctl(['proxy', 'config', 'backends', ...local])
  assert.equal(r.code, 0, r.stderr)
  const rows = r.stdout.trimEnd().split('\n').slice(1)
  assert.equal(rows.length, 2, r.stdout)
  const meshRow = rows.find(row => row.includes('hbone'))
  assert.ok(meshRow !== undefined, r.stdout)
  assert.match(meshRow, new RegExp(`hbone → ${ECHO_ID} \\(127\\.0\\.0\\.1:\\d+\\)\\s+1\\.00\\s+1\\s`))
  assert.equal(rows.filter(row => row.includes('spiffe://')).length, 1, 'the plain backend shows its address only')
})

test('proxy mesh --local: a CA that does not answer is failed with the reason; exit 0 (the state is the answer)', async () => {
  let r = await ctl(['proxy', 'mesh', ...failingLocal])
  await waitUntil(async () => {
    r = await ctl(['proxy', 'mesh', ...failingLocal])
    return r.stdout.startsWith('STATE:     failed')
  }, 20_000, 'the mesh state failed', 200)
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /^IDENTITY: {2}spiffe:\/\/cluster\.local\/ns\/gw\/sa\/portico$/m)
  assert.match(r.stdout, /^EXPIRES: {3}-$/m)
  assert.match(r.stdout, new RegExp(`^SOURCE: {4}istiod CA 127\\.0\\.0\\.1:${caPort}$`, 'm'))
  assert.match(r.stdout, new RegExp(`^REASON: {4}CA unreachable: mesh CA 127\\.0\\.0\\.1:${caPort}: .+$`, 'm'))
})

test('proxy mesh: errors exit 1 (admin port closed), usage errors 2', async () => {
  const closed = await ctl(['proxy', 'mesh', '--local', '--admin-addr', `127.0.0.1:${await freePort()}`])
  assert.equal(closed.code, 1)
  assert.match(closed.stderr, /^porticoctl: cannot reach/)
  const usage = await ctl(['proxy', 'mesh', ...local, '-o', 'wide'])
  assert.equal(usage.code, 2)
})
