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
import { createHash, randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Engine } from '../src/engine/engine.ts'
import { configToIR } from '../src/config/to-ir.ts'
import type { ConfigFile } from '../src/config/schema.ts'
import type { StreamConnectionRecord, StreamProxyOptions } from '../src/stream/stream-proxy.ts'
import type { TraceEvent } from '../src/trace/events.ts'
import { waitUntil } from '../../testkit/src/wait.ts'
import { selfSignedCert } from '../../testkit/src/test-ca.ts'

/**
 * The connection-end records in `list` after index `from` that `match`, once there are `n` of
 * them: the proxy's own close handler runs a moment after the client saw the close.
 */
async function ended (list: StreamConnectionRecord[], from: number, match: (r: StreamConnectionRecord) => boolean = () => true, n = 1): Promise<StreamConnectionRecord[]> {
  const found = () => list.slice(from).filter(match)
  await waitUntil(() => found().length >= n, 5_000, () => `${n} connection-end record(s); got ${JSON.stringify(list.slice(from).map(r => r.reason))}`)
  return found()
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

interface Backing {
  /** The gateway's stream options (timeouts, the record hook). */
  streams?: StreamProxyOptions
  /** The backend is a TLS server with these options (and the route has backendTLS). */
  tls?: tls.TlsOptions
  /** The route has backendTLS though the backend does not speak TLS. */
  backendTLS?: boolean
}

/**
 * `serve` as the backend (each connection) behind a TCP gateway with an engine of its own, for
 * `body`, which connects through the gateway with `connect`; every socket and server is
 * closed after.
 */
async function behindProxy (dir: string, serve: (s: net.Socket) => void, backing: Backing, body: (port: number, connect: () => net.Socket) => Promise<void>): Promise<void> {
  const sockets = new Set<net.Socket>()
  const track = (s: net.Socket): net.Socket => {
    sockets.add(s)
    s.on('error', () => {})
    return s
  }
  const backend = backing.tls !== undefined
    ? tls.createServer({ allowHalfOpen: true, ...backing.tls }, s => serve(track(s)))
    : net.createServer({ allowHalfOpen: true }, s => serve(track(s)))
  const port = await listen(backend)
  const policies = backing.tls !== undefined || backing.backendTLS === true ? { backendTLS: { insecure: true } } : undefined
  const { ir, diagnostics } = configToIR({ gateways: { tcp: { port: 2, protocol: 'TCP' } }, tcpRoutes: [{ name: 'r', gateways: 'tcp', backends: [{ host: `127.0.0.1:${port}`, ...(policies !== undefined ? { policies } : {}) }] }] }, { baseDir: dir, readFile: p => readFileSync(p, 'utf8') })
  assert.deepEqual(diagnostics, [])
  const engine = new Engine({ streams: backing.streams ?? {} })
  engine.apply(ir)
  const handle = engine.streamHandler(ir.binds[0]!.key)
  const front = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, s => handle(s))
  const frontPort = await listen(front)
  try {
    await body(frontPort, () => track(net.connect({ port: frontPort, host: '127.0.0.1', allowHalfOpen: true })))
  } finally {
    for (const s of sockets) s.destroy()
    front.close()
    backend.close()
    await engine.close()
  }
}

/** Echoes, and says goodbye when the client half-closes. */
function echoBye (s: net.Socket): void {
  s.on('data', (c: Buffer) => s.write(c))
  s.on('end', () => s.end('bye'))
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
  let tcpBindKey: string
  const records: StreamConnectionRecord[] = []

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'portico-stream-'))
    selfSignedCert(dir, 't.test', { key: 'rsa', sans: ['DNS:t.test'], files: { cert: 'cert.pem', key: 'key.pem' } })
    // Echoes, and says goodbye when the client half-closes (so half-close passing is visible).
    echo = net.createServer({ allowHalfOpen: true }, s => {
      echoBye(s)
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
    tcpBindKey = ir.binds.find(b => b.protocol === 'TCP')!.key
    tcpFront = serve(tcpBindKey)
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
    const from = records.length
    const { received } = await exchange(tcpPort, 'ping', { endAfterMs: 100 })
    assert.equal(received.toString(), 'pingbye')
    const [r] = await ended(records, from)
    assert.ok(r !== undefined)
    assert.equal(r.protocol, 'tcp')
    assert.equal(r.route, 'tcp:plain')
    assert.equal(r.reason, 'Done')
    assert.equal(r.bytesFromClient, 4)
    assert.equal(r.bytesToClient, 7)
    // Read while the connection was open: a closed socket no longer knows its peer.
    assert.equal(r.source.address, '127.0.0.1')
    assert.ok(r.source.port > 0)
  })

  test('TLS terminate: the handshake is Portico\'s, the plaintext reaches the backend', async () => {
    const from = records.length
    const ca = readFileSync(join(dir, 'cert.pem'), 'utf8')
    const got = await new Promise<string>((resolve, reject) => {
      let text = ''
      const s = tls.connect({ port: tlsPort, host: '127.0.0.1', servername: 't.test', ca }, () => { s.write('hello'); setTimeout(() => s.end(), 100) })
      s.setEncoding('utf8').on('data', (c: string) => { text += c })
      s.on('close', () => resolve(text))
      s.on('error', reject)
    })
    assert.equal(got, 'hellobye')
    const [r] = await ended(records, from)
    assert.equal(r!.mode, 'Terminate')
    assert.equal(r!.serverName, 't.test')
  })

  test('garbage instead of a client hello is dropped at once', async () => {
    const from = records.length
    const { received, closedMs } = await exchange(tlsPort, 'GET / HTTP/1.1\r\nhost: t.test\r\n\r\n')
    assert.equal(received.length, 0)
    assert.ok(closedMs < 1_000)
    const [r] = await ended(records, from)
    assert.equal(r!.reason, 'ClientHelloInvalid')
  })

  test('a hello that claims more than 64 KiB is dropped before it is read', async () => {
    // A handshake record holding the start of a client hello whose length says 1 MiB.
    const header = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x10, 0x00, 0x00])
    const from = records.length
    const { closedMs } = await exchange(tlsPort, header)
    assert.ok(closedMs < 1_000)
    const [r] = await ended(records, from)
    assert.equal(r!.reason, 'ClientHelloInvalid')
    assert.match(r!.error ?? '', /too large/)
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
    await ended(records, 0, r => r.reason === 'ClientHelloTimeout', 2)
    assert.equal(records.filter(r => r.reason === 'ClientHelloTimeout').length, 2)
  })

  test('an unknown SNI name: the connection is closed, no handshake', async () => {
    const from = records.length
    const err = await new Promise<Error>(resolve => {
      const s = tls.connect({ port: tlsPort, host: '127.0.0.1', servername: 'other.test', rejectUnauthorized: false }, () => resolve(new Error('connected')))
      s.on('error', resolve)
    })
    assert.match((err as NodeJS.ErrnoException).code ?? err.message, /ECONNRESET|socket disconnected/i)
    const [r] = await ended(records, from)
    assert.equal(r!.reason, 'NoRoute')
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
    const from = records.length
    const local = new Engine({ streams: { onConnectionEnd: r => records.push(r) } })
    local.apply(ir)
    const handle = local.streamHandler(ir.binds[0]!.key)
    const server = net.createServer({ allowHalfOpen: true }, s => handle(s))
    const p = await listen(server)
    try {
      const { received } = await exchange(p, 'x')
      assert.equal(received.length, 0)
      // The traced connection of the test before may end after `from`: this one's is found by its reason.
      const [r] = await ended(records, from, r => r.reason === 'UpstreamConnectFailed')
      assert.match(r!.error ?? '', /ECONNREFUSED/)
    } finally {
      server.close()
      await local.close()
    }
  })
  test('TCP: concurrent bulk transfers, more than there are bulk buffers, all arrive intact both ways', async () => {
    // 20 connections at once (relay.ts lends at most 16 bulk buffers; the rest copy).
    const payloads = Array.from({ length: 20 }, () => randomBytes(1024 * 1024 + 17))
    const backs = await Promise.all(payloads.map(async p => (await exchange(tcpPort, p, { endAfterMs: 0 })).received))
    for (const [i, back] of backs.entries()) {
      assert.equal(back.length, payloads[i]!.length + 3)
      assert.equal(createHash('sha256').update(back.subarray(0, -3)).digest('hex'), createHash('sha256').update(payloads[i]!).digest('hex'))
      assert.equal(back.subarray(-3).toString(), 'bye')
    }
  })

  test('a stalled reader\'s waiting writes keep their bytes while other connections flow', async () => {
    // A write to a client that stopped reading waits, holding the buffer its bytes were copied
    // into; the other connections copy their reads meanwhile. A buffer handed out again
    // before its write was flushed would put their bytes into the stalled client's stream.
    // Each connection gets the pattern from an offset of its own (sent first, 4 bytes), in
    // 40 KiB writes a millisecond apart (reads that do not fill the shared buffer: copies).
    const pattern = randomBytes(1024 * 1024 + 7)
    const source = (s: net.Socket): void => {
      let at = Math.floor(Math.random() * pattern.length)
      const head = Buffer.alloc(4)
      head.writeUInt32BE(at)
      s.write(head)
      const timer = setInterval(() => {
        if (s.writableLength > 1024 * 1024) return
        const chunk = pattern.subarray(at, Math.min(at + 40 * 1024, pattern.length))
        at = (at + chunk.length) % pattern.length
        s.write(chunk)
      }, 1)
      s.on('close', () => clearInterval(timer))
    }
    await behindProxy(dir, source, {}, async (_, connect) => {
      /** Reads `size` bytes after `stallMs` without reading, checking each against the pattern. */
      const download = (size: number, stallMs: number) => new Promise<number>((resolve, reject) => {
        const c = connect()
        let head: Buffer | null = Buffer.alloc(0)
        let at = 0
        let got = 0
        c.on('error', reject)
        c.pause()
        setTimeout(() => c.resume(), stallMs)
        c.on('data', (d: Buffer) => {
          if (head !== null) {
            head = Buffer.concat([head, d])
            if (head.length < 4) return
            at = head.readUInt32BE(0)
            d = head.subarray(4)
            head = null
          }
          for (let i = 0; i < d.length; i++) {
            if (d[i] !== pattern[(at + i) % pattern.length]) {
              c.destroy()
              reject(new Error(`byte ${got + i} differs from what the backend sent`))
              return
            }
          }
          at = (at + d.length) % pattern.length
          got += d.length
          if (got >= size) {
            c.destroy()
            resolve(got)
          }
        })
      })
      const stalled = download(8 * 1024 * 1024, 1_500)
      const flowing = Array.from({ length: 4 }, () => download(8 * 1024 * 1024, 0))
      await Promise.all([stalled, ...flowing])
    })
  })

  test('a connection the engine gets after it has read (no onread): its early bytes and the rest are forwarded', async () => {
    // A server that lets the socket read before handing it over: it cannot be re-made to read
    // through a relay, so the proxy reads it through the stream API.
    const handle = engine.streamHandler(tcpBindKey)
    const server = net.createServer({ allowHalfOpen: true }, s => {
      s.once('readable', () => {
        assert.ok(s.readableLength > 0)
        const carried = handle(s)
        assert.equal(carried, s)
      })
    })
    const port = await listen(server)
    try {
      const got = await new Promise<string>((resolve, reject) => {
        let text = ''
        const c = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => {
          c.write('early ')
          setTimeout(() => c.end('late'), 100)
        })
        c.setEncoding('utf8').on('data', (d: string) => { text += d })
        c.on('end', () => c.end())
        c.on('close', () => resolve(text))
        c.on('error', reject)
      })
      assert.equal(got, 'early latebye')
    } finally {
      server.close()
    }
  })

  test('TCP to a TLS backend (backendTLS): the bytes go through Portico\'s TLS connection intact', async () => {
    const tlsOptions = { cert: readFileSync(join(dir, 'cert.pem')), key: readFileSync(join(dir, 'key.pem')) }
    await behindProxy(dir, echoBye, { tls: tlsOptions }, async port => {
      const data = randomBytes(3 * 1024 * 1024)
      const { received } = await exchange(port, data, { endAfterMs: 0 })
      assert.equal(received.length, data.length + 3)
      assert.ok(received.subarray(0, data.length).equals(data))
    })
  })

  test('backpressure: a reader that stops holds the writer on the other side, with bounded memory, and gets every byte after', async () => {
    // The backend writes a patterned stream as fast as it is let; the client reads nothing for
    // a second. Without backpressure the proxy would read it all (hundreds of MiB a second)
    // into memory. Writes to the stalled client wait meanwhile, holding the proxy's buffers:
    // the pattern shows a buffer reused too early.
    const pattern = randomBytes(1024 * 1024 + 7)
    let pushed = 0
    const firehose = (s: net.Socket): void => {
      const pump = (): void => {
        while (pushed < 256 * 1024 * 1024) {
          const at = pushed % pattern.length
          const chunk = pattern.subarray(at, Math.min(at + 64 * 1024, pattern.length))
          pushed += chunk.length
          if (!s.write(chunk)) { s.once('drain', pump); return }
        }
        s.end()
      }
      pump()
    }
    await behindProxy(dir, firehose, {}, async (_, connect) => {
      const arrayBuffers = process.memoryUsage().arrayBuffers
      const client = connect()
      client.pause()
      await new Promise(resolve => setTimeout(resolve, 1_000))
      // Socket buffers of two loopback hops hold some MiB; the proxy at most a few more.
      assert.ok(pushed < 64 * 1024 * 1024, `the backend could push ${pushed} bytes`)
      assert.ok(process.memoryUsage().arrayBuffers - arrayBuffers < 32 * 1024 * 1024, 'proxy memory grew')
      // Then the client reads: the bytes arrive as sent, and the backend goes on.
      const before = pushed
      let got = 0
      await new Promise<void>((resolve, reject) => {
        client.on('data', (c: Buffer) => {
          for (let i = 0; i < c.length; i++) {
            if (c[i] !== pattern[(got + i) % pattern.length]) {
              reject(new Error(`byte ${got + i} differs from what the backend sent`))
              return
            }
          }
          got += c.length
          if (got >= before + 16 * 1024 * 1024) resolve()
        })
        client.resume()
      })
      assert.ok(pushed > before)
    })
  })

  test('backpressure the other way: a backend that stops reading holds the client', async () => {
    let backendSocket: net.Socket | undefined
    const sink = (s: net.Socket): void => {
      backendSocket = s
      s.pause()
    }
    await behindProxy(dir, sink, {}, async (_, connect) => {
      const client = connect()
      let accepted = 0
      const chunk = Buffer.alloc(64 * 1024, 2)
      await new Promise<void>(resolve => {
        const pump = (): void => {
          while (client.write(chunk)) accepted += chunk.length
          accepted += chunk.length
          client.once('drain', pump)
        }
        client.once('connect', pump)
        setTimeout(resolve, 1_000)
      })
      assert.ok(accepted < 64 * 1024 * 1024, `the client could write ${accepted} bytes`)
      // The backend reads again: what the client wrote comes through.
      let read = 0
      await new Promise<void>(resolve => {
        backendSocket!.on('data', (c: Buffer) => {
          read += c.length
          if (read >= 8 * 1024 * 1024) resolve()
        })
        backendSocket!.resume()
      })
    })
  })

  test('a backend that takes the connection but never completes TLS is given up after the connect timeout', async () => {
    const local: StreamConnectionRecord[] = []
    await behindProxy(dir, () => {}, { backendTLS: true, streams: { connectTimeoutMs: 300, onConnectionEnd: r => local.push(r) } }, async port => {
      const { closedMs } = await exchange(port, 'x')
      assert.ok(closedMs >= 250 && closedMs < 3_000, `closed after ${closedMs} ms`)
      await ended(local, 0)
      assert.equal(local[0]?.reason, 'UpstreamConnectFailed')
      assert.match(local[0]?.error ?? '', /after 300 ms/)
    })
  })

  test('a client that sends its hello but never finishes the handshake is dropped after the hello timeout (Terminate)', async () => {
    // A real client hello for t.test, taken from a TLS client talking to a server that only listens.
    const hello = await new Promise<Buffer>(resolve => {
      const taker = net.createServer(s => s.once('data', (d: Buffer) => { resolve(d); s.destroy(); taker.close() }))
      taker.listen(0, '127.0.0.1', () => tls.connect({ port: (taker.address() as AddressInfo).port, host: '127.0.0.1', servername: 't.test' }).on('error', () => {}))
    })
    const from = records.length
    const { closedMs } = await exchange(tlsPort, hello)
    assert.ok(closedMs >= 250 && closedMs < 3_000, `closed after ${closedMs} ms`)
    // Connections of earlier tests may end after `from`: this one's is found by its reason.
    const [r] = await ended(records, from, r => r.reason === 'HandshakeFailed')
    assert.match(r!.error ?? '', /not completed in time/)
  })

  test('a connection quiet for the idle timeout is cut (IdleTimeout); one that keeps talking is not', async () => {
    const local: StreamConnectionRecord[] = []
    await behindProxy(dir, echoBye, { streams: { idleTimeoutMs: 300, onConnectionEnd: r => local.push(r) } }, async (_, connect) => {
      const talk = (everyMs: number, forMs: number) => new Promise<{ closedMs: number, text: string, sent: number }>((resolve, reject) => {
        const started = performance.now()
        let text = ''
        let sent = 0
        const c = connect()
        const timer = setInterval(() => { if (performance.now() - started < forMs) { c.write('.'); sent++ } }, everyMs)
        c.setEncoding('utf8').on('data', (d: string) => { text += d })
        c.on('end', () => c.end())
        c.on('close', () => {
          clearInterval(timer)
          resolve({ closedMs: performance.now() - started, text, sent })
        })
        c.on('error', reject)
      })
      // A byte each way every 100 ms for 900 ms: alive all along, then quiet and cut.
      const [chatty, quiet] = await Promise.all([talk(100, 900), talk(10_000, 0)])
      assert.ok(chatty.closedMs >= 900 && chatty.closedMs < 3_000, `chatty closed after ${chatty.closedMs} ms`)
      // Every byte it sent came back (a loaded machine fires fewer of the 100 ms timers).
      assert.ok(chatty.sent >= 3 && chatty.text.startsWith('.'.repeat(chatty.sent)), `sent ${chatty.sent}, got ${JSON.stringify(chatty.text)}`)
      assert.ok(quiet.closedMs >= 250 && quiet.closedMs < 2_000, `quiet closed after ${quiet.closedMs} ms`)
      await ended(local, 0, () => true, 2)
      assert.deepEqual(local.map(r => r.reason), ['IdleTimeout', 'IdleTimeout'])
    })
  })
})
