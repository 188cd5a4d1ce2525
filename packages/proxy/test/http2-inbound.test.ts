/**
 * Node's HTTP/2 compatibility request and response, once src/http2.ts is loaded, provide the
 * engine's contract (@portico/engine's http/inbound.ts) but for the HTTP/1.1-only members;
 * and the response's `destroyed` follows its stream: false while it is open, true once the
 * client reset it (e2e/test/http2-client-left.test.ts shows what that decides).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import { type AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { INBOUND_REQUEST_HEAD, INBOUND_RESPONSE_MEMBERS } from '@portico/engine/inbound'
import '../src/http2.ts'

/**
 * HTTP/1.1 framing and connection members: the engine reads `chunkedEncoding` only beside an
 * HTTP/1.x version, and `shouldKeepAlive` and `detachSocket` only for HTTP/1.1 upgrades.
 */
const HTTP1_ONLY = ['chunkedEncoding', 'shouldKeepAlive', 'detachSocket']

test('an HTTP/2 compatibility exchange provides the contract but for the HTTP/1.1-only members; destroyed follows the stream', async () => {
  const server = http2.createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  session.on('error', () => {})
  try {
    const seen = await new Promise<{ request: string[], readable: boolean, response: string[], destroyedOpen: boolean, destroyedReset: boolean }>((resolve) => {
      server.once('request', (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
        const open = (res as unknown as { destroyed: boolean }).destroyed
        res.on('close', () => {
          resolve({
            request: INBOUND_REQUEST_HEAD.filter(m => !(m in req)),
            readable: req instanceof Readable,
            response: INBOUND_RESPONSE_MEMBERS.filter(m => !(m in res)),
            destroyedOpen: open,
            destroyedReset: (res as unknown as { destroyed: boolean }).destroyed
          })
        })
        stream.close(http2.constants.NGHTTP2_CANCEL)
      })
      const stream = session.request({ ':path': '/' })
      stream.on('error', () => {})
    })
    assert.deepEqual(seen, { request: [], readable: true, response: HTTP1_ONLY, destroyedOpen: false, destroyedReset: true })
  } finally {
    session.close()
    await new Promise(resolve => server.close(resolve))
  }
})
