import { test } from 'node:test'
import assert from 'node:assert/strict'
import { renderProxy, type ProxyDeploymentOptions } from '../src/deployer/render.ts'

const base: ProxyDeploymentOptions = {
  namespace: 'apps',
  gateway: { name: 'web', uid: 'u1', className: 'portico' },
  ports: [{ name: 'port-8080', port: 8080, protocol: 'TCP' }],
  image: 'portico:test',
  xdsAddress: 'https://portico-controller.portico-system:9978',
  xdsCa: '-----BEGIN CERTIFICATE-----\n',
  tokenAudience: 'portico-xds',
  managedBy: 'portico'
}

type Obj = { kind: string, metadata: { labels: Record<string, string>, annotations?: Record<string, string> }, spec?: any }
const byKind = (objects: Array<Record<string, unknown>>, kind: string): Obj => objects.find(o => o.kind === kind) as unknown as Obj

test('renderProxy: spec.infrastructure labels and annotations reach every object and the pods; selector labels stay', () => {
  const objects = renderProxy({
    ...base,
    gateway: { ...base.gateway, labels: { team: 'edge', 'app.kubernetes.io/name': 'hijack' }, annotations: { 'example.com/owner': 'ops', 'prometheus.io/scrape': 'false' } }
  })
  assert.deepEqual(objects.map(o => o.kind), ['ServiceAccount', 'ConfigMap', 'Service', 'Deployment'])
  for (const o of objects as unknown as Obj[]) {
    assert.equal(o.metadata.labels.team, 'edge', o.kind)
    assert.equal(o.metadata.labels['app.kubernetes.io/name'], 'web', `${o.kind}: the selector label wins`)
    assert.equal(o.metadata.annotations?.['example.com/owner'], 'ops', o.kind)
  }
  const pod = byKind(objects, 'Deployment').spec.template.metadata
  assert.equal(pod.labels.team, 'edge')
  assert.equal(pod.annotations['example.com/owner'], 'ops')
  assert.equal(pod.annotations['prometheus.io/scrape'], 'false', 'the Gateway\'s annotation over the scrape default')
  assert.equal(pod.annotations['prometheus.io/port'], '15020')
})

test('renderProxy: without infrastructure metadata, no annotations on the objects, the scrape ones on the pods', () => {
  const objects = renderProxy(base)
  assert.equal(byKind(objects, 'Service').metadata.annotations, undefined)
  assert.deepEqual(byKind(objects, 'Deployment').spec.template.metadata.annotations, { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '15020', 'prometheus.io/path': '/metrics' })
})

test('renderProxy: a requested static address is the LoadBalancer Service\'s loadBalancerIP (the first, when several)', () => {
  assert.equal(byKind(renderProxy(base), 'Service').spec.loadBalancerIP, undefined)
  assert.equal(byKind(renderProxy({ ...base, addresses: [] }), 'Service').spec.loadBalancerIP, undefined)
  assert.equal(byKind(renderProxy({ ...base, addresses: ['198.51.100.7'] }), 'Service').spec.loadBalancerIP, '198.51.100.7')
  assert.equal(byKind(renderProxy({ ...base, addresses: ['198.51.100.7', '198.51.100.8'] }), 'Service').spec.loadBalancerIP, '198.51.100.7')
  const clusterIP = byKind(renderProxy({ ...base, serviceType: 'ClusterIP', addresses: ['198.51.100.7'] }), 'Service').spec
  assert.equal(clusterIP.type, 'ClusterIP')
  assert.equal(clusterIP.loadBalancerIP, undefined, 'only a LoadBalancer Service can ask for an address')
})
