/**
 * The TCP/TLS connection proxy (stream/stream-proxy.ts) with real sockets on loopback and the
 * engine in process: hostile client hellos (garbage, oversized, never finished, trickled)
 * are dropped without holding up other clients, the trace of a connection has its steps,
 * and the record the access log and metrics read says how each connection ended.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import net, { type AddressInfo, type Socket } from 'node:net'
import tls from 'node:tls'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../src/engine/engine.ts'
import { configToIR } from '../src/config/to-ir.ts'
import type { ConfigFile } from '../src/config/schema.ts'
import type { StreamConnectionRecord } from '../src/stream/stream-proxy.ts'
import type { TraceEvent } from '../src/trace/events.ts'

/** The proxy's own close handler runs a moment after the client saw the close. */
async function settled (): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, 50))
}

async function listen (server: net.Server): Promise<number> {
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

/** Connects, sends `data` (or nothing), and collects what comes back until the server closes. */
async function exchange (port: number, data: Buffer | string | null, options: { endAfterMs?: number } = {}): Promise<{ received: Buffer, closedMs: number }> {
  const started = performance.now()
  return await new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => {
      if (data !== null) s.write(data)
      if (options.endAfterMs !== undefined) setTimeout(() => s.end(), options.endAfterMs)
    })
    s.on('data', (c: Buffer) => chunks.push(c))
    // The server is done: end our side too (allowHalfOpen would keep it open).
    s.on('end', () => s.end())
    s.on('error', () => {})
    s.on('close', () => resolve({ received: Buffer.concat(chunks), closedMs: performance.now() - started }))
    setTimeout(() => reject(new Error('connection not closed in 10 s')), 10_000).unref()
  })
}

describe('stream proxy', () => {
  let dir: string
  let echo: net.Server
  let echoPort: number
  let engine: Engine
  let front: net.Server
  let tlsPort: number
  let tcpFront: net.Server
  let tcpPort: number
  const records: StreamConnectionRecord[] = []

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'portico-stream-'))
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-days', '1', '-keyout', 'key.pem', '-out', 'cert.pem', '-subj', '/CN=t.test', '-addext', 'subjectAltName=DNS:t.test'], { cwd: dir, stdio: 'ignore' })
    // Echoes, and says goodbye when the client half-closes (so half-close passing is visible).
    echo = net.createServer({ allowHalfOpen: true }, s => {
      s.on('data', (c: Buffer) => s.write(c))
      s.on('end', () => s.end('bye'))
      s.on('error', () => {})
    })
    echoPort = await listen(echo)
    const config: ConfigFile = {
      gateways: {
        tls: { port: 1, protocol: 'TLS', hostname: 't.test', tls: { cert: 'cert.pem', key: 'key.pem' } },
        tcp: { port: 2, protocol: 'TCP' }
      },
      tlsRoutes: [{ name: 'terminated', gateways: 'tls', backends: [{ host: `127.0.0.1:${echoPort}` }] }],
      tcpRoutes: [{ name: 'plain', gateways: 'tcp', backends: [{ host: `127.0.0.1:${echoPort}` }] }]
    }
    const { ir, diagnostics } = configToIR(config, { baseDir: dir, readFile: p => readFileSync(p, 'utf8') })
    assert.deepEqual(diagnostics, [])
    engine = new Engine({ streams: { clientHelloTimeoutMs: 300, onConnectionEnd: r => records.push(r) } })
    engine.apply(ir)
    const serve = (key: string) => {
      const handle = engine.streamHandler(key)
      return net.createServer({ allowHalfOpen: true }, (s: Socket) => handle(s))
    }
    front = serve(ir.binds.find(b => b.protocol === 'TLS')!.key)
    tlsPort = await listen(front)
    tcpFront = serve(ir.binds.find(b => b.protocol === 'TCP')!.key)
    tcpPort = await listen(tcpFront)
  })

  after(async () => {
    front?.close()
    tcpFront?.close()
    echo?.close()
    await engine?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('TCP: bytes both ways, and the client\'s half-close reaches the backend (which still answers)', async () => {
    const { received } = await exchange(tcpPort, 'ping', { endAfterMs: 100 })
    assert.equal(received.toString(), 'pingbye')
    await settled()
    const r = records.at(-1)!
    assert.equal(r.protocol, 'tcp')
    assert.equal(r.route, 'tcp:plain')
    assert.equal(r.reason, 'Done')
    assert.equal(r.bytesFromClient, 4)
    assert.equal(r.bytesToClient, 7)
  })

  test('TLS terminate: the handshake is Portico\'s, the plaintext reaches the backend', async () => {
    const ca = readFileSync(join(dir, 'cert.pem'), 'utf8')
    const got = await new Promise<string>((resolve, reject) => {
      let text = ''
      const s = tls.connect({ port: tlsPort, host: '127.0.0.1', servername: 't.test', ca }, () => { s.write('hello'); setTimeout(() => s.end(), 100) })
      s.setEncoding('utf8').on('data', (c: string) => { text += c })
      s.on('close', () => resolve(text))
      s.on('error', reject)
    })
    assert.equal(got, 'hellobye')
    await settled()
    assert.equal(records.at(-1)!.mode, 'Terminate')
    assert.equal(records.at(-1)!.serverName, 't.test')
  })

  test('garbage instead of a client hello is dropped at once', async () => {
    const { received, closedMs } = await exchange(tlsPort, 'GET / HTTP/1.1\r\nhost: t.test\r\n\r\n')
    assert.equal(received.length, 0)
    assert.ok(closedMs < 1_000)
    await settled()
    assert.equal(records.at(-1)!.reason, 'ClientHelloInvalid')
  })

  test('a hello that claims more than 64 KiB is dropped before it is read', async () => {
    // A handshake record holding the start of a client hello whose length says 1 MiB.
    const header = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x10, 0x00, 0x00])
    const { closedMs } = await exchange(tlsPort, header)
    assert.ok(closedMs < 1_000)
    await settled()
    assert.equal(records.at(-1)!.reason, 'ClientHelloInvalid')
    assert.match(records.at(-1)!.error ?? '', /too large/)
  })

  test('a client that never finishes its hello is dropped after the hello timeout, and others are served meanwhile', async () => {
    const stalled = exchange(tlsPort, Buffer.from([0x16, 0x03, 0x01, 0x00, 0x40, 0x01]))
    const silent = exchange(tlsPort, null)
    // Meanwhile a plain TCP client is served as usual.
    const { received } = await exchange(tcpPort, 'x', { endAfterMs: 10 })
    assert.equal(received.toString(), 'xbye')
    const [a, b] = await Promise.all([stalled, silent])
    for (const r of [a, b]) {
      assert.ok(r.closedMs >= 250 && r.closedMs < 3_000, `closed after ${r.closedMs} ms`)
    }
    await settled()
    assert.equal(records.filter(r => r.reason === 'ClientHelloTimeout').length, 2)
  })

  test('an unknown SNI name: the connection is closed, no handshake', async () => {
    const err = await new Promise<Error>(resolve => {
      const s = tls.connect({ port: tlsPort, host: '127.0.0.1', servername: 'other.test', rejectUnauthorized: false }, () => resolve(new Error('connected')))
      s.on('error', resolve)
    })
    assert.match((err as NodeJS.ErrnoException).code ?? err.message, /ECONNRESET|socket disconnected/i)
    await settled()
    assert.equal(records.at(-1)!.reason, 'NoRoute')
  })

  test('a traced connection has its steps: start, route, backend call, finish with byte counts', async () => {
    const events: TraceEvent[] = []
    const done = new Promise<void>(resolve => {
      engine.hub.arm({ accepts: c => c.method === 'TCP', deliver: e => { events.push(e); if (e.message.type === 'requestFinished') resolve() } })
    })
    await exchange(tcpPort, 'traced', { endAfterMs: 50 })
    await done
    assert.deepEqual(events.map(e => e.message.type), ['requestStarted', 'connectionStarted', 'routeSelection', 'backendCallStart', 'backendCallResult', 'requestFinished'])
    const finished = events.at(-1)!.message
    assert.ok(finished.type === 'requestFinished')
    assert.deepEqual(finished.stream, { bytesFromClient: 6, bytesToClient: 9, reason: 'Done' })
  })

  test('a backend that refuses the connection closes the client\'s and says why', async () => {
    const closed = net.createServer()
    const port = await listen(closed)
    closed.close()
    const { ir } = configToIR({ gateways: { tcp: { port: 2, protocol: 'TCP' } }, tcpRoutes: [{ gateways: 'tcp', backends: [{ host: `127.0.0.1:${port}` }] }] }, { baseDir: dir, readFile: p => readFileSync(p, 'utf8') })
    await settled()
    const local = new Engine({ streams: { onConnectionEnd: r => records.push(r) } })
    local.apply(ir)
    const handle = local.streamHandler(ir.binds[0]!.key)
    const server = net.createServer({ allowHalfOpen: true }, s => handle(s))
    const p = await listen(server)
    try {
      const { received } = await exchange(p, 'x')
      assert.equal(received.length, 0)
      assert.equal(records.at(-1)!.reason, 'UpstreamConnectFailed')
      assert.match(records.at(-1)!.error ?? '', /ECONNREFUSED/)
    } finally {
      server.close()
      await local.close()
    }
  })
})
