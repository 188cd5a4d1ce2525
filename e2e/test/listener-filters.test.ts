/**
 * Listener filters (gateway `filters.requests`, Gateway API GatewayListenerFilters) against
 * real authorization services on loopback: a gRPC server speaking Envoy's Authorization/Check
 * and a node:http service. Proves the filters run in the order given, that a header the first
 * adds is seen by the second and selects the route (matching happens after the last filter),
 * that a Host change is ignored, that a denial answers before routing, a trace event per
 * filter, and that a 17th filter is refused by the schema.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { freePort, startPortico, type PorticoProcess } from '../lib/portico.ts'
import { startBackend, startEchoBackend, type Backend, type EchoedRequest } from '../lib/backends.ts'
import { startAuthzServer, type AuthzServer } from '../lib/ext-authz.ts'
import { openTrace } from '../lib/trace.ts'
import { assertConfigError, validateConfig } from '../lib/validate.ts'
import type { ConfigFile } from '@portico/engine'

let gold: Backend
let plain: Backend
let grpcAuthz: AuthzServer
let httpAuthz: Backend
/** Which service answered, in call order ('grpc' / 'http'). */
const order: string[] = []
/** The x-tier header each HTTP check carried. */
const httpSawTier: Array<string | undefined> = []
let portico: PorticoProcess
let reversedPort: number
let admin: string

before(async () => {
  gold = await startEchoBackend('gold')
  plain = await startEchoBackend('plain')
  // The gRPC service: denies `x-deny: yes`; otherwise allows, adding x-tier: gold and trying to change Host.
  grpcAuthz = await startAuthzServer(request => {
    order.push('grpc')
    if (request.attributes.request?.http?.headers?.['x-deny'] === 'yes') {
      return { status: { code: 7 }, denied_response: { status: { code: 403 }, body: 'grpc filter says no' } }
    }
    return {
      status: { code: 0 },
      ok_response: {
        headers: [
          { header: { key: 'x-tier', value: 'gold' }, append: { value: false } },
          { header: { key: 'host', value: 'evil.example' }, append: { value: false } },
          { header: { key: ':authority', value: 'evil.example' }, append: { value: false } }
        ]
      }
    }
  })
  // The HTTP service: allows, answering with x-second naming the tier it was shown.
  httpAuthz = await startBackend((req, res) => {
    order.push('http')
    const tier = req.headers['x-tier'] as string | undefined
    httpSawTier.push(tier)
    res.writeHead(200, { 'x-second': `saw-${tier ?? 'none'}`, host: 'evil2.example' }).end()
  })
  reversedPort = await freePort()
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({ env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` }, config: port => config(port) })
})

after(async () => {
  await portico?.stop()
  await grpcAuthz?.close()
  await httpAuthz?.close()
  await gold?.close()
  await plain?.close()
})

function config (port: number): ConfigFile {
  const grpcFilter = { extAuthz: { host: grpcAuthz.host, timeout: '2s' } }
  const httpFilter = { extAuthz: { host: httpAuthz.host, timeout: '2s', protocol: { http: { allowedResponseHeaders: ['x-second', 'host'] } } } }
  return {
    gateways: {
      default: { port, address: '127.0.0.1', filters: { requests: [grpcFilter, httpFilter] } },
      reversed: { port: reversedPort, address: '127.0.0.1', filters: { requests: [httpFilter, grpcFilter] } }
    },
    routes: [
      // Only a header a filter adds selects these (a client never gets here with its own
      // x-tier: gold either way, the gRPC filter sets it).
      { name: 'second-saw-gold', gateways: ['default', 'reversed'], matches: [{ path: { pathPrefix: '/' }, headers: [{ name: 'x-second', value: { exact: 'saw-gold' } }] }], backends: [{ host: gold.host }] },
      { name: 'gold', gateways: ['default', 'reversed'], matches: [{ path: { pathPrefix: '/' }, headers: [{ name: 'x-tier', value: { exact: 'gold' } }] }], backends: [{ host: plain.host }] }
    ]
  }
}

async function send (path: string, headers: Record<string, string> = {}, port = portico.port): Promise<{ status: number, headers: http.IncomingHttpHeaders, text: string, echo: EchoedRequest | null }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers })
  const text = await res.text()
  const echo = res.status === 200 ? JSON.parse(text) as EchoedRequest : null
  return { status: res.status, headers: Object.fromEntries(res.headers), text, echo }
}

test('two filters run in order; the header the first adds is seen by the second and both select the route; Host is not changed', async () => {
  order.length = 0
  httpSawTier.length = 0
  const r = await send('/a', { 'x-tier': 'client' })
  assert.equal(r.status, 200, r.text)
  assert.deepEqual(order, ['grpc', 'http'])
  assert.deepEqual(httpSawTier, ['gold'], 'the HTTP filter sees the x-tier the gRPC filter set')
  // Route matching read x-second, which only the second filter's answer carries.
  assert.equal(r.echo!.name, 'gold')
  assert.equal(r.echo!.headers['x-tier'], 'gold')
  assert.equal(r.echo!.headers['x-second'], 'saw-gold')
  // Neither filter's Host change took effect: the backend gets the client's Host.
  assert.equal(r.echo!.headers.host, `127.0.0.1:${portico.port}`)
})

test('reversed order: the HTTP filter runs first and does not see x-tier; the route is chosen after both', async () => {
  order.length = 0
  httpSawTier.length = 0
  const r = await send('/b', {}, reversedPort)
  assert.equal(r.status, 200, r.text)
  assert.deepEqual(order, ['http', 'grpc'])
  assert.deepEqual(httpSawTier, [undefined])
  // x-second: saw-none does not match the first route; x-tier: gold (set after) matches the second.
  assert.equal(r.echo!.name, 'plain')
  assert.equal(r.echo!.headers['x-second'], 'saw-none')
  assert.equal(r.echo!.headers.host, `127.0.0.1:${reversedPort}`)
})

test('a denial answers before routing: the later filter and no backend are called', async () => {
  order.length = 0
  const r = await send('/c', { 'x-deny': 'yes' })
  assert.equal(r.status, 403)
  assert.equal(r.text, 'grpc filter says no')
  assert.deepEqual(order, ['grpc'])
})

test('a trace event per filter call, naming its place in the list', async () => {
  const trace = await openTrace(admin, 'path=/traced')
  await trace.ready
  assert.equal((await send('/traced')).status, 200)
  const events = await trace.done
  const calls = events.filter(e => e.message.type === 'policy' && e.message.kind === 'extAuthz').map(e => (e.message.result as { type: string, details: string }))
  assert.equal(calls.length, 2)
  assert.equal(calls[0]!.type, 'apply')
  assert.match(calls[0]!.details, /^listener filter 1 of 2: allowed by 127\.0\.0\.1:\d+ .*set x-tier/)
  assert.match(calls[1]!.details, /^listener filter 2 of 2: allowed by 127\.0\.0\.1:\d+ .*set x-second/)
  const selection = events.findIndex(e => e.message.type === 'routeSelection')
  const lastFilter = events.findLastIndex(e => e.message.type === 'policy' && e.message.kind === 'extAuthz')
  assert.ok(lastFilter < selection, 'route selection after the last filter')
})

test('17 filters are refused by the schema (Gateway API MaxItems 16); 16 are accepted', async () => {
  const filter = { extAuthz: { host: '127.0.0.1:1' } }
  const many = (n: number): ConfigFile => ({ gateways: { default: { port: 1, filters: { requests: Array.from({ length: n }, () => filter) } } }, routes: [] })
  await assertConfigError(many(17), 'gateways.default.filters.requests', /16/)
  assert.equal((await validateConfig(many(16))).code, 0)
  await assertConfigError({ gateways: { default: { port: 1, protocol: 'TCP', filters: { requests: [filter] } } }, tcpRoutes: [] } as ConfigFile, 'gateways.default.filters', /not used with protocol TCP/)
})
