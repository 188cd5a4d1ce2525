/**
 * The HTTP/2 helpers of the listeners: the h2c preface is recognised even when it arrives in
 * pieces, an HTTP/1.1 request is told apart on its first bytes, and the bytes read are put
 * back for whoever serves the connection.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import net from 'node:net'
import { H2_PREFACE, sniffPreface } from '../src/http2.ts'

async function sniff (pieces: Buffer[]): Promise<{ h2: boolean, replay: Buffer }> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer(socket => {
      sniffPreface(socket, 5_000, h2 => {
        // Whatever was read is readable again.
        const replay = socket.read() as Buffer | null
        resolve({ h2, replay: replay ?? Buffer.alloc(0) })
        socket.destroy()
        server.close()
      }, () => reject(new Error('silent')))
    })
    server.listen(0, '127.0.0.1', () => {
      const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1', async () => {
        for (const p of pieces) {
          client.write(p)
          await new Promise(r => setTimeout(r, 20))
        }
      })
      client.on('error', () => {})
    })
  })
}

test('the h2c preface is recognised whole or in pieces; the bytes are put back', async () => {
  const withFrame = Buffer.concat([H2_PREFACE, Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])])
  assert.deepEqual(await sniff([withFrame]), { h2: true, replay: withFrame })
  const split = await sniff([H2_PREFACE.subarray(0, 5), H2_PREFACE.subarray(5, 17), H2_PREFACE.subarray(17)])
  assert.equal(split.h2, true)
  assert.deepEqual(split.replay, H2_PREFACE)
})

test('an HTTP/1.1 request is told apart on its first bytes, even a PRI-like start', async () => {
  const get = Buffer.from('GET / HTTP/1.1\r\nhost: a\r\n\r\n')
  assert.deepEqual(await sniff([get]), { h2: false, replay: get })
  const pri = Buffer.from('PRI * HTTP/1.1\r\n\r\n')
  assert.deepEqual(await sniff([pri]), { h2: false, replay: pri })
})

test('a connection that sends nothing is reported silent', async () => {
  await new Promise<void>((resolve, reject) => {
    const server = net.createServer(socket => {
      sniffPreface(socket, 50, () => reject(new Error('not silent')), () => { socket.destroy(); server.close(); resolve() })
    })
    server.listen(0, '127.0.0.1', () => { net.connect((server.address() as net.AddressInfo).port, '127.0.0.1').on('error', () => {}) })
  })
})
