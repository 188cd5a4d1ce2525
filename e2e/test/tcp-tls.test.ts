/**
 * TCP and TLS listeners of a real portico process (tcpRoutes / tlsRoutes), driven by real
 * clients: `openssl s_client` for SNI passthrough, termination, client certificates, TLS
 * versions and cipher suites; Node sockets for plain TCP (bytes both ways, integrity of a
 * large transfer, half-close). Backends are a TCP echo server and two TLS servers with
 * certificates of their own, so a passed-through handshake shows the backend's certificate.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, rmSync } from 'node:fs'
import net, { type AddressInfo } from 'node:net'
import tls from 'node:tls'
import { join } from 'node:path'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { createTestCa, selfSignedCert } from '@portico/testkit/test-ca'

/** A self-signed certificate for `name` (and its SANs) as `<file>.pem` / `<file>.key`. */
function selfSigned (dir: string, file: string, name: string, sans = [name]): void {
  selfSignedCert(dir, file, { subject: `/CN=${name}`, key: 'rsa', sans: sans.map(s => `DNS:${s}`) })
}

/**
 * `openssl s_client` to 127.0.0.1:port: sends `input`, keeps reading until the server closes
 * (-ign_eof), and returns what it printed (certificate subject, cipher, the server's bytes).
 * Asynchronous: the backends answering it run in this process.
 */
async function sClient (port: number, args: string[], input = ''): Promise<{ ok: boolean, out: string }> {
  return await new Promise(resolve => {
    const child = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-ign_eof', ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s })
    child.stderr.setEncoding('utf8').on('data', (s: string) => { out += s })
    const timer = setTimeout(() => child.kill(), 15_000)
    child.on('close', code => {
      clearTimeout(timer)
      resolve({ ok: code === 0, out })
    })
    child.stdin.end(input)
  })
}

async function listen (server: net.Server): Promise<number> {
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

/** Sends `data`, half-closes, and returns everything the other side sent until it closed. */
async function roundTrip (port: number, data: Buffer): Promise<Buffer> {
  return await new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => s.end(data))
    s.on('data', (c: Buffer) => chunks.push(c))
    s.on('end', () => s.end())
    s.on('close', () => resolve(Buffer.concat(chunks)))
    s.on('error', reject)
  })
}

describe('TCP and TLS listeners', () => {
  let dir: string
  let echoServer: net.Server
  let echoPort: number
  let oncePort: number
  let onceServer: net.Server
  const tlsBackends: tls.Server[] = []
  const tlsPorts: number[] = []
  let httpBackend: Backend
  let portico: PorticoProcess
  let tcpPort: number
  let httpsPort: number
  let mtlsPort: number

  before(async () => {
    dir = makeTempDir('portico-e2e-tcp-')
    selfSigned(dir, 'a', 'a.test', ['a.test', '*.wild.test'])
    selfSigned(dir, 'b', 'b.test')
    selfSigned(dir, 'stranger', 'stranger')
    selfSigned(dir, 'portico', 'term.test', ['term.test', 'secure.test', 'mtls.test'])
    // A client CA and a client certificate it signed.
    createTestCa(dir, 'ca', { subject: '/CN=client CA', key: 'rsa' }).issue('client')

    // TCP echo: sends back what it gets, then `done` and the byte count when the client half-closes.
    echoServer = net.createServer({ allowHalfOpen: true }, s => {
      let n = 0
      s.on('data', (c: Buffer) => { n += c.length; s.write(c) })
      s.on('end', () => s.end(`done ${n}`))
      s.on('error', () => {})
    })
    echoPort = await listen(echoServer)
    // Answers the first bytes and closes (openssl s_client never half-closes).
    onceServer = net.createServer(s => {
      s.once('data', (c: Buffer) => s.end(`plain got ${c.toString().trim()}\n`))
      s.on('error', () => {})
    })
    oncePort = await listen(onceServer)
    for (const name of ['a', 'b']) {
      const server = tls.createServer({ cert: readFileSync(join(dir, `${name}.pem`)), key: readFileSync(join(dir, `${name}.key`)) }, s => {
        s.once('data', (c: Buffer) => s.end(`backend ${name} got ${c.toString().trim()} sni=${String((s as tls.TLSSocket).servername)}\n`))
        s.on('error', () => {})
      })
      tlsBackends.push(server)
      tlsPorts.push(await listen(server))
    }
    httpBackend = await startEchoBackend('http')
    tcpPort = await freePort()
    httpsPort = await freePort()
    mtlsPort = await freePort()
    const pem = (f: string) => join(dir, f)
    portico = await startPortico({
      config: port => ({
        gateways: {
          // One TLS port: two names passed through, one terminated with Portico's certificate.
          passA: { port, protocol: 'TLS', address: '127.0.0.1', hostname: 'a.test' },
          passWild: { port, protocol: 'TLS', address: '127.0.0.1', hostname: '*.wild.test' },
          passAny: { port, protocol: 'TLS', address: '127.0.0.1' },
          term: { port, protocol: 'TLS', address: '127.0.0.1', hostname: 'term.test', tls: { cert: pem('portico.pem'), key: pem('portico.key'), minTLSVersion: '1.3' } },
          mtls: { port: mtlsPort, protocol: 'TLS', address: '127.0.0.1', tls: { cert: pem('portico.pem'), key: pem('portico.key'), root: pem('ca.pem') } },
          tcp: { port: tcpPort, protocol: 'TCP', address: '127.0.0.1' },
          secure: { port: httpsPort, protocol: 'HTTPS', address: '127.0.0.1', tls: { cert: pem('portico.pem'), key: pem('portico.key'), maxTLSVersion: '1.2', cipherSuites: ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'ECDHE-RSA-CHACHA20-POLY1305'] } }
        },
        routes: [{ name: 'web', gateways: 'secure', backends: [{ host: httpBackend.host }] }],
        tlsRoutes: [
          { name: 'to-a', gateways: ['passA', 'passWild'], backends: [{ host: `127.0.0.1:${tlsPorts[0]!}` }] },
          // b.test arrives on the catch-all gateway; its most specific route wins over "any".
          { name: 'to-b', gateways: 'passAny', hostnames: ['b.test'], backends: [{ host: `127.0.0.1:${tlsPorts[1]!}` }] },
          { name: 'terminated', gateways: 'term', backends: [{ host: `127.0.0.1:${oncePort}` }] },
          { name: 'mutual', gateways: 'mtls', backends: [{ host: `127.0.0.1:${oncePort}` }] }
        ],
        tcpRoutes: [
          { name: 'echo', gateways: 'tcp', backends: [{ host: `127.0.0.1:${echoPort}` }] },
          // agentgateway's spelling: tcpRoutes with hostnames on a TLS gateway match SNI too.
          { name: 'any-name', gateways: 'passAny', hostnames: ['*.test'], backends: [{ host: `127.0.0.1:${tlsPorts[0]!}` }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    echoServer?.close()
    onceServer?.close()
    for (const s of tlsBackends) s.close()
    await httpBackend?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('SNI passthrough: the backend chosen by name completes the handshake with its own certificate', async () => {
    const a = await sClient(portico.port, ['-servername', 'a.test', '-CAfile', join(dir, 'a.pem'), '-verify_return_error'], 'hi\n')
    assert.ok(a.ok, a.out)
    assert.match(a.out, /subject=\s*CN\s*=\s*a\.test/)
    assert.match(a.out, /backend a got hi sni=a\.test/)
    const wild = await sClient(portico.port, ['-servername', 'x.wild.test', '-CAfile', join(dir, 'a.pem')], 'w\n')
    assert.match(wild.out, /backend a got w sni=x\.wild\.test/)
    const b = await sClient(portico.port, ['-servername', 'b.test', '-CAfile', join(dir, 'b.pem'), '-verify_return_error'], 'hi\n')
    assert.ok(b.ok, b.out)
    assert.match(b.out, /subject=\s*CN\s*=\s*b\.test/)
    assert.match(b.out, /backend b got hi sni=b\.test/)
    // Another name under .test goes to the catch-all gateway's wildcard tcpRoute.
    assert.match((await sClient(portico.port, ['-servername', 'c.test'], 'c\n')).out, /backend a got c sni=c\.test/)
  })

  test('a name no route serves: the connection is closed before any handshake', async () => {
    const r = await sClient(portico.port, ['-servername', 'nobody.example'], 'x\n')
    assert.equal(r.ok, false)
    assert.match(r.out, /unexpected eof|Connection reset|errno=104|write:errno/i)
    assert.doesNotMatch(r.out, /BEGIN CERTIFICATE/)
  })

  test('Terminate: Portico\'s certificate, TLS 1.3 only (minTLSVersion), the plaintext forwarded', async () => {
    const r = await sClient(portico.port, ['-servername', 'term.test', '-CAfile', join(dir, 'portico.pem'), '-verify_return_error'], 'plain\n')
    assert.ok(r.ok, r.out)
    assert.match(r.out, /subject=\s*CN\s*=\s*term\.test/)
    assert.match(r.out, /plain got plain/)
    assert.match(r.out, /TLSv1\.3/)
    const old = await sClient(portico.port, ['-servername', 'term.test', '-tls1_2'], 'x\n')
    assert.equal(old.ok, false, 'TLS 1.2 is refused')
  })

  test('Terminate with root: a client certificate of the CA is required', async () => {
    const args = ['-servername', 'mtls.test', '-CAfile', join(dir, 'portico.pem')]
    const withCert = await sClient(mtlsPort, [...args, '-cert', join(dir, 'client.pem'), '-key', join(dir, 'client.key')], 'id\n')
    assert.match(withCert.out, /plain got id/, withCert.out)
    const without = await sClient(mtlsPort, args, 'id\n')
    assert.doesNotMatch(without.out, /plain got id/)
    const stranger = await sClient(mtlsPort, [...args, '-cert', join(dir, 'stranger.pem'), '-key', join(dir, 'stranger.key')], 'id\n')
    assert.doesNotMatch(stranger.out, /plain got id/, 'a certificate of another CA is refused')
    await waitUntil(() => portico.logs().filter(l => l.msg === 'connection' && l.reason === 'ClientCertificateRequired').length === 2, 5_000, 'two refusals logged')
  })

  test('HTTPS cipherSuites and maxTLSVersion: only the listed TLS 1.2 suites are negotiated', async () => {
    const args = ['-servername', 'secure.test', '-CAfile', join(dir, 'portico.pem')]
    const good = await sClient(httpsPort, [...args, '-cipher', 'ECDHE-RSA-AES128-GCM-SHA256'], 'GET / HTTP/1.1\r\nhost: secure.test\r\nconnection: close\r\n\r\n')
    assert.ok(good.ok, good.out)
    assert.match(good.out, /Cipher is ECDHE-RSA-AES128-GCM-SHA256/)
    assert.match(good.out, /TLSv1\.2/)
    assert.match(good.out, /HTTP\/1\.1 200/)
    assert.equal((await sClient(httpsPort, [...args, '-cipher', 'ECDHE-RSA-AES256-GCM-SHA384'])).ok, false, 'an unlisted suite is refused')
    assert.equal((await sClient(httpsPort, [...args, '-tls1_3'])).ok, false, 'TLS 1.3 is above maxTLSVersion')
  })

  test('TCP: 8 MiB each way arrive intact, and the half-close reaches the backend', async () => {
    const data = randomBytes(8 * 1024 * 1024)
    const back = await roundTrip(tcpPort, data)
    const tail = Buffer.from(`done ${data.length}`)
    assert.equal(back.length, data.length + tail.length)
    assert.equal(createHash('sha256').update(back.subarray(0, data.length)).digest('hex'), createHash('sha256').update(data).digest('hex'))
    assert.deepEqual(back.subarray(data.length), tail)
  })

  test('TCP: a client that reads slowly still gets every byte the backend sent before it closed', async () => {
    // The client is the slow end, so Portico mostly holds bytes it has not read yet — also
    // when the backend sends its tail and closes: those must still reach the client (closing
    // the client's side at the backend's close dropped up to a high-water mark of them). The
    // sizes vary so the last read lands differently each time.
    const slowRead = (data: Buffer): Promise<Buffer> => new Promise((resolve, reject) => {
      const chunks: Buffer[] = []
      const s = net.connect({ port: tcpPort, host: '127.0.0.1', allowHalfOpen: true }, () => s.end(data))
      s.on('data', (c: Buffer) => {
        chunks.push(c)
        s.pause()
        setTimeout(() => s.resume(), 1)
      })
      s.on('end', () => s.end())
      s.on('close', () => resolve(Buffer.concat(chunks)))
      s.on('error', reject)
    })
    for (let i = 0; i < 40; i++) {
      const data = randomBytes(1024 * 1024 + i * 4099)
      const back = await slowRead(data)
      assert.equal(back.length, data.length + `done ${data.length}`.length, `round ${i}`)
      assert.ok(back.subarray(0, data.length).equals(data), `round ${i}: the bytes came back as sent`)
    }
  })

  test('each connection gets an access-log line with route, bytes and how it ended', async () => {
    await roundTrip(tcpPort, Buffer.from('log me'))
    const find = () => portico.logs().find(l => l.msg === 'connection' && l.route === 'tcp:echo' && l['bytes.received'] === 6)
    await waitUntil(() => find() !== undefined, 5_000, 'the connection\'s access-log line')
    const line = find()!
    assert.equal(line.protocol, 'tcp')
    assert.equal(line.reason, 'Done')
    assert.equal(line['bytes.sent'], 6 + 'done 6'.length)
    assert.equal(line.target, `127.0.0.1:${echoPort}`)
    assert.equal(line.src, '127.0.0.1')
    const refused = portico.logs().find(l => l.msg === 'connection' && l.reason === 'NoRoute')
    assert.equal(refused?.['tls.server.name'], 'nobody.example')
  })

  test('HTTPS gateways sharing a port with their own certificates: the SNI name picks each, the most specific first', async () => {
    const port = await freePort()
    const pem = (f: string) => join(dir, f)
    const multi = await startPortico({
      config: {
        gateways: {
          a: { port, address: '127.0.0.1', protocol: 'HTTPS', hostname: 'a.test', tls: { cert: pem('a.pem'), key: pem('a.key') } },
          wild: { port, address: '127.0.0.1', protocol: 'HTTPS', hostname: '*.test', tls: { cert: pem('b.pem'), key: pem('b.key') } },
          any: { port, address: '127.0.0.1', protocol: 'HTTPS', tls: { cert: pem('portico.pem'), key: pem('portico.key') } }
        },
        routes: [{ gateways: ['a', 'wild', 'any'], backends: [{ host: httpBackend.host }] }]
      }
    })
    try {
      const subject = (servername: string) => new Promise<string>((resolve, reject) => {
        const s = tls.connect({ port, host: '127.0.0.1', servername, rejectUnauthorized: false }, () => {
          resolve(String(s.getPeerCertificate().subject.CN))
          s.end()
        })
        s.on('error', reject)
      })
      assert.equal(await subject('a.test'), 'a.test')
      assert.equal(await subject('other.test'), 'b.test')
      assert.equal(await subject('elsewhere.example'), 'term.test')
    } finally {
      await multi.stop()
    }
  })

  test('a port can change from HTTP to TCP on reload', async () => {
    const port = await freePort()
    const reloading = await startPortico({
      config: { gateways: { g: { port, address: '127.0.0.1' } }, routes: [{ gateways: 'g', backends: [{ host: httpBackend.host }] }] }
    })
    try {
      const res = await fetch(`http://127.0.0.1:${port}/`)
      assert.equal(res.status, 200)
      await res.arrayBuffer()
      const from = reloading.stdout.length
      reloading.replaceConfig({ gateways: { g: { port, address: '127.0.0.1', protocol: 'TCP' } }, tcpRoutes: [{ gateways: 'g', backends: [{ host: `127.0.0.1:${echoPort}` }] }] })
      await reloading.waitForOutput('config reloaded', { fromStdout: from, timeoutMs: 10_000 })
      assert.equal((await roundTrip(port, Buffer.from('tcp now'))).toString(), 'tcp nowdone 7')
    } finally {
      await reloading.stop()
    }
  })
})
