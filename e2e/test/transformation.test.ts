/**
 * transformation against the real portico process: request and response headers set,
 * appended and removed with CEL, bodies replaced (content-length right, chunking and
 * content-encoding gone, the original body discarded), the `response` variable, proxy-made
 * answers transformed too, gateway and backend attachment, expressions that fail at run
 * time, and configs with bad CEL refused with the field named.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, randomBody, sha256, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { newAgent, nodeRequest, send } from '@portico/testkit/client'
import { openTrace } from '@portico/testkit/trace'
import { assertConfigError } from '../lib/validate.ts'

describe('transformation', () => {
  let portico: PorticoProcess
  let echo: Backend
  let chunky: Backend
  let admin: string
  const agent = newAgent()

  before(async () => {
    echo = await startEchoBackend('echo', { 'x-remove-me': 'gone?' })
    // Answers in chunks (no content-length), "compressed", with a header to transform.
    chunky = await startBackend((_req, res) => {
      res.writeHead(201, { 'content-type': 'text/plain', 'content-encoding': 'gzip', 'x-backend': 'chunky', 'x-remove-me': 'gone?' })
      res.write('first part, ')
      setTimeout(() => res.end('second part'), 20)
    })
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port, { policies: { transformation: { response: { set: { 'x-gateway': '"gw " + request.method' } } } } }) },
        routes: [
          {
            name: 'request',
            matches: [{ path: { pathPrefix: '/req' } }],
            policies: {
              transformation: {
                request: {
                  set: { 'x-user': 'request.headers["x-name"] + "!"', 'X-Path': 'request.path', 'x-number': '40 + 2' },
                  add: { 'x-list': '"b"' },
                  remove: ['X-Secret'],
                  body: '\'{"method":"\' + request.method + \'","path":"\' + request.path + \'"}\''
                }
              }
            },
            backends: [{ host: echo.host }]
          },
          {
            name: 'response',
            matches: [{ path: { pathPrefix: '/res' } }],
            policies: {
              transformation: {
                response: {
                  set: { 'x-status': 'string(response.code)', 'x-type': 'response.headers["content-type"]' },
                  add: { 'x-backend': '"proxy"' },
                  remove: ['x-remove-me'],
                  body: '"status " + string(response.code) + " for " + request.path'
                }
              }
            },
            backends: [{ host: chunky.host }]
          },
          {
            name: 'json',
            matches: [{ path: { pathPrefix: '/json' } }],
            policies: { transformation: { response: { body: '{"code": response.code, "list": [true, "x", 1.5], "echoed": response.headers["x-backend"]}' } } },
            backends: [{ host: echo.host }]
          },
          {
            name: 'local',
            matches: [{ path: { pathPrefix: '/local' } }],
            policies: {
              directResponse: { status: 418, body: 'teapot' },
              transformation: { response: { body: 'response.code == 418 ? "short and stout" : "other"', set: { 'x-code': 'response.code' } } }
            }
          },
          {
            name: 'failing',
            matches: [{ path: { pathPrefix: '/failing' } }],
            policies: {
              transformation: {
                request: { set: { 'x-missing': 'request.headers["nope"]', 'x-newline': '"a\\nb"', 'x-ok': '"fine"' } },
                response: { body: 'response.headers["nope"]' }
              }
            },
            backends: [{ host: echo.host }]
          },
          {
            name: 'per-backend',
            matches: [{ path: { pathPrefix: '/backend' } }],
            backends: [{ host: echo.host, policies: { transformation: { request: { set: { 'x-be': '"yes"' } } } } }]
          }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await echo?.close()
    await chunky?.close()
  })

  test('request headers are set, appended to and removed with CEL; the body is replaced', { timeout: 10_000 }, async () => {
    const original = randomBody(1 << 20)
    const res = await send(agent, `${portico.url}/req/a?q=1`, {
      method: 'POST',
      headers: { 'x-name': 'alice', 'x-list': 'a', 'x-secret': 's3cret', 'x-path': 'client', 'content-type': 'application/octet-stream' },
      body: original
    })
    assert.equal(res.status, 200)
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.headers['x-user'], 'alice!')
    assert.equal(got.headers['x-path'], '/req/a', 'set overwrites, names case-insensitive')
    assert.equal(got.headers['x-number'], '42')
    assert.equal(got.headers['x-list'], 'a,b')
    assert.equal(got.headers['x-secret'], undefined)
    const body = '{"method":"POST","path":"/req/a"}'
    assert.equal(got.bodyLength, body.length)
    assert.equal(got.bodySha256, sha256(body), 'the backend got the new body, not the 1 MiB one')
    assert.equal(got.headers['content-length'], String(body.length))
    assert.equal(got.headers['transfer-encoding'], undefined)
  })

  test('a chunked request body is replaced too; a GET without a body gets one', { timeout: 10_000 }, async () => {
    const res = await nodeRequest({ port: portico.port, path: '/req/chunked', method: 'PUT', headers: { 'transfer-encoding': 'chunked' }, body: 'x'.repeat(100_000) })
    assert.equal(res.status, 200)
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.bodySha256, sha256('{"method":"PUT","path":"/req/chunked"}'))
    assert.equal(got.headers['transfer-encoding'], undefined)
    // A GET without a body gets one.
    const get = JSON.parse((await send(agent, `${portico.url}/req/get`)).text) as EchoedRequest
    assert.equal(get.bodySha256, sha256('{"method":"GET","path":"/req/get"}'))
  })

  test('response headers and body from CEL over `response`: content-length set, chunking and encoding gone', { timeout: 10_000 }, async () => {
    const res = await nodeRequest({ port: portico.port, path: '/res/x' })
    assert.equal(res.status, 201)
    assert.equal(res.text, 'status 201 for /res/x')
    assert.equal(res.headers['content-length'], String(res.text.length))
    assert.equal(res.headers['transfer-encoding'], undefined)
    assert.equal(res.headers['content-encoding'], undefined)
    assert.equal(res.headers['x-status'], '201')
    assert.equal(res.headers['x-type'], 'text/plain')
    assert.equal(res.headers['x-backend'], 'chunky,proxy')
    assert.equal(res.headers['x-remove-me'], undefined)
    assert.equal(res.headers['x-gateway'], 'gw GET', 'gateway-level transformation')
    // HEAD: the headers of the replaced body, no body.
    const head = await nodeRequest({ port: portico.port, path: '/res/x', method: 'HEAD' })
    assert.equal(head.headers['content-length'], String('status 201 for /res/x'.length))
    assert.equal(head.body.length, 0)
  })

  test('lists and maps become JSON; numbers and bools their text', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/json`)
    assert.deepEqual(JSON.parse(res.text), { code: 200, list: [true, 'x', 1.5], echoed: 'echo' })
    assert.equal(res.headers['content-length'], String(res.body.length))
  })

  test('answers made by the proxy are transformed as well', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/local`)
    assert.equal(res.status, 418)
    assert.equal(res.text, 'short and stout')
    assert.equal(res.headers['content-length'], '15')
    assert.equal(res.headers['x-code'], '418')
  })

  test('expressions that fail or give unusable values change nothing; the trace says why', { timeout: 10_000 }, async () => {
    const trace = await openTrace(admin, 'path=/failing/x')
    await trace.ready
    const res = await send(agent, `${portico.url}/failing/x`)
    assert.equal(res.status, 200)
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.headers['x-missing'], undefined)
    assert.equal(got.headers['x-newline'], undefined)
    assert.equal(got.headers['x-ok'], 'fine', 'the other headers still apply')
    assert.equal(got.name, 'echo', 'the body was left as the backend sent it')
    const events = await trace.done
    const route = events.filter(e => e.message.type === 'policySelection')[1]!.message.effectivePolicy as Record<string, unknown>
    // String literals of request-side expressions are redacted (ir/redact.ts: a secret would be one).
    assert.deepEqual(route.transformation, {
      request: { set: { 'x-missing': 'request.headers["nope"]', 'x-newline': '"<redacted>"', 'x-ok': '"<redacted>"' } },
      response: { body: 'response.headers["nope"]' }
    })
    const details = events.filter(e => e.message.type === 'policy' && e.message.kind === 'transformation').map(e => (e.message.result as { details: string }).details)
    assert.equal(details.length, 3, details.join('\n'))
    assert.equal(details[2], 'response: set x-gateway', 'then the gateway\'s, outermost last')
    assert.match(details[0]!, /^request: set x-missing failed: .+; set x-newline failed: the value has characters a header cannot carry.*; set x-ok$/)
    assert.match(details[1]!, /^response: body failed: /)
  })

  test('on a backend reference', { timeout: 10_000 }, async () => {
    const got = JSON.parse((await send(agent, `${portico.url}/backend`)).text) as EchoedRequest
    assert.equal(got.headers['x-be'], 'yes')
  })
})

describe('transformation: bad configs', () => {
  const config = (transformation: unknown) => `gateways:
  default: { port: 18080, address: 127.0.0.1 }
routes:
  - name: r
    policies:
      transformation: ${JSON.stringify(transformation)}
    backends: [{ host: 127.0.0.1:8080 }]
`
  test('bad CEL is refused at load, naming the field', { timeout: 30_000 }, async () => {
    await Promise.all([
      assertConfigError(config({ request: { set: { 'x-a': 'request.path +' } } }), 'routes[0].policies.transformation.request.set.x-a', /invalid CEL expression "request.path \+"/),
      assertConfigError(config({ response: { body: '"a" + ' } }), 'routes[0].policies.transformation.response.body', /invalid CEL expression/),
      assertConfigError(config({ request: { add: { 'x-a': 'response.code' } } }), 'routes[0].policies.transformation.request.add.x-a', /unknown variable "response"/),
      assertConfigError(config({ response: { set: { 'x-a': 'secrets.key' } } }), 'routes[0].policies.transformation.response.set.x-a', /unknown variable "secrets"/)
    ])
  })
  test('framing headers, duplicate names and an empty transformation are refused', { timeout: 30_000 }, async () => {
    await Promise.all([
      assertConfigError(config({ response: { set: { 'Content-Length': '"5"' } } }), 'routes[0].policies.transformation.response.set.Content-Length', /set by the proxy/),
      assertConfigError(config({ request: { set: { 'x-a': '"1"', 'X-A': '"2"' } } }), 'routes[0].policies.transformation.request.set.X-A', /given twice/),
      assertConfigError(config({}), 'routes[0].policies.transformation', /needs request or response/)
    ])
  })
})
