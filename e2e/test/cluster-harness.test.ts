/**
 * Smoke test of the cluster harness (e2e/cluster/harness.ts): a real kube-apiserver built by
 * scripts/kube-tools, the Gateway API CRDs, TokenRequest/TokenReview for service-account
 * tokens, and Deployment → Ready pods → EndpointSlices through kube-controller-manager and the
 * harness's fake kubelet, and pods/portforward through the API server to the fake kubelet's
 * WebSocket endpoint (client-node's PortForward). Skips locally (fails in CI) when the tools are not installed.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:net'
import { PassThrough } from 'node:stream'
import { AuthenticationV1Api, CoreV1Api, CustomObjectsApi, DiscoveryV1Api, AppsV1Api, PortForward } from '@kubernetes/client-node'
import { requireKubeTools, startCluster, type KubeObject } from '../cluster/harness.ts'

const GW = { group: 'gateway.networking.k8s.io', version: 'v1' }

test('cluster harness', { timeout: 180_000 }, async (t) => {
  const tools = requireKubeTools(t)
  if (tools === null) return
  const started = Date.now()
  // A TCP echo on loopback stands for what pod `pf` runs on port 7000; other ports are refused.
  const echo: Server = createServer((socket) => socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`)).on('error', () => {}))
  await new Promise<void>((resolve) => echo.listen({ host: '127.0.0.1', port: 0 }, resolve))
  t.after(() => echo.close())
  const echoPort = (echo.address() as { port: number }).port
  const cluster = await startCluster({
    tools,
    portForward: (pod, port) => pod.metadata?.name === 'pf' && port === 7000 ? { host: '127.0.0.1', port: echoPort } : null
  })
  t.after(async () => await cluster.stop())
  t.diagnostic(`cluster ${cluster.version} up in ${Date.now() - started} ms at ${cluster.server}`)

  const kc = cluster.kubeConfig()
  const core = kc.makeApiClient(CoreV1Api)
  const custom = kc.makeApiClient(CustomObjectsApi)
  const ns = 'smoke'
  await cluster.createNamespace(ns)

  await t.test('the API server reports the version that was built', async () => {
    assert.equal(cluster.version, tools.version)
    const out = await cluster.kubectl(['version', '-o', 'json'])
    const versions = JSON.parse(out) as { clientVersion: { gitVersion: string }, serverVersion: { gitVersion: string } }
    assert.equal(versions.serverVersion.gitVersion, tools.version)
    assert.equal(versions.clientVersion.gitVersion, tools.version)
  })

  await t.test('the Gateway API CRDs are established', async () => {
    const crds = await cluster.api<{ items: KubeObject[] }>('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions')
    const byName = new Map(crds.items.map((c) => [c.metadata?.name, c]))
    for (const plural of ['gatewayclasses', 'gateways', 'httproutes', 'grpcroutes', 'referencegrants']) {
      const crd = byName.get(`${plural}.${GW.group}`)
      assert.ok(crd, `CRD ${plural} installed`)
      assert.ok(crd.status.conditions.some((c: { type: string, status: string }) => c.type === 'Established' && c.status === 'True'), `${plural} established`)
    }
  })

  await t.test('a GatewayClass, a Gateway and an HTTPRoute are stored and read back', async () => {
    await cluster.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: portico }
spec: { controllerName: portico.dev/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: web, namespace: ${ns} }
spec:
  gatewayClassName: portico
  listeners:
    - { name: http, protocol: HTTP, port: 80 }
`)
    await custom.createNamespacedCustomObject({
      ...GW,
      namespace: ns,
      plural: 'httproutes',
      body: {
        apiVersion: `${GW.group}/${GW.version}`,
        kind: 'HTTPRoute',
        metadata: { name: 'api' },
        spec: {
          parentRefs: [{ name: 'web' }],
          rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/api' } }], backendRefs: [{ name: 'echo', port: 80 }] }]
        }
      }
    })
    const gateway = await custom.getNamespacedCustomObject({ ...GW, namespace: ns, plural: 'gateways', name: 'web' }) as KubeObject
    assert.equal(gateway.spec.gatewayClassName, 'portico')
    assert.equal(gateway.spec.listeners[0].port, 80)
    const route = await custom.getNamespacedCustomObject({ ...GW, namespace: ns, plural: 'httproutes', name: 'api' }) as KubeObject
    assert.equal(route.spec.rules[0].matches[0].path.value, '/api')
    // Defaults from the CRD schema are applied by the API server.
    assert.equal(route.spec.parentRefs[0].group, GW.group)
    assert.equal(route.spec.parentRefs[0].kind, 'Gateway')
    const listed = await cluster.kubectl(['get', 'httproutes', '-n', ns, '-o', 'name'])
    assert.equal(listed.trim(), 'httproute.gateway.networking.k8s.io/api')
  })

  await t.test('a Namespace is stored and read back, with its default ServiceAccount', async () => {
    await core.createNamespace({ body: { metadata: { name: 'other', labels: { team: 'a' } } } })
    const read = await core.readNamespace({ name: 'other' })
    assert.equal(read.metadata?.labels?.team, 'a')
    assert.equal(read.status?.phase, 'Active')
    const sa = await core.readNamespacedServiceAccount({ name: 'default', namespace: ns })
    assert.equal(sa.metadata?.name, 'default')
  })

  await t.test('a service-account token from TokenRequest passes TokenReview', async () => {
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'proxy' } } })
    const request = await core.createNamespacedServiceAccountToken({
      name: 'proxy',
      namespace: ns,
      body: { spec: { audiences: ['portico'], expirationSeconds: 600 } }
    })
    const token = request.status?.token
    assert.ok(token)
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as { iss: string, aud: string[], sub: string }
    assert.equal(claims.iss, cluster.serviceAccountIssuer)
    assert.deepEqual(claims.aud, ['portico'])
    assert.equal(claims.sub, `system:serviceaccount:${ns}:proxy`)

    const authn = kc.makeApiClient(AuthenticationV1Api)
    const review = await authn.createTokenReview({ body: { spec: { token, audiences: ['portico'] } } })
    assert.equal(review.status?.authenticated, true)
    assert.equal(review.status?.user?.username, `system:serviceaccount:${ns}:proxy`)
    assert.deepEqual(review.status?.audiences, ['portico'])
    assert.ok(review.status?.user?.groups?.includes(`system:serviceaccounts:${ns}`))

    // Another audience is refused; so is a token minted by the helper for a different one.
    const wrong = await authn.createTokenReview({ body: { spec: { token, audiences: ['someone-else'] } } })
    assert.notEqual(wrong.status?.authenticated, true)
    const other = await cluster.createToken(ns, 'proxy', { audiences: ['other'] })
    const otherReview = await authn.createTokenReview({ body: { spec: { token: other, audiences: ['portico'] } } })
    assert.notEqual(otherReview.status?.authenticated, true)
  })

  await t.test('RBAC applies to everyone but the admin', async () => {
    const token = await cluster.createToken(ns, 'proxy', { audiences: [cluster.serviceAccountIssuer] })
    // The service account's own token: authenticated, but RBAC grants it nothing yet.
    await assert.rejects(cluster.kubectl(['get', 'pods', '-n', ns, '--token', token]), /forbidden/i)
    await cluster.apply([
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'read-pods', namespace: ns }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }] },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'proxy-reads-pods', namespace: ns }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-pods' }, subjects: [{ kind: 'ServiceAccount', name: 'proxy', namespace: ns }] }
    ])
    const out = await cluster.kubectl(['auth', 'can-i', 'list', 'pods', '-n', ns, `--as=system:serviceaccount:${ns}:proxy`])
    assert.equal(out.trim(), 'yes')
    await cluster.kubectl(['get', 'pods', '-n', ns, '--token', token])
  })

  await t.test('a Deployment gets Ready pods and its Service gets an EndpointSlice', async () => {
    const apps = kc.makeApiClient(AppsV1Api)
    await cluster.apply([
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'echo', namespace: ns },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'echo' } },
          template: {
            metadata: { labels: { app: 'echo' } },
            spec: { containers: [{ name: 'echo', image: 'example.invalid/echo:1', ports: [{ name: 'http', containerPort: 8080 }] }] }
          }
        }
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'echo', namespace: ns },
        spec: { selector: { app: 'echo' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] }
      }
    ])
    const pods = await cluster.waitForReadyPods(ns, 'app=echo', 2)
    const podIPs = pods.map((p) => p.status.podIP as string).sort()
    assert.equal(podIPs.length, 2)
    for (const ip of podIPs) assert.match(ip, /^192\.0\.2\.\d+$/) // documentation range, never routed

    const discovery = kc.makeApiClient(DiscoveryV1Api)
    const deadline = Date.now() + 30_000
    let addresses: string[] = []
    let port: number | undefined
    while (Date.now() < deadline) {
      const slices = await discovery.listNamespacedEndpointSlice({ namespace: ns, labelSelector: 'kubernetes.io/service-name=echo' })
      const endpoints = slices.items.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready === true)
      addresses = endpoints.flatMap((e) => e.addresses).sort()
      port = slices.items[0]?.ports?.[0]?.port
      if (addresses.length === 2) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    assert.deepEqual(addresses, podIPs)
    assert.equal(port, 8080)

    const deadline2 = Date.now() + 30_000
    let available = 0
    while (Date.now() < deadline2) {
      const deployment = await apps.readNamespacedDeployment({ name: 'echo', namespace: ns })
      available = deployment.status?.availableReplicas ?? 0
      if (available === 2) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    assert.equal(available, 2)

    // Scaling down deletes a pod gracefully; the fake kubelet completes the deletion.
    await apps.patchNamespacedDeploymentScale({ name: 'echo', namespace: ns, body: [{ op: 'replace', path: '/spec/replicas', value: 1 }] })
    const deadline3 = Date.now() + 30_000
    let remaining = -1
    while (Date.now() < deadline3) {
      remaining = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=echo' })).items.length
      if (remaining === 1) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    assert.equal(remaining, 1)
  })

  await t.test('port-forward through the API server reaches the fake kubelet\'s target', async () => {
    await cluster.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'pf', namespace: ns, labels: { app: 'pf' } },
      spec: { containers: [{ name: 'main', image: 'example.invalid/pf:1', ports: [{ containerPort: 7000 }] }] }
    })
    await cluster.waitForReadyPods(ns, 'app=pf', 1)

    const forward = async (port: number, send: string): Promise<{ out: string, err: string }> => {
      const output = new PassThrough()
      const errors = new PassThrough()
      const input = new PassThrough()
      let out = ''
      let err = ''
      output.on('data', (c: Buffer) => { out += c.toString() })
      errors.on('data', (c: Buffer) => { err += c.toString() })
      const ws = await new PortForward(kc, false).portForward(ns, 'pf', [port], output, errors, input) as unknown as { close: () => void, on: (e: string, f: () => void) => void }
      const closed = new Promise<void>((resolve) => ws.on('close', resolve))
      input.write(send)
      const deadline = Date.now() + 10_000
      while (Date.now() < deadline && out.length < `echo:${send}`.length && err === '') await new Promise((resolve) => setTimeout(resolve, 20))
      ws.close()
      await closed
      return { out, err }
    }

    assert.deepEqual(await forward(7000, 'hello'), { out: 'echo:hello', err: '' })
    // A second connection works too (one WebSocket per connection, as kubectl does).
    assert.equal((await forward(7000, 'again')).out, 'echo:again')
    // Refused by the hook: the kubelet's error channel says so.
    const refused = await forward(7001, 'x')
    assert.equal(refused.out, '')
    assert.match(refused.err, /nothing listens on port 7001 in pod smoke\/pf/)
  })
})
