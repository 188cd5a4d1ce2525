/**
 * The two timeouts of a backend call and the route's retries, in one process (the engine's
 * handler on a node:http server, a loopback backend): a try that hits the backend request
 * timeout is retried as the route's retry policy says (HTTPRouteRetryBackendTimeout), the
 * request timeout is the client's deadline and never retried. pipeline/resiliency.ts tells
 * them apart by code (PORTICO_BACKEND_TIMEOUT, PORTICO_REQUEST_TIMEOUT), not by message.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { loadConfigText } from '../src/index.ts'
import { retriable } from '../src/pipeline/resiliency.ts'
import { PorticoError } from '../src/util/errors.ts'
import { listenLoopback, serveIr, type ServedIr } from '../../testkit/src/serve-ir.ts'

let backend: http.Server
let served: ServedIr | undefined
let base = ''
/** Tries per x-key; the first x-hang tries of a key get no answer until the gateway gives up. */
const tries = new Map<string, number>()

before(async () => {
  backend = http.createServer((req, res) => {
    const key = String(req.headers['x-key'])
    const n = (tries.get(key) ?? 0) + 1
    tries.set(key, n)
    if (n <= Number(req.headers['x-hang'] ?? 0)) return // never answers: the gateway's timeout cuts it
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`try ${n}`)
  })
  const port = await listenLoopback(backend)
  const loaded = loadConfigText(`
gateways:
  default:
    port: 1
    address: 127.0.0.1
routes:
  - name: backend-timeout
    matches: [{ path: { pathPrefix: /backend } }]
    policies:
      retry: { attempts: 2, backoff: 1ms }
      timeout: { backendRequestTimeout: 150ms }
    backends: [{ host: 127.0.0.1:${port} }]
  - name: request-timeout
    matches: [{ path: { pathPrefix: /request } }]
    policies:
      retry: { attempts: 2, backoff: 1ms }
      timeout: { requestTimeout: 150ms }
    backends: [{ host: 127.0.0.1:${port} }]
`, { baseDir: process.cwd() })
  assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.diagnostics))
  served = await serveIr(loaded.config.ir)
  base = served.base
})

after(async () => {
  backend?.closeAllConnections()
  await Promise.all([served?.close(), new Promise(r => backend?.close(r))])
})

async function get (path: string, headers: Record<string, string>): Promise<{ status: number, body: string }> {
  return await new Promise((resolve, reject) => {
    http.get(`${base}${path}`, { headers, agent: false }, res => {
      let body = ''
      res.setEncoding('utf8').on('data', (c: string) => { body += c }).on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    }).on('error', reject)
  })
}

test('a try cut by the backend request timeout is retried, up to the route\'s attempts', async () => {
  const r = await get('/backend', { 'x-key': 'b1', 'x-hang': '2' })
  assert.deepEqual(r, { status: 200, body: 'try 3' })
  assert.equal(tries.get('b1'), 3)
  const gaveUp = await get('/backend', { 'x-key': 'b2', 'x-hang': '5' })
  assert.deepEqual(gaveUp, { status: 504, body: 'upstream call timeout' })
  assert.equal(tries.get('b2'), 3, 'one try and two retries, no more')
})

test('the request timeout is not retried, though the route retries', async () => {
  const r = await get('/request', { 'x-key': 'r1', 'x-hang': '1' })
  assert.deepEqual(r, { status: 504, body: 'request timeout' })
  assert.equal(tries.get('r1'), 1)
})

test('retriable branches on the code: the message does not matter', () => {
  assert.equal(retriable(new PorticoError('PORTICO_BACKEND_TIMEOUT', 'request timeout')), true)
  assert.equal(retriable(new PorticoError('PORTICO_REQUEST_TIMEOUT', 'upstream call timeout')), false)
  assert.equal(retriable(new PorticoError('PORTICO_DOWNSTREAM_CLOSED')), false)
})
