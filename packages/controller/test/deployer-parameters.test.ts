import { test } from 'node:test'
import assert from 'node:assert/strict'
import { image, proxySettings } from '../src/deployer/parameters.ts'
import { renderProxy } from '../src/deployer/render.ts'
import { proxyConfigProblem } from '../src/translate/parameters.ts'

const settings = { proxyImage: 'ghcr.io/portico-dev/portico:0.1.0', proxyImagePullPolicy: '' }

test('image: parts of PorticoParameters replace parts of the default reference', () => {
  assert.equal(image(settings.proxyImage, undefined), 'ghcr.io/portico-dev/portico:0.1.0')
  assert.equal(image(settings.proxyImage, { pullPolicy: 'Always' }), 'ghcr.io/portico-dev/portico:0.1.0')
  assert.equal(image(settings.proxyImage, { tag: '0.2.0' }), 'ghcr.io/portico-dev/portico:0.2.0')
  assert.equal(image(settings.proxyImage, { registry: 'registry.local:5000', repository: 'gw' }), 'registry.local:5000/gw:0.1.0')
  assert.equal(image('localhost:5000/portico', { tag: 'dev' }), 'localhost:5000/portico:dev')
  assert.equal(image('portico', { registry: 'r.example' }), 'r.example/portico:latest')
})

test('proxySettings: unset fields keep the defaults; set ones reach the rendered Deployment and Service', () => {
  assert.deepEqual(proxySettings(settings, undefined), { image: settings.proxyImage, imagePullPolicy: '' })
  const options = proxySettings(settings, {
    replicas: 3,
    image: { tag: '9.9.9', pullPolicy: 'IfNotPresent' },
    service: { type: 'ClusterIP' },
    env: [{ name: 'DRAIN_TIMEOUT', value: '20s' }, { name: 'LOG_FORMAT', value: 'text' }],
    resources: { limits: { memory: '512Mi' } },
    logLevel: 'debug'
  })
  const objects = renderProxy({
    namespace: 'apps',
    gateway: { name: 'web', uid: 'u1', className: 'portico' },
    ports: [{ name: 'port-80', port: 80, protocol: 'TCP' }],
    xdsAddress: 'http://portico-controller.portico-system.svc:9978',
    tokenAudience: 'portico',
    managedBy: 'portico',
    ...options
  }) as Array<{ kind: string, spec: any }>
  const deployment = objects.find(o => o.kind === 'Deployment')!
  const service = objects.find(o => o.kind === 'Service')!
  const container = deployment.spec.template.spec.containers[0]
  assert.equal(deployment.spec.replicas, 3)
  assert.equal(container.image, 'ghcr.io/portico-dev/portico:9.9.9')
  assert.equal(container.imagePullPolicy, 'IfNotPresent')
  assert.deepEqual(container.resources, { limits: { memory: '512Mi' } })
  assert.equal(service.spec.type, 'ClusterIP')
  const env = container.env as Array<{ name: string, value?: string }>
  assert.equal(env.find(e => e.name === 'LOG_LEVEL')?.value, 'debug')
  assert.equal(env.find(e => e.name === 'DRAIN_TIMEOUT')?.value, '20s')
  // A name given twice would be refused by server-side apply: the parameters' value wins.
  assert.deepEqual(env.filter(e => e.name === 'LOG_FORMAT').map(e => e.value), ['text'])
})

test('tracing and accessLog reach the proxy as TRACING and ACCESS_LOG (JSON); a variable of the same name in env wins', () => {
  const tracing = { otlpEndpoint: 'http://otel-collector.observability:4317', randomSampling: 0.1 }
  const options = proxySettings(settings, { tracing, accessLog: { fields: { add: { user: 'jwt.sub' } } }, env: [{ name: 'ACCESS_LOG', value: '{}' }] })
  assert.deepEqual(options.env, [{ name: 'TRACING', value: JSON.stringify(tracing) }, { name: 'ACCESS_LOG', value: '{}' }])
})

test('PorticoParameters with an invalid tracing section are InvalidParameters, naming the field', () => {
  assert.equal(proxyConfigProblem({ tracing: { otlpEndpoint: 'http://collector:4317', randomSampling: 0.5 } }), null)
  assert.match(proxyConfigProblem({ tracing: { otlpEndpoint: 'collector:4317', bogus: true } }) ?? '', /tracing\.otlpEndpoint: invalid value.*tracing\.bogus: unknown field/s)
})

test('WORKERS: PorticoParameters workers, else none under a CPU limit (the proxy reads its quota), else the CPU request rounded up, else 1', () => {
  const workersOf = (parameters: Parameters<typeof proxySettings>[1]): string | undefined => {
    const objects = renderProxy({
      namespace: 'apps',
      gateway: { name: 'web', uid: 'u1', className: 'portico' },
      ports: [],
      xdsAddress: 'http://portico-controller.portico-system.svc:9978',
      tokenAudience: 'portico',
      managedBy: 'portico',
      ...proxySettings(settings, parameters)
    }) as Array<{ kind: string, spec: any }>
    const env = objects.find(o => o.kind === 'Deployment')!.spec.template.spec.containers[0].env as Array<{ name: string, value?: string }>
    const found = env.filter(e => e.name === 'WORKERS')
    assert.ok(found.length <= 1, 'WORKERS given once')
    return found[0]?.value
  }
  // The default resources request 100m and set no limit: one worker, not one per CPU of the node.
  assert.equal(workersOf(undefined), '1')
  assert.equal(workersOf({ workers: 3 }), '3')
  assert.equal(workersOf({ workers: 3, resources: { limits: { cpu: '8' } } }), '3')
  assert.equal(workersOf({ resources: { limits: { cpu: '2' } } }), undefined)
  assert.equal(workersOf({ resources: { requests: { cpu: '1500m' } } }), '2')
  assert.equal(workersOf({ resources: { requests: { cpu: '4' }, limits: { memory: '1Gi' } } }), '4')
  assert.equal(workersOf({ resources: { requests: { cpu: 'lots' } } }), '1')
  assert.equal(workersOf({ resources: { requests: { cpu: '99999999' } } }), '256')
  // A WORKERS variable in env wins, given once.
  assert.equal(workersOf({ workers: 3, env: [{ name: 'WORKERS', value: '2' }] }), '2')
  assert.equal(proxyConfigProblem({ workers: 0 }) !== null, true)
  assert.equal(proxyConfigProblem({ workers: 4 }), null)
})
