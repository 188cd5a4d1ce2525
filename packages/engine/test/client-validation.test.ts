/**
 * Client certificate validation in the config: the standalone tls.root / tls.clientCertMode
 * fields → the bind's tls.clientValidation, and the checks validateIR makes on any IR (the
 * controller's included). The handshake itself is covered over TLS in
 * e2e/test/client-certificates.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText } from '../src/config/load.ts'
import { validateIR } from '../src/ir/validate.ts'
import type { ProxyIR } from '../src/ir/types.ts'

const PEM = { 'cert.pem': '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', 'key.pem': '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n', 'ca.pem': '-----BEGIN CERTIFICATE-----\nMIICA\n-----END CERTIFICATE-----\n', 'ca2.pem': '-----BEGIN CERTIFICATE-----\nMIICA2\n-----END CERTIFICATE-----\n' }

function load (gateways: string) {
  return loadConfigText(`gateways:\n${gateways}\nroutes:\n  - {name: app, gateways: [a], policies: {directResponse: {status: 200}}}\n`, {
    baseDir: '/cfg',
    readFile: (path: string) => {
      const text = PEM[path.replace('/cfg/', '') as keyof typeof PEM]
      if (text === undefined) throw Object.assign(new Error('missing'), { code: 'ENOENT' })
      return text
    }
  })
}

test('tls.root and tls.clientCertMode become the bind\'s clientValidation (default mode AllowValidOnly)', () => {
  const strict = load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, root: ca.pem}}')
  assert.ok(strict.ok, JSON.stringify(!strict.ok && strict.diagnostics))
  assert.deepEqual(strict.config.ir.binds[0]!.tls?.clientValidation, { caCerts: PEM['ca.pem'], mode: 'AllowValidOnly' })
  const fallback = load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, root: ca.pem, clientCertMode: AllowInsecureFallback}}')
  assert.ok(fallback.ok)
  assert.equal(fallback.config.ir.binds[0]!.tls?.clientValidation?.mode, 'AllowInsecureFallback')
  const none = load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem}}')
  assert.ok(none.ok)
  assert.equal(none.config.ir.binds[0]!.tls?.clientValidation, undefined)
})

test('clientCertMode without root, an unreadable root, and gateways of one port that disagree are errors', () => {
  const messages = (r: ReturnType<typeof load>) => r.ok ? [] : r.diagnostics.map(d => d.message).join('\n')
  assert.match(String(messages(load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, clientCertMode: AllowValidOnly}}'))), /clientCertMode needs root/)
  assert.match(String(messages(load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, root: nope.pem}}'))), /cannot read \/cfg\/nope\.pem/)
  const split = load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, root: ca.pem}}\n  b: {port: 8443, hostname: b.test, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, root: ca2.pem}}')
  assert.match(String(messages(split)), /must use the same root and clientCertMode/)
})

test('validateIR: clientValidation needs an HTTPS bind, a PEM CA and a known mode, and sits on the bind only', () => {
  const ok = load('  a: {port: 8443, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, root: ca.pem}}')
  assert.ok(ok.ok)
  const ir = ok.config.ir
  assert.deepEqual(validateIR(ir), [])
  const bad = structuredClone(ir) as ProxyIR
  bad.binds[0]!.tls!.clientValidation = { caCerts: 'not a certificate', mode: 'Sometimes' as never }
  bad.binds[0]!.listeners[0]!.tls = { cert: PEM['cert.pem'], key: PEM['key.pem'], clientValidation: { caCerts: PEM['ca.pem'], mode: 'AllowValidOnly' } }
  assert.deepEqual(validateIR(bad).map(d => d.path.join('.')).sort(), [
    'binds.0.listeners.0.tls.clientValidation',
    'binds.0.tls.clientValidation.caCerts',
    'binds.0.tls.clientValidation.mode'
  ])
  const http = structuredClone(ir) as ProxyIR
  http.binds[0]!.protocol = 'HTTP'
  assert.deepEqual(validateIR(http).map(d => d.message), ['client certificate validation needs an HTTPS or TLS bind'])
})
