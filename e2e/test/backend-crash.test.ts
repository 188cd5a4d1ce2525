/**
 * A backend that dies mid-response (headers and part of the body sent, then the socket is
 * destroyed): the client must see a truncated, failed response — never a short body that
 * looks complete — and the proxy goes on serving.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { request } from 'undici'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'
import { withTimeout } from '@portico/testkit/wait'

const PARTIAL = Buffer.alloc(32 * 1024, 'p')

describe('backend crash mid-response', () => {
  let portico: PorticoProcess
  let backend: Backend
  const agent = newAgent()

  before(async () => {
    backend = await startBackend((req, res) => {
      req.resume()
      if (req.url === '/crash-length' || req.url === '/crash-chunked') {
        const headers: Record<string, string> = { 'content-type': 'application/octet-stream' }
        if (req.url === '/crash-length') headers['content-length'] = String(1024 * 1024)
        res.writeHead(200, headers)
        res.write(PARTIAL)
        // Give the partial body time to reach the client through the proxy, then die.
        setTimeout(() => res.socket?.destroy(), 100)
      } else if (req.url === '/crash-before-headers') {
        req.socket.destroy()
      } else {
        res.end('still here')
      }
    })
    portico = await startPortico({
      config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  for (const framing of ['length', 'chunked'] as const) {
    test(`a crash during a ${framing === 'length' ? 'content-length' : 'chunked'} body fails the client's response (undici)`, { timeout: 10_000 }, async () => {
      const res = await request(`${portico.url}/crash-${framing}`, { dispatcher: agent })
      assert.equal(res.statusCode, 200)
      let received = 0
      const readAll = (async () => {
        for await (const chunk of res.body) received += (chunk as Buffer).length
      })()
      await assert.rejects(
        withTimeout(readAll, 5_000, 'the client was left hanging instead of seeing the connection cut'),
        (err: Error) => {
          assert.doesNotMatch(err.message, /left hanging/)
          return true
        },
        'the truncated body was reported as complete'
      )
      assert.ok(received <= PARTIAL.length, `received ${received} bytes`)
    })

    test(`a crash during a ${framing === 'length' ? 'content-length' : 'chunked'} body fails the client's response (node:http)`, { timeout: 10_000 }, async () => {
      const outcome = await new Promise<string>(resolve => {
        const req = http.get({ host: '127.0.0.1', port: portico.port, path: `/crash-${framing}`, agent: false }, res => {
          res.on('data', () => {})
          res.on('end', () => resolve(res.complete ? 'complete' : 'incomplete'))
          res.on('error', () => resolve('error'))
          res.on('aborted', () => resolve('aborted'))
        })
        req.on('error', () => resolve('error'))
        req.setTimeout(5_000, () => { resolve('timeout'); req.destroy() })
      })
      assert.notEqual(outcome, 'complete')
      assert.notEqual(outcome, 'timeout', 'the client was left hanging instead of seeing the connection cut')
    })
  }

  test('a crash before the response headers gives 503 "upstream call failed"', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/crash-before-headers`)
    assert.equal(res.status, 503)
    assert.ok(res.text.startsWith('upstream call failed'), `body: ${res.text}`)
  })

  test('the proxy serves the next request after backend crashes', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/fine`)
    assert.equal(res.status, 200)
    assert.equal(res.text, 'still here')
    assert.equal(portico.exit, null)
  })
})
