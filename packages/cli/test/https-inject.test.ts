/**
 * Inject mode against an HTTPS listener (self-signed certificate made by openssl): the URL's
 * host is the TLS server name and the Host header; without -k the certificate is refused.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { freePort, makeTempDir, startPortico, type PorticoProcess } from '@portico/testkit/portico'
import { startEchoBackend, type Backend } from '@portico/testkit/backends'
import { ctl, jsonLines } from '@portico/testkit/porticoctl'
import { selfSignedCert } from '@portico/testkit/test-ca'

let portico: PorticoProcess
let backend: Backend
let local: string[]

before(async () => {
  const dir = makeTempDir('porticoctl-tls-')
  selfSignedCert(dir, 'secure.example.test', { key: 'rsa', sans: ['DNS:secure.example.test'], files: { cert: 'cert.pem', key: 'key.pem' } })
  backend = await startEchoBackend('tls-backend')
  const adminAddr = `127.0.0.1:${await freePort()}`
  local = ['--local', '--admin-addr', adminAddr]
  portico = await startPortico({
    dir,
    env: { ADMIN_ADDR: adminAddr },
    config: port => ({
      gateways: { secure: { port, protocol: 'HTTPS', address: '127.0.0.1', tls: { cert: 'cert.pem', key: 'key.pem' } } },
      routes: [{ name: 'secure', gateways: ['secure'], backends: [{ host: backend.host }] }]
    })
  })
  portico.ownsDir = true
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

test('https:// with -k: TLS to 127.0.0.1 with the URL host as server name and Host header', async () => {
  const r = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'https://secure.example.test/pay', '-k'])
  assert.equal(r.code, 0, r.stderr)
  const events = jsonLines(r.stdout)
  const initial = events.find(e => e.message.stage === 'initial request')!.message.requestState as { request: { scheme: string, host: string } }
  assert.equal(initial.request.scheme, 'https')
  assert.equal(initial.request.host, 'secure.example.test')
  assert.equal(backend.requests.at(-1)?.headers.host, 'secure.example.test')
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
})

test('https:// without -k: the self-signed certificate is refused, with a hint', async () => {
  const r = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'https://secure.example.test/pay'])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /^porticoctl: the request to https:\/\/127\.0\.0\.1:\d+\/pay \(Host: secure\.example\.test\) failed: .*self-signed certificate.* \(use -k to skip certificate verification\)\n$/)
})
