/**
 * The cluster path (pod resolution and port-forward with @kubernetes/client-node) against a
 * stand-in API server (fake-kube.ts) whose pods forward to a real portico process and a
 * stand-in controller. The same commands run against a real kube-apiserver in
 * e2e/test/cli-cluster.test.ts; this file keeps the failures a real cluster does not make on
 * demand (an API server refusing, a pod whose admin port is closed) and runs without the
 * kube tools.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, startPortico, type PorticoProcess } from '@portico/testkit/portico'
import { startEchoBackend, type Backend } from '@portico/testkit/backends'
import { ctl, jsonLines } from '@portico/testkit/porticoctl'
import { fakeKubeconfig, startFakeKube, type FakeKube } from './fake-kube.ts'
import { startFakeController, type FakeController } from './fake-controller.ts'

let kube: FakeKube
let portico: PorticoProcess
let backend: Backend
let controller: FakeController
let dir: string
let env: Record<string, string>
const GW = 'gateway.networking.k8s.io/gateway-name'

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'porticoctl-cluster-'))
  backend = await startEchoBackend('app')
  const adminPort = await freePort()
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'app', matches: [{ path: { pathPrefix: '/app' } }], backends: [{ host: backend.host }] }]
    })
  })
  controller = await startFakeController()
  kube = await startFakeKube()
  const proxyPorts = { 15000: adminPort, 8080: portico.port }
  kube.gateways.add('apps/web')
  kube.gateways.add('apps/idle')
  kube.gateways.add('apps/broken')
  kube.pods.push(
    { namespace: 'apps', name: 'web-b', labels: { [GW]: 'web' }, ready: true, ports: proxyPorts },
    { namespace: 'apps', name: 'web-a', labels: { [GW]: 'web' }, ready: true, ports: proxyPorts },
    { namespace: 'apps', name: 'web-starting', labels: { [GW]: 'web' }, ready: false, ports: proxyPorts },
    { namespace: 'apps', name: 'idle-1', labels: { [GW]: 'idle' }, ready: false, ports: proxyPorts },
    { namespace: 'apps', name: 'broken-1', labels: { [GW]: 'broken' }, ready: true, ports: {} },
    { namespace: 'portico-system', name: 'portico-controller-0', labels: { 'app.kubernetes.io/name': 'portico-controller' }, ready: true, ports: { 9095: Number(controller.addr.split(':')[1]) } }
  )
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, fakeKubeconfig(kube, 'apps'))
  env = { KUBECONFIG: kubeconfig, HOME: dir }
})

after(async () => {
  await kube?.close()
  await controller?.close()
  await portico?.stop()
  await backend?.close()
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

async function forwardsClosed (): Promise<void> {
  const deadline = Date.now() + 5000
  while (kube.forwards.open > 0 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 20))
  assert.equal(kube.forwards.open, 0, 'every port-forward is closed when porticoctl exits')
}

test('proxy trace gateway/NAME: finds the first ready pod, traces over a port-forward, sends the request through one', async () => {
  const before = kube.forwards.total
  const r = await ctl(['proxy', 'trace', 'gateway/web', '-n', 'apps', '--raw', '--port', '8080', '--', 'http://shop.example.test/app/cart', '-H', 'x-user: 7'], { env })
  assert.equal(r.code, 0, r.stderr)
  const events = jsonLines(r.stdout)
  assert.equal(events[0]!.message.type, 'requestStarted')
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
  const initial = events.find(e => e.message.stage === 'initial request')!.message.requestState as { request: { host: string, headers: Record<string, string> } }
  assert.equal(initial.request.host, 'shop.example.test')
  assert.equal(initial.request.headers['x-user'], '7')
  const got = backend.requests.at(-1)
  assert.equal(got?.url, '/app/cart')
  assert.equal(got?.headers.host, 'shop.example.test', 'the URL\'s host is the Host header, never resolved')
  assert.ok(kube.requests.includes('GET /apis/gateway.networking.k8s.io/v1/namespaces/apps/gateways/web'))
  assert.ok(kube.requests.some(q => q === 'UPGRADE /api/v1/namespaces/apps/pods/web-a/portforward?ports=15000'), 'the admin port of the first ready pod (by name)')
  assert.ok(kube.requests.some(q => q === 'UPGRADE /api/v1/namespaces/apps/pods/web-a/portforward?ports=8080'), 'the request goes through a forward to the listener port')
  assert.ok(kube.forwards.total - before >= 2)
  await forwardsClosed()
})

test('proxy config backends / all gateway/NAME (namespace from the kubeconfig context)', async () => {
  const r = await ctl(['proxy', 'config', 'backends', 'gateway/web'], { env })
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /^TYPE +NAME +NAMESPACE +ENDPOINT +HEALTH +REQUESTS +LATENCY\nBackend +127\.0\.0\.1:\d+ +- +127\.0\.0\.1:\d+ +1\.00 +\d+ +[\d.]+ms\n$/)
  const all = await ctl(['proxy', 'config', 'all', 'gateway/web', '-n', 'apps', '-o', 'json'], { env })
  assert.equal(all.code, 0, all.stderr)
  assert.deepEqual((JSON.parse(all.stdout) as { routes: Array<{ name: string }> }).routes.map(r => r.name), ['app'])
  await forwardsClosed()
})

test('proxy log gateway/NAME: every ready pod, named', async () => {
  const r = await ctl(['proxy', 'log', 'gateway/web', '-n', 'apps'], { env })
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, 'web-a.apps: current log level is info\nweb-b.apps: current log level is info\n')
  const set = await ctl(['proxy', 'log', 'gateway/web', '-n', 'apps', '--level', 'warn'], { env })
  assert.equal(set.stdout, 'web-a.apps: current log level is warn\nweb-b.apps: current log level is warn\n')
  await ctl(['proxy', 'log', 'gateway/web', '-n', 'apps', '--level', 'info'], { env })
  await forwardsClosed()
})

test('controller log: the controller pod in portico-system', async () => {
  const r = await ctl(['controller', 'log', '--set', 'deployer=debug'], { env })
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /^portico-controller-0\.portico-system:\nCOMPONENT +LEVEL\n/)
  assert.match(r.stdout, /^deployer +debug$/m)
  const other = await ctl(['controller', 'log', '-n', 'elsewhere'], { env })
  assert.equal(other.code, 1)
  assert.equal(other.stderr, 'porticoctl: no ready pod for the controller in namespace elsewhere (label app.kubernetes.io/name=portico-controller in namespace elsewhere: no pods)\n')
})

test('gateway not found, no ready pod, admin port closed in the pod, API refusal', async () => {
  const missing = await ctl(['proxy', 'log', 'gateway/nope', '-n', 'apps'], { env })
  assert.equal(missing.code, 1)
  assert.equal(missing.stderr, 'porticoctl: gateway "nope" not found in namespace "apps"\n')
  const idle = await ctl(['proxy', 'config', 'all', 'gateway/idle', '-n', 'apps'], { env })
  assert.equal(idle.code, 1)
  assert.equal(idle.stderr, `porticoctl: no ready pod for gateway apps/idle (label ${GW}=idle in namespace apps: 1 pod, none ready)\n`)
  const broken = await ctl(['proxy', 'log', 'gateway/broken', '-n', 'apps'], { env })
  assert.equal(broken.code, 1)
  assert.equal(broken.stderr, 'porticoctl: cannot reach the admin server of pod broken-1.apps on port 15000 through the port-forward (is it running? is the admin server enabled?)\n')
  const badToken = join(dir, 'bad-token')
  writeFileSync(badToken, fakeKubeconfig({ ...kube, token: 'wrong' }, 'apps'))
  const refused = await ctl(['proxy', 'log', 'gateway/web', '--kubeconfig', badToken], { env })
  assert.equal(refused.code, 1)
  assert.equal(refused.stderr, 'porticoctl: get gateway apps/web: the Kubernetes API server answered 401: Unauthorized\n')
  await forwardsClosed()
})
