/**
 * The chart in a real kube-apiserver (e2e/cluster/harness.ts, built by scripts/kube-tools):
 *
 * 1. every golden rendering (every case) is accepted by the API server — a server-side,
 *    strict-validation dry run, with the Prometheus Operator and VPA CRDs installed;
 * 2. `helm install` (monitoring on) creates every object;
 * 3. the controller runs as a local process with the environment the installed Deployment
 *    has (read back from the API server) and the chart's ServiceAccount's credentials (a
 *    TokenRequest token), so the chart's RBAC is what it works with: it becomes ready, owns
 *    GatewayClass `portico` (Accepted), and handles deploy/examples (Gateway, HTTPRoutes,
 *    PorticoParameters) — proxies deployed, statuses written, never a `forbidden`;
 * 4. `helm upgrade` after the controller co-owns the GatewayClass;
 * 5. `helm upgrade --set gatewayModels.enabled=true`: the PorticoModel CRD and its RBAC appear
 *    (absent before, with the controller not watching), the restarted controller watches
 *    PorticoModels and writes their status;
 * 6. `helm upgrade --set inferenceExtension.enabled=true --set crds.inferencePool=true`: the
 *    chart's vendored InferencePool CRD (v1.6.2) is installed and Established, the RBAC for
 *    InferencePools, their status, Pods and the CRD by name; the restarted controller reads a
 *    pool an HTTPRoute names and writes its status; and `helm uninstall`, which keeps the CRDs.
 */

import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { requireKubeTools, startCluster, type Cluster, type KubeObject } from '../cluster/harness.ts'
import { CHART_DIR, GOLDEN_DIR, NAMESPACE, RELEASE, REPO_ROOT, caseNames, findChartCrds, objectsOf, requireHelm, run } from '../lib/chart.ts'
import { freePort } from '@portico/testkit/portico'

const GW = '/apis/gateway.networking.k8s.io/v1'

async function until<T> (what: string, timeoutMs: number, check: () => Promise<T | undefined | false>, diagnostics?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      const value = await check()
      if (value !== undefined && value !== false) return value
    } catch (err) {
      last = err
    }
    await new Promise(resolve => setTimeout(resolve, 250))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last !== undefined ? ` (last error: ${(last as Error).message})` : ''}${diagnostics !== undefined ? `\n${diagnostics()}` : ''}`)
}

type Condition = { type: string, status: string, reason: string, message: string }

function conditionOf (obj: KubeObject | undefined, type: string): Condition | undefined {
  return ((obj?.status?.conditions ?? []) as Condition[]).find(c => c.type === type)
}

/** A running controller process and everything it printed. */
interface Controller { child: ChildProcess, output: () => string, healthPort: number, metricsPort: number, stop: () => Promise<void> }

/**
 * The controller as the installed Deployment would run it: its container's environment
 * (fieldRefs resolved as the kubelet does), local ports instead of the pod's, and a
 * kubeconfig with a token of the chart's ServiceAccount.
 */
async function startController (cluster: Cluster, dir: string, label: string): Promise<Controller> {
  const deployment = await cluster.api<KubeObject>('GET', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${RELEASE}`)
  const pod = deployment.spec.template.spec
  const container = pod.containers.find((c: { name: string }) => c.name === 'controller')
  const pods = await cluster.waitForReadyPods(NAMESPACE, 'app.kubernetes.io/name=portico-controller', 1, 60_000)
  const podName = pods[0]!.metadata!.name!
  const env: Record<string, string> = {}
  for (const e of container.env as Array<{ name: string, value?: string, valueFrom?: { fieldRef?: { fieldPath: string } } }>) {
    if (e.value !== undefined) env[e.name] = e.value
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = NAMESPACE
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') env[e.name] = podName
    else if (e.valueFrom === undefined) env[e.name] = ''
    else throw new Error(`env ${e.name}: a valueFrom the test does not resolve`)
  }
  const [healthPort, metricsPort, xdsPort, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  Object.assign(env, { HEALTH_PORT: String(healthPort), METRICS_PORT: String(metricsPort), XDS_PORT: String(xdsPort), ADMIN_ADDR: `127.0.0.1:${adminPort}` })

  // The pod's credentials: a token of its ServiceAccount for the API server's audience.
  const token = await cluster.createToken(NAMESPACE, pod.serviceAccountName, { audiences: [cluster.serviceAccountIssuer], expirationSeconds: 3600 })
  const kubeconfig = join(dir, `controller-${label}.kubeconfig`)
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: cluster.server, 'certificate-authority': cluster.caFile } }],
    users: [{ name: `system:serviceaccount:${NAMESPACE}:${pod.serviceAccountName}`, user: { token } }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: `system:serviceaccount:${NAMESPACE}:${pod.serviceAccountName}`, namespace: NAMESPACE } }],
    'current-context': 'c'
  }), { mode: 0o600 })

  const child = spawn(process.execPath, [join(REPO_ROOT, 'packages/controller/bin/portico-controller.ts')], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ...env, KUBECONFIG: kubeconfig },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  child.stdout!.on('data', (d: Buffer) => { output += d.toString() })
  child.stderr!.on('data', (d: Buffer) => { output += d.toString() })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  const kill = () => { if (child.exitCode === null) child.kill('SIGKILL') }
  process.once('exit', kill)
  return {
    child,
    output: () => output,
    healthPort,
    metricsPort,
    stop: async () => {
      process.removeListener('exit', kill)
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
        await exited
        clearTimeout(timer)
      }
    }
  }
}

async function get (cluster: Cluster, path: string): Promise<KubeObject | undefined> {
  try {
    return await cluster.api<KubeObject>('GET', path)
  } catch (err) {
    if ((err as { status?: number }).status === 404) return undefined
    throw err
  }
}

test('the chart in a real API server, and the controller running with its settings and RBAC', { timeout: 300_000 }, async (t: TestContext) => {
  const helm = requireHelm(t)
  if (helm === null) return
  const tools = requireKubeTools(t)
  if (tools === null) return
  const crds = findChartCrds()
  if (crds === null) {
    const why = 'the ServiceMonitor/PodMonitor/VPA CRDs are missing: run ./scripts/test-tools (CHART_CRDS)'
    if (process.env.CI === 'true') throw new Error(why)
    t.skip(why)
    return
  }
  const started = Date.now()
  const cluster = await startCluster({ tools })
  t.after(async () => await cluster.stop())
  t.diagnostic(`cluster ${cluster.version} up in ${Date.now() - started} ms`)
  const dir = mkdtempSync(join(tmpdir(), 'portico-chart-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const helmEnv = { ...process.env, HELM_CACHE_HOME: join(dir, 'helm/cache'), HELM_CONFIG_HOME: join(dir, 'helm/config'), HELM_DATA_HOME: join(dir, 'helm/data'), KUBECONFIG: cluster.kubeconfig }
  const helmRun = async (args: string[]) => {
    const r = await run(helm, [...args, '--kube-context', 'portico-test'], { env: helmEnv, timeoutMs: 150_000 })
    assert.equal(r.code, 0, `helm ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`)
    return r.stdout
  }

  // The monitoring and VPA CRDs, so the optional templates are validated too.
  await cluster.kubectl(['apply', '--server-side', '-f', crds])
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/servicemonitors.monitoring.coreos.com', 'crd/podmonitors.monitoring.coreos.com', 'crd/verticalpodautoscalers.autoscaling.k8s.io'])
  for (const ns of [NAMESPACE, 'apps', 'edge']) await cluster.createNamespace(ns)

  await t.test('every golden rendering is accepted by the API server (server-side dry run, strict)', async () => {
    const cases = caseNames()
    assert.deepEqual(readdirSync(GOLDEN_DIR).map(f => f.replace(/\.yaml$/, '')).sort(), cases)
    for (const c of cases) {
      const file = join(GOLDEN_DIR, `${c}.yaml`)
      const objects = objectsOf(readFileSync(file, 'utf8'))
      let out: string
      try {
        out = await cluster.kubectl(['apply', '--server-side', '--dry-run=server', '--validate=strict', '--field-manager=helm', '-f', file])
      } catch (err) {
        assert.fail(`${c}: the API server rejects the rendering: ${(err as Error).message}`)
      }
      const lines = out.trim().split('\n').filter(l => l.includes('(server dry run)'))
      assert.equal(lines.length, objects.length, `${c}: every object accepted:\n${out}`)
    }
  })

  await t.test('helm install creates every rendered object', async () => {
    await helmRun(['install', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--set', 'monitoring.enabled=true', '--set', 'monitoring.proxy.namespaceSelector.any=true', '--wait', '--timeout', '120s'])
    const manifest = await helmRun(['get', 'manifest', RELEASE, '--namespace', NAMESPACE])
    const objects = objectsOf(manifest)
    assert.ok(objects.some(o => o.kind === 'ServiceMonitor') && objects.some(o => o.kind === 'PodMonitor') && objects.some(o => o.kind === 'ConfigMap'))
    const listed = JSON.parse(await cluster.kubectl(['get', '-n', NAMESPACE, '-f', '-', '-o', 'json'], { input: manifest })) as { items?: KubeObject[] }
    const found = (listed.items ?? [listed as KubeObject]).map(o => `${o.kind}/${o.metadata?.name}`).sort()
    assert.deepEqual(found, objects.map(o => `${o.kind}/${o.metadata.name}`).sort())
    const deployment = await cluster.api<KubeObject>('GET', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${RELEASE}`)
    assert.equal(deployment.status?.availableReplicas, 1, 'the Deployment is available (the harness plays kubelet)')
    // gatewayModels.enabled is off by default: no PorticoModel CRD.
    assert.equal(await get(cluster, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/porticomodels.portico.dev'), undefined, 'no PorticoModel CRD without gatewayModels.enabled')
  })

  await t.test('RBAC: what the controller needs, and not more', async () => {
    const user = `system:serviceaccount:${NAMESPACE}:${RELEASE}`
    const can = async (verb: string, resource: string, options: { group?: string, namespace?: string, subresource?: string, name?: string } = {}) => {
      const review = await cluster.api<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${NAMESPACE}`, 'system:authenticated'],
          resourceAttributes: { verb, resource, group: options.group ?? '', namespace: options.namespace ?? '', subresource: options.subresource ?? '', name: options.name ?? '' }
        }
      })
      return review.status.allowed
    }
    const gw = 'gateway.networking.k8s.io'
    const allowed: Array<[string, string, Parameters<typeof can>[2]]> = [
      ...['get', 'list', 'watch'].flatMap(v => ['gatewayclasses', 'gateways', 'httproutes', 'referencegrants'].map(r => [v, r, { group: gw }] as [string, string, Parameters<typeof can>[2]])),
      ...['get', 'list', 'watch'].flatMap(v => ['services', 'secrets', 'namespaces'].map(r => [v, r, {}] as [string, string, Parameters<typeof can>[2]])),
      ['list', 'endpointslices', { group: 'discovery.k8s.io' }],
      ['watch', 'endpointslices', { group: 'discovery.k8s.io' }],
      ['create', 'gatewayclasses', { group: gw }],
      ['patch', 'gatewayclasses', { group: gw }],
      ['update', 'gatewayclasses', { group: gw }],
      ...['gatewayclasses', 'gateways', 'httproutes'].flatMap(r => ['update', 'patch'].map(v => [v, r, { group: gw, subresource: 'status', namespace: r === 'gatewayclasses' ? '' : 'default' }] as [string, string, Parameters<typeof can>[2]])),
      ...['serviceaccounts', 'configmaps', 'services'].flatMap(r => ['get', 'create', 'patch', 'update'].map(v => [v, r, { namespace: 'default' }] as [string, string, Parameters<typeof can>[2]])),
      ...['get', 'create', 'patch', 'update'].map(v => [v, 'deployments', { group: 'apps', namespace: 'apps' }] as [string, string, Parameters<typeof can>[2]]),
      ['create', 'events', { namespace: 'default' }],
      ['create', 'tokenreviews', { group: 'authentication.k8s.io' }],
      ['get', 'customresourcedefinitions', { group: 'apiextensions.k8s.io', name: 'httproutes.gateway.networking.k8s.io' }],
      // The Gateway CRD too: address routability is claimed only when its schema has the field.
      ['get', 'customresourcedefinitions', { group: 'apiextensions.k8s.io', name: 'gateways.gateway.networking.k8s.io' }],
      ['create', 'leases', { group: 'coordination.k8s.io', namespace: NAMESPACE }],
      ['get', 'leases', { group: 'coordination.k8s.io', namespace: NAMESPACE, name: 'portico-controller' }],
      ['update', 'leases', { group: 'coordination.k8s.io', namespace: NAMESPACE, name: 'portico-controller' }],
      ['create', 'secrets', { namespace: NAMESPACE }]
    ]
    const denied: Array<[string, string, Parameters<typeof can>[2]]> = [
      ['delete', 'deployments', { group: 'apps', namespace: 'default' }],
      ['list', 'pods', { namespace: 'default' }],
      ['create', 'secrets', { namespace: 'default' }],
      ['update', 'secrets', { namespace: NAMESPACE, name: 'portico-xds-ca' }],
      ['update', 'leases', { group: 'coordination.k8s.io', namespace: NAMESPACE, name: 'someone-elses-lease' }],
      ['create', 'leases', { group: 'coordination.k8s.io', namespace: 'default' }],
      ['update', 'gateways', { group: gw, namespace: 'default' }],
      ['delete', 'gatewayclasses', { group: gw }],
      ['create', 'clusterrolebindings', { group: 'rbac.authorization.k8s.io' }],
      ['get', 'customresourcedefinitions', { group: 'apiextensions.k8s.io', name: 'grpcroutes.gateway.networking.k8s.io' }],
      ['list', 'customresourcedefinitions', { group: 'apiextensions.k8s.io' }],
      ['update', 'customresourcedefinitions', { group: 'apiextensions.k8s.io', name: 'httproutes.gateway.networking.k8s.io' }],
      ['create', 'pods', { namespace: 'default' }],
      // gatewayModels.enabled is off by default: no rule for PorticoModels.
      ['list', 'porticomodels', { group: 'portico.dev' }],
      ['update', 'porticomodels', { group: 'portico.dev', subresource: 'status', namespace: 'default' }]
    ]
    const results = await Promise.all([...allowed.map(async ([v, r, o]) => ({ v, r, o, want: true, got: await can(v, r, o) })), ...denied.map(async ([v, r, o]) => ({ v, r, o, want: false, got: await can(v, r, o) }))])
    const wrong = results.filter(x => x.want !== x.got).map(x => `${x.want ? 'cannot' : 'can'} ${x.v} ${x.r}${x.o?.subresource !== undefined ? `/${x.o.subresource}` : ''} ${JSON.stringify(x.o)}`)
    assert.deepEqual(wrong, [])
  })

  let controller: Controller | undefined
  t.after(async () => await controller?.stop())
  const diagnostics = () => `controller output:\n${controller?.output().split('\n').slice(-30).join('\n') ?? ''}`

  await t.test('the controller starts with the rendered settings and the chart\'s RBAC, and owns GatewayClass portico', async () => {
    controller = await startController(cluster, dir, 'first')
    const c = controller
    await until('GET /readyz 200', 60_000, async () => {
      if (c.child.exitCode !== null) throw new Error(`the controller exited (${c.child.exitCode})`)
      const res = await fetch(`http://127.0.0.1:${c.healthPort}/readyz`)
      return res.status === 200
    }, diagnostics)
    const gc = await until('GatewayClass portico Accepted=True', 30_000, async () => {
      const obj = await get(cluster, `${GW}/gatewayclasses/portico`)
      return conditionOf(obj, 'Accepted')?.status === 'True' ? obj : undefined
    }, diagnostics)
    assert.equal(gc.spec.controllerName, 'portico.dev/gateway-controller')
    // supportedFeatures from the installed (standard-channel) HTTPRoute CRD, read with the
    // chart's RBAC: CORS's field is there, retry's is not.
    const features = ((gc.status?.supportedFeatures ?? []) as Array<{ name: string }>).map(f => f.name)
    assert.ok(features.includes('HTTPRouteCORS'), `supportedFeatures: ${features.join(', ')}`)
    assert.ok(!features.includes('HTTPRouteRetry'), `supportedFeatures: ${features.join(', ')}`)
    // helm and the controller both manage its spec, without conflicting.
    const managers = (gc.metadata?.managedFields as Array<{ manager: string }>).map(m => m.manager)
    assert.ok(managers.includes('portico-controller'), `managers: ${managers.join(', ')}`)
    assert.ok(managers.some(m => m.startsWith('helm')), `managers: ${managers.join(', ')}`)
    // The xDS CA Secret (tls mode) and the leader's Lease, in the release namespace.
    assert.ok(await get(cluster, `/api/v1/namespaces/${NAMESPACE}/secrets/portico-xds-ca`), 'xDS CA Secret created')
    const lease = await until('the Lease', 15_000, async () => await get(cluster, `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/portico-controller`), diagnostics)
    assert.equal(lease.spec.holderIdentity, (await cluster.waitForReadyPods(NAMESPACE, 'app.kubernetes.io/name=portico-controller', 1))[0]!.metadata!.name)
  })

  await t.test('deploy/examples: the proxy is deployed, routes accepted, PorticoParameters validated', async () => {
    for (const f of ['gateway.yaml', 'httproute.yaml', 'mcp-backend.yaml', 'porticoparameters.yaml']) {
      await cluster.kubectl(['apply', '--server-side', '--validate=strict', '-f', join(REPO_ROOT, 'deploy/examples', f)])
    }
    const gw = await until('Gateway web Accepted=True', 30_000, async () => {
      const obj = await get(cluster, `${GW}/namespaces/default/gateways/web`)
      return conditionOf(obj, 'Accepted')?.status === 'True' ? obj : undefined
    }, diagnostics)
    assert.ok(conditionOf(gw, 'Programmed'), 'Programmed is reported (True once a proxy ACKs)')
    for (const route of ['api', 'mcp']) {
      let last: KubeObject | undefined
      await until(`HTTPRoute ${route} Accepted and ResolvedRefs`, 30_000, async () => {
        last = await get(cluster, `${GW}/namespaces/default/httproutes/${route}`)
        const parent = ((last?.status?.parents ?? []) as Array<{ controllerName: string, conditions: Condition[] }>).find(p => p.controllerName === 'portico.dev/gateway-controller')
        const status = (type: string) => parent?.conditions.find(c => c.type === type)?.status
        return status('Accepted') === 'True' && status('ResolvedRefs') === 'True'
      }, () => `status: ${JSON.stringify(last?.status)}\n${diagnostics()}`)
    }
    // The deployer, with the chart's deployer ClusterRole: the proxy's objects next to the Gateway.
    const proxy = await until('proxy Deployment default/web', 30_000, async () => await get(cluster, '/apis/apps/v1/namespaces/default/deployments/web'), diagnostics)
    const installed = await cluster.api<KubeObject>('GET', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${RELEASE}`)
    const proxyImage = installed.spec.template.spec.containers[0].env.find((e: { name: string }) => e.name === 'PROXY_IMAGE').value
    assert.equal(proxy.spec.template.spec.containers[0].image, proxyImage)
    for (const path of ['/api/v1/namespaces/default/services/web', '/api/v1/namespaces/default/serviceaccounts/web', '/api/v1/namespaces/default/configmaps/web-xds-ca']) {
      assert.ok(await get(cluster, path), `${path} deployed`)
    }
    // The chart's PodMonitor selects these proxy pods, on their `metrics` port, 15020.
    const podMonitor = await cluster.api<KubeObject>('GET', `/apis/monitoring.coreos.com/v1/namespaces/${NAMESPACE}/podmonitors/${RELEASE}-proxy`)
    const expr = podMonitor.spec.selector.matchExpressions[0]
    const pods = await cluster.waitForReadyPods('default', `${expr.key} in (${expr.values.join(',')})`, 1, 30_000)
    const port = pods[0]!.spec.containers[0].ports.find((p: { name: string }) => p.name === podMonitor.spec.podMetricsEndpoints[0].port)
    assert.equal(port?.containerPort, 15020)
  })

  await t.test('the controller serves the metrics the dashboard and ServiceMonitor use', async () => {
    const text = await (await fetch(`http://127.0.0.1:${controller!.metricsPort}/metrics`)).text()
    for (const name of ['portico_controller_reconciles_total', 'portico_controller_translation_duration_seconds', 'portico_controller_xds_connected_proxies', 'portico_controller_gateways', 'portico_controller_httproutes', 'portico_controller_process_resident_memory_bytes']) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name)
    }
    assert.match(text, /^portico_controller_gateways 1$/m)
  })

  await t.test('helm upgrade with class parameters; the restarted controller agrees with the chart', async () => {
    await controller!.stop()
    await helmRun(['upgrade', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--reuse-values', '--set', 'gatewayClassParametersRefs.portico.name=proxy-defaults', '--set', 'gatewayClassParametersRefs.portico.namespace=portico-system', '--set', 'controller.logLevel=debug', '--wait', '--timeout', '120s'])
    const installed = await cluster.api<KubeObject>('GET', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${RELEASE}`)
    const env = installed.spec.template.spec.containers[0].env as Array<{ name: string, value?: string }>
    assert.equal(env.find(e => e.name === 'LOG_LEVEL')?.value, 'debug')
    assert.deepEqual(JSON.parse(env.find(e => e.name === 'GATEWAY_CLASS_PARAMETERS_REFS')!.value!), { portico: { name: 'proxy-defaults', namespace: 'portico-system' } })
    const before = controller!.output()
    controller = await startController(cluster, dir, 'second')
    const c = controller
    await until('GET /readyz 200 again', 60_000, async () => (await fetch(`http://127.0.0.1:${c.healthPort}/readyz`)).status === 200, diagnostics)
    await until('the controller applied its GatewayClass', 30_000, async () => c.output().includes('"msg":"portico controller started"'), diagnostics)
    const gc = await cluster.api<KubeObject>('GET', `${GW}/gatewayclasses/portico`)
    assert.deepEqual(gc.spec.parametersRef, { group: 'portico.dev', kind: 'PorticoParameters', name: 'proxy-defaults', namespace: 'portico-system' })
    assert.equal(conditionOf(gc, 'Accepted')?.status, 'True')
    // The class's PorticoParameters (deploy/examples/porticoparameters.yaml) reach the proxy.
    const proxy = await until('proxy Deployment default/web with the class parameters', 30_000, async () => {
      const d = await get(cluster, '/apis/apps/v1/namespaces/default/deployments/web')
      return d?.spec.replicas === 2 ? d : undefined
    }, diagnostics)
    const container = proxy.spec.template.spec.containers[0]
    assert.equal((container.env as Array<{ name: string, value?: string }>).find(e => e.name === 'DRAIN_TIMEOUT')?.value, '20s')
    // config.accessLog reaches the proxy as ACCESS_LOG (JSON), checked by the controller.
    assert.deepEqual(JSON.parse((container.env as Array<{ name: string, value?: string }>).find(e => e.name === 'ACCESS_LOG')?.value ?? '{}'), { fields: { add: { user_agent: 'request.headers["user-agent"]' } } })
    assert.equal(container.imagePullPolicy, 'IfNotPresent')
    assert.deepEqual(container.resources, { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } })
    // Once more, now that the controller has re-applied the class: no field-ownership conflict.
    await helmRun(['upgrade', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--reuse-values', '--set', 'controller.logLevel=info'])
    const all = before + c.output()
    assert.doesNotMatch(all, /forbidden/i, 'the chart\'s RBAC covers everything the controller did')
    assert.doesNotMatch(all, /"level":50/, 'no error logged')
  })

  await t.test('helm upgrade with gatewayModels.enabled=true: the PorticoModel CRD and RBAC; the restarted controller watches PorticoModels and writes their status', async () => {
    assert.doesNotMatch(controller!.output(), /PorticoModels|porticomodels/, 'the model API off: PorticoModels are not watched (not even discovered)')
    await controller!.stop()
    await helmRun(['upgrade', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--reuse-values', '--set', 'gatewayModels.enabled=true', '--wait', '--timeout', '120s'])
    await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/porticomodels.portico.dev'])
    const review = async (verb: string, subresource = '') => (await cluster.api<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: `system:serviceaccount:${NAMESPACE}:${RELEASE}`, groups: ['system:authenticated'], resourceAttributes: { verb, resource: 'porticomodels', group: 'portico.dev', namespace: 'default', subresource } }
    })).status.allowed
    assert.deepEqual(await Promise.all([review('list'), review('watch'), review('update', 'status'), review('delete')]), [true, true, true, false])
    const before = controller!.output()
    controller = await startController(cluster, dir, 'models')
    const c = controller
    await until('the controller watches PorticoModels', 60_000, async () => c.output().includes('model API on: watching PorticoModels'), diagnostics)
    await cluster.kubectl(['apply', '--server-side', '-f', '-'], {
      input: `apiVersion: portico.dev/v1alpha1
kind: PorticoModel
metadata: { name: gpt, namespace: default }
spec:
  parentRefs: [{ name: web }]
  match: { model: gpt-* }
  provider: { openAI: { model: gpt-4o-mini } }
  baseURL: https://api.openai.example/v1
`
    })
    let last: KubeObject | undefined
    await until('PorticoModel gpt Accepted and ResolvedRefs on Gateway web', 30_000, async () => {
      last = await get(cluster, '/apis/portico.dev/v1alpha1/namespaces/default/porticomodels/gpt')
      const parent = ((last?.status?.parents ?? []) as Array<{ controllerName: string, conditions: Condition[] }>).find(p => p.controllerName === 'portico.dev/gateway-controller')
      return parent?.conditions.find(x => x.type === 'Accepted')?.status === 'True' && parent.conditions.find(x => x.type === 'ResolvedRefs')?.status === 'True'
    }, () => `status: ${JSON.stringify(last?.status)}\n${diagnostics()}`)
    assert.equal(last!.status.model, 'gpt-*')
    assert.match(await cluster.kubectl(['get', 'pmodel', '-n', 'default']), /^gpt\s+gpt-\*\s+/m)
    const all = before + c.output()
    assert.doesNotMatch(all, /forbidden/i, 'the chart\'s RBAC covers the model API')
    assert.doesNotMatch(c.output(), /not available/, 'no "not available" warning for gatewayModels')
  })

  await t.test('helm upgrade with inferenceExtension.enabled=true and crds.inferencePool=true: the chart\'s InferencePool CRD, the RBAC for InferencePools, their status and Pods; the restarted controller reads pools and writes their status', async () => {
    assert.doesNotMatch(controller!.output(), /InferencePool|inferencepools/, 'the extension off: InferencePools are not watched')
    await controller!.stop()
    assert.equal(await get(cluster, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/inferencepools.inference.networking.k8s.io'), undefined, 'no InferencePool CRD before it is asked for')
    // The chart installs the extension's CRD (vendored from the module, v1.6.2) when asked.
    await helmRun(['upgrade', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--reuse-values', '--set', 'inferenceExtension.enabled=true', '--set', 'crds.inferencePool=true', '--wait', '--timeout', '120s'])
    await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/inferencepools.inference.networking.k8s.io'])
    const poolCrd = await get(cluster, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/inferencepools.inference.networking.k8s.io')
    const annotations = (poolCrd?.metadata?.annotations ?? {}) as Record<string, string>
    assert.equal(annotations['inference.networking.k8s.io/bundle-version'], 'v1.6.2')
    assert.equal(annotations['helm.sh/resource-policy'], 'keep')
    const review = async (verb: string, resource: string, group: string, subresource = '') => (await cluster.api<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: `system:serviceaccount:${NAMESPACE}:${RELEASE}`, groups: ['system:authenticated'], resourceAttributes: { verb, resource, group, namespace: 'default', subresource } }
    })).status.allowed
    const pool = 'inference.networking.k8s.io'
    assert.deepEqual(await Promise.all([review('list', 'inferencepools', pool), review('watch', 'inferencepools', pool), review('update', 'inferencepools', pool, 'status'), review('delete', 'inferencepools', pool), review('list', 'pods', ''), review('watch', 'pods', ''), review('delete', 'pods', '')]), [true, true, true, false, true, true, false])
    // The InferencePool CRD, by name only: the controller watches it to start (or stop) watching pools.
    const reviewCrd = async (verb: string, name: string) => (await cluster.api<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: `system:serviceaccount:${NAMESPACE}:${RELEASE}`, groups: ['system:authenticated'], resourceAttributes: { verb, resource: 'customresourcedefinitions', group: 'apiextensions.k8s.io', name } }
    })).status.allowed
    assert.deepEqual(await Promise.all([reviewCrd('list', 'inferencepools.inference.networking.k8s.io'), reviewCrd('watch', 'inferencepools.inference.networking.k8s.io'), reviewCrd('watch', ''), reviewCrd('delete', 'inferencepools.inference.networking.k8s.io')]), [true, true, false, false])
    const before = controller!.output()
    controller = await startController(cluster, dir, 'inference')
    const c = controller
    await until('the controller watches InferencePools', 60_000, async () => c.output().includes('inference extension on: watching InferencePools and Pods'), diagnostics)
    await cluster.kubectl(['apply', '--server-side', '-f', '-'], {
      input: `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: llama, namespace: default }
spec:
  selector: { matchLabels: { app: llama } }
  targetPorts: [{ number: 8000 }]
  endpointPickerRef: { name: llama-epp, port: { number: 9002 } }
---
apiVersion: v1
kind: Service
metadata: { name: llama-epp, namespace: default }
spec: { ports: [{ port: 9002 }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm-pool, namespace: default }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /pool } }]
      backendRefs: [{ group: inference.networking.k8s.io, kind: InferencePool, name: llama }]
`
    })
    let last: KubeObject | undefined
    await until('InferencePool llama Accepted and ResolvedRefs on Gateway web', 30_000, async () => {
      last = await get(cluster, '/apis/inference.networking.k8s.io/v1/namespaces/default/inferencepools/llama')
      const parent = ((last?.status?.parents ?? []) as Array<{ controllerName: string, conditions: Condition[] }>).find(p => p.controllerName === 'portico.dev/gateway-controller')
      return parent?.conditions.find(x => x.type === 'Accepted')?.status === 'True' && parent.conditions.find(x => x.type === 'ResolvedRefs')?.status === 'True'
    }, () => `status: ${JSON.stringify(last?.status)}\n${diagnostics()}`)
    const all = before + c.output()
    assert.doesNotMatch(all, /forbidden/i, 'the chart\'s RBAC covers the inference extension')
    assert.doesNotMatch(c.output(), /not available/, 'no "not available" warning for inferenceExtension')
  })

  await t.test('helm uninstall removes the release, keeps the CRD', async () => {
    await controller!.stop()
    await helmRun(['uninstall', RELEASE, '--namespace', NAMESPACE, '--wait', '--timeout', '60s'])
    assert.equal(await get(cluster, `${GW}/gatewayclasses/portico`), undefined, 'GatewayClass removed with the release')
    assert.equal(await get(cluster, `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${RELEASE}`), undefined)
    assert.ok(await get(cluster, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/porticoparameters.portico.dev'), 'CRD kept (helm.sh/resource-policy: keep)')
    assert.ok(await get(cluster, `/apis/portico.dev/v1alpha1/namespaces/${NAMESPACE}/porticoparameters/proxy-defaults`), 'PorticoParameters kept')
    assert.ok(await get(cluster, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/inferencepools.inference.networking.k8s.io'), 'InferencePool CRD kept (helm.sh/resource-policy: keep)')
  })
})
