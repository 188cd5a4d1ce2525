/**
 * backendTLS against real TLS backends (node:https) with certificates made by openssl at
 * test time: a private CA, SNI and the verified name, mutual TLS with a client certificate,
 * a wrong CA, a wrong name, a server that requires a client certificate we do not send,
 * `insecure`, and config errors. /config_dump never shows the client key.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import type { TLSSocket } from 'node:tls'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { createTestCa, selfSignedCert } from '@portico/testkit/test-ca'

let dir: string
let plain: https.Server
let mtls: https.Server
let plainPort: number
let mtlsPort: number
let portico: PorticoProcess
let admin: string
const seen: Array<{ server: string, servername: string | false, clientCN: string | null }> = []

/** A CA, a server certificate for backend.test and a client certificate signed by it, and another CA. */
function makeCerts (): void {
  const ca = createTestCa(dir, 'ca', { subject: '/CN=portico-test-ca' })
  selfSignedCert(dir, 'other-ca', { subject: '/CN=someone-else' })
  ca.issue('server', { subject: '/CN=backend.test', sans: ['DNS:backend.test'] })
  ca.issue('client', { subject: '/CN=portico-client', extensions: ['extendedKeyUsage=clientAuth'] })
}

async function listen (server: https.Server): Promise<number> {
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as { port: number }).port
}

function handler (name: string): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void {
  return (req, res) => {
    const socket = req.socket as TLSSocket
    const peer = socket.getPeerCertificate()
    const cn = peer?.subject?.CN
    seen.push({ server: name, servername: socket.servername ?? false, clientCN: Array.isArray(cn) ? cn.join(',') : cn ?? null })
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`hello from ${name}`)
  }
}

before(async () => {
  dir = makeTempDir('portico-backend-tls-')
  makeCerts()
  const key = readFileSync(join(dir, 'server.key'))
  const cert = readFileSync(join(dir, 'server.pem'))
  plain = https.createServer({ key, cert }, handler('plain'))
  mtls = https.createServer({ key, cert, ca: readFileSync(join(dir, 'ca.pem')), requestCert: true, rejectUnauthorized: true }, handler('mtls'))
  plainPort = await listen(plain)
  mtlsPort = await listen(mtls)
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  const route = (name: string, host: string, backendTLS?: Record<string, unknown>) => ({
    name, matches: [{ path: { pathPrefix: `/${name}` } }], backends: [{ host, ...(backendTLS !== undefined ? { policies: { backendTLS } } : {}) }]
  })
  const trusted = { root: 'ca.pem', hostname: 'backend.test' }
  const client = { ...trusted, cert: 'client.pem', key: 'client.key' }
  portico = await startPortico({
    dir,
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        route('tls', `https://127.0.0.1:${plainPort}`, trusted),
        route('implied', `127.0.0.1:${plainPort}`, trusted),
        route('system-roots', `https://127.0.0.1:${plainPort}`),
        route('wrong-ca', `https://127.0.0.1:${plainPort}`, { root: 'other-ca.pem', hostname: 'backend.test' }),
        route('wrong-name', `https://127.0.0.1:${plainPort}`, { root: 'ca.pem', hostname: 'other.test' }),
        route('insecure', `https://127.0.0.1:${plainPort}`, { insecure: true }),
        route('mtls', `https://127.0.0.1:${mtlsPort}`, client),
        route('mtls-no-cert', `https://127.0.0.1:${mtlsPort}`, trusted)
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  plain?.close()
  mtls?.close()
})

async function send (path: string) {
  const res = await request(`${portico.url}${path}`)
  return { status: res.statusCode, text: await res.body.text() }
}

test('a private CA and a server name: verified, sent as SNI; https is implied by backendTLS', async () => {
  const r = await send('/tls')
  assert.equal(r.status, 200, r.text)
  assert.equal(r.text, 'hello from plain')
  assert.equal(seen.at(-1)!.servername, 'backend.test')
  const implied = await send('/implied')
  assert.equal(implied.status, 200, implied.text)
})

test('a wrong CA, the system roots or a wrong name: 503 with the TLS error', async () => {
  for (const path of ['/wrong-ca', '/system-roots']) {
    const r = await send(path)
    assert.equal(r.status, 503)
    assert.match(r.text, /^upstream TLS failed: .*(certificate|self-signed|issuer)/i, r.text)
  }
  const name = await send('/wrong-name')
  assert.equal(name.status, 503)
  assert.match(name.text, /^upstream TLS failed: .*other\.test/, name.text)
})

test('insecure skips verification', async () => {
  assert.equal((await send('/insecure')).status, 200)
})

test('mutual TLS: the client certificate is presented; without it the server refuses', async () => {
  const r = await send('/mtls')
  assert.equal(r.status, 200, r.text)
  assert.equal(seen.at(-1)!.server, 'mtls')
  assert.equal(seen.at(-1)!.clientCN, 'portico-client')
  const refused = await send('/mtls-no-cert')
  assert.equal(refused.status, 503)
  assert.match(refused.text, /^upstream (TLS|call) failed: /)
})

test('/config_dump shows the backend TLS settings, never the client key', async () => {
  const res = await request(`${admin}/config_dump`)
  const text = await res.body.text()
  assert.ok(!text.includes('PRIVATE KEY'))
  const dump = JSON.parse(text) as { backends: Array<{ name: string, protocol: string, tls?: Record<string, unknown> }> }
  const b = dump.backends.find(x => x.tls?.cert !== undefined)!
  assert.equal(b.protocol, 'https')
  assert.equal(b.tls!.key, '<redacted>')
  assert.equal(b.tls!.serverName, 'backend.test')
})

test('config errors: missing files, a certificate without its key, a file that is not PEM', async () => {
  const bad = join(dir, 'bad.yaml')
  writeFileSync(bad, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - backends:',
    '      - host: "https://127.0.0.1:1"',
    '        policies: {backendTLS: {root: missing.pem}}',
    '      - host: "https://127.0.0.1:2"',
    '        policies: {backendTLS: {cert: client.pem}}',
    '      - host: "https://127.0.0.1:3"',
    '        policies: {backendTLS: {root: bad.yaml, sni: x}}'
  ].join('\n'))
  const r = await runPortico(['--validate', '-f', bad])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /routes\[0\]\.backends\[2\]\.policies\.backendTLS\.sni: unknown field "sni"/)
  writeFileSync(bad, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - backends:',
    '      - host: "https://127.0.0.1:1"',
    '        policies: {backendTLS: {root: missing.pem}}',
    '      - host: "https://127.0.0.1:2"',
    '        policies: {backendTLS: {cert: client.pem}}',
    '      - host: "https://127.0.0.1:3"',
    '        policies: {backendTLS: {root: bad.yaml}}'
  ].join('\n'))
  const r2 = await runPortico(['--validate', '-f', bad])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /routes\[0\]\.backends\[0\]\.policies\.backendTLS\.root: cannot read .*missing\.pem: ENOENT/)
  assert.match(r2.stderr, /routes\[0\]\.backends\[1\]\.policies\.backendTLS: a client certificate needs both cert and key/)
  assert.match(r2.stderr, /routes\[0\]\.backends\[2\]\.policies\.backendTLS\.root: .*bad\.yaml is not a PEM file/)
})
