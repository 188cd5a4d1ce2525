/**
 * A client that goes away mid-request: the backend's response (and connection) is closed
 * promptly instead of streaming to nobody, and the proxy goes on serving.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import type { ServerResponse } from 'node:http'
import { request } from 'undici'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'
import { deferred, withTimeout } from '@portico/testkit/wait'

interface BackendCall {
  /** Resolves when the backend's response closes; true if it had finished first. */
  closed: Promise<{ finished: boolean, socketDestroyed: boolean }>
  res: ServerResponse
}

describe('client abort', () => {
  let portico: PorticoProcess
  let backend: Backend
  const agent = newAgent()
  let nextCall = deferred<BackendCall>()

  before(async () => {
    backend = await startBackend((req, res) => {
      const closed = new Promise<{ finished: boolean, socketDestroyed: boolean }>(resolve => {
        res.once('close', () => resolve({ finished: res.writableFinished, socketDestroyed: res.socket === null || res.socket.destroyed }))
      })
      if (req.url === '/stream') {
        // An endless body: 16 KiB every 20 ms until the connection goes away.
        res.writeHead(200, { 'content-type': 'application/octet-stream' })
        const timer = setInterval(() => res.write(Buffer.alloc(16 * 1024, 'x')), 20)
        res.once('close', () => clearInterval(timer))
      } else if (req.url === '/upload') {
        // Reads the body; answers only once it is complete (it never is in the test).
        req.resume()
        req.once('end', () => res.end('uploaded'))
      } else if (req.url === '/hang') {
        // Never answers; only the proxy giving up ends this.
        req.resume()
      } else {
        res.end('ok')
      }
      nextCall.resolve({ closed, res })
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

  test('a client that disconnects mid-body gets its backend response closed', { timeout: 15_000 }, async () => {
    nextCall = deferred<BackendCall>()
    const controller = new AbortController()
    const res = await request(`${portico.url}/stream`, { dispatcher: agent, signal: controller.signal })
    assert.equal(res.statusCode, 200)
    let received = 0
    for await (const chunk of res.body) {
      received += (chunk as Buffer).length
      if (received >= 64 * 1024) break // leaving the loop destroys the body: the client is gone
    }
    controller.abort()
    const call = await withTimeout(nextCall.promise, 5_000, 'backend saw no request')
    const closed = await withTimeout(call.closed, 5_000, 'the backend response was not closed after the client left')
    assert.equal(closed.finished, false)
    assert.equal(closed.socketDestroyed, true)
  })

  test('a client that disconnects before the response headers gets its backend call cancelled', { timeout: 15_000 }, async () => {
    nextCall = deferred<BackendCall>()
    // A raw socket: send the request, wait until the backend has it, then hang up.
    const socket = connect({ host: '127.0.0.1', port: portico.port })
    socket.on('error', () => {})
    socket.write(`GET /hang HTTP/1.1\r\nHost: 127.0.0.1:${portico.port}\r\n\r\n`)
    const call = await withTimeout(nextCall.promise, 5_000, 'backend saw no request')
    socket.destroy()
    const closed = await withTimeout(call.closed, 5_000, 'the backend call was not cancelled after the client left')
    assert.equal(closed.finished, false)
  })

  test('a client that disconnects mid-upload gets its backend call cancelled', { timeout: 15_000 }, async () => {
    nextCall = deferred<BackendCall>()
    const socket = connect({ host: '127.0.0.1', port: portico.port })
    socket.on('error', () => {})
    socket.write(`POST /upload HTTP/1.1\r\nHost: 127.0.0.1:${portico.port}\r\ncontent-length: 1000000\r\n\r\n`)
    socket.write(Buffer.alloc(10_000, 'y'))
    const call = await withTimeout(nextCall.promise, 5_000, 'backend saw no request')
    const request = backend.requests.at(-1)!
    const aborted = new Promise<boolean>(resolve => request.once('close', () => resolve(!request.complete)))
    socket.destroy()
    const closed = await withTimeout(call.closed, 5_000, 'the backend call was not cancelled after the client left mid-upload')
    assert.equal(closed.finished, false)
    assert.equal(await withTimeout(aborted, 5_000, 'backend request not closed'), true)
  })

  test('the proxy serves the next request after clients went away', { timeout: 10_000 }, async () => {
    nextCall = deferred<BackendCall>()
    const res = await send(agent, `${portico.url}/ok`)
    assert.equal(res.status, 200)
    assert.equal(res.text, 'ok')
    assert.equal(portico.exit, null)
  })
})
