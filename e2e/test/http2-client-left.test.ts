/**
 * A client that leaves while the request's policies run gets nothing sent to the backend on
 * its behalf, over HTTP/2 as over HTTP/1.1. Node's HTTP/2 compatibility response has no
 * `destroyed` (the engine's "the client left" checks read it, http/inbound.ts): a stream the
 * client reset while extAuthz was deciding still went on to the backend — a cancelled POST
 * executed anyway. proxy/src/http2.ts gives the compatibility response its stream's state.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import { type AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { h2Status } from '@portico/testkit/client'

/** How long the authorization service takes to answer: the client leaves meanwhile. */
const DECIDE_MS = 400

let dir: string
let backend: Backend
let authz: http.Server
let portico: PorticoProcess
let backendRequests = 0
/** Resolves each time the authorization service receives a check. */
let onCheck: () => void = () => {}

before(async () => {
  dir = makeTempDir('portico-e2e-h2-left-')
  backend = await startBackend((req, res) => {
    backendRequests++
    req.resume()
    req.on('end', () => res.end('done'))
  })
  authz = http.createServer((req, res) => {
    onCheck()
    req.resume()
    setTimeout(() => res.end(), DECIDE_MS)
  })
  await new Promise<void>(resolve => authz.listen(0, '127.0.0.1', resolve))
  const authzPort = (authz.address() as AddressInfo).port
  portico = await startPortico({
    dir,
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{
        name: 'guarded',
        policies: { extAuthz: { host: `127.0.0.1:${authzPort}`, protocol: { http: { path: '/check' } } } },
        backends: [{ host: backend.host }]
      }]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
  await new Promise(resolve => authz?.close(resolve))
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

/** Waits for the next check to reach the authorization service. */
function nextCheck (): Promise<void> {
  return new Promise(resolve => { onCheck = resolve })
}

test('the policies decide after the client left: the backend gets nothing (HTTP/1.1, the control)', async () => {
  const before = backendRequests
  const checked = nextCheck()
  const req = http.request({ host: '127.0.0.1', port: portico.port, method: 'POST', path: '/order', headers: { 'content-length': '2' } })
  req.on('error', () => {})
  req.end('{}')
  await checked
  req.destroy()
  await sleep(DECIDE_MS + 300)
  assert.equal(backendRequests - before, 0)
})

test('the policies decide after the client reset its HTTP/2 stream: the backend gets nothing', async () => {
  const before = backendRequests
  const session = http2.connect(`http://127.0.0.1:${portico.port}`)
  session.on('error', () => {})
  try {
    const checked = nextCheck()
    const stream = session.request({ ':method': 'POST', ':path': '/order', 'content-length': '2' })
    stream.on('error', () => {})
    stream.end('{}')
    await checked
    stream.close(http2.constants.NGHTTP2_CANCEL)
    await sleep(DECIDE_MS + 300)
    assert.equal(backendRequests - before, 0, 'the cancelled request reached the backend')
    // The connection still serves: a next request goes through.
    assert.equal(await h2Status(session, '/next'), 200)
  } finally {
    session.close()
  }
})
