/**
 * requestHeaderModifier and responseHeaderModifier at the gateway, route and backend levels:
 * set overwrites, add appends to an existing value, remove deletes; they also apply to the
 * proxy's own answers.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'

describe('header modifiers', () => {
  let portico: PorticoProcess
  let backend: Backend
  const agent = newAgent()

  before(async () => {
    backend = await startEchoBackend('echo', {
      'x-resp-overwrite': 'from-backend',
      'x-resp-add': 'from-backend',
      'x-resp-remove': 'from-backend',
      server: 'secret-backend/1.0'
    })
    portico = await startPortico({
      config: (port): ConfigFile => ({
        gateways: {
          default: gateway(port, {
            policies: {
              requestHeaderModifier: { set: { 'x-gateway': 'gw' } },
              responseHeaderModifier: { add: { 'x-resp-chain': 'gateway' } }
            }
          })
        },
        routes: [
          {
            name: 'local',
            matches: [{ path: { exact: '/local' } }],
            policies: {
              directResponse: { status: 418, body: 'short and stout', headers: { 'x-direct': 'yes' } },
              responseHeaderModifier: { set: { 'x-route-resp': 'on-local-answer' } }
            }
          },
          {
            name: 'modified',
            policies: {
              requestHeaderModifier: {
                set: { 'x-set': 'route', 'X-Overwrite': 'new' },
                add: { 'x-add': 'added' },
                remove: ['X-Remove', 'user-agent']
              },
              responseHeaderModifier: {
                set: { 'x-resp-overwrite': 'from-route' },
                add: { 'x-resp-add': 'from-route', 'x-resp-chain': 'route' },
                remove: ['x-resp-remove', 'server']
              }
            },
            backends: [{
              host: backend.host,
              policies: {
                requestHeaderModifier: { add: { 'x-backend-ref': 'ref' } },
                responseHeaderModifier: { set: { 'x-resp-chain': 'backend' } }
              }
            }]
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

  test('request headers are set, appended to and removed before reaching the backend', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/anything`, {
      headers: { 'x-overwrite': 'old', 'x-add': 'original', 'x-remove': 'should go', 'x-untouched': 'same', 'user-agent': 'e2e' }
    })
    assert.equal(res.status, 200)
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.headers['x-set'], 'route')
    assert.equal(got.headers['x-overwrite'], 'new')
    assert.equal(got.headers['x-add'], 'original,added')
    assert.equal(got.headers['x-remove'], undefined)
    assert.equal(got.headers['user-agent'], undefined)
    assert.equal(got.headers['x-untouched'], 'same')
    assert.equal(got.headers['x-gateway'], 'gw', 'gateway-level modifier')
    assert.equal(got.headers['x-backend-ref'], 'ref', 'backend-level modifier')
  })

  test('add on a header the client did not send just sets it', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/anything`)
    const got = JSON.parse(res.text) as EchoedRequest
    assert.equal(got.headers['x-add'], 'added')
  })

  test('response headers are set, appended to and removed before reaching the client', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/anything`)
    assert.equal(res.status, 200)
    assert.equal(res.headers['x-resp-overwrite'], 'from-route')
    assert.equal(res.headers['x-resp-add'], 'from-backend,from-route')
    assert.equal(res.headers['x-resp-remove'], undefined)
    assert.equal(res.headers.server, undefined)
    assert.equal(res.headers['x-backend'], 'echo', 'untouched backend header')
    // Response modifiers run innermost first: backend sets, route appends, gateway appends.
    assert.equal(res.headers['x-resp-chain'], 'backend,route,gateway')
  })

  test('response modifiers also apply to answers from the proxy itself', { timeout: 10_000 }, async () => {
    const res = await send(agent, `${portico.url}/local`)
    assert.equal(res.status, 418)
    assert.equal(res.text, 'short and stout')
    assert.equal(res.headers['x-direct'], 'yes')
    assert.equal(res.headers['x-route-resp'], 'on-local-answer')
    assert.equal(res.headers['x-resp-chain'], 'gateway')
  })
})
