/**
 * The Gateway API's GatewayAddressRoutability and GatewayAddressRoutabilityCluster (v1.7.0),
 * in a real cluster (e2e/cluster/harness.ts): spec.addresses[].routability exists only in
 * v1.7.0's experimental-channel Gateway CRD, so this cluster installs those CRDs (from the
 * gateway-api v1.7.0 module: GATEWAY_API_V170_CRDS_EXPERIMENTAL, else the Go module cache;
 * skipped when neither has them). A Gateway asking for Cluster routability gets a ClusterIP
 * proxy Service and its cluster IP in status.addresses marked `routability: Cluster`; one
 * with a value gets that cluster IP; an implementation-specific routability Portico does not
 * define is UnsupportedAddress; the class claims both features. (The harness runs no
 * kube-proxy: nothing is sent to the cluster IPs, only their allocation is checked.)
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'

const GW_API = '/apis/gateway.networking.k8s.io/v1'

let suite: ClusterGateway | null = null

before(async s => {
  suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-routability-', v170Crds: true, cluster: { controllerManager: false }, namespaces: ['portico-system', 'apps'] })
})

after(async () => await suite?.stop())

const gateway = (name: string, port: number, addresses: string) => gatewayYaml('apps', name, port, { spec: { addresses } })

test('Cluster routability: a ClusterIP proxy Service, its cluster IP in status.addresses with routability Cluster; a static one is that IP; a vendor routability is UnsupportedAddress', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  await cluster.apply(`${gateway('internal', await freePort(), '[{ type: IPAddress, routability: Cluster }]')}---
${gateway('pinned', await freePort(), '[{ type: IPAddress, value: 10.96.200.7, routability: Cluster }]')}---
${gateway('vendor', await freePort(), '[{ type: IPAddress, routability: example.com/private }]')}`)
  const stored = await cluster.api<KubeObject>('GET', `${GW_API}/namespaces/apps/gateways/internal`)
  assert.equal((stored.spec.addresses as Array<{ routability?: string }>)[0]?.routability, 'Cluster', 'the CRD keeps the field (v1.7.0 experimental channel)')

  const controller = await suite.startController()
  const why = () => `\n${controller.output().slice(-3000)}`
  const get = (path: string) => cluster.api<KubeObject>('GET', path)

  let gw: KubeObject | undefined
  await waitUntil(async () => {
    gw = await get(`${GW_API}/namespaces/apps/gateways/internal`)
    return (gw.status?.addresses ?? []).length > 0
  }, 30_000, `status.addresses of internal${why()}`, 200)
  const svc = await get('/api/v1/namespaces/apps/services/internal')
  assert.equal(svc.spec.type, 'ClusterIP')
  assert.deepEqual(gw!.status.addresses, [{ type: 'IPAddress', value: svc.spec.clusterIP, routability: 'Cluster' }])

  let pinned: KubeObject | undefined
  await waitUntil(async () => {
    pinned = await get(`${GW_API}/namespaces/apps/gateways/pinned`)
    return (pinned.status?.addresses ?? []).length > 0
  }, 30_000, `status.addresses of pinned${why()}`, 200)
  assert.equal((await get('/api/v1/namespaces/apps/services/pinned')).spec.clusterIP, '10.96.200.7')
  assert.deepEqual(pinned!.status.addresses, [{ type: 'IPAddress', value: '10.96.200.7', routability: 'Cluster' }])
  const programmed = (pinned!.status.conditions as Array<{ type: string, reason: string }>).find(c => c.type === 'Programmed')
  assert.notEqual(programmed?.reason, 'AddressNotUsable', 'the requested cluster IP is the Service\'s')

  await waitUntil(async () => {
    const v = await get(`${GW_API}/namespaces/apps/gateways/vendor`)
    return (v.status?.conditions as Array<{ type: string, reason: string }> | undefined)?.some(c => c.type === 'Accepted' && c.reason === 'UnsupportedAddress') === true
  }, 30_000, `vendor: Accepted False UnsupportedAddress${why()}`, 200)

  const features = ((await get(`${GW_API}/gatewayclasses/portico`)).status.supportedFeatures as Array<{ name: string }>).map(f => f.name)
  assert.ok(features.includes('GatewayAddressRoutability') && features.includes('GatewayAddressRoutabilityCluster'), features.join(', '))
})
