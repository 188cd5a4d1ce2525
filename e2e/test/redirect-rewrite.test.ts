/**
 * requestRedirect and urlRewrite against the real portico process, with the Gateway API's
 * semantics: the Location's scheme, host and port rules (default ports left out, the
 * listener's port when neither scheme nor port is given), ReplaceFullPath and
 * ReplacePrefixMatch (with the spec's trailing-slash cases), redirect statuses, the query
 * kept; rewrites of the path and Host the backend gets, at route and backend level; a
 * gateway-wide http→https redirect; and the configs that must be refused.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'
import { openTrace } from '@portico/testkit/trace'
import { assertConfigError } from '../lib/validate.ts'

describe('requestRedirect and urlRewrite', () => {
  let portico: PorticoProcess
  let backend: Backend
  let httpsOnlyPort: number
  let admin: string
  const agent = newAgent()

  before(async () => {
    backend = await startEchoBackend()
    httpsOnlyPort = await freePort()
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    const redirect = (name: string, path: string, requestRedirect: Record<string, unknown>, kind: 'pathPrefix' | 'exact' = 'pathPrefix') =>
      ({ name, matches: [{ path: { [kind]: path } }], policies: { requestRedirect } })
    const rewrite = (name: string, prefix: string, urlRewrite: Record<string, unknown>) =>
      ({ name, matches: [{ path: { pathPrefix: prefix } }], policies: { urlRewrite }, backends: [{ host: backend.host }] })
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: (port): ConfigFile => ({
        gateways: {
          default: gateway(port),
          // Everything on this gateway goes to HTTPS, path and query kept.
          'https-only': gateway(httpsOnlyPort, { policies: { requestRedirect: { scheme: 'https', status: 301 } } })
        },
        routes: [
          redirect('prefix', '/old', { path: { prefix: '/new' } }),
          redirect('prefix-slash', '/slashed/', { path: { prefix: '/new/' } }),
          redirect('prefix-empty', '/strip', { path: { prefix: '' } }),
          redirect('full', '/full', { path: { full: '/elsewhere' }, status: 301 }, 'exact'),
          redirect('nil', '/nil', {}),
          redirect('https', '/to-https', { scheme: 'https' }),
          redirect('https-443', '/https-443', { scheme: 'https', port: 443 }),
          redirect('https-8443', '/https-8443', { scheme: 'https', port: 8443 }),
          redirect('port-80', '/port-80', { port: 80 }),
          redirect('port-8080', '/port-8080', { port: 8080 }),
          redirect('hostname', '/hostname', { hostname: 'example.org' }),
          redirect('s303', '/s303', { status: 303 }),
          redirect('s307', '/s307', { status: 307 }),
          redirect('s308', '/s308', { status: 308 }),
          rewrite('rw-prefix', '/api', { path: { prefix: '/v2' } }),
          rewrite('rw-prefix-slash', '/svc/', { path: { prefix: '/inner/' } }),
          rewrite('rw-strip', '/rw-strip', { path: { prefix: '/' } }),
          rewrite('rw-full', '/rw-full', { path: { full: '/fixed' } }),
          rewrite('rw-host', '/rw-host', { hostname: 'internal.example' }),
          {
            name: 'rw-backend',
            matches: [{ path: { pathPrefix: '/per-backend' } }],
            backends: [{ host: backend.host, policies: { urlRewrite: { path: { prefix: '/b' }, hostname: 'b.internal' } } }]
          },
          { name: 'anything', gateways: 'https-only', backends: [{ host: backend.host }] }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  async function location (path: string, host = 'app.test', port = portico.port): Promise<{ status: number, location: string | undefined, body: string }> {
    const res = await send(agent, `http://127.0.0.1:${port}${path}`, { headers: { host } })
    const loc = res.headers.location
    return { status: res.status, location: Array.isArray(loc) ? loc[0] : loc, body: res.text }
  }

  async function upstream (path: string, headers: Record<string, string> = {}): Promise<EchoedRequest> {
    const res = await send(agent, `${portico.url}${path}`, { headers })
    assert.equal(res.status, 200, res.text)
    return JSON.parse(res.text) as EchoedRequest
  }

  test('ReplacePrefixMatch replaces the matched prefix, with the spec\'s trailing-slash cases', { timeout: 10_000 }, async () => {
    const P = portico.port
    const cases: Array<[string, string]> = [
      ['/old', `http://app.test:${P}/new`],
      ['/old/', `http://app.test:${P}/new/`],
      ['/old/a/b?x=1&y=2', `http://app.test:${P}/new/a/b?x=1&y=2`],
      ['/slashed/a', `http://app.test:${P}/new/a`],
      ['/slashed', `http://app.test:${P}/new`],
      ['/strip/a', `http://app.test:${P}/a`],
      ['/strip', `http://app.test:${P}/`],
      ['/strip/', `http://app.test:${P}/`]
    ]
    for (const [path, expected] of cases) {
      const r = await location(path)
      assert.equal(r.status, 302, `${path}: default status`)
      assert.equal(r.location, expected, path)
      assert.equal(r.body, '')
    }
  })

  test('ReplaceFullPath, and no path: the request path as it is', { timeout: 10_000 }, async () => {
    assert.deepEqual(await location('/full?q=1'), { status: 301, location: `http://app.test:${portico.port}/elsewhere?q=1`, body: '' })
    assert.equal((await location('/nil/x')).location, `http://app.test:${portico.port}/nil/x`)
  })

  test('scheme and port rules: default ports are left out, the listener port when neither is set', { timeout: 10_000 }, async () => {
    const P = portico.port
    // Host header with a port: its port never counts, only the rules below.
    assert.equal((await location('/nil', `app.test:9999`)).location, `http://app.test:${P}/nil`, 'scheme nil, port nil: listener port')
    assert.equal((await location('/to-https')).location, 'https://app.test/to-https', 'scheme https, port nil: 443, left out')
    assert.equal((await location('/https-443')).location, 'https://app.test/https-443')
    assert.equal((await location('/https-8443')).location, 'https://app.test:8443/https-8443')
    assert.equal((await location('/port-80')).location, 'http://app.test/port-80', 'http and 80: left out')
    assert.equal((await location('/port-8080')).location, 'http://app.test:8080/port-8080')
    assert.equal((await location('/hostname/x')).location, `http://example.org:${P}/hostname/x`)
  })

  test('redirect statuses 303, 307 and 308', { timeout: 10_000 }, async () => {
    for (const s of [303, 307, 308]) assert.equal((await location(`/s${s}`)).status, s)
  })

  test('a gateway-level redirect sends every request on the gateway to https', { timeout: 10_000 }, async () => {
    const r = await location('/any/path?a=b', 'shop.example.com', httpsOnlyPort)
    assert.deepEqual(r, { status: 301, location: 'https://shop.example.com/any/path?a=b', body: '' })
    assert.equal(backend.requests.filter(q => q.url === '/any/path?a=b').length, 0, 'nothing forwarded')
  })

  test('urlRewrite ReplacePrefixMatch: the backend gets the rewritten path, query kept', { timeout: 10_000 }, async () => {
    assert.equal((await upstream('/api/users?id=7')).url, '/v2/users?id=7')
    assert.equal((await upstream('/api')).url, '/v2')
    assert.equal((await upstream('/api/')).url, '/v2/')
    assert.equal((await upstream('/svc/a/b')).url, '/inner/a/b')
    assert.equal((await upstream('/svc')).url, '/inner')
    assert.equal((await upstream('/rw-strip/a')).url, '/a')
    assert.equal((await upstream('/rw-strip')).url, '/')
    assert.equal((await upstream('/rw-full/x/y?z=1')).url, '/fixed?z=1')
  })

  test('urlRewrite hostname: the backend gets the new Host; X-Forwarded-Host keeps the client\'s', { timeout: 10_000 }, async () => {
    const got = await upstream('/rw-host/x', { host: 'public.example' })
    assert.equal(got.headers.host, 'internal.example')
    assert.equal(got.headers['x-forwarded-host'], 'public.example')
    assert.equal(got.url, '/rw-host/x')
  })

  test('urlRewrite on a backend reference', { timeout: 10_000 }, async () => {
    const got = await upstream('/per-backend/items')
    assert.equal(got.url, '/b/items')
    assert.equal(got.headers.host, 'b.internal')
  })

  test('the trace shows both policies under their keys and what they did', { timeout: 10_000 }, async () => {
    let trace = await openTrace(admin, 'path=/old/traced')
    await trace.ready
    await location('/old/traced')
    let events = await trace.done
    let route = events.filter(e => e.message.type === 'policySelection')[1]!.message.effectivePolicy as Record<string, unknown>
    assert.deepEqual(route.requestRedirect, { status: 302, path: { prefix: '/new' } })
    assert.equal(route.urlRewrite, null)
    let decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'requestRedirect')!
    assert.deepEqual(decision.message.result, { type: 'apply', details: `302 to http://app.test:${portico.port}/new/traced` })

    trace = await openTrace(admin, 'path=/api/traced')
    await trace.ready
    await upstream('/api/traced')
    events = await trace.done
    route = events.filter(e => e.message.type === 'policySelection')[1]!.message.effectivePolicy as Record<string, unknown>
    assert.deepEqual(route.urlRewrite, { path: { prefix: '/v2' } })
    decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'urlRewrite')!
    assert.deepEqual(decision.message.result, { type: 'apply', details: 'path /api/traced → /v2/traced' })
    const final = events.find(e => e.message.type === 'requestSnapshot' && e.message.stage === 'final request')!
    assert.equal((final.message.requestState as { request: { path: string } }).request.path, '/v2/traced')
  })
})

describe('requestRedirect and urlRewrite: bad configs', () => {
  const config = (routePolicies: unknown, extra = '') => `gateways:
  default: { port: 18080, address: 127.0.0.1${extra} }
routes:
  - name: r
    matches: [{ path: { pathPrefix: /a } }, { path: { exact: /b } }]
    policies: ${JSON.stringify(routePolicies)}
    backends: [{ host: 127.0.0.1:8080 }]
`
  const prefixRoute = (routePolicies: unknown) => config(routePolicies).replace(', { path: { exact: /b } }', '')

  test('a status that is not a redirect status is refused', { timeout: 20_000 }, async () => {
    await Promise.all([200, 304, 305, 404].map(status =>
      assertConfigError(prefixRoute({ requestRedirect: { status } }), 'routes[0].policies.requestRedirect.status', /must be one of: 301, 302, 303, 307, 308/)))
  })

  test('ReplacePrefixMatch needs every route match to be a prefix, and a route', { timeout: 20_000 }, async () => {
    await Promise.all([
      assertConfigError(config({ urlRewrite: { path: { prefix: '/x' } } }), 'routes[0].policies.urlRewrite.path.prefix', /every path match of the route to be a pathPrefix \(found exact "\/b"\)/),
      assertConfigError(config({ requestRedirect: { path: { prefix: '/x' } } }), 'routes[0].policies.requestRedirect.path.prefix', /pathPrefix/),
      assertConfigError(prefixRoute({}).replace('address: 127.0.0.1 }', 'address: 127.0.0.1, policies: { requestRedirect: { path: { prefix: /x } } } }'), 'gateways.default.policies.requestRedirect.path.prefix', /gateway policies run before routing/)
    ])
  })

  test('full and prefix together, a redirect with a rewrite, a hostname with a port, urlRewrite on a gateway', { timeout: 20_000 }, async () => {
    await Promise.all([
      assertConfigError(prefixRoute({ urlRewrite: { path: { full: '/x', prefix: '/y' } } }), 'routes[0].policies.urlRewrite.path', /exactly one of full or prefix/),
      assertConfigError(prefixRoute({ urlRewrite: { path: {} } }), 'routes[0].policies.urlRewrite.path', /exactly one of full or prefix/),
      assertConfigError(prefixRoute({ requestRedirect: { scheme: 'https' }, urlRewrite: { hostname: 'x.example' } }), 'routes[0].policies.urlRewrite', /cannot be used together/),
      assertConfigError(prefixRoute({ requestRedirect: { hostname: 'x.example:8080' } }), 'routes[0].policies.requestRedirect.hostname', /invalid value/),
      assertConfigError(prefixRoute({ requestRedirect: { scheme: 'ftp' } }), 'routes[0].policies.requestRedirect.scheme', /http|allowed/),
      assertConfigError(prefixRoute({}).replace('address: 127.0.0.1 }', 'address: 127.0.0.1, policies: { urlRewrite: { hostname: x.example } } }'), 'gateways.default.policies.urlRewrite', /unknown field "urlRewrite"/)
    ])
  })
})
