/**
 * WebSocket upgrades through the proxy to a `ws` server: the handshake is forwarded (path,
 * query, headers), messages flow both ways (text and binary), and closes from either side
 * reach the other side with their code and reason.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import { WebSocket, WebSocketServer, type RawData } from 'ws'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, randomBody, sha256, startBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'
import { deferred, withTimeout } from '@portico/testkit/wait'

interface ServerSide {
  socket: WebSocket
  request: IncomingMessage
  closed: Promise<{ code: number, reason: string }>
}

/** Opens a client WebSocket and waits for the open (or fails). */
async function openClient (url: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  const ws = new WebSocket(url, { headers })
  await withTimeout(new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
    ws.once('unexpected-response', (_req, res) => reject(new Error(`unexpected response ${res.statusCode}`)))
  }), 5_000, 'WebSocket did not open')
  return ws
}

function nextMessage (ws: WebSocket): Promise<{ data: RawData, isBinary: boolean }> {
  return withTimeout(new Promise(resolve => ws.once('message', (data, isBinary) => resolve({ data, isBinary }))), 5_000, 'no message')
}

function closedOf (ws: WebSocket): Promise<{ code: number, reason: string }> {
  return new Promise(resolve => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))
}

describe('websocket', () => {
  let portico: PorticoProcess
  let backend: Backend
  let wss: WebSocketServer
  const agent = newAgent()
  let nextServerSide = deferred<ServerSide>()

  before(async () => {
    backend = await startBackend((_req, res) => res.end('plain http'))
    wss = new WebSocketServer({ server: backend.server })
    wss.on('connection', (socket, request) => {
      // Echo: text as text, binary as binary.
      socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }))
      nextServerSide.resolve({ socket, request, closed: closedOf(socket) })
    })
    const downPort = await freePort()
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'ws', matches: [{ path: { pathPrefix: '/ws' } }], backends: [{ host: backend.host }] },
          { name: 'ws-down', matches: [{ path: { pathPrefix: '/down' } }], backends: [{ host: `127.0.0.1:${downPort}` }] }
        ]
      })
    })
  })

  after(async () => {
    for (const client of wss?.clients ?? []) client.terminate()
    wss?.close()
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  test('the upgrade request reaches the backend with its path, query and headers', { timeout: 15_000 }, async () => {
    nextServerSide = deferred<ServerSide>()
    const ws = await openClient(`ws://127.0.0.1:${portico.port}/ws/chat/room1?user=ann`, { 'x-client': 'e2e' })
    const server = await withTimeout(nextServerSide.promise, 5_000, 'backend saw no connection')
    assert.equal(server.request.url, '/ws/chat/room1?user=ann')
    assert.equal(server.request.headers['x-client'], 'e2e')
    assert.equal(server.request.headers['x-forwarded-for'], '127.0.0.1')
    assert.equal(server.request.headers.host, `127.0.0.1:${portico.port}`)
    const closed = closedOf(ws)
    ws.close(1000)
    await withTimeout(closed, 5_000, 'client not closed')
  })

  test('text and binary messages are echoed both ways', { timeout: 15_000 }, async () => {
    nextServerSide = deferred<ServerSide>()
    const ws = await openClient(`ws://127.0.0.1:${portico.port}/ws/echo`)
    const server = await withTimeout(nextServerSide.promise, 5_000, 'backend saw no connection')

    for (const text of ['hello', 'second message', 'ünïcødé ✓']) {
      const reply = nextMessage(ws)
      ws.send(text)
      const { data, isBinary } = await reply
      assert.equal(isBinary, false)
      assert.equal(data.toString(), text)
    }

    const blob = randomBody(1024 * 1024)
    const reply = nextMessage(ws)
    ws.send(blob)
    const { data, isBinary } = await reply
    assert.equal(isBinary, true)
    assert.equal(sha256(data as Buffer), sha256(blob))

    // The server speaks first too.
    const pushed = nextMessage(ws)
    server.socket.send('pushed by server')
    assert.equal((await pushed).data.toString(), 'pushed by server')

    const closed = closedOf(ws)
    ws.close(1000, 'done')
    assert.deepEqual(await withTimeout(closed, 5_000, 'client not closed'), { code: 1000, reason: 'done' })
  })

  test('a close from the client reaches the server with its code and reason', { timeout: 15_000 }, async () => {
    nextServerSide = deferred<ServerSide>()
    const ws = await openClient(`ws://127.0.0.1:${portico.port}/ws/close-client`)
    const server = await withTimeout(nextServerSide.promise, 5_000, 'backend saw no connection')
    const clientClosed = closedOf(ws)
    ws.close(4001, 'client says bye')
    assert.deepEqual(await withTimeout(server.closed, 5_000, 'server saw no close'), { code: 4001, reason: 'client says bye' })
    assert.deepEqual(await withTimeout(clientClosed, 5_000, 'client not closed'), { code: 4001, reason: 'client says bye' })
  })

  test('a close from the server reaches the client with its code and reason', { timeout: 15_000 }, async () => {
    nextServerSide = deferred<ServerSide>()
    const ws = await openClient(`ws://127.0.0.1:${portico.port}/ws/close-server`)
    const server = await withTimeout(nextServerSide.promise, 5_000, 'backend saw no connection')
    const clientClosed = closedOf(ws)
    server.socket.close(4002, 'server says bye')
    assert.deepEqual(await withTimeout(clientClosed, 5_000, 'client saw no close'), { code: 4002, reason: 'server says bye' })
    assert.deepEqual(await withTimeout(server.closed, 5_000, 'server not closed'), { code: 4002, reason: 'server says bye' })
  })

  test('an upgrade no route matches gets a 404 response', { timeout: 10_000 }, async () => {
    await assert.rejects(openClient(`ws://127.0.0.1:${portico.port}/elsewhere`), /unexpected response 404/)
  })

  test('an upgrade to a backend that is down gets a 503 response', { timeout: 10_000 }, async () => {
    await assert.rejects(openClient(`ws://127.0.0.1:${portico.port}/down`), /unexpected response 503/)
  })

  test('plain HTTP keeps working on the same route after WebSocket sessions', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/ws/anything`)
    assert.equal(res.status, 200)
    assert.equal(res.text, 'plain http')
  })
})
