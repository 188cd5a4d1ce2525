/**
 * HTTP/2 flow control end to end: a stream whose client stops reading holds only its own
 * window — the other streams of the same connection keep flowing, and backpressure reaches the
 * backend (it cannot push a 64 MiB answer into Portico's memory: its writes stall).
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { sleep, waitUntil } from '@portico/testkit/wait'

const HUGE = 64 * 1024 * 1024
let backend: http.Server
let portico: PorticoProcess
/** Bytes the backend got written into its socket for /huge so far. */
let hugeWritten = 0

before(async () => {
  backend = http.createServer((req, res) => {
    if (req.url !== '/huge') {
      res.end('small')
      return
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(HUGE) })
    const chunk = Buffer.alloc(64 * 1024, 1)
    const pump = (): void => {
      while (hugeWritten < HUGE) {
        hugeWritten += chunk.length
        if (!res.write(chunk)) {
          res.once('drain', pump)
          return
        }
      }
      res.end()
    }
    pump()
  })
  await new Promise<void>(resolve => backend.listen(0, '127.0.0.1', resolve))
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'all', backends: [{ host: `127.0.0.1:${(backend.address() as AddressInfo).port}` }] }]
    })
  })
})

after(async () => {
  await portico?.stop()
  backend?.closeAllConnections()
  await new Promise(resolve => backend?.close(resolve))
})

test('a stream nobody reads does not stall its connection, and its backend is held back', { timeout: 30_000 }, async () => {
  const session = http2.connect(portico.url)
  session.on('error', () => {})
  try {
    // The stalled stream: its response is never read (the client's window for it fills).
    const stalled = session.request({ ':path': '/huge' })
    stalled.pause()
    await new Promise(resolve => stalled.once('response', resolve))
    // Its window is full: the client takes no more bytes for it.
    await waitUntil(() => stalled.state.localWindowSize === 0, 10_000, () => `the stalled stream's window to fill (${JSON.stringify(stalled.state)})`)

    // Other streams on the same connection are answered at once.
    for (let i = 0; i < 10; i++) {
      const body = await new Promise<string>((resolve, reject) => {
        const s = session.request({ ':path': `/small/${i}` })
        let text = ''
        s.setEncoding('utf8')
        s.on('data', (c: string) => { text += c })
        s.on('end', () => resolve(text))
        s.on('error', reject)
      })
      assert.equal(body, 'small')
    }

    // Backpressure reached the backend: far from the whole 64 MiB could be written.
    const written = hugeWritten
    // The thing under test is that nothing moves: a fixed time for the backend to write more if it could.
    await sleep(500)
    assert.ok(hugeWritten < HUGE / 4, `the backend wrote ${hugeWritten} of ${HUGE} bytes for a stream nobody reads`)
    assert.ok(hugeWritten - written < 1024 * 1024, 'and it is not still writing')
    stalled.close()
  } finally {
    session.destroy()
  }
})
