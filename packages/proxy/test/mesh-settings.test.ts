/** config.mesh.certificate and config.hbone as process settings (the HBONE data path: docs/mesh.md). */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { resolve } from 'node:path'
import { resolveSettings } from '../src/settings.ts'

test('mesh.certificate: none is null; the three files resolved; the env wins; a partial set is an error', () => {
  assert.equal(resolveSettings({}, {}, false).meshCertificate, null)
  const file = { mesh: { certificate: { cert: 'gw.pem', key: 'gw.key', root: '/etc/mesh/root.pem' } } }
  assert.deepEqual(resolveSettings(file, {}, false).meshCertificate, { cert: resolve('gw.pem'), key: resolve('gw.key'), root: '/etc/mesh/root.pem' })
  assert.deepEqual(resolveSettings(file, { MESH_CERT_FILE: '/var/run/c.pem' }, false).meshCertificate?.cert, '/var/run/c.pem')
  assert.throws(() => resolveSettings({}, { MESH_CERT_FILE: '/c.pem' }, false), /mesh\.certificate needs cert, key and root/)
})

test('hbone: the pool settings by agentgateway\'s names, defaults left to the engine', () => {
  assert.deepEqual(resolveSettings({}, {}, false).hbone, {})
  assert.deepEqual(resolveSettings({ hbone: { poolMaxStreamsPerConn: 10, poolUnusedReleaseTimeout: '30s' } }, {}, false).hbone, { maxStreams: 10, idleTimeoutMs: 30_000 })
})

test('mesh CA: MESH_ENABLED with agentgateway\'s env names and defaults; config.mesh.ca; not with files', () => {
  assert.equal(resolveSettings({}, {}, false).meshCa, null)
  assert.equal(resolveSettings({}, { MESH_ENABLED: 'false', POD_NAMESPACE: 'gw' }, false).meshCa, null)
  assert.deepEqual(resolveSettings({}, { MESH_ENABLED: 'true', POD_NAMESPACE: 'gw', SERVICE_ACCOUNT: 'portico' }, false).meshCa, {
    address: 'istiod.istio-system.svc:15012',
    trustDomain: 'cluster.local',
    clusterId: 'Kubernetes',
    network: null,
    namespace: 'gw',
    serviceAccount: 'portico',
    tokenFile: '/var/run/secrets/tokens/istio-token',
    rootFile: '/var/run/secrets/istio/root-cert.pem'
  })
  const env = {
    MESH_ENABLED: 'true', POD_NAMESPACE: 'gw', SERVICE_ACCOUNT: 'portico', CA_ADDRESS: 'istiod-canary.istio-system.svc:15012', TRUST_DOMAIN: 'example.org',
    CLUSTER_ID: 'c1', NETWORK: 'n1', MESH_TOKEN_FILE: '/t', MESH_ROOT_FILE: '/r', CA_SERVER_NAME: 'istiod.x.svc'
  }
  assert.deepEqual(resolveSettings({}, env, false).meshCa, {
    address: 'istiod-canary.istio-system.svc:15012', serverName: 'istiod.x.svc', trustDomain: 'example.org', clusterId: 'c1', network: 'n1', namespace: 'gw', serviceAccount: 'portico', tokenFile: '/t', rootFile: '/r'
  })
  const file = { mesh: { ca: { address: '10.0.0.1:15012', namespace: 'a', serviceAccount: 'b', certificateTtl: '1h', renewFraction: 0.8, tokenFile: 'tok' } } }
  const fromFile = resolveSettings(file, {}, false).meshCa!
  assert.equal(fromFile.validitySeconds, 3600)
  assert.equal(fromFile.renewFraction, 0.8)
  assert.equal(fromFile.tokenFile, resolve('tok'))
  assert.equal(resolveSettings(file, { POD_NAMESPACE: 'env-wins' }, false).meshCa!.namespace, 'env-wins')
  assert.equal(resolveSettings(file, { MESH_ENABLED: 'false' }, false).meshCa, null)
  assert.throws(() => resolveSettings({}, { MESH_ENABLED: 'true' }, false), /POD_NAMESPACE and SERVICE_ACCOUNT/)
  assert.throws(() => resolveSettings({}, { MESH_ENABLED: 'yes' }, false), /MESH_ENABLED: invalid value/)
  assert.throws(() => resolveSettings({ mesh: { certificate: { cert: 'c', key: 'k', root: 'r' } } }, { MESH_ENABLED: 'true', POD_NAMESPACE: 'a', SERVICE_ACCOUNT: 'b' }, false), /not both/)
})
