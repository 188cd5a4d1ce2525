/**
 * Server-sent events through the proxy: each event reaches the client when the backend sends
 * it (not when the stream ends), and pauses in a live stream are not cut by an idle timeout.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent } from '@portico/testkit/client'
import { sleep } from '@portico/testkit/wait'

/** Pause before each event, in ms: a quick burst, then gaps long enough to catch buffering. */
const GAPS = [0, 500, 500, 500, 2_000]
/** How late an event may reach the client (buffering would make it 500 ms or more). */
const MAX_DELAY_MS = 300

describe('server-sent events', () => {
  let portico: PorticoProcess
  let backend: Backend
  const agent = newAgent()
  /** performance.now() when the backend wrote event i. */
  const sentAt: number[] = []

  before(async () => {
    backend = await startBackend((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      void (async () => {
        for (let i = 0; i < GAPS.length; i++) {
          await sleep(GAPS[i]!)
          if (res.destroyed) return
          sentAt[i] = performance.now()
          res.write(`id: ${i}\nevent: tick\ndata: {"n":${i}}\n\n`)
        }
        res.end()
      })()
      req.resume()
    })
    portico = await startPortico({
      config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'events', backends: [{ host: backend.host }] }] })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  test('each event arrives as it is sent and the stream survives pauses', { timeout: 20_000 }, async () => {
    const res = await request(`${portico.url}/events`, { dispatcher: agent, headers: { accept: 'text/event-stream' } })
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^text\/event-stream/)

    const receivedAt: number[] = []
    const events: string[] = []
    let buffer = ''
    for await (const chunk of res.body) {
      buffer += (chunk as Buffer).toString('utf8')
      let end: number
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        events.push(buffer.slice(0, end))
        buffer = buffer.slice(end + 2)
        receivedAt.push(performance.now())
      }
    }

    assert.deepEqual(events, GAPS.map((_gap, i) => `id: ${i}\nevent: tick\ndata: {"n":${i}}`))
    assert.equal(buffer, '')
    for (let i = 0; i < events.length; i++) {
      const delay = receivedAt[i]! - sentAt[i]!
      assert.ok(delay < MAX_DELAY_MS, `event ${i} reached the client ${Math.round(delay)} ms after the backend sent it`)
      if (i + 1 < events.length) {
        assert.ok(receivedAt[i]! < sentAt[i + 1]!, `event ${i} only arrived after the backend had sent event ${i + 1}`)
      }
    }
  })
})
