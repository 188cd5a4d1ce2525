import { test } from 'node:test'
import assert from 'node:assert/strict'
import { gatewayAddresses } from '../src/status/addresses.ts'
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
