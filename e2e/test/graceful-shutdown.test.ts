/**
 * SIGTERM drains: the listener stops accepting at once, requests in flight finish, idle
 * connections do not hold the process up, and it exits 0. A request that outlives
 * DRAIN_TIMEOUT is cut at the deadline.
 */

import { after, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import net, { connect, type AddressInfo } from 'node:net'
import { request } from 'undici'
import http2 from 'node:http2'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent, send, tryConnect } from '@portico/testkit/client'
import { deferred, sleep, withTimeout } from '@portico/testkit/wait'

describe('graceful shutdown on SIGTERM', () => {
  const cleanups: Array<() => Promise<unknown>> = []
  after(async () => {
    for (const c of cleanups.reverse()) await c()
  })

  /** A backend whose /slow answers after `delayMs`, and a portico in front of it. */
  async function setup (delayMs: number, env: Record<string, string> = {}): Promise<{ portico: PorticoProcess, backend: Backend, received: Promise<void> }> {
    const got = deferred()
    const backend = await startBackend((req, res) => {
      req.resume()
      if (req.url === '/slow') {
        got.resolve()
        const timer = setTimeout(() => res.end('slow done'), delayMs)
        res.on('close', () => clearTimeout(timer))
      } else {
        res.end('fast')
      }
    })
    cleanups.push(() => backend.close())
    const portico = await startPortico({
      env,
      config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] })
    })
    cleanups.push(() => portico.stop())
    return { portico, backend, received: got.promise }
  }

  test('a request in flight completes, new connections are refused, and the exit code is 0', { timeout: 20_000 }, async () => {
    const { portico, received } = await setup(1_000)
    const agent = newAgent()
    cleanups.push(() => agent.destroy())

    const inFlight = request(`${portico.url}/slow`, { dispatcher: agent }).then(async res => ({ status: res.statusCode, body: await res.body.text() }))
    await withTimeout(received, 5_000, 'the backend never got the request')
    const signalledAt = performance.now()
    portico.signal('SIGTERM')
    await portico.waitForOutput('shutting down', { timeoutMs: 5_000 })

    // The log line can reach us a moment before the listener is closed; then it must be.
    let attempt = await tryConnect(portico.port)
    const deadline = performance.now() + 500
    while (attempt !== 'ECONNREFUSED' && performance.now() < deadline) {
      await sleep(20)
      attempt = await tryConnect(portico.port)
    }
    assert.equal(attempt, 'ECONNREFUSED', 'new connections were still accepted 500 ms after SIGTERM')

    const res = await withTimeout(inFlight, 5_000, 'the in-flight request did not complete')
    assert.equal(res.status, 200)
    assert.equal(res.body, 'slow done')
    assert.ok(performance.now() - signalledAt >= 700, 'the request finished too early to have been in flight during the drain')

    const exit = await portico.waitForExit(5_000)
    assert.deepEqual(exit, { code: 0, signal: null })
    const exitedAfter = performance.now() - signalledAt
    assert.ok(exitedAfter < 3_000, `exit took ${Math.round(exitedAfter)} ms after SIGTERM; the drain should end when the last request does`)
    assert.match(portico.stdout, /shutdown complete/)
  })

  test('HTTP/2: a drain sends GOAWAY, the stream in flight completes, no new stream is taken, and the exit code is 0', { timeout: 20_000 }, async () => {
    const { portico, received } = await setup(1_000)
    const session = http2.connect(portico.url)
    session.on('error', () => {})
    cleanups.push(async () => session.destroy())
    const goaway = new Promise<number>(resolve => session.once('goaway', code => resolve(code)))
    const inFlight = new Promise<{ status: number, body: string }>((resolve, reject) => {
      const stream = session.request({ ':path': '/slow' })
      let status = 0
      let body = ''
      stream.on('response', h => { status = Number(h[':status']) })
      stream.setEncoding('utf8')
      stream.on('data', (c: string) => { body += c })
      stream.on('end', () => resolve({ status, body }))
      stream.on('error', reject)
    })
    await withTimeout(received, 5_000, 'the backend never got the request')
    portico.signal('SIGTERM')
    assert.equal(await withTimeout(goaway, 5_000, 'no GOAWAY on drain'), http2.constants.NGHTTP2_NO_ERROR)
    // The session takes no new stream after GOAWAY.
    const refused = await new Promise<string>(resolve => {
      const stream = session.request({ ':path': '/fast' })
      stream.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message))
      stream.on('response', () => resolve('answered'))
    })
    assert.equal(refused, 'ERR_HTTP2_GOAWAY_SESSION')
    const res = await withTimeout(inFlight, 5_000, 'the in-flight stream did not complete')
    assert.deepEqual(res, { status: 200, body: 'slow done' })
    assert.deepEqual(await portico.waitForExit(5_000), { code: 0, signal: null })
  })

  test('idle keep-alive connections do not delay the exit', { timeout: 20_000 }, async () => {
    const { portico } = await setup(0)
    const agent = newAgent({ keepAliveTimeout: 60_000 })
    cleanups.push(() => agent.destroy())
    assert.equal((await send(agent, `${portico.url}/fast`)).text, 'fast')

    const signalledAt = performance.now()
    portico.signal('SIGTERM')
    assert.deepEqual(await portico.waitForExit(5_000), { code: 0, signal: null })
    const took = performance.now() - signalledAt
    assert.ok(took < 2_000, `exit took ${Math.round(took)} ms with one idle keep-alive connection open`)
  })

  test('a connection that never sent a request does not delay the exit', { timeout: 20_000 }, async () => {
    const { portico } = await setup(0)
    const socket = connect({ host: '127.0.0.1', port: portico.port })
    socket.on('error', () => {})
    cleanups.push(async () => { socket.destroy() })
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    const closedByServer = new Promise<void>(resolve => socket.once('close', () => resolve()))

    const signalledAt = performance.now()
    portico.signal('SIGTERM')
    assert.deepEqual(await portico.waitForExit(8_000), { code: 0, signal: null })
    const took = performance.now() - signalledAt
    assert.ok(took < 3_000, `exit took ${Math.round(took)} ms with one unused connection open (DRAIN_TIMEOUT is 10 s)`)
    await withTimeout(closedByServer, 2_000, 'the unused connection was not closed')
  })

  test('TCP: a connection open at SIGTERM keeps flowing until DRAIN_TIMEOUT cuts it, and the process exits 0', { timeout: 20_000 }, async () => {
    const echo = net.createServer(s => {
      s.on('data', (c: Buffer) => s.write(c))
      s.on('error', () => {})
    })
    await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
    cleanups.push(async () => { echo.close() })
    const portico = await startPortico({
      env: { DRAIN_TIMEOUT: '800ms' },
      config: port => ({ gateways: { tcp: { port, protocol: 'TCP', address: '127.0.0.1' } }, tcpRoutes: [{ gateways: 'tcp', backends: [{ host: `127.0.0.1:${(echo.address() as AddressInfo).port}` }] }] })
    })
    cleanups.push(() => portico.stop())
    const client = connect(portico.port, '127.0.0.1')
    client.on('error', () => {})
    const closed = new Promise<void>(resolve => client.once('close', () => resolve()))
    const echoed = (text: string) => new Promise<string>(resolve => client.once('data', (c: Buffer) => resolve(c.toString())).write(text))
    assert.equal(await echoed('before'), 'before')
    const signalledAt = performance.now()
    portico.signal('SIGTERM')
    await portico.waitForOutput('shutting down', { timeoutMs: 5_000 })
    // Draining: the open connection still carries bytes both ways.
    assert.equal(await echoed('during'), 'during')
    await withTimeout(closed, 5_000, 'the connection was not cut at the drain deadline')
    assert.deepEqual(await portico.waitForExit(5_000), { code: 0, signal: null })
    const took = performance.now() - signalledAt
    assert.ok(took >= 700 && took < 4_000, `exit took ${Math.round(took)} ms; want about the 800 ms drain timeout`)
  })

  test('a request still running at DRAIN_TIMEOUT is cut and the process exits 0', { timeout: 20_000 }, async () => {
    const { portico, received } = await setup(10_000, { DRAIN_TIMEOUT: '500ms' })
    const agent = newAgent()
    cleanups.push(() => agent.destroy())

    const inFlight = request(`${portico.url}/slow`, { dispatcher: agent }).then(async res => ({ status: res.statusCode, body: await res.body.text() }))
    inFlight.catch(() => {})
    await withTimeout(received, 5_000, 'the backend never got the request')
    const signalledAt = performance.now()
    portico.signal('SIGTERM')

    await assert.rejects(withTimeout(inFlight, 5_000, 'the request was not cut'), (err: Error) => !/was not cut/.test(err.message))
    assert.deepEqual(await portico.waitForExit(5_000), { code: 0, signal: null })
    const took = performance.now() - signalledAt
    assert.ok(took >= 400 && took < 3_000, `exit took ${Math.round(took)} ms; want about the 500 ms drain timeout`)
  })
})
