/**
 * Host-based routing end to end: exact hostnames beat wildcards (longest first), which beat
 * routes without hostnames; a wildcard needs at least one more label; Host is compared
 * without port, case or trailing dot; gateways sharing a port are told apart by hostname.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { nodeRequest } from '@portico/testkit/client'

type Route = NonNullable<ConfigFile['routes']>[number]

function named (name: string, extra: Partial<Route>): Route {
  return { name, ...extra, policies: { directResponse: { status: 200, body: name } } }
}

describe('hostnames', () => {
  let portico: PorticoProcess

  before(async () => {
    portico = await startPortico({
      config: port => ({
        gateways: {
          default: gateway(port),
          internal: gateway(port, { hostname: 'internal.corp' })
        },
        routes: [
          named('any-host', {}),
          named('wildcard', { hostnames: ['*.example.com'] }),
          named('wildcard-eu', { hostnames: ['*.eu.example.com'] }),
          named('exact-a', { hostnames: ['a.example.com', 'alias.example.org'] }),
          named('api-only', { hostnames: ['api.example.com'], matches: [{ path: { exact: '/only' } }] }),
          named('internal', { gateways: ['internal'], matches: [{ path: { pathPrefix: '/admin' } }] })
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
  })

  async function routeFor (host: string, path = '/'): Promise<string> {
    const res = await nodeRequest({ port: portico.port, path, headers: { host } })
    return res.status === 200 ? res.text : `${res.status} ${res.text}`
  }

  test('an exact hostname beats a wildcard that also matches', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('a.example.com'), 'exact-a')
    assert.equal(await routeFor('alias.example.org'), 'exact-a')
  })

  test('Host is matched without its port, case or trailing dot', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor(`a.example.com:${portico.port}`), 'exact-a')
    assert.equal(await routeFor('A.Example.COM'), 'exact-a')
    assert.equal(await routeFor('a.example.com.'), 'exact-a')
  })

  test('a wildcard hostname matches one or more extra labels, the longest wildcard first', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('b.example.com'), 'wildcard')
    assert.equal(await routeFor('x.y.example.com'), 'wildcard')
    assert.equal(await routeFor('shop.eu.example.com'), 'wildcard-eu')
  })

  test('a wildcard does not match the bare domain; routes without hostnames catch the rest', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('example.com'), 'any-host')
    assert.equal(await routeFor('notexample.com'), 'any-host')
    assert.equal(await routeFor('other.org'), 'any-host')
    assert.equal(await routeFor('127.0.0.1'), 'any-host')
  })

  test('when the exact-host route\'s matches do not fit, the wildcard routes are tried next', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('api.example.com', '/only'), 'api-only')
    assert.equal(await routeFor('api.example.com', '/elsewhere'), 'wildcard')
  })

  test('a gateway with a hostname takes its host\'s requests on a shared port', { timeout: 10_000 }, async () => {
    assert.equal(await routeFor('internal.corp', '/admin/users'), 'internal')
    assert.equal(await routeFor('internal.corp', '/'), '404 route not found')
    assert.equal(await routeFor('other.corp', '/admin/users'), 'any-host')
  })
})
