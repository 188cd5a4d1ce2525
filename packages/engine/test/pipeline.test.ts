/**
 * The pipeline in one process, no spawned gateway: a config text through the YAML front end
 * and Engine.apply, the engine's request handler on a node:http server, a loopback backend.
 * Route selection, the three policy phases, path normalisation and the upstream call, each
 * seen from both ends.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { loadConfigText } from '../src/index.ts'
import { listenLoopback, serveIr, type ServedIr } from '../../testkit/src/serve-ir.ts'

let backend: http.Server
let served: ServedIr | undefined
let base = ''
const seen: Array<{ url: string, headers: http.IncomingHttpHeaders }> = []

before(async () => {
  backend = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers })
    res.writeHead(200, { 'content-type': 'text/plain', 'x-backend': 'yes' }).end(`backend ${req.url}`)
  })
  const backendPort = await listenLoopback(backend)
  const loaded = loadConfigText(`
gateways:
  default:
    port: 1
    address: 127.0.0.1
    policies:
      responseHeaderModifier: { set: { x-gateway: g } }
routes:
  - name: api
    matches: [{ path: { pathPrefix: /api } }]
    policies:
      requestHeaderModifier: { set: { x-route: api } }
      authorization: { rules: ['request.headers["x-user"] == "alice"'] }
    backends:
      - host: 127.0.0.1:${backendPort}
        policies:
          requestHeaderModifier: { set: { x-backend-ref: b } }
  - name: hello
    matches: [{ path: { exact: /hello } }]
    policies:
      directResponse: { status: 200, body: hi }
`, { baseDir: process.cwd() })
  assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.diagnostics))
  served = await serveIr(loaded.config.ir)
  base = served.base
})

after(async () => {
  backend?.closeAllConnections()
  await Promise.all([served?.close(), new Promise(r => backend?.close(r))])
})

async function get (path: string, headers: Record<string, string> = {}): Promise<{ status: number, headers: http.IncomingHttpHeaders, body: string }> {
  return await new Promise((resolve, reject) => {
    http.get(`${base}${path}`, { headers, agent: false }, res => {
      let body = ''
      res.setEncoding('utf8').on('data', (c: string) => { body += c }).on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    }).on('error', reject)
  })
}

test('route → gateway, route and backend policies → upstream, and back through the response policies', async () => {
  const before = seen.length
  const res = await get('/api/%61/./items', { 'x-user': 'alice' })
  assert.equal(res.status, 200, res.body)
  assert.equal(res.body, 'backend /api/a/items')
  assert.equal(res.headers['x-gateway'], 'g')
  const got = seen.slice(before)
  assert.equal(got.length, 1)
  assert.equal(got[0]!.headers['x-route'], 'api')
  assert.equal(got[0]!.headers['x-backend-ref'], 'b')
})

test('a policy refusal and a local answer never reach the backend, and still get the response policies', async () => {
  const before = seen.length
  const denied = await get('/api/x', { 'x-user': 'mallory' })
  assert.equal(denied.status, 403)
  assert.equal(denied.headers['x-gateway'], 'g')
  const hello = await get('/hello')
  assert.equal(hello.body, 'hi')
  const none = await get('/nothing')
  assert.equal(none.status, 404)
  assert.equal(seen.length, before)
})
