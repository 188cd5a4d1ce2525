/**
 * The client hello reader (stream/client-hello.ts) on real hellos from Node's TLS client and
 * OpenSSL, split at every byte, spread over several TLS records, and mutated at random: it
 * finds the SNI name and ALPN list, asks for more while the hello is incomplete, and never
 * throws or reads past what it was given.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import net, { type AddressInfo } from 'node:net'
import tls from 'node:tls'
import { parseClientHello } from '../src/stream/client-hello.ts'

/** The first flight a TLS client sends for `servername`. */
async function captureHello (options: tls.ConnectionOptions): Promise<Buffer> {
  const server = net.createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  try {
    return await new Promise<Buffer>(resolve => {
      server.once('connection', s => {
        let buf = Buffer.alloc(0)
        s.on('data', (c: Buffer) => {
          buf = Buffer.concat([buf, c])
          if (buf.length >= 5 && buf.length >= 5 + buf.readUInt16BE(3)) {
            s.destroy()
            resolve(buf)
          }
        })
      })
      const c = tls.connect({ port, host: '127.0.0.1', ...options })
      c.on('error', () => {})
    })
  } finally {
    server.close()
  }
}

/** The same hello re-framed as one record per `size` bytes of handshake. */
function fragment (hello: Buffer, size: number): Buffer {
  const body = hello.subarray(5, 5 + hello.readUInt16BE(3))
  const records: Buffer[] = []
  for (let i = 0; i < body.length; i += size) {
    const part = body.subarray(i, i + size)
    const header = Buffer.from([0x16, 0x03, 0x01, 0, 0])
    header.writeUInt16BE(part.length, 3)
    records.push(header, part)
  }
  return Buffer.concat(records)
}

test('a real hello: SNI name and ALPN found; every prefix is incomplete', async () => {
  const hello = await captureHello({ servername: 'Api.Example.COM', ALPNProtocols: ['h2', 'http/1.1'] })
  assert.deepEqual(parseClientHello(hello), { kind: 'hello', serverName: 'api.example.com', alpn: ['h2', 'http/1.1'] })
  for (let n = 0; n < hello.length; n++) {
    assert.deepEqual(parseClientHello(hello.subarray(0, n)), { kind: 'incomplete' }, `prefix of ${n} bytes`)
  }
})

test('a hello without SNI (a client connecting by IP address) has serverName null', async () => {
  const hello = await captureHello({ servername: '' })
  const r = parseClientHello(hello)
  assert.equal(r.kind, 'hello')
  assert.equal(r.kind === 'hello' ? r.serverName : undefined, null)
})

test('a hello spread over several records is put back together', async () => {
  const hello = await captureHello({ servername: 'a.test' })
  for (const size of [1, 7, 100]) {
    const split = fragment(hello, size)
    assert.deepEqual(parseClientHello(split), { kind: 'hello', serverName: 'a.test', alpn: [] }, `records of ${size} bytes`)
    for (let n = 0; n < split.length; n += 13) assert.equal(parseClientHello(split.subarray(0, n)).kind, 'incomplete')
  }
})

test('not TLS, a wrong record type, and an oversized hello are invalid at once', () => {
  assert.equal(parseClientHello(Buffer.from('GET / HTTP/1.1\r\n')).kind, 'invalid')
  assert.equal(parseClientHello(Buffer.from([0x17, 0x03, 0x03, 0x00, 0x05, 1, 2, 3, 4, 5])).kind, 'invalid')
  assert.equal(parseClientHello(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0, 0, 0])).kind, 'invalid', 'server hello, not client hello')
  const big = parseClientHello(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x10, 0x00, 0x00]))
  assert.equal(big.kind, 'invalid')
})

test('random mutations never throw and never yield a name that is not a DNS name', async () => {
  const hello = await captureHello({ servername: 'fuzz.example.com', ALPNProtocols: ['h2'] })
  let seed = 12345
  const random = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n }
  for (let i = 0; i < 5000; i++) {
    const copy = Buffer.from(hello)
    const flips = 1 + random(4)
    for (let f = 0; f < flips; f++) copy[5 + random(copy.length - 5)] = random(256)
    const cut = random(4) === 0 ? copy.subarray(0, random(copy.length)) : copy
    const r = parseClientHello(cut)
    if (r.kind === 'hello' && r.serverName !== null) assert.match(r.serverName, /^[a-z0-9.-]+$/)
  }
})
