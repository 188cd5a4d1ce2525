/**
 * The answers portico gives itself when it cannot proxy: no route (404), backend down (503),
 * backend too slow (504), and bytes that are not HTTP (400). The process survives all of them.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent, rawExchange, send } from '@portico/testkit/client'

describe('error responses', () => {
  let portico: PorticoProcess
  let slow: Backend
  let ok: Backend
  const agent = newAgent()

  before(async () => {
    slow = await startBackend((_req, res) => {
      const timer = setTimeout(() => res.end('too late'), 3_000)
      res.on('close', () => clearTimeout(timer))
    })
    ok = await startBackend((_req, res) => res.end('ok'))
    const downPort = await freePort()
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'ok', matches: [{ path: { exact: '/ok' } }], backends: [{ host: ok.host }] },
          { name: 'down', matches: [{ path: { pathPrefix: '/down' } }], backends: [{ host: `127.0.0.1:${downPort}` }] },
          {
            name: 'backend-timeout',
            matches: [{ path: { pathPrefix: '/slow-backend' } }],
            policies: { timeout: { backendRequestTimeout: '200ms' } },
            backends: [{ host: slow.host }]
          },
          {
            name: 'request-timeout',
            matches: [{ path: { pathPrefix: '/slow-request' } }],
            policies: { timeout: { requestTimeout: '300ms' } },
            backends: [{ host: slow.host }]
          }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await slow?.close()
    await ok?.close()
  })

  test('a request no route matches gets 404 "route not found"', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/nowhere`)
    assert.equal(res.status, 404)
    assert.equal(res.text, 'route not found')
  })

  test('a backend with nothing listening gets 503 "upstream call failed..."', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/down/x`)
    assert.equal(res.status, 503)
    assert.ok(res.text.startsWith('upstream call failed'), `body: ${res.text}`)
  })

  test('backendRequestTimeout exceeded gives 504 without waiting for the backend', { timeout: 10_000 }, async () => {
    const started = performance.now()
    const res = await send(agent, `${portico.url}/slow-backend`)
    const elapsed = performance.now() - started
    assert.equal(res.status, 504)
    assert.ok(elapsed >= 150 && elapsed < 2_000, `answered after ${Math.round(elapsed)} ms; want about 200 ms`)
  })

  test('requestTimeout exceeded gives 504', { timeout: 10_000 }, async () => {
    const started = performance.now()
    const res = await send(agent, `${portico.url}/slow-request`)
    const elapsed = performance.now() - started
    assert.equal(res.status, 504)
    assert.ok(elapsed >= 250 && elapsed < 2_000, `answered after ${Math.round(elapsed)} ms; want about 300 ms`)
  })

  test('garbage bytes on the socket get 400 and the connection is closed', { timeout: 10_000 }, async () => {
    const answer = await rawExchange(portico.port, Buffer.from('\x16\x03\x01 this is not http \x00\xff\r\n\r\n', 'latin1'))
    assert.match(answer, /^HTTP\/1\.1 400 /)
  })

  test('a request line with an invalid header gets 400', { timeout: 10_000 }, async () => {
    const answer = await rawExchange(portico.port, 'GET /ok HTTP/1.1\r\nHost: x\r\nBad Header Name: y\r\n\r\n')
    assert.match(answer, /^HTTP\/1\.1 400 /)
  })

  test('the proxy keeps serving after all of the above', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/ok`)
    assert.equal(res.status, 200)
    assert.equal(res.text, 'ok')
    assert.equal(portico.exit, null)
  })
})
