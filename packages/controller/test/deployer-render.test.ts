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

test('renderProxy: Cluster routability makes a ClusterIP Service whatever serviceType says, the first address its clusterIP', () => {
  const any = byKind(renderProxy({ ...base, addressRoutability: 'Cluster' }), 'Service').spec
  assert.equal(any.type, 'ClusterIP')
  assert.equal(any.clusterIP, undefined, 'no value: the API server allocates one')
  const fixed = byKind(renderProxy({ ...base, serviceType: 'LoadBalancer', addressRoutability: 'Cluster', addresses: ['10.96.0.50', '10.96.0.51'] }), 'Service').spec
  assert.equal(fixed.type, 'ClusterIP')
  assert.equal(fixed.clusterIP, '10.96.0.50')
  assert.equal(fixed.loadBalancerIP, undefined)
})

test('renderProxy: a Gateway in the mesh gets the identity settings, the istio-ca token and the mesh root; others none of them', () => {
  const plain = byKind(renderProxy(base), 'Deployment').spec.template.spec
  assert.equal(plain.containers[0].env.some((e: { name: string }) => e.name === 'MESH_ENABLED'), false)
  assert.deepEqual(plain.volumes.map((v: { name: string }) => v.name), ['xds-token', 'xds-ca'])

  const pod = byKind(renderProxy({ ...base, mesh: { caAddress: 'istiod-canary.istio-system.svc:15012', clusterId: 'east-1', network: 'net-a', trustDomain: 'example.org' } }), 'Deployment').spec.template.spec
  const env = pod.containers[0].env as Array<{ name: string }>
  assert.deepEqual(env.slice(env.findIndex(e => e.name === 'MESH_ENABLED')), [
    { name: 'MESH_ENABLED', value: 'true' },
    { name: 'CA_ADDRESS', value: 'istiod-canary.istio-system.svc:15012' },
    { name: 'TRUST_DOMAIN', value: 'example.org' },
    { name: 'CLUSTER_ID', value: 'east-1' },
    { name: 'NETWORK', value: 'net-a' },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'SERVICE_ACCOUNT', valueFrom: { fieldRef: { fieldPath: 'spec.serviceAccountName' } } },
    { name: 'MESH_TOKEN_FILE', value: '/var/run/secrets/tokens/istio-token' },
    { name: 'MESH_ROOT_FILE', value: '/var/run/secrets/istio/root-cert.pem' }
  ])
  assert.deepEqual(pod.volumes.slice(2), [
    { name: 'istio-token', projected: { sources: [{ serviceAccountToken: { audience: 'istio-ca', expirationSeconds: 43200, path: 'istio-token' } }] } },
    { name: 'istio-ca-root-cert', configMap: { name: 'istio-ca-root-cert', optional: true, items: [{ key: 'root-cert.pem', path: 'root-cert.pem' }] } }
  ])
  assert.deepEqual(pod.containers[0].volumeMounts.slice(2), [
    { name: 'istio-token', mountPath: '/var/run/secrets/tokens', readOnly: true },
    { name: 'istio-ca-root-cert', mountPath: '/var/run/secrets/istio', readOnly: true }
  ])
  // No network: no NETWORK variable (the proxy's default).
  const noNetwork = byKind(renderProxy({ ...base, mesh: { caAddress: 'istiod.istio-system.svc:15012', clusterId: 'Kubernetes', network: '', trustDomain: 'cluster.local' } }), 'Deployment').spec.template.spec
  assert.equal(noNetwork.containers[0].env.some((e: { name: string }) => e.name === 'NETWORK'), false)
})
