/**
 * The chart with the real helm (built by scripts/test-tools): `helm lint`, `helm template`
 * golden files for the defaults and every case in charts/portico/tests/cases/
 * (UPDATE_GOLDEN=1 rewrites charts/portico/tests/golden/), what each case must render, and
 * values.schema.json rejecting bad values with a message naming the key.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { CHART_DIR, GOLDEN_DIR, NAMESPACE, REPO_ROOT, caseNames, find, objectsOf, render, requireHelm, run, type K8sObject } from '../lib/chart.ts'

const update = process.env.UPDATE_GOLDEN === '1'

type Env = Array<{ name: string, value?: string, valueFrom?: unknown }>

function controllerContainer (objects: K8sObject[]): { env: Env, image: string, [k: string]: any } {
  const deployment = find(objects, 'Deployment')
  assert.ok(deployment, 'a Deployment is rendered')
  const container = deployment.spec.template.spec.containers.find((c: { name: string }) => c.name === 'controller')
  assert.ok(container, 'container controller')
  return container
}

function envOf (objects: K8sObject[]): Map<string, { value?: string, valueFrom?: unknown }> {
  const env = controllerContainer(objects).env
  const names = env.map(e => e.name)
  assert.deepEqual(names, [...new Set(names)], 'environment variable names are unique (server-side apply rejects duplicates)')
  return new Map(env.map(e => [e.name, e]))
}

/** The environment variables packages/controller/src/settings.ts reads. */
function controllerSettingNames (): string[] {
  const source = readFileSync(join(REPO_ROOT, 'packages/controller/src/settings.ts'), 'utf8')
  const names = new Set<string>()
  for (const m of source.matchAll(/\b(?:str|bool|json(?:<[^>]*>)?)\('([A-Z_]+)'/g)) names.add(m[1]!)
  const mesh = /\[((?:'MESH_[A-Z_]+',?\s*)+)\]/.exec(source)
  for (const m of mesh?.[1]?.matchAll(/'([A-Z_]+)'/g) ?? []) names.add(m[1]!)
  return [...names].sort()
}

test('helm lint passes, strict, for the defaults and every case', async (t) => {
  const helm = requireHelm(t)
  if (helm === null) return
  const r = await run(helm, ['lint', '--strict', CHART_DIR])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/)
  const results = await Promise.all(caseNames().map(async c => ({ c, r: await run(helm, ['lint', '--strict', CHART_DIR, '-f', join(CHART_DIR, 'tests/cases', `${c}.yaml`)]) })))
  for (const { c, r } of results) assert.equal(r.code, 0, `lint with ${c}: ${r.stdout}${r.stderr}`)
})

test('helm template matches the golden files', async (t) => {
  const helm = requireHelm(t)
  if (helm === null) return
  const cases = caseNames()
  assert.ok(cases.includes('default'))
  if (update) mkdirSync(GOLDEN_DIR, { recursive: true })
  const outputs = await Promise.all(cases.map(async c => ({ c, text: await render(helm, c) })))
  for (const { c, text } of outputs) {
    const file = join(GOLDEN_DIR, `${c}.yaml`)
    if (update) {
      writeFileSync(file, text)
      continue
    }
    assert.ok(existsSync(file), `${file} missing: run UPDATE_GOLDEN=1 node --test e2e/test/chart-helm.test.ts`)
    assert.equal(text, readFileSync(file, 'utf8'), `${c}: rendering differs from tests/golden/${c}.yaml (UPDATE_GOLDEN=1 rewrites it)`)
  }
  const stale = readdirSync(GOLDEN_DIR).filter(f => !cases.includes(f.replace(/\.yaml$/, '')))
  assert.deepEqual(stale, [], 'golden files without a case')
})

test('the defaults: the controller with every setting, Service, RBAC, GatewayClass and CRD', async (t) => {
  const helm = requireHelm(t)
  if (helm === null) return
  const objects = objectsOf(await render(helm, 'default'))
  const kinds = objects.map(o => `${o.kind}/${o.metadata.name}`).sort()
  assert.deepEqual(kinds, [
    'ClusterRole/portico-portico-system',
    'ClusterRole/portico-portico-system-deployer',
    'ClusterRoleBinding/portico-portico-system',
    'ClusterRoleBinding/portico-portico-system-deployer',
    'CustomResourceDefinition/porticobackends.portico.dev',
    'CustomResourceDefinition/porticoparameters.portico.dev',
    'CustomResourceDefinition/porticopolicies.portico.dev',
    'Deployment/portico',
    'GatewayClass/portico',
    'Role/portico-local',
    'RoleBinding/portico-local',
    'Service/portico',
    'ServiceAccount/portico'
  ])
  const chartVersion = /^appVersion: "?([^"\n]+)"?$/m.exec(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8'))![1]
  const container = controllerContainer(objects)
  assert.equal(container.image, `ghcr.io/portico-dev/controller:${chartVersion}`)
  assert.equal(container.imagePullPolicy, 'IfNotPresent')
  const env = envOf(objects)
  // Every setting the controller reads is set by the chart, except the optional overrides.
  const optional = new Set(['XDS_ADDRESS', 'PROXY_IMAGE_PULL_POLICY'])
  const missing = controllerSettingNames().filter(n => !optional.has(n) && !env.has(n))
  assert.deepEqual(missing, [], 'settings.ts reads these, the chart does not set them')
  assert.deepEqual(env.get('POD_NAMESPACE')?.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } })
  assert.deepEqual(env.get('POD_NAME')?.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } })
  const values = Object.fromEntries([...env].filter(([, e]) => e.value !== undefined).map(([k, e]) => [k, e.value]))
  assert.deepEqual({
    CONTROLLER_NAME: values.CONTROLLER_NAME,
    GATEWAY_CLASS_NAME: values.GATEWAY_CLASS_NAME,
    GATEWAY_CLASS_PARAMETERS_REFS: values.GATEWAY_CLASS_PARAMETERS_REFS,
    DISCOVERY_NAMESPACE_SELECTORS: values.DISCOVERY_NAMESPACE_SELECTORS,
    XDS_MODE: values.XDS_MODE,
    XDS_PORT: values.XDS_PORT,
    HEALTH_PORT: values.HEALTH_PORT,
    METRICS_PORT: values.METRICS_PORT,
    ADMIN_ADDR: values.ADMIN_ADDR,
    SERVICE_NAME: values.SERVICE_NAME,
    XDS_TLS_SECRET: values.XDS_TLS_SECRET,
    XDS_AUTH: values.XDS_AUTH,
    XDS_TOKEN_AUDIENCE: values.XDS_TOKEN_AUDIENCE,
    PROXY_IMAGE: values.PROXY_IMAGE,
    LOG_LEVEL: values.LOG_LEVEL,
    LEADER_ELECTION: values.LEADER_ELECTION,
    GATEWAY_MODELS_ENABLED: values.GATEWAY_MODELS_ENABLED,
    INFERENCE_EXTENSION_ENABLED: values.INFERENCE_EXTENSION_ENABLED,
    MESH_AUTO_ENABLED: values.MESH_AUTO_ENABLED
  }, {
    CONTROLLER_NAME: 'portico.dev/gateway-controller',
    GATEWAY_CLASS_NAME: 'portico',
    GATEWAY_CLASS_PARAMETERS_REFS: '{}',
    DISCOVERY_NAMESPACE_SELECTORS: '[]',
    XDS_MODE: 'tls',
    XDS_PORT: '9978',
    HEALTH_PORT: '9093',
    METRICS_PORT: '9092',
    ADMIN_ADDR: '127.0.0.1:9095',
    SERVICE_NAME: 'portico',
    XDS_TLS_SECRET: 'portico-xds-ca',
    XDS_AUTH: 'true',
    XDS_TOKEN_AUDIENCE: 'portico',
    PROXY_IMAGE: `ghcr.io/portico-dev/portico:${chartVersion}`,
    LOG_LEVEL: 'info',
    LEADER_ELECTION: 'true',
    GATEWAY_MODELS_ENABLED: 'false',
    INFERENCE_EXTENSION_ENABLED: 'false',
    MESH_AUTO_ENABLED: 'false'
  })
  assert.ok(!env.has('XDS_ADDRESS'), 'the controller derives the address from SERVICE_NAME')
  assert.deepEqual(container.ports.map((p: { name: string, containerPort: number }) => [p.name, p.containerPort]), [['grpc-xds', 9978], ['health', 9093], ['metrics', 9092]])
  assert.deepEqual(container.readinessProbe.httpGet, { path: '/readyz', port: 'health' })
  assert.deepEqual(container.livenessProbe.httpGet, { path: '/healthz', port: 'health' })

  const deployment = find(objects, 'Deployment')!
  const pod = deployment.spec.template
  assert.deepEqual(pod.metadata.annotations, { 'prometheus.io/path': '/metrics', 'prometheus.io/port': '9092', 'prometheus.io/scrape': 'true' })
  assert.equal(pod.metadata.labels['app.kubernetes.io/name'], 'portico-controller', 'porticoctl finds the controller by this label')
  assert.equal(pod.spec.serviceAccountName, 'portico')
  assert.equal(pod.spec.securityContext.runAsNonRoot, true)
  assert.equal(container.securityContext.readOnlyRootFilesystem, true)
  assert.equal(deployment.spec.replicas, 1)

  const service = find(objects, 'Service')!
  assert.deepEqual(service.spec.ports.map((p: { name: string, port: number }) => [p.name, p.port]), [['grpc-xds', 9978], ['health', 9093], ['metrics', 9092]])
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels)
  assert.equal(service.spec.type, 'ClusterIP')

  // The GatewayClass has the spec the controller applies itself (controller.ts ensureGatewayClass).
  const source = readFileSync(join(REPO_ROOT, 'packages/controller/src/controller.ts'), 'utf8')
  const description = /controllerName: this\.settings\.controllerName, description: '([^']+)'/.exec(source)?.[1]
  assert.ok(description !== undefined, 'found the description the controller applies')
  assert.deepEqual(find(objects, 'GatewayClass')!.spec, { controllerName: 'portico.dev/gateway-controller', description })

  // Least privilege: nothing is granted with wildcards, nothing deletes, secrets are read-only
  // cluster-wide.
  for (const role of objects.filter(o => o.kind === 'ClusterRole' || o.kind === 'Role')) {
    for (const rule of role.rules!) {
      for (const field of ['apiGroups', 'resources', 'verbs']) assert.ok(!rule[field].includes('*'), `${role.metadata.name}: no wildcard ${field}`)
      assert.ok(!rule.verbs.includes('delete') && !rule.verbs.includes('deletecollection'), `${role.metadata.name}: no delete`)
      if (role.kind === 'ClusterRole' && rule.resources.includes('secrets')) assert.deepEqual(rule.verbs, ['get', 'list', 'watch'])
    }
  }
  for (const o of objects) {
    assert.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm', `${o.kind}/${o.metadata.name} labelled`)
    if (!['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'GatewayClass'].includes(o.kind)) assert.equal(o.metadata.namespace, NAMESPACE, `${o.kind}/${o.metadata.name} namespace`)
  }
})

test('every case renders what its values ask for', async (t) => {
  const helm = requireHelm(t)
  if (helm === null) return
  const rendered = new Map(await Promise.all(caseNames().map(async c => [c, objectsOf(await render(helm, c))] as const)))
  const get = (c: string) => rendered.get(c)!

  await t.test('monitoring: ServiceMonitor, PodMonitor on 15020 (metrics) and the dashboard', () => {
    const objects = get('monitoring')
    const sm = find(objects, 'ServiceMonitor', 'portico')!
    assert.deepEqual(sm.spec.endpoints, [{ port: 'metrics', path: '/metrics', interval: '30s' }])
    assert.deepEqual(sm.spec.selector.matchLabels, find(objects, 'Deployment')!.spec.selector.matchLabels)
    assert.equal(sm.metadata.labels!.release, 'prometheus')
    const pm = find(objects, 'PodMonitor', 'portico-proxy')!
    assert.equal(pm.metadata.labels!.release, 'prometheus')
    assert.deepEqual(pm.spec.selector.matchExpressions, [{ key: 'gateway.networking.k8s.io/gateway-class-name', operator: 'In', values: ['portico', 'portico-internal'] }])
    assert.deepEqual(pm.spec.namespaceSelector, { any: true })
    assert.deepEqual(pm.spec.podMetricsEndpoints, [{ port: 'metrics', path: '/metrics', interval: '30s' }])
    const cm = find(objects, 'ConfigMap', 'portico-dashboard')!
    assert.equal(cm.metadata.labels!.grafana_dashboard, '1')
    assert.equal(cm.metadata.annotations!.grafana_folder, 'Gateways')
    const dashboard = JSON.parse(cm.data!['portico.json']!) as { title: string }
    assert.equal(dashboard.title, 'Portico')
    assert.deepEqual(JSON.parse(cm.data!['portico.json']!), JSON.parse(readFileSync(join(CHART_DIR, 'files/portico-dashboard.json'), 'utf8')))
    // The proxies' metrics port is 15020, named `metrics`, in the pods the controller deploys.
    const render = readFileSync(join(REPO_ROOT, 'packages/controller/src/deployer/render.ts'), 'utf8')
    assert.match(render, /\{ name: 'metrics', containerPort: 15020, protocol: 'TCP' \}/)
    const partial = get('monitoring-partial')
    assert.ok(find(partial, 'PodMonitor') !== undefined)
    assert.equal(find(partial, 'ServiceMonitor'), undefined)
    assert.equal(find(partial, 'ConfigMap'), undefined)
    assert.deepEqual(find(partial, 'PodMonitor')!.spec.namespaceSelector, { matchNames: ['apps', 'edge'] })
    assert.equal(find(partial, 'PodMonitor')!.spec.podTargetLabels, undefined)
    for (const c of ['default', 'autoscaling', 'service-full']) assert.equal(get(c).filter(o => ['ServiceMonitor', 'PodMonitor', 'ConfigMap'].includes(o.kind)).length, 0, `${c}: nothing of monitoring`)
  })

  await t.test('autoscaling: HPA, VPA and PDB aim at the controller Deployment', () => {
    const objects = get('autoscaling')
    const deployment = find(objects, 'Deployment')!
    assert.equal(deployment.spec.replicas, undefined, 'the HPA owns replicas')
    const hpa = find(objects, 'HorizontalPodAutoscaler')!
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name })
    assert.equal(hpa.spec.minReplicas, 2)
    assert.equal(hpa.spec.maxReplicas, 5)
    const vpa = find(objects, 'VerticalPodAutoscaler')!
    assert.equal(vpa.apiVersion, 'autoscaling.k8s.io/v1')
    assert.deepEqual(vpa.spec.targetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name })
    assert.equal(vpa.spec.updatePolicy.updateMode, 'Auto')
    const pdb = find(objects, 'PodDisruptionBudget')!
    assert.deepEqual(pdb.spec, { selector: { matchLabels: deployment.spec.selector.matchLabels }, minAvailable: 1 })
    for (const kind of ['HorizontalPodAutoscaler', 'VerticalPodAutoscaler', 'PodDisruptionBudget']) assert.equal(find(get('default'), kind), undefined, `no ${kind} by default`)
  })

  await t.test('service-full: every controller.service field', () => {
    const service = find(get('service-full'), 'Service')!
    assert.deepEqual(service.metadata.annotations, { 'service.beta.kubernetes.io/aws-load-balancer-internal': 'true' })
    assert.equal(service.metadata.labels!.exposure, 'internal')
    const { selector, ports, ...spec } = service.spec
    assert.deepEqual(spec, {
      type: 'LoadBalancer',
      clusterIP: '10.96.100.10',
      clusterIPs: ['10.96.100.10'],
      externalIPs: ['203.0.113.10'],
      loadBalancerIP: '203.0.113.20',
      loadBalancerSourceRanges: ['10.0.0.0/8', '192.168.0.0/16'],
      loadBalancerClass: 'example.com/internal-lb',
      externalTrafficPolicy: 'Local',
      internalTrafficPolicy: 'Cluster',
      healthCheckNodePort: 32100,
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      publishNotReadyAddresses: true,
      allocateLoadBalancerNodePorts: true,
      trafficDistribution: 'PreferClose'
    })
    assert.deepEqual(ports.map((p: { port: number }) => p.port), [15978, 15093, 15092])
    const env = envOf(get('service-full'))
    assert.equal(env.get('XDS_PORT')?.value, '15978')
    assert.equal(env.get('HEALTH_PORT')?.value, '15093')
    assert.equal(env.get('METRICS_PORT')?.value, '15092')
  })

  await t.test('service-disabled: no Service, RBAC, ServiceAccount, GatewayClass or CRD; an explicit xDS address', () => {
    const objects = get('service-disabled')
    assert.deepEqual(objects.map(o => o.kind), ['Deployment'])
    assert.equal(find(objects, 'Deployment')!.spec.template.spec.serviceAccountName, 'portico-controller')
    assert.equal(envOf(objects).get('XDS_ADDRESS')?.value, 'https://portico-xds.example.internal:443')
  })

  await t.test('extra-env: scalars, valueFrom sources, and a replaced chart setting', () => {
    const container = controllerContainer(get('extra-env'))
    const env = envOf(get('extra-env'))
    assert.deepEqual(env.get('LOG_FORMAT'), { name: 'LOG_FORMAT', value: 'text' })
    assert.deepEqual(env.get('FEATURE_COUNT'), { name: 'FEATURE_COUNT', value: '3' })
    assert.deepEqual(env.get('DEBUG_TRACES'), { name: 'DEBUG_TRACES', value: 'true' })
    assert.deepEqual(env.get('NODE_OPTIONS'), { name: 'NODE_OPTIONS', value: '--max-old-space-size=384' })
    assert.deepEqual(env.get('API_TOKEN'), { name: 'API_TOKEN', valueFrom: { secretKeyRef: { name: 'portico-secrets', key: 'apiToken' } } })
    assert.deepEqual(env.get('REGION'), { name: 'REGION', valueFrom: { configMapKeyRef: { name: 'cluster-info', key: 'region', optional: true } } })
    assert.equal(container.volumeMounts.find((m: { name: string }) => m.name === 'ca-bundle').mountPath, '/etc/ssl/corporate')
    const pod = find(get('extra-env'), 'Deployment')!.spec.template.spec
    assert.deepEqual(pod.containers.map((c: { name: string }) => c.name), ['controller', 'log-shipper'])
    assert.deepEqual(pod.volumes.map((v: { name: string }) => v.name), ['tmp', 'logs', 'ca-bundle'])
  })

  await t.test('xDS modes and settings', () => {
    assert.equal(envOf(get('default')).get('XDS_MODE')?.value, 'tls')
    const plain = envOf(get('xds-plaintext'))
    assert.equal(plain.get('XDS_MODE')?.value, 'plaintext')
    assert.equal(plain.get('XDS_AUTH')?.value, 'false')
    const either = envOf(get('xds-either'))
    assert.equal(either.get('XDS_MODE')?.value, 'either')
    assert.equal(either.get('XDS_TLS_SECRET')?.value, 'portico-xds-cert')
    assert.equal(either.get('XDS_TOKEN_AUDIENCE')?.value, 'portico-xds')
    // The local Role lets the controller read exactly that Secret.
    const role = find(get('xds-either'), 'Role')!
    assert.ok(role.rules!.some(r => r.resources.includes('secrets') && r.resourceNames?.includes('portico-xds-cert')))
  })

  await t.test('fullnameOverride and nameOverride name every resource', () => {
    const objects = get('fullname-override')
    for (const kind of ['Deployment', 'Service', 'ServiceAccount']) assert.ok(find(objects, kind, 'edge-gateway-controller'), `${kind} named by fullnameOverride`)
    assert.ok(find(objects, 'ClusterRole', 'edge-gateway-controller-portico-system'))
    assert.ok(find(objects, 'Role', 'edge-gateway-controller-local'))
    assert.equal(envOf(objects).get('SERVICE_NAME')?.value, 'edge-gateway-controller')
    assert.equal(envOf(objects).get('XDS_TLS_SECRET')?.value, 'edge-gateway-controller-xds-ca')
    assert.equal(find(objects, 'Deployment')!.spec.template.spec.serviceAccountName, 'edge-gateway-controller')
    const named = get('name-override')
    assert.ok(find(named, 'Deployment', 'portico-edge'))
    assert.equal(find(named, 'Deployment', 'portico-edge')!.spec.selector.matchLabels['app.kubernetes.io/name'], 'edge-controller')
  })

  await t.test('pod-settings: images, labels, annotations, scheduling, security, strategy', () => {
    const objects = get('pod-settings')
    for (const o of objects) {
      assert.equal(o.metadata.labels?.team, 'platform', `commonLabels on ${o.kind}/${o.metadata.name}`)
      assert.equal(o.metadata.labels?.['cost-center'], '1234', `commonLabels on ${o.kind}/${o.metadata.name}`)
    }
    const deployment = find(objects, 'Deployment')!
    assert.deepEqual(deployment.metadata.annotations, { 'reloader.stakater.com/auto': 'true' })
    assert.equal(deployment.spec.replicas, 2)
    assert.equal(deployment.spec.revisionHistoryLimit, 3)
    assert.deepEqual(deployment.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: '100%', maxUnavailable: 0 } })
    const pod = deployment.spec.template
    assert.equal(pod.metadata.labels.team, 'platform')
    assert.equal(pod.metadata.labels['sidecar.istio.io/inject'], 'false')
    assert.deepEqual(pod.metadata.annotations, { 'example.com/owner': 'platform', 'prometheus.io/path': '/metrics', 'prometheus.io/port': '9999', 'prometheus.io/scrape': 'false' })
    assert.deepEqual(pod.spec.imagePullSecrets, [{ name: 'registry-credentials' }])
    assert.equal(pod.spec.priorityClassName, 'system-cluster-critical')
    assert.equal(pod.spec.serviceAccountName, 'portico-sa')
    assert.deepEqual(pod.spec.securityContext, { runAsNonRoot: true, runAsUser: 20000, fsGroup: 20000 })
    assert.deepEqual(pod.spec.nodeSelector, { 'kubernetes.io/os': 'linux' })
    assert.equal(pod.spec.tolerations[0].key, 'dedicated')
    assert.ok(pod.spec.affinity.podAntiAffinity)
    assert.equal(pod.spec.topologySpreadConstraints[0].topologyKey, 'topology.kubernetes.io/zone')
    assert.deepEqual(pod.spec.dnsConfig, { options: [{ name: 'ndots', value: '2' }] })
    const container = controllerContainer(objects)
    assert.equal(container.image, 'registry.example.com/controllers/portico-controller:0.1.0-debug')
    assert.equal(container.imagePullPolicy, 'IfNotPresent')
    assert.deepEqual(container.resources, { requests: { cpu: '200m', memory: '256Mi' }, limits: { memory: '512Mi' } })
    const env = envOf(objects)
    assert.equal(env.get('PROXY_IMAGE')?.value, 'registry.example.com/proxies/portico-proxy:0.1.0-fast')
    assert.equal(env.get('PROXY_IMAGE_PULL_POLICY')?.value, 'Always')
    assert.equal(env.get('LOG_LEVEL')?.value, 'info,deployer=debug,portico/syncer=warn')
    assert.equal(env.get('LOG_FORMAT')?.value, 'text')
    assert.equal(env.get('ADMIN_ADDR')?.value, '127.0.0.1:19095')
    assert.deepEqual(find(objects, 'ServiceAccount')!.metadata.annotations, { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::123456789012:role/portico' })
  })

  await t.test('mesh: autoEnabled and a revision reach the controller as env, and only a configured mesh grants reading Pods', () => {
    const readsPods = (c: string) => find(get(c), 'ClusterRole')!.rules!.some(r => r.apiGroups.includes('') && r.resources.includes('pods') && r.verbs.includes('watch'))
    assert.equal(readsPods('default'), false, 'default: no mesh, no inference extension: Pods are not read')
    assert.equal(readsPods('mesh-auto'), true)
    assert.equal(readsPods('mesh-revision'), true)
    const auto = envOf(get('mesh-auto'))
    assert.equal(auto.get('MESH_AUTO_ENABLED')?.value, 'true')
    for (const name of ['MESH_CA_ADDRESS', 'MESH_CLUSTER_ID', 'MESH_NAMESPACE', 'MESH_NETWORK', 'MESH_REVISION']) assert.equal(auto.get(name)?.value ?? '', '', `${name}: empty (the controller's defaults)`)
    const revision = envOf(get('mesh-revision'))
    assert.equal(revision.get('MESH_AUTO_ENABLED')?.value, 'false')
    assert.equal(revision.get('MESH_NAMESPACE')?.value, 'mesh-system')
    assert.equal(revision.get('MESH_REVISION')?.value, 'canary')
  })

  await t.test('features: class parameters, discovery selectors, experimental and mesh settings as env, restricted deployer', () => {
    const objects = get('features')
    const env = envOf(objects)
    assert.deepEqual(JSON.parse(env.get('GATEWAY_CLASS_PARAMETERS_REFS')!.value!), { 'portico-internal': { name: 'internal-proxies', namespace: 'portico-system' } })
    assert.deepEqual(JSON.parse(env.get('DISCOVERY_NAMESPACE_SELECTORS')!.value!), [{ matchLabels: { 'portico.dev/discover': 'true' } }, { matchExpressions: [{ key: 'environment', operator: 'In', values: ['prod', 'staging'] }] }])
    const expected: Record<string, string> = {
      GATEWAY_CLASS_NAME: 'portico-internal',
      CONTROLLER_NAME: 'example.com/portico-internal',
      GATEWAY_MODELS_ENABLED: 'true',
      INFERENCE_EXTENSION_ENABLED: 'true',
      MESH_AUTO_ENABLED: 'true',
      MESH_NAMESPACE: 'mesh-system',
      MESH_REVISION: 'canary',
      MESH_CLUSTER_ID: 'cluster-1',
      MESH_NETWORK: 'network-1',
      MESH_CA_ADDRESS: 'mesh-ca.mesh-system.svc:15012'
    }
    for (const [name, value] of Object.entries(expected)) assert.equal(env.get(name)?.value, value, name)
    assert.deepEqual(find(objects, 'GatewayClass')!, {
      ...find(objects, 'GatewayClass')!,
      metadata: { ...find(objects, 'GatewayClass')!.metadata, name: 'portico-internal' },
      spec: { controllerName: 'example.com/portico-internal', description: 'Portico gateways', parametersRef: { group: 'portico.dev', kind: 'PorticoParameters', name: 'internal-proxies', namespace: 'portico-system' } }
    })
    const bindings = objects.filter(o => o.kind === 'RoleBinding' && o.roleRef!.kind === 'ClusterRole')
    assert.deepEqual(bindings.map(b => b.metadata.namespace).sort(), ['apps', 'edge'])
    assert.equal(objects.filter(o => o.kind === 'ClusterRoleBinding').length, 1, 'the deployer is not bound cluster-wide')
  })

  await t.test('inferenceExtension.enabled with crds.inferencePool: the vendored InferencePool CRD, kept on uninstall, and the RBAC to watch it by name; without either switch: no CRD', () => {
    const objects = get('inference-crd')
    const crd = find(objects, 'CustomResourceDefinition', 'inferencepools.inference.networking.k8s.io')
    assert.ok(crd, 'the InferencePool CRD is rendered')
    assert.equal(crd.metadata.annotations?.['helm.sh/resource-policy'], 'keep')
    assert.equal(crd.metadata.annotations?.['inference.networking.k8s.io/bundle-version'], 'v1.6.2')
    assert.equal(crd.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm')
    // The vendored file's spec, unchanged (its comment header aside).
    const vendored = parse(readFileSync(join(CHART_DIR, 'files/inference.networking.k8s.io_inferencepools.yaml'), 'utf8')) as K8sObject
    assert.deepEqual(crd.spec, vendored.spec)
    assert.deepEqual(crd.spec.versions.map((v: { name: string }) => v.name), ['v1'])
    const rules = find(objects, 'ClusterRole')!.rules!
    assert.ok(rules.some(r => r.apiGroups.includes('apiextensions.k8s.io') && r.resourceNames?.join() === 'inferencepools.inference.networking.k8s.io' && ['get', 'list', 'watch'].every(v => r.verbs.includes(v))), 'the controller may watch the InferencePool CRD by name')
    // The switch without crds.inferencePool (features): no CRD.
    assert.equal(find(get('features'), 'CustomResourceDefinition', 'inferencepools.inference.networking.k8s.io'), undefined, 'features: the CRD only when asked')
    assert.equal(find(get('default'), 'CustomResourceDefinition', 'inferencepools.inference.networking.k8s.io'), undefined, 'default: no CRD')
    assert.ok(!find(get('default'), 'ClusterRole')!.rules!.some(r => r.resourceNames?.includes('inferencepools.inference.networking.k8s.io')), 'default: no rule for the CRD')
  })

  await t.test('gatewayModels.enabled: the PorticoModel CRD and the RBAC to watch PorticoModels and write their status; off: neither', () => {
    const modelRules = (objects: K8sObject[]) => find(objects, 'ClusterRole')!.rules!.filter(r => r.resources.some((x: string) => x.startsWith('porticomodels')))
    const on = get('features')
    const crd = find(on, 'CustomResourceDefinition', 'porticomodels.portico.dev')
    assert.ok(crd, 'the PorticoModel CRD is rendered')
    assert.deepEqual(crd.spec.names.shortNames, ['pmodel'])
    assert.deepEqual(crd.spec.versions[0].additionalPrinterColumns.map((c: { name: string }) => c.name), ['Model', 'Age'])
    assert.deepEqual(modelRules(on).map(r => [r.resources, r.verbs]), [[['porticomodels'], ['get', 'list', 'watch']], [['porticomodels/status'], ['patch', 'update']]])
    for (const c of ['default', 'service-full']) {
      const off = get(c)
      assert.equal(find(off, 'CustomResourceDefinition', 'porticomodels.portico.dev'), undefined, `${c}: no PorticoModel CRD`)
      assert.deepEqual(modelRules(off), [], `${c}: no RBAC rule for PorticoModels`)
      assert.equal(envOf(off).get('GATEWAY_MODELS_ENABLED')?.value, 'false')
    }
  })
})

test('values.schema.json rejects bad values with a message naming the key', async (t) => {
  const helm = requireHelm(t)
  if (helm === null) return
  const cases: Array<[string, string[], RegExp]> = [
    ['a misspelt top-level key', ['--set', 'contoller.replicaCount=2'], /additional properties 'contoller' not allowed/],
    ['a misspelt nested key', ['--set', 'controller.service.prots.agwGrpc=1'], /at '\/controller\/service': additional properties 'prots' not allowed/],
    ['a misspelt key in a list item\'s parent', ['--set', 'monitoring.servicemonitor.enabled=true'], /at '\/monitoring': additional properties 'servicemonitor' not allowed/],
    ['a wrong type', ['--set-string', 'controller.replicaCount=two'], /at '\/controller\/replicaCount': got string, want integer/],
    ['an unknown xDS mode', ['--set', 'controller.xds.mode=mtls'], /at '\/controller\/xds\/mode': value must be one of 'plaintext', 'tls', 'either'/],
    ['a port out of range', ['--set', 'controller.service.ports.agwGrpc=70000'], /at '\/controller\/service\/ports\/agwGrpc': maximum: got 70,000, want 65,535/],
    ['a Service type that does not exist', ['--set', 'controller.service.type=Internal'], /at '\/controller\/service\/type': value must be one of/],
    ['a parameters reference without namespace', ['--set', 'gatewayClassParametersRefs.portico.name=p'], /at '\/gatewayClassParametersRefs\/portico': missing property 'namespace'/],
    ['an extraEnv map without valueFrom', ['--set', 'controller.extraEnv.TOKEN.secretKeyRef.name=s'], /at '\/controller\/extraEnv\/TOKEN': missing property 'valueFrom'/],
    ['an unknown log level', ['--set', 'controller.logLevel=verbose'], /at '\/controller\/logLevel': 'verbose' does not match pattern/],
    ['a scrape interval that is not a duration', ['--set', 'monitoring.serviceMonitor.interval=15'], /at '\/monitoring\/serviceMonitor\/interval'/],
    ['a HPA field that does not exist', ['--set', 'controller.horizontalPodAutoscaler.maxReplica=3'], /at '\/controller\/horizontalPodAutoscaler': additional properties 'maxReplica' not allowed/]
  ]
  const results = await Promise.all(cases.map(async ([why, args, message]) => ({ why, message, r: await run(helm, ['template', 'portico', CHART_DIR, ...args]) })))
  for (const { why, message, r } of results) {
    assert.notEqual(r.code, 0, `${why}: rejected`)
    assert.match(r.stderr, /values don't meet the specifications of the schema/, `${why}: ${r.stderr}`)
    assert.match(r.stderr, message, `${why}: ${r.stderr}`)
  }
  // And the good ones of each kind pass.
  const ok = await run(helm, ['template', 'portico', CHART_DIR, '--set', 'controller.xds.mode=either', '--set', 'controller.logLevel=debug\\,deployer=trace', '--set', 'controller.extraEnv.TOKEN.valueFrom.secretKeyRef.name=s', '--set', 'controller.extraEnv.TOKEN.valueFrom.secretKeyRef.key=k'])
  assert.equal(ok.code, 0, ok.stderr)
})
