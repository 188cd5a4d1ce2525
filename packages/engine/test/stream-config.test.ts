/**
 * TCP and TLS gateways, tcpRoutes / tlsRoutes and server TLS options in a standalone file:
 * what can never work is refused at load with `file:line:col: field: why`, and a valid file
 * becomes the stream-route IR (golden-style, whole objects compared).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfigText, formatDiagnostic, redactSecrets } from '../src/index.ts'
import { selfSignedCert } from '../../testkit/src/test-ca.ts'

const dir = mkdtempSync(join(tmpdir(), 'portico-stream-config-'))
selfSignedCert(dir, 't.test', { key: 'rsa', files: { cert: 'cert.pem', key: 'key.pem' } })
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))

function load (yaml: string) {
  return loadConfigText(yaml, { baseDir: dir, readFile: p => readFileSync(p, 'utf8') })
}

function errors (yaml: string): string[] {
  const result = load(yaml)
  assert.equal(result.ok, false, 'expected the config to be rejected')
  if (result.ok) return []
  return result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
}

test('a TLS gateway without a certificate passes through; with one it terminates; both become stream routes', () => {
  const result = load([
    'gateways:',
    '  pass: {port: 9443, protocol: TLS, hostname: "*.example.com"}',
    '  term: {port: 9443, protocol: TLS, hostname: api.internal, tls: {cert: cert.pem, key: key.pem, minTLSVersion: "1.3"}}',
    '  raw: {port: 9000, protocol: TCP}',
    'tlsRoutes:',
    '  - {name: a, gateways: pass, hostnames: [a.example.com], backends: [{host: "10.0.0.1:443"}]}',
    '  - {name: t, gateways: term, backends: [{host: "10.0.0.2:8080", weight: 2}, {endpoints: ["10.0.0.3:8080", "10.0.0.4:8080"]}]}',
    'tcpRoutes:',
    '  - {name: db, gateways: raw, backends: [{host: "db:5432", policies: {backendTLS: {insecure: true}}}]}'
  ].join('\n'))
  assert.equal(result.ok, true, result.ok ? '' : result.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n'))
  if (!result.ok) return
  const ir = result.config.ir
  const tlsBind = ir.binds.find(b => b.port === 9443)!
  assert.equal(tlsBind.protocol, 'TLS')
  assert.deepEqual(tlsBind.listeners.map(l => [l.name, l.tlsMode, l.tls?.minVersion ?? null]), [['pass', 'Passthrough', null], ['term', 'Terminate', 'TLSv1.3']])
  assert.deepEqual(tlsBind.listeners[0]!.streamRoutes, [{ key: 'tls:a', name: 'a', kind: 'tls', hostnames: ['a.example.com'], backends: [{ backend: 'tcp://10.0.0.1:443', weight: 1, policies: {} }], order: 0 }])
  assert.deepEqual(tlsBind.listeners[1]!.streamRoutes![0]!.backends.map(b => [b.backend, b.weight]), [['tcp://10.0.0.2:8080', 2], ['tcp://10.0.0.3:8080,10.0.0.4:8080', 1]])
  const tcp = ir.binds.find(b => b.port === 9000)!
  assert.equal(tcp.protocol, 'TCP')
  const db = ir.backends.find(b => b.key === tcp.listeners[0]!.streamRoutes![0]!.backends[0]!.backend)!
  assert.equal(db.protocol, 'https')
  assert.deepEqual(db.tls, { insecure: true })
  // A terminating listener's key sits on the listener: /config_dump must not show it.
  assert.match(JSON.stringify(ir), /PRIVATE KEY/)
  assert.doesNotMatch(JSON.stringify(redactSecrets(ir)), /PRIVATE KEY/)
})

test('routes, tcpRoutes and tlsRoutes attach only to gateways of their kind', () => {
  assert.deepEqual(errors([
    'gateways:',
    '  web: {port: 8080}',
    '  raw: {port: 9000, protocol: TCP}',
    '  sni: {port: 9443, protocol: TLS}',
    'routes:',
    '  - {gateways: raw, backends: [{host: "a:80"}]}',
    'tcpRoutes:',
    '  - {gateways: web, backends: [{host: "a:80"}]}',
    '  - {gateways: raw, hostnames: [a.test], backends: [{host: "a:80"}]}',
    'tlsRoutes:',
    '  - {gateways: raw, backends: [{host: "a:80"}]}',
    '  - {gateways: sni, backends: [{host: "http://a:80"}]}'
  ].join('\n')), [
    'c.yaml:6:6: routes[0].gateways: gateway "raw" has protocol TCP: it forwards connections, not HTTP requests (use tcpRoutes)',
    'c.yaml:8:6: tcpRoutes[0].gateways: gateway "web" has protocol HTTP; tcpRoutes attach to TCP or TLS gateways (HTTP traffic goes in routes)',
    'c.yaml:9:21: tcpRoutes[1].hostnames: gateway "raw" has protocol TCP: a plain TCP connection carries no name to match (hostnames need a TLS gateway)',
    'c.yaml:11:6: tlsRoutes[0].gateways: gateway "raw" has protocol TCP; tlsRoutes attach to TLS gateways',
    'c.yaml:12:33: tlsRoutes[1].backends[0].host: "http://a:80": a connection backend is host:port (the bytes are forwarded as they are; for TLS to the backend use policies.backendTLS)'
  ])
})

test('TLS settings that can never work are refused at load', () => {
  assert.deepEqual(errors([
    'gateways:',
    '  a: {port: 9443, protocol: TLS, tls: {mode: Passthrough, cert: cert.pem}}',
    '  b: {port: 9444, protocol: TLS, tls: {mode: Terminate}}',
    '  c: {port: 9445, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, minTLSVersion: "1.3", maxTLSVersion: "1.2"}}',
    '  d: {port: 9446, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA265]}}',
    '  e: {port: 9447, protocol: HTTPS, tls: {cert: cert.pem, key: key.pem, cipherSuites: [TLS_AES_128_GCM_SHA256]}}',
    '  f: {port: 9448, protocol: HTTP, tls: {mode: Terminate}}',
    '  g: {port: 9000, protocol: TCP, hostname: a.test, http2: false}',
    '  h: {port: 9000, protocol: TCP}'
  ].join('\n')), [
    'c.yaml:2:59: gateways.a.tls.cert: is not used in mode Passthrough: the backend completes the handshake',
    'c.yaml:3:34: gateways.b.tls.cert: required in mode Terminate (the certificate and key Portico answers with)',
    'c.yaml:3:34: gateways.b.tls.key: required in mode Terminate (the certificate and key Portico answers with)',
    'c.yaml:4:94: gateways.c.tls.maxTLSVersion: is older than minTLSVersion 1.3: no version is left to offer',
    'c.yaml:5:87: gateways.d.tls.cipherSuites[0]: unknown cipher suite "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA265" (did you mean TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256?)',
    'c.yaml:6:72: gateways.e.tls.cipherSuites: lists only TLS 1.3 suites while TLS 1.2 is allowed: add a TLS 1.2 suite or set minTLSVersion: "1.3"',
    'c.yaml:7:35: gateways.f.tls: tls is only used with protocol HTTPS or TLS',
    'c.yaml:7:41: gateways.f.tls.mode: mode is only used with protocol TLS',
    'c.yaml:8:34: gateways.g.hostname: is not used with protocol TCP: a plain TCP connection carries no name (use protocol TLS to tell connections apart by SNI)',
    'c.yaml:8:52: gateways.g.http2: is not used with protocol TCP (connections are forwarded, not HTTP requests)',
    'c.yaml:9:3: gateways.h: port 9000 is already used by gateway "g": a TCP port serves one gateway (connections carry no name to tell gateways apart)'
  ])
})
