/**
 * porticoctl's cluster path against a real kube-apiserver (e2e/cluster/harness.ts): it finds
 * a Gateway's proxy pod by the `gateway.networking.k8s.io/gateway-name` label and
 * port-forwards to it with @kubernetes/client-node, through the API server to the harness's
 * fake kubelet, whose portForward hook maps the pod's admin port (15000) and listener port
 * (3000, porticoctl's default in inject mode) to a standalone portico on loopback. Also the
 * error paths: no such Gateway, no ready pod, no kubeconfig. Skips locally (fails in CI) when
 * the kube tools are not installed.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { requireKubeTools, startCluster, type KubeObject } from '../cluster/harness.ts'
import { freePort, startPortico } from '@portico/testkit/portico'
import { startEchoBackend } from '@portico/testkit/backends'
import { ctl, jsonLines } from '@portico/testkit/porticoctl'
import { startController } from '../cluster/portico-processes.ts'

const GW = 'gateway.networking.k8s.io/gateway-name'
const NS = 'apps'

test('porticoctl against a real API server', { timeout: 180_000 }, async (t) => {
  const tools = requireKubeTools(t)
  if (tools === null) return

  const backend = await startEchoBackend('app')
  t.after(async () => await backend.close())
  const adminPort = await freePort()
  const portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, LOG_LEVEL: 'info' },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'app', matches: [{ path: { pathPrefix: '/app' } }], backends: [{ host: backend.host }] }]
    })
  })
  t.after(async () => await portico.stop())

  // Where pod web-a's ports really are: admin 15000, listener 3000 (porticoctl's default).
  const podPorts: Record<string, Record<number, number>> = { 'web-a': { 15000: adminPort, 3000: portico.port } }
  const forwarded: string[] = []
  const cluster = await startCluster({
    tools,
    portForward: (pod, port) => {
      forwarded.push(`${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}:${port}`)
      const target = podPorts[pod.metadata?.name ?? '']?.[port]
      return target === undefined ? null : { host: '127.0.0.1', port: target }
    }
  })
  t.after(async () => await cluster.stop())

  await cluster.createNamespace(NS)
  const gateway = (name: string): KubeObject => ({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata: { name, namespace: NS },
    spec: { gatewayClassName: 'portico', listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }] }
  })
  const pod = (name: string, gatewayName: string, extra: object = {}): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels: { [GW]: gatewayName } },
    spec: { containers: [{ name: 'proxy', image: 'example.invalid/portico:1' }], ...extra }
  })
  await cluster.apply([
    gateway('web'),
    gateway('idle'),
    gateway('empty'),
    pod('web-a', 'web'),
    // Bound to a node the fake kubelet does not run: stays Pending, never Ready.
    pod('idle-1', 'idle', { nodeName: 'elsewhere' })
  ])
  await cluster.waitForReadyPods(NS, `${GW}=web`, 1)

  const home = mkdtempSync(join(tmpdir(), 'porticoctl-cluster-e2e-'))
  t.after(() => rmSync(home, { recursive: true, force: true }))
  const env = { KUBECONFIG: cluster.kubeconfig, HOME: home, KUBERNETES_SERVICE_HOST: '' }

  await t.test('proxy config all -o json: the config dump of the pod, over a port-forward', async () => {
    const r = await ctl(['proxy', 'config', 'all', 'gateway/web', '-n', NS, '-o', 'json'], { env })
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual((JSON.parse(r.stdout) as { routes: Array<{ name: string }> }).routes.map(route => route.name), ['app'])
    assert.ok(forwarded.includes(`${NS}/web-a:15000`), forwarded.join(', '))
  })

  await t.test('proxy log: the pod\'s log level', async () => {
    const r = await ctl(['proxy', 'log', 'gateway/web', '-n', NS], { env })
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout, 'web-a.apps: current log level is info\n')
  })

  await t.test('proxy trace --raw: the request goes through a forward to the listener port', async () => {
    const before = forwarded.filter(f => f === `${NS}/web-a:3000`).length
    const r = await ctl(['proxy', 'trace', 'gateway/web', '-n', NS, '--raw', '--', 'http://example.com/app/cart', '-H', 'x-user: 7'], { env, timeoutMs: 30_000 })
    assert.equal(r.code, 0, r.stderr)
    const events = jsonLines(r.stdout)
    assert.equal(events[0]?.message.type, 'requestStarted')
    assert.equal(events.at(-1)?.message.type, 'requestFinished')
    const initial = events.find(e => e.message.stage === 'initial request')?.message.requestState as { request: { host: string, headers: Record<string, string> } }
    assert.equal(initial.request.host, 'example.com')
    assert.equal(initial.request.headers['x-user'], '7')
    const got = backend.requests.at(-1)
    assert.equal(got?.url, '/app/cart')
    assert.equal(got?.headers.host, 'example.com', 'the URL\'s host is the Host header, never resolved')
    assert.ok(forwarded.filter(f => f === `${NS}/web-a:3000`).length > before, 'a forward to port 3000 of web-a')
  })

  await t.test('errors: no such gateway, no pod, no ready pod, no kubeconfig', async () => {
    const missing = await ctl(['proxy', 'log', 'gateway/nope', '-n', NS], { env })
    assert.equal(missing.code, 1)
    assert.equal(missing.stderr, 'porticoctl: gateway "nope" not found in namespace "apps"\n')

    const empty = await ctl(['proxy', 'log', 'gateway/empty', '-n', NS], { env })
    assert.equal(empty.code, 1)
    assert.equal(empty.stderr, `porticoctl: no ready pod for gateway apps/empty (label ${GW}=empty in namespace apps: no pods)\n`)

    const idle = await ctl(['proxy', 'config', 'all', 'gateway/idle', '-n', NS], { env })
    assert.equal(idle.code, 1)
    assert.equal(idle.stderr, `porticoctl: no ready pod for gateway apps/idle (label ${GW}=idle in namespace apps: 1 pod, none ready)\n`)

    const none = await ctl(['proxy', 'log', 'gateway/web', '-n', NS], { env: { KUBECONFIG: '', HOME: home, KUBERNETES_SERVICE_HOST: '' } })
    assert.equal(none.code, 1)
    assert.equal(none.stderr, `porticoctl: no kubeconfig: KUBECONFIG is not set and ${join(home, '.kube', 'config')} does not exist (use --local for a standalone instance)\n`)
  })

  await t.test('controller log: the real controller\'s components, read and set through its pod', async () => {
    await cluster.createNamespace('portico-system')
    // Its own GatewayClass, so it provisions nothing for the Gateways above.
    const controller = await startController(cluster, { env: { CONTROLLER_NAME: 'example.com/cli-test', GATEWAY_CLASS_NAME: 'cli-test' } })
    t.after(async () => await controller.stop())
    // The controller runs here; its pod (the chart's label) forwards admin port 9095 to it.
    podPorts['portico-controller-0'] = { 9095: controller.admin }
    await cluster.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'portico-controller-0', namespace: 'portico-system', labels: { 'app.kubernetes.io/name': 'portico-controller' } },
      spec: { containers: [{ name: 'controller', image: 'example.invalid/portico-controller:1' }] }
    })
    await cluster.waitForReadyPods('portico-system', 'app.kubernetes.io/name=portico-controller', 1)
    const shown = await ctl(['controller', 'log'], { env })
    assert.equal(shown.code, 0, shown.stderr)
    assert.match(shown.stdout, /^portico-controller-0\.portico-system:\nCOMPONENT +LEVEL\n/)
    for (const component of ['portico/syncer', 'portico/translator', 'gateway-controller', 'deployer', 'default']) {
      assert.match(shown.stdout, new RegExp(`^${component} +info$`, 'm'))
    }
    const set = await ctl(['controller', 'log', '--set', 'portico/syncer=debug'], { env })
    assert.equal(set.code, 0, set.stderr)
    assert.match(set.stdout, /^portico\/syncer +debug$/m)
    assert.match(set.stdout, /^deployer +info$/m)
    const bad = await ctl(['controller', 'log', '--set', 'portico/syncer=loud'], { env })
    assert.equal(bad.code, 2, bad.stderr)
  })
})
