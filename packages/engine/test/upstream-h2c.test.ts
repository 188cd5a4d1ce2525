/**
 * A backend marked h2c (a Service port with appProtocol kubernetes.io/h2c) is called with
 * HTTP/2 prior knowledge: a backend that speaks only h2c answers, the Host header becomes
 * :authority, and a change of the flag opens new connections.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { UpstreamPools } from '../src/http/upstream-pools.ts'
import { collect } from './lib/dispatch.ts'
import type { BackendIR } from '../src/ir/types.ts'

test('an h2c backend is called over HTTP/2 with prior knowledge', async () => {
  const server = http2.createServer((req, res) => { res.end(`${req.httpVersion} ${String(req.headers[':authority'])}`) })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const backend: BackendIR = { key: 'service/apps/app:81', kind: 'service', name: 'app', protocol: 'http', h2c: true, endpoints: [{ host: '127.0.0.1', port }], target: `127.0.0.1:${port}` }
  const pools = new UpstreamPools()
  try {
    const res = await collect(pools.get(backend), { headers: { host: 'app.example' } })
    assert.equal(res.status, 200)
    assert.equal(res.body, '2.0 app.example')
    const first = pools.get(backend)
    pools.sync([{ ...backend, h2c: false }])
    assert.notEqual(pools.get({ ...backend, h2c: false }), first, 'turning h2c off makes a new pool')
  } finally {
    pools.sync([])
    server.close()
  }
})
