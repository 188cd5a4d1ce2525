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
