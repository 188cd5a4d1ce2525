/**
 * cors and csrf against the real portico process. CORS: the Gateway API conformance cases
 * (exact and wildcard origins, preflights answered by the proxy, `*` with and without
 * credentials), CORS headers on proxied and local answers, disallowed origins getting none,
 * gateway-level preflights, the innermost policy deciding. CSRF: Origin and Sec-Fetch-Site
 * checks on state-changing methods. And the configs that must be refused.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { newAgent, type Response, send } from '@portico/testkit/client'
import { openTrace } from '@portico/testkit/trace'
import { assertConfigError } from '../lib/validate.ts'

const CONFORMANCE_CORS = {
  allowOrigins: ['https://www.foo.com', 'https://*.bar.com'],
  allowMethods: ['GET', 'OPTIONS'],
  allowHeaders: ['x-header-1', 'x-header-2'],
  exposeHeaders: ['x-header-3', 'x-header-4'],
  allowCredentials: true,
  maxAge: 3600
}

const CORS_HEADERS = ['access-control-allow-origin', 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-max-age', 'access-control-allow-credentials']

function corsHeadersOf (res: Response): Record<string, unknown> {
  return Object.fromEntries(CORS_HEADERS.filter(h => res.headers[h] !== undefined).map(h => [h, res.headers[h]]))
}

describe('cors', () => {
  let portico: PorticoProcess
  let backend: Backend
  let gwPort: number
  let admin: string
  const agent = newAgent()

  before(async () => {
    backend = await startEchoBackend('echo', { 'x-header-3': 'three', 'x-other': 'other' })
    gwPort = await freePort()
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    const route = (name: string, prefix: string, policies: Record<string, unknown>) =>
      ({ name, matches: [{ path: { pathPrefix: prefix } }], policies, backends: [{ host: backend.host }] })
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: (port): ConfigFile => ({
        gateways: {
          default: gateway(port),
          // Gateway-level CORS answers preflights before routing: the route below only matches POST.
          'cors-gw': gateway(gwPort, { policies: { cors: { allowOrigins: ['https://gw.example', 'https://route.example'], allowMethods: ['POST'] } } })
        },
        routes: [
          route('cors-1', '/cors-1', { cors: CONFORMANCE_CORS }),
          route('cors-2', '/cors-2', { cors: { allowOrigins: ['https://www.foo.com'], allowMethods: ['*'] } }),
          route('cors-star', '/cors-star', { cors: { allowOrigins: ['*'], allowMethods: ['*'], allowHeaders: ['*'], exposeHeaders: ['*'] } }),
          route('cors-star-cred', '/cors-star-cred', { cors: { allowOrigins: ['*'], allowMethods: ['*'], allowHeaders: ['*'], exposeHeaders: ['*'], allowCredentials: true } }),
          route('cors-port', '/cors-port', { cors: { allowOrigins: ['http://localhost:8080', 'https://*.example.com:8443'] } }),
          route('cors-auth', '/cors-auth', {
            cors: { allowOrigins: ['https://app.example'], allowCredentials: true },
            apiKey: { keys: [{ key: 'a-long-test-key-1' }] }
          }),
          { name: 'post-only', gateways: 'cors-gw', matches: [{ path: { pathPrefix: '/' }, method: 'POST' }], backends: [{ host: backend.host }] },
          {
            name: 'inner',
            gateways: 'cors-gw',
            matches: [{ path: { pathPrefix: '/inner' } }],
            policies: { cors: { allowOrigins: ['https://route.example'] } },
            backends: [{ host: backend.host }]
          }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  const preflight = (path: string, headers: Record<string, string>, port = portico.port) =>
    send(agent, `http://127.0.0.1:${port}${path}`, { method: 'OPTIONS', headers })

  test('preflight from an exact or wildcard-matching origin: answered by the proxy with every header', { timeout: 10_000 }, async () => {
    const before = backend.requests.length
    for (const origin of ['https://www.foo.com', 'https://www.bar.com', 'https://xpto.www.bar.com', 'https://www.foo.com:443']) {
      const res = await preflight('/cors-1', { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-header-1, x-header-2' })
      assert.equal(res.status, 200, origin)
      assert.deepEqual(corsHeadersOf(res), {
        'access-control-allow-origin': origin,
        'access-control-allow-methods': 'GET, OPTIONS',
        'access-control-allow-headers': 'x-header-1, x-header-2',
        'access-control-expose-headers': 'x-header-3, x-header-4',
        'access-control-max-age': '3600',
        'access-control-allow-credentials': 'true'
      }, origin)
      assert.match(String(res.headers.vary), /Origin/)
    }
    assert.equal(backend.requests.length, before, 'preflights never reach the backend')
  })

  test('preflight from other origins: 200 without CORS headers', { timeout: 10_000 }, async () => {
    for (const origin of ['https://foobar.com', 'https://bar.com', 'http://www.foo.com', 'https://www.foo.com:8443', 'null']) {
      const res = await preflight('/cors-1', { origin, 'access-control-request-method': 'GET' })
      assert.equal(res.status, 200, origin)
      assert.deepEqual(corsHeadersOf(res), {}, origin)
    }
  })

  test('actual requests: allowed origins get Allow-Origin, -Credentials and -Expose-Headers; others none', { timeout: 10_000 }, async () => {
    let res = await send(agent, `${portico.url}/cors-1`, { headers: { origin: 'https://www.bar.com' } })
    assert.equal(res.status, 200)
    assert.deepEqual(corsHeadersOf(res), {
      'access-control-allow-origin': 'https://www.bar.com',
      'access-control-allow-credentials': 'true',
      'access-control-expose-headers': 'x-header-3, x-header-4'
    })
    assert.equal(res.headers['x-backend'], 'echo', 'the request went to the backend')
    res = await send(agent, `${portico.url}/cors-1`, { headers: { origin: 'https://foobar.com' } })
    assert.equal(res.status, 200)
    assert.deepEqual(corsHeadersOf(res), {})
    // An OPTIONS without Access-Control-Request-Method is not a preflight: it is proxied.
    res = await send(agent, `${portico.url}/cors-1`, { method: 'OPTIONS', headers: { origin: 'https://www.foo.com' } })
    assert.equal(res.headers['x-backend'], 'echo')
    // No Origin: nothing to do.
    res = await send(agent, `${portico.url}/cors-1`)
    assert.deepEqual(corsHeadersOf(res), {})
  })

  test('allowMethods * without credentials: * (the spec allows it); no Allow-Credentials', { timeout: 10_000 }, async () => {
    const res = await preflight('/cors-2', { origin: 'https://www.foo.com', 'access-control-request-method': 'POST' })
    assert.equal(res.status, 200)
    assert.equal(res.headers['access-control-allow-methods'], '*')
    assert.equal(res.headers['access-control-allow-origin'], 'https://www.foo.com')
    assert.equal(res.headers['access-control-allow-credentials'], undefined)
  })

  test('* everywhere without credentials is answered as *', { timeout: 10_000 }, async () => {
    let res = await preflight('/cors-star', { origin: 'https://foobar.com:12345', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'x-a' })
    assert.deepEqual(corsHeadersOf(res), {
      'access-control-allow-origin': '*',
      'access-control-allow-methods': '*',
      'access-control-allow-headers': '*',
      'access-control-expose-headers': '*'
    })
    res = await send(agent, `${portico.url}/cors-star`, { method: 'PUT', headers: { origin: 'https://foobar.com' } })
    assert.deepEqual(corsHeadersOf(res), { 'access-control-allow-origin': '*', 'access-control-expose-headers': '*' })
  })

  test('* with credentials: never a literal *; origin, method and headers are echoed', { timeout: 10_000 }, async () => {
    let res = await preflight('/cors-star-cred', { origin: 'https://other.foo.com', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'x-header-1, x-header-2' })
    assert.deepEqual(corsHeadersOf(res), {
      'access-control-allow-origin': 'https://other.foo.com',
      'access-control-allow-methods': 'PUT',
      'access-control-allow-headers': 'x-header-1, x-header-2',
      'access-control-allow-credentials': 'true'
    })
    assert.match(String(res.headers.vary), /Origin/)
    // Without Access-Control-Request-Headers, Allow-Headers is left out rather than *.
    res = await preflight('/cors-star-cred', { origin: 'https://other.foo.com', 'access-control-request-method': 'PUT' })
    assert.equal(res.headers['access-control-allow-headers'], undefined)
    // The actual request: exposeHeaders * lists the response's own header names.
    res = await send(agent, `${portico.url}/cors-star-cred`, { headers: { origin: 'https://other.foo.com', authorization: 'Bearer test' } })
    assert.equal(res.headers['access-control-allow-origin'], 'https://other.foo.com')
    assert.equal(res.headers['access-control-allow-credentials'], 'true')
    const exposed = String(res.headers['access-control-expose-headers']).split(', ')
    assert.ok(exposed.includes('x-header-3') && exposed.includes('x-other') && exposed.includes('x-backend'), exposed.join(','))
    assert.ok(!exposed.includes('*'))
  })

  test('origins with ports: the default port is implied, others must match', { timeout: 10_000 }, async () => {
    const allowed = async (origin: string) => (await send(agent, `${portico.url}/cors-port`, { headers: { origin } })).headers['access-control-allow-origin'] === origin
    assert.equal(await allowed('http://localhost:8080'), true)
    assert.equal(await allowed('http://localhost'), false)
    assert.equal(await allowed('https://a.example.com:8443'), true)
    assert.equal(await allowed('https://a.example.com'), false)
  })

  test('the proxy\'s own answers (a 401 here) carry CORS headers, so the browser can read them', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/cors-auth`, { headers: { origin: 'https://app.example' } })
    assert.equal(res.status, 401)
    assert.equal(res.headers['access-control-allow-origin'], 'https://app.example')
    assert.equal(res.headers['access-control-allow-credentials'], 'true')
  })

  test('gateway-level cors answers preflights before routing; the innermost policy decides', { timeout: 10_000 }, async () => {
    let res = await preflight('/anything', { origin: 'https://gw.example', 'access-control-request-method': 'POST' }, gwPort)
    assert.equal(res.status, 200, 'answered although no route matches OPTIONS')
    assert.equal(res.headers['access-control-allow-origin'], 'https://gw.example')
    assert.equal(res.headers['access-control-allow-methods'], 'POST')
    res = await send(agent, `http://127.0.0.1:${gwPort}/anything`, { method: 'POST', headers: { origin: 'https://gw.example' } })
    assert.equal(res.headers['access-control-allow-origin'], 'https://gw.example')
    // The route's own cors allows only route.example: it decides for its requests.
    res = await send(agent, `http://127.0.0.1:${gwPort}/inner`, { headers: { origin: 'https://gw.example' } })
    assert.equal(res.status, 200)
    assert.equal(res.headers['access-control-allow-origin'], undefined)
    res = await send(agent, `http://127.0.0.1:${gwPort}/inner`, { headers: { origin: 'https://route.example' } })
    assert.equal(res.headers['access-control-allow-origin'], 'https://route.example')
    assert.equal(res.headers['access-control-allow-methods'], undefined, 'not on actual responses')
  })

  test('the trace shows cors under its key and the preflight decision', { timeout: 10_000 }, async () => {
    const trace = await openTrace(admin, 'path=/cors-2/traced')
    await trace.ready
    await preflight('/cors-2/traced', { origin: 'https://www.foo.com', 'access-control-request-method': 'PUT' })
    const events = await trace.done
    const route = events.filter(e => e.message.type === 'policySelection')[1]!.message.effectivePolicy as Record<string, unknown>
    assert.deepEqual(route.cors, { allowOrigins: ['https://www.foo.com'], allowMethods: ['*'], allowHeaders: [], exposeHeaders: [], allowCredentials: false })
    const decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'cors')!
    assert.deepEqual(decision.message.result, { type: 'apply', details: 'preflight from https://www.foo.com answered' })
  })
})

describe('csrf', () => {
  let portico: PorticoProcess
  let backend: Backend
  let admin: string
  const agent = newAgent()

  before(async () => {
    backend = await startEchoBackend()
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'csrf', matches: [{ path: { pathPrefix: '/csrf' } }], policies: { csrf: { additionalOrigins: ['https://trusted.example', 'http://Partner.example:8080'] } }, backends: [{ host: backend.host }] },
          { name: 'per-backend', matches: [{ path: { pathPrefix: '/backend' } }], backends: [{ host: backend.host, policies: { csrf: {} } }] }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  const call = (method: 'GET' | 'HEAD' | 'OPTIONS' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', headers: Record<string, string>, path = '/csrf') =>
    send(agent, `${portico.url}${path}`, { method, headers })

  test('safe methods always pass, whatever the origin', { timeout: 10_000 }, async () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS'] as const) {
      assert.equal((await call(method, { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' })).status, 200, method)
    }
  })

  test('state-changing requests from the request\'s own origin or additionalOrigins pass', { timeout: 10_000 }, async () => {
    assert.equal((await call('POST', { origin: portico.url })).status, 200, 'same host and port')
    assert.equal((await call('POST', { host: 'app.test', origin: 'https://app.test' })).status, 200, 'same host, scheme ignored behind TLS offload')
    assert.equal((await call('POST', { host: 'app.test:443', origin: 'https://app.test' })).status, 200, 'default port on either side')
    assert.equal((await call('PUT', { origin: 'https://trusted.example' })).status, 200)
    assert.equal((await call('DELETE', { origin: 'https://trusted.example:443' })).status, 200, 'default port normalized')
    assert.equal((await call('PATCH', { origin: 'http://partner.example:8080' })).status, 200, 'case normalized')
  })

  test('other origins are refused with 403 CSRF validation failed', { timeout: 10_000 }, async () => {
    for (const [method, origin] of [['POST', 'https://evil.example'], ['PUT', 'http://127.0.0.1:1'], ['DELETE', 'https://trusted.example:8443'], ['PATCH', 'not an origin']] as const) {
      const res = await call(method, { origin })
      assert.equal(res.status, 403, `${method} ${origin}`)
      assert.equal(res.text, 'CSRF validation failed')
    }
  })

  test('without Origin: Sec-Fetch-Site cross-site or same-site is refused; same-origin, none or no header pass', { timeout: 10_000 }, async () => {
    assert.equal((await call('POST', { 'sec-fetch-site': 'cross-site' })).status, 403)
    assert.equal((await call('POST', { 'sec-fetch-site': 'same-site' })).status, 403)
    assert.equal((await call('POST', { origin: 'null', 'sec-fetch-site': 'cross-site' })).status, 403, 'Origin: null counts as no origin')
    assert.equal((await call('POST', { 'sec-fetch-site': 'same-origin' })).status, 200)
    assert.equal((await call('POST', { 'sec-fetch-site': 'none' })).status, 200)
    assert.equal((await call('POST', {})).status, 200, 'not a browser (curl, a server)')
  })

  test('the trace shows csrf under its key and why a request was refused', { timeout: 10_000 }, async () => {
    const trace = await openTrace(admin, 'path=/csrf/traced')
    await trace.ready
    assert.equal((await call('POST', { origin: 'https://evil.example' }, '/csrf/traced')).status, 403)
    const events = await trace.done
    const route = events.filter(e => e.message.type === 'policySelection')[1]!.message.effectivePolicy as Record<string, unknown>
    assert.deepEqual(route.csrf, { additionalOrigins: ['https://trusted.example', 'http://partner.example:8080'] })
    const decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'csrf')!
    assert.deepEqual(decision.message.result, { type: 'deny', details: `Origin https://evil.example is neither host 127.0.0.1:${portico.port} nor in additionalOrigins` })
  })

  test('csrf on a backend reference', { timeout: 10_000 }, async () => {
    assert.equal((await call('POST', { origin: 'https://evil.example' }, '/backend')).status, 403)
    assert.equal((await call('POST', { origin: portico.url }, '/backend')).status, 200)
  })
})

describe('cors and csrf: bad configs', () => {
  const config = (policies: unknown) => `gateways:
  default: { port: 18080, address: 127.0.0.1 }
routes:
  - name: r
    policies: ${JSON.stringify(policies)}
    backends: [{ host: 127.0.0.1:8080 }]
`
  test('origins that are not origins, * alongside others, a zero maxAge', { timeout: 30_000 }, async () => {
    await Promise.all([
      assertConfigError(config({ cors: { allowOrigins: ['example.com'] } }), 'routes[0].policies.cors.allowOrigins[0]', /invalid value/),
      assertConfigError(config({ cors: { allowOrigins: ['https://example.com/path'] } }), 'routes[0].policies.cors.allowOrigins[0]', /invalid value/),
      assertConfigError(config({ cors: { allowOrigins: ['*', 'https://a.example'] } }), 'routes[0].policies.cors.allowOrigins', /cannot be listed alongside other origins/),
      assertConfigError(config({ cors: { allowMethods: ['GET', '*'] } }), 'routes[0].policies.cors.allowMethods', /cannot be listed alongside other methods/),
      assertConfigError(config({ cors: { maxAge: '0s' } }), 'routes[0].policies.cors.maxAge', /at least 1s/),
      assertConfigError(config({ csrf: { additionalOrigins: ['https://a.example/x'] } }), 'routes[0].policies.csrf.additionalOrigins[0]', /invalid value/)
    ])
  })
})
