/**
 * A hostile or broken backend cannot split responses through Portico (RFC 9112 §6, the
 * HTTP/1.1 client's strict parser, http/h1-response-parser.ts): a response framed two ways
 * (Content-Length and Transfer-Encoding, differing Content-Lengths), with a folded header
 * line or bare LFs, is answered 502 and its bytes go nowhere; bytes a backend sends after a
 * complete response never become the answer to the next request on that connection.
 *
 * The backend is a raw TCP server answering each request line with exact bytes.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import net, { type AddressInfo } from 'node:net'
import { gateway, startPortico, type PorticoProcess } from '../lib/portico.ts'
import { nodeRequest } from '../lib/client.ts'

const ANSWERS: Record<string, string> = {
  '/ok': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
  '/both': 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled',
  '/two-lengths': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 30\r\n\r\nokHTTP/1.1 200 OK\r\n\r\nsmuggled',
  '/folded': 'HTTP/1.1 200 OK\r\nx-a: 1\r\n x-injected: 1\r\ncontent-length: 2\r\n\r\nok',
  '/bare-lf': 'HTTP/1.1 200 OK\nx-a: 1\ncontent-length: 2\n\nok',
  // A complete response, then a second one nobody asked for.
  '/extra': 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirstHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled'
}

describe('security: responses a backend cannot split', () => {
  let portico: PorticoProcess
  let server: net.Server
  let connections = 0

  before(async () => {
    server = net.createServer(socket => {
      connections++
      let buf = ''
      socket.on('error', () => {})
      socket.on('data', d => {
        buf += d.toString('latin1')
        let end: number
        while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
          const path = buf.slice(0, buf.indexOf('\r\n')).split(' ')[1] ?? '/'
          buf = buf.slice(end + 4)
          socket.write(ANSWERS[path] ?? ANSWERS['/ok']!)
        }
      })
    })
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    const host = `127.0.0.1:${(server.address() as AddressInfo).port}`
    portico = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host }] }] }) })
  })

  after(async () => {
    await portico?.stop()
    server?.close()
  })

  for (const path of ['/both', '/two-lengths', '/folded', '/bare-lf']) {
    test(`${path}: 502, nothing of it reaches the client, the next request gets its own answer`, async () => {
      const res = await nodeRequest({ port: portico.port, path })
      assert.equal(res.status, 502)
      assert.match(res.text, /invalid response from backend/)
      assert.doesNotMatch(res.text, /smuggled/)
      assert.equal(res.headers['x-injected'], undefined)
      const next = await nodeRequest({ port: portico.port, path: '/ok' })
      assert.equal(next.status, 200)
      assert.equal(next.text, 'ok')
    })
  }

  test('bytes after a complete response end that connection: the next request is not answered with them', async () => {
    const first = await nodeRequest({ port: portico.port, path: '/extra' })
    assert.equal(first.text, 'first')
    const before = connections
    for (let i = 0; i < 3; i++) {
      const next = await nodeRequest({ port: portico.port, path: '/ok' })
      assert.equal(next.text, 'ok', 'never the smuggled answer')
    }
    assert.ok(connections > before, 'the connection that carried extra bytes was not reused')
  })
})
