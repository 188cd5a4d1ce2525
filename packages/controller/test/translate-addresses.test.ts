import { test } from 'node:test'
import assert from 'node:assert/strict'
import { translate } from '../src/translate/translate.ts'
import { requestedAddresses } from '../src/translate/addresses.ts'
import type { Gateway } from '../src/translate/gateway-api.ts'
import { CLASS_AND_GATEWAY, CONTROLLER, clusterState } from './cluster-state.ts'

const gw = (addresses: Array<{ type?: string, value?: string }>): Gateway => ({
  metadata: { name: 'web', namespace: 'apps' },
  spec: { gatewayClassName: 'portico', listeners: [], addresses }
})

test('requestedAddresses: IPAddress values are requested (once each); an IPAddress without a value asks for nothing', () => {
  assert.deepEqual(requestedAddresses(gw([])), { ips: [] })
  assert.deepEqual(requestedAddresses(gw([{ type: 'IPAddress' }])), { ips: [] })
  assert.deepEqual(requestedAddresses(gw([{ type: 'IPAddress', value: '' }, { value: '198.51.100.1' }, { type: 'IPAddress', value: '2001:db8::1' }, { value: '198.51.100.1' }])), { ips: ['198.51.100.1', '2001:db8::1'] })
})

test('requestedAddresses: other types and values that are not IPs cannot be requested', () => {
  assert.match((requestedAddresses(gw([{ type: 'Hostname', value: 'gw.example.com' }])) as { error: string }).error, /Hostname is not supported/)
  assert.match((requestedAddresses(gw([{ type: 'test/fake-invalid-type', value: 'x' }, { value: '198.51.100.1' }])) as { error: string }).error, /test\/fake-invalid-type/)
  assert.match((requestedAddresses(gw([{ type: 'IPAddress', value: 'not-an-ip' }])) as { error: string }).error, /not an IP address/)
})

function translateWith (addresses: string): ReturnType<typeof translate>['gateways'][number] {
  const yaml = CLASS_AND_GATEWAY.replace('  gatewayClassName: portico\n', `  gatewayClassName: portico\n  addresses: ${addresses}\n`)
  const result = translate(clusterState(yaml), { controllerName: CONTROLLER })
  return result.gateways[0]!
}

test('translate: a Gateway with an unsupported address type is not accepted (UnsupportedAddress) and gets no proxy', () => {
  const g = translateWith('[{ type: Hostname, value: gw.example.com }]')
  assert.equal(g.accepted, false)
  const accepted = g.conditions.find(c => c.type === 'Accepted')!
  assert.equal(accepted.status, 'False')
  assert.equal(accepted.reason, 'UnsupportedAddress')
})

test('translate: static IPs and empty IPAddress entries are accepted; the IPs are handed to the deployer', () => {
  const empty = translateWith('[{ type: IPAddress }]')
  assert.equal(empty.accepted, true)
  assert.equal(empty.conditions.find(c => c.type === 'Accepted')!.reason, 'Accepted')
  assert.equal(empty.requestedAddresses, undefined)
  const fixed = translateWith('[{ type: IPAddress, value: 198.51.100.7 }, { value: 198.51.100.8 }]')
  assert.equal(fixed.accepted, true)
  assert.deepEqual(fixed.requestedAddresses, ['198.51.100.7', '198.51.100.8'])
})

test('requestedAddresses: routability Cluster asks for a ClusterIP (a value is the cluster IP asked for); other routabilities and mixes cannot be requested', () => {
  assert.deepEqual(requestedAddresses(gw([{ type: 'IPAddress', routability: 'Cluster' } as never])), { ips: [], routability: 'Cluster' })
  assert.deepEqual(requestedAddresses(gw([{ value: '10.96.0.50', routability: 'Cluster' } as never])), { ips: ['10.96.0.50'], routability: 'Cluster' })
  assert.deepEqual(requestedAddresses(gw([{ value: '198.51.100.1', routability: '' } as never])), { ips: ['198.51.100.1'] }, 'empty: the default')
  assert.match((requestedAddresses(gw([{ routability: 'example.com/private' } as never])) as { error: string }).error, /routability example.com\/private is not supported/)
  assert.match((requestedAddresses(gw([{ routability: 'Cluster' }, { value: '198.51.100.1' }] as never)) as { error: string }).error, /cannot be mixed/)
})

test('translate: a Gateway with Cluster routability is accepted and hands the routability to the deployer; an unknown routability is UnsupportedAddress', () => {
  const cluster = translateWith('[{ type: IPAddress, routability: Cluster }]')
  assert.equal(cluster.accepted, true)
  assert.equal(cluster.addressRoutability, 'Cluster')
  assert.equal(translateWith('[{ type: IPAddress }]').addressRoutability, undefined)
  const vendor = translateWith('[{ type: IPAddress, routability: example.com/private }]')
  assert.equal(vendor.accepted, false)
  assert.equal(vendor.conditions.find(c => c.type === 'Accepted')!.reason, 'UnsupportedAddress')
})
