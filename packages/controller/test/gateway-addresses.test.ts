import { test } from 'node:test'
import assert from 'node:assert/strict'
import { gatewayAddresses, unusableAddresses } from '../src/status/addresses.ts'
import type { Service } from '../src/translate/gateway-api.ts'

const svc = (spec: Service['spec'], ingress?: Array<{ ip?: string, hostname?: string }>): Service => ({
  metadata: { name: 'web', namespace: 'apps' },
  spec,
  ...(ingress !== undefined ? { status: { loadBalancer: { ingress } } } : {})
})

test('gatewayAddresses: a LoadBalancer Service whose ingress is pending publishes nothing, not its cluster IP', () => {
  assert.deepEqual(gatewayAddresses(svc({ type: 'LoadBalancer', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'] })), [])
  assert.deepEqual(gatewayAddresses(svc({ type: 'LoadBalancer', clusterIP: '10.96.0.10' }, [])), [])
})

test('gatewayAddresses: the load-balancer ingress, in the Service\'s order, IPs and hostnames', () => {
  assert.deepEqual(gatewayAddresses(svc({ type: 'LoadBalancer', clusterIP: '10.96.0.10' }, [{ ip: '192.0.2.10' }, { hostname: 'lb.example.com' }, { ip: '2001:db8::1' }])), [
    { type: 'IPAddress', value: '192.0.2.10' },
    { type: 'Hostname', value: 'lb.example.com' },
    { type: 'IPAddress', value: '2001:db8::1' }
  ])
})

test('gatewayAddresses: ClusterIP and NodePort Services publish their cluster IPs, primary first; headless and absent ones nothing', () => {
  assert.deepEqual(gatewayAddresses(svc({ type: 'ClusterIP', clusterIP: '10.96.0.11', clusterIPs: ['10.96.0.11', 'fd00::11'] })), [
    { type: 'IPAddress', value: '10.96.0.11' },
    { type: 'IPAddress', value: 'fd00::11' }
  ])
  assert.deepEqual(gatewayAddresses(svc({ type: 'NodePort', clusterIP: '10.96.0.12' })), [{ type: 'IPAddress', value: '10.96.0.12' }])
  assert.deepEqual(gatewayAddresses(svc({ clusterIP: '10.96.0.13' })), [{ type: 'IPAddress', value: '10.96.0.13' }])
  assert.deepEqual(gatewayAddresses(svc({ type: 'ClusterIP', clusterIP: 'None' })), [])
  assert.deepEqual(gatewayAddresses(undefined), [])
})

test('unusableAddresses: nothing requested, or every requested address in the load-balancer ingress: none', () => {
  assert.equal(unusableAddresses(undefined, undefined), undefined)
  assert.equal(unusableAddresses([], svc({ type: 'LoadBalancer' })), undefined)
  assert.equal(unusableAddresses(['198.18.0.10'], svc({ type: 'LoadBalancer' }, [{ ip: '198.18.0.10' }])), undefined)
})

test('unusableAddresses: a requested address the load balancer did not assign is named', () => {
  assert.match(unusableAddresses(['198.18.0.10'], undefined) ?? '', /198\.18\.0\.10 is not assigned by the load balancer/)
  assert.match(unusableAddresses(['198.18.0.10'], svc({ type: 'LoadBalancer' })) ?? '', /198\.18\.0\.10 is not assigned/)
  // The load balancer ignored the request and assigned another address.
  assert.match(unusableAddresses(['198.18.0.10'], svc({ type: 'LoadBalancer' }, [{ ip: '192.0.2.5' }])) ?? '', /198\.18\.0\.10 is not assigned/)
})

test('unusableAddresses: addresses beyond the first cannot be asked for; other Service types cannot ask at all', () => {
  assert.match(unusableAddresses(['198.18.0.10', '198.18.0.11'], svc({ type: 'LoadBalancer' }, [{ ip: '198.18.0.10' }])) ?? '', /198\.18\.0\.11 cannot be used: .*one address/)
  assert.match(unusableAddresses(['10.96.0.10'], svc({ type: 'ClusterIP', clusterIP: '10.96.0.11' })) ?? '', /type ClusterIP/)
})

test('gatewayAddresses with Cluster routability: the cluster IPs, each marked routability Cluster, never a load-balancer ingress', () => {
  assert.deepEqual(gatewayAddresses(svc({ type: 'ClusterIP', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10', 'fd00::10'] }), 'Cluster'), [
    { type: 'IPAddress', value: '10.96.0.10', routability: 'Cluster' },
    { type: 'IPAddress', value: 'fd00::10', routability: 'Cluster' }
  ])
  assert.deepEqual(gatewayAddresses(svc({ type: 'ClusterIP', clusterIP: '10.96.0.10' }, [{ ip: '203.0.113.9' }]), 'Cluster'), [{ type: 'IPAddress', value: '10.96.0.10', routability: 'Cluster' }])
  assert.deepEqual(gatewayAddresses(svc({ type: 'ClusterIP', clusterIP: 'None' }), 'Cluster'), [])
  assert.deepEqual(gatewayAddresses(undefined, 'Cluster'), [])
})

test('unusableAddresses with Cluster routability: the requested cluster IP must be the Service\'s', () => {
  assert.equal(unusableAddresses(['10.96.0.50'], svc({ type: 'ClusterIP', clusterIP: '10.96.0.50' }), 'Cluster'), undefined)
  assert.match(unusableAddresses(['10.96.0.50'], svc({ type: 'ClusterIP', clusterIP: '10.96.0.7' }), 'Cluster')!, /requested cluster IP 10.96.0.50 is not the proxy Service's \(10.96.0.7\)/)
  assert.match(unusableAddresses(['10.96.0.50', '10.96.0.51'], svc({ type: 'ClusterIP', clusterIP: '10.96.0.50' }), 'Cluster')!, /10.96.0.51 cannot be used/)
  assert.match(unusableAddresses(['10.96.0.50'], undefined, 'Cluster')!, /not created yet/)
})
