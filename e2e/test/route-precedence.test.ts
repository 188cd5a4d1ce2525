/**
 * Route selection end to end, with the Gateway API's precedence: exact path > longest prefix
 * > regex, then a method match, then more header matches, then more query matches — whatever
 * the order of the routes in the file (it is deliberately backwards here). Each route answers
 * with its own name; one forwards to a real backend.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { Dispatcher } from 'undici'
import type { ConfigFile } from '@portico/engine'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'

type Route = NonNullable<ConfigFile['routes']>[number]

/** A route that answers 200 with its own name. */
function named (name: string, matches: Route['matches']): Route {
  return { name, matches, policies: { directResponse: { status: 200, body: name } } }
}

describe('route precedence', () => {
  let portico: PorticoProcess
  let backend: Backend
  const agent = newAgent()

  before(async () => {
    backend = await startEchoBackend('backend')
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port) },
        routes: [
          // Paths: least specific first in the file.
          named('regex-api', [{ path: { regex: '/api/.*' } }]),
          named('prefix-api', [{ path: { pathPrefix: '/api' } }]),
          named('prefix-api-v1', [{ path: { pathPrefix: '/api/v1/' } }]),
          named('exact-users', [{ path: { exact: '/api/v1/users' } }]),
          named('regex-img', [{ path: { regex: '/img/[a-z]+\\.png' } }]),
          // Method.
          named('orders-any', [{ path: { pathPrefix: '/orders' } }]),
          named('orders-post', [{ path: { pathPrefix: '/orders' }, method: 'POST' }]),
          // Headers: more header matches win.
          named('beta-plain', [{ path: { pathPrefix: '/beta' } }]),
          named('beta-one-header', [{ path: { pathPrefix: '/beta' }, headers: [{ name: 'x-beta', value: { exact: 'on' } }] }]),
          named('beta-two-headers', [{
            path: { pathPrefix: '/beta' },
            headers: [{ name: 'X-Beta', value: { regex: 'v[0-9]+' } }, { name: 'x-tier', value: { exact: 'gold' } }]
          }]),
          // Method beats headers.
          named('mix-header', [{ path: { pathPrefix: '/mix' }, headers: [{ name: 'x-h', value: { exact: '1' } }] }]),
          named('mix-method', [{ path: { pathPrefix: '/mix' }, method: 'GET' }]),
          // Query.
          named('search-plain', [{ path: { exact: '/search' } }]),
          named('search-q', [{ path: { exact: '/search' }, query: [{ name: 'q', value: { regex: 'a.*' } }] }]),
          // Any one of several matches selects the route.
          named('multi', [{ path: { exact: '/one' } }, { path: { exact: '/two' }, method: 'PUT' }]),
          // A proxied route in the middle of it all.
          { name: 'to-backend', matches: [{ path: { pathPrefix: '/backend' } }], backends: [{ host: backend.host }] }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  async function routeFor (path: string, options: { method?: Dispatcher.HttpMethod, headers?: Record<string, string> } = {}): Promise<string> {
    const res = await send(agent, `${portico.url}${path}`, options)
    if (res.status === 404) return `404 ${res.text}`
    assert.equal(res.status, 200, `${path}: ${res.text}`)
    return res.text
  }

  test('exact path beats longest prefix beats shorter prefix beats regex', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/api/v1/users'), 'exact-users')
    assert.equal(await routeFor('/api/v1/users/7'), 'prefix-api-v1')
    assert.equal(await routeFor('/api/v1'), 'prefix-api-v1', 'a prefix\'s trailing slash is ignored')
    assert.equal(await routeFor('/api/v2/things'), 'prefix-api')
    assert.equal(await routeFor('/api'), 'prefix-api')
    assert.equal(await routeFor('/api/v1/users?page=2'), 'exact-users', 'the query is not part of the path')
  })

  test('prefixes match whole path segments only', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/apix'), '404 route not found')
    assert.equal(await routeFor('/api/v10'), 'prefix-api')
  })

  test('a regex must match the whole path', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/img/cat.png'), 'regex-img')
    assert.equal(await routeFor('/img/cat.gif'), '404 route not found')
    assert.equal(await routeFor('/img/Cat.png'), '404 route not found')
    assert.equal(await routeFor('/x/img/cat.png'), '404 route not found')
  })

  test('a route with a method match beats one without', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/orders/1', { method: 'POST' }), 'orders-post')
    assert.equal(await routeFor('/orders/1'), 'orders-any')
    assert.equal(await routeFor('/orders/1', { method: 'DELETE' }), 'orders-any')
  })

  test('more header matches beat fewer; names are case-insensitive, values exact or whole-regex', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/beta'), 'beta-plain')
    assert.equal(await routeFor('/beta', { headers: { 'x-beta': 'on' } }), 'beta-one-header')
    assert.equal(await routeFor('/beta', { headers: { 'x-beta': 'ON' } }), 'beta-plain')
    assert.equal(await routeFor('/beta', { headers: { 'x-beta': 'v2', 'x-tier': 'gold' } }), 'beta-two-headers')
    assert.equal(await routeFor('/beta', { headers: { 'x-beta': 'v2x', 'x-tier': 'gold' } }), 'beta-plain')
    assert.equal(await routeFor('/beta', { headers: { 'x-beta': 'v2' } }), 'beta-plain')
  })

  test('a method match beats header matches', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/mix', { headers: { 'x-h': '1' } }), 'mix-method')
    assert.equal(await routeFor('/mix', { method: 'POST', headers: { 'x-h': '1' } }), 'mix-header')
    assert.equal(await routeFor('/mix', { method: 'POST' }), '404 route not found')
  })

  test('query matches select among routes for the same path', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/search'), 'search-plain')
    assert.equal(await routeFor('/search?q=abc'), 'search-q')
    assert.equal(await routeFor('/search?q=xyz'), 'search-plain')
    assert.equal(await routeFor('/search?other=1&q=a'), 'search-q')
  })

  test('any one of a route\'s matches selects it', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('/one'), 'multi')
    assert.equal(await routeFor('/two', { method: 'PUT' }), 'multi')
    assert.equal(await routeFor('/two'), '404 route not found')
  })

  test('a proxied route among local ones reaches its backend with the original path', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/backend/deep/path?x=1`)
    assert.equal(res.status, 200)
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.name, 'backend')
    assert.equal(got.url, '/backend/deep/path?x=1')
  })
})
