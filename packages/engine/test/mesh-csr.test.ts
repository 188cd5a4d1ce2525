/**
 * The mesh workload CSR (mesh/csr.ts) read back by OpenSSL: its signature verifies with the
 * key's public half, the subject is empty, the SPIFFE URI SAN is there (critical), for EC
 * P-256 and RSA keys; lengths past 127 and 255 bytes (long-form DER lengths) still parse; a
 * certificate signed from it by OpenSSL carries the SAN. Unsupported keys and non-ASCII URIs
 * are refused.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { generateKeyPairSync, X509Certificate } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createCsrPem, CsrError } from '../src/mesh/csr.ts'

const SPIFFE = 'spiffe://cluster.local/ns/portico-system/sa/portico-gateway'

function openssl (args: string[], input?: string): { status: number | null, out: string } {
  const r = spawnSync('openssl', args, { input, encoding: 'utf8' })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

for (const kind of ['ec', 'rsa'] as const) {
  test(`${kind} key: OpenSSL verifies the CSR and reads the SPIFFE URI SAN`, () => {
    const { privateKey } = kind === 'ec'
      ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 })
    const pem = createCsrPem({ privateKey, uris: [SPIFFE] })
    assert.match(pem, /^-----BEGIN CERTIFICATE REQUEST-----\n/)
    const r = openssl(['req', '-verify', '-noout', '-text'], pem)
    assert.equal(r.status, 0, r.out)
    assert.match(r.out, /verify OK/i)
    assert.match(r.out, /X509v3 Subject Alternative Name: critical\s+URI:spiffe:\/\/cluster\.local\/ns\/portico-system\/sa\/portico-gateway/)
    assert.match(r.out, kind === 'ec' ? /ecdsa-with-SHA256/ : /sha256WithRSAEncryption/)
    assert.match(r.out, /Subject:\s*\n/)
  })
}

test('long URIs (DER lengths in long form) and several SANs parse', () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  const long = `spiffe://cluster.local/ns/${'n'.repeat(60)}/sa/${'s'.repeat(250)}`
  const r = openssl(['req', '-verify', '-noout', '-text'], createCsrPem({ privateKey, uris: [SPIFFE, long] }))
  assert.equal(r.status, 0, r.out)
  assert.ok(r.out.includes(`URI:${SPIFFE}, URI:${long}`), r.out)
})

test('a certificate signed from the CSR (copying its extensions) carries the SAN', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-csr-'))
  try {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
    writeFileSync(join(dir, 'req.pem'), createCsrPem({ privateKey, uris: [SPIFFE] }))
    const ca = openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'ca.key'),
      '-out', join(dir, 'ca.crt'), '-days', '1', '-subj', '/CN=test-ca'])
    assert.equal(ca.status, 0, ca.out)
    const signed = openssl(['x509', '-req', '-in', join(dir, 'req.pem'), '-CA', join(dir, 'ca.crt'), '-CAkey', join(dir, 'ca.key'),
      '-days', '1', '-copy_extensions', 'copy', '-out', join(dir, 'leaf.crt')])
    assert.equal(signed.status, 0, signed.out)
    const leaf = new X509Certificate(readFileSync(join(dir, 'leaf.crt')))
    assert.equal(leaf.subjectAltName, `URI:${SPIFFE}`)
    assert.ok(leaf.checkPrivateKey(privateKey))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('refused: no URI, a non-ASCII URI, a public key, an unsupported key type or curve', () => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  assert.throws(() => createCsrPem({ privateKey: ec.privateKey, uris: [] }), CsrError)
  assert.throws(() => createCsrPem({ privateKey: ec.privateKey, uris: ['spiffe://cluster.local/ns/é/sa/x'] }), CsrError)
  assert.throws(() => createCsrPem({ privateKey: ec.publicKey, uris: [SPIFFE] }), CsrError)
  assert.throws(() => createCsrPem({ privateKey: generateKeyPairSync('ed25519').privateKey, uris: [SPIFFE] }), CsrError)
  assert.throws(() => createCsrPem({ privateKey: generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey, uris: [SPIFFE] }), CsrError)
})
