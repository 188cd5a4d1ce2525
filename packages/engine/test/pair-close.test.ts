/**
 * closeWhenFlushed (stream/pair-close.ts) on real loopback sockets: what a socket still holds
 * when the other side of its pair closes reaches its peer; a socket that was not ended is
 * closed at once; a peer that never reads is given up after the linger.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import net, { type AddressInfo, type Socket } from 'node:net'
import { randomBytes } from 'node:crypto'
import { closeWhenFlushed } from '../src/stream/pair-close.ts'

describe('closeWhenFlushed', () => {
  let server: net.Server
  let port: number
  const accepted: Socket[] = []

  before(async () => {
    server = net.createServer({ allowHalfOpen: true }, s => { accepted.push(s) })
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as AddressInfo).port
  })
  after(() => server.close())

  /** A client that reads nothing until told to, and the server's socket for it. */
  async function pair (): Promise<{ client: Socket, served: Socket }> {
    const n = accepted.length
    const client = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    client.pause()
    await new Promise(resolve => client.once('connect', resolve))
    while (accepted.length === n) await new Promise(resolve => setImmediate(resolve))
    return { client, served: accepted[n]! }
  }

  function readAll (client: Socket): Promise<Buffer> {
    const chunks: Buffer[] = []
    client.on('data', (c: Buffer) => chunks.push(c))
    client.resume()
    return new Promise(resolve => client.once('end', () => resolve(Buffer.concat(chunks))))
  }

  test('an ended socket still holding bytes writes them all before it closes', async () => {
    const { client, served } = await pair()
    // More than loopback's buffers take while the client reads nothing: the socket holds the rest.
    const data = randomBytes(16 * 1024 * 1024)
    served.end(data)
    await new Promise(resolve => setTimeout(resolve, 50))
    assert.ok(served.writableLength > 0, 'the socket holds bytes the client has not taken')
    const closed = new Promise(resolve => served.once('close', resolve))
    closeWhenFlushed(served)
    const got = await readAll(client)
    assert.equal(got.length, data.length)
    assert.ok(got.equals(data))
    await closed
    client.destroy()
  })

  test('a socket that was not ended is closed at once (its pair went away without ending)', async () => {
    const { client, served } = await pair()
    served.write('partial')
    closeWhenFlushed(served)
    assert.equal(served.destroyed, true)
    client.destroy()
  })

  test('a peer that never reads is given up after the linger', async () => {
    const { client, served } = await pair()
    served.end(randomBytes(16 * 1024 * 1024))
    const started = performance.now()
    closeWhenFlushed(served, 200)
    await new Promise(resolve => served.once('close', resolve))
    const waited = performance.now() - started
    assert.ok(waited >= 150 && waited < 5_000, `closed after ${Math.round(waited)} ms`)
    client.destroy()
  })
})
