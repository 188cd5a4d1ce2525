/**
 * The HTTP external authorization check's header copying against a real HTTP service on
 * loopback: a list copies those headers only; null (Gateway API HTTPAuthConfig with an
 * empty allowedResponseHeaders: "all headers from the authorization server except Authority
 * or Host") copies every header but framing ones, Host and those describing the answer's own
 * body.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import { httpCheck } from '../src/auth/ext-authz-http.ts'
import type { CheckInput } from '../src/auth/ext-authz-check.ts'

let server: http.Server
let origin: string
let pool: Pool

before(async () => {
  server = http.createServer((_req, res) => {
    res.writeHead(200, { 'x-user': 'alice', 'x-tier': 'gold', 'content-type': 'text/plain', host: 'evil.example', etag: '"1"', 'x-envoy-auth-headers-to-remove': 'x-drop' }).end('ok')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  pool = new Pool(origin)
})

after(async () => {
  await pool.close()
  server.close()
})

const input: CheckInput = {
  id: 'r1', method: 'GET', path: '/x', host: 'gw.example', scheme: 'http', protocol: 'HTTP/1.1', size: 0,
  headers: {}, body: null, traceHeaders: null, source: { address: '127.0.0.1', port: 1 }, destination: { address: '127.0.0.1', port: 2 }, contextExtensions: {}, time: 0
}

test('a list of allowedResponseHeaders copies those only', async () => {
  const r = await httpCheck(pool, input, { origin, pathPrefix: '', timeoutMs: 2000, allowedResponseHeaders: ['x-user'] })
  assert.equal(r.decision, 'allow')
  if (r.decision !== 'allow') return
  assert.deepEqual(r.requestHeaders.map(h => h.name), ['x-user'])
  assert.deepEqual(r.removeHeaders, ['x-drop'])
})

test('null copies every header but framing ones, Host and those of the answer\'s body', async () => {
  const r = await httpCheck(pool, input, { origin, pathPrefix: '', timeoutMs: 2000, allowedResponseHeaders: null })
  assert.equal(r.decision, 'allow')
  if (r.decision !== 'allow') return
  assert.deepEqual(r.requestHeaders.map(h => `${h.name}: ${h.value}`).sort(), ['x-tier: gold', 'x-user: alice'])
  assert.ok(r.requestHeaders.every(h => h.action === 'overwrite'))
})
