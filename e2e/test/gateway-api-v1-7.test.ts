/**
 * The Gateway API v1.7.0 features of HTTP, gRPC and TLS routes against the real portico
 * process, standalone, with the cases of the v1.7.0 conformance tests (tests/*.go there):
 *
 * - GatewayRouteHostnameIntersectionPrecedence: routes narrowed by the listener's hostname
 *   to the same name rank by their own hostnames first — an older `*.example.com` route with a
 *   longer prefix loses to a newer `abc.example.com` one, and gets what that one does not
 *   match; `*.com` narrowed to `*.example.com` loses to `*.example.com`; TLS SNI likewise;
 * - HTTPRouteRetryCodes: a backend that fails with a code `succeedAfter` times per request id
 *   (echo-basic's retry simulation), retried only for the listed codes, `attempts` times after
 *   the first try, none at attempts 0, and never past the request timeout;
 * - HTTPRouteBackendURLRewrite: URLRewrite on a backend reference (ReplaceFullPath,
 *   ReplacePrefixMatch) — the path the backend gets;
 * - GRPCRouteRequestHeaderModifier: set, add and remove of request metadata on gRPC methods,
 *   names case-insensitive — what the backend receives (the suite's own test only checks that
 *   the call is routed).
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import net, { type AddressInfo } from 'node:net'
import tls from 'node:tls'
import { randomUUID } from 'node:crypto'
import * as grpc from '@grpc/grpc-js'
import type { ConfigFile } from '@portico/engine'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'

const agent = newAgent()

/**
 * echo-basic's retry simulation (conformance/echo-basic): per `uuid`, the first `succeedAfter`
 * requests answer `responseCode` (after `delayRetry`), later ones 200 (after `delay`).
 * `tries` counts them.
 */
function retrySimulation (): { handler: Parameters<typeof startBackend>[0], tries: Map<string, number> } {
  const tries = new Map<string, number>()
  return {
    tries,
    handler: (req, res) => {
      const q = new URL(req.url ?? '/', 'http://x').searchParams
      const id = q.get('uuid') ?? ''
      const n = (tries.get(id) ?? 0) + 1
      tries.set(id, n)
      const fail = n <= Number(q.get('succeedAfter') ?? '0')
      const delay = Number(/^(\d+)ms$/.exec(q.get(fail ? 'delayRetry' : 'delay') ?? '')?.[1] ?? '0')
      setTimeout(() => {
        res.writeHead(fail ? Number(q.get('responseCode')) : 200, { 'content-type': 'text/plain' })
        res.end(fail ? 'failed' : 'ok')
      }, delay)
    }
  }
}

describe('Gateway API v1.7.0 HTTP route features', () => {
  let portico: PorticoProcess
  let v1: Backend
  let v2: Backend
  let flaky: Backend
  let sim: ReturnType<typeof retrySimulation>
  let exactPort: number
  let wildPort: number

  before(async () => {
    v1 = await startEchoBackend('v1')
    v2 = await startEchoBackend('v2')
    sim = retrySimulation()
    flaky = await startBackend(sim.handler)
    exactPort = await freePort()
    wildPort = await freePort()
    const retryRoute = (path: string, retry: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      ({ name: path.slice(1).replaceAll('/', '-'), gateways: 'default', matches: [{ path: { pathPrefix: path } }], policies: { retry, ...extra }, backends: [{ host: flaky.host }] })
    portico = await startPortico({
      config: (port): ConfigFile => ({
        gateways: {
          default: { port, protocol: 'HTTP', address: '127.0.0.1' },
          exact: { port: exactPort, protocol: 'HTTP', address: '127.0.0.1', hostname: 'abc.example.com' },
          wild: { port: wildPort, protocol: 'HTTP', address: '127.0.0.1', hostname: '*.example.com' }
        },
        routes: [
          // Older (earlier in the file), longer prefix, a wildcard the listener narrows.
          { name: 'wc-older', gateways: 'exact', hostnames: ['*.example.com'], matches: [{ path: { pathPrefix: '/path/prefix' }, headers: [{ name: 'header-b', value: { exact: 'B' } }] }], backends: [{ host: v1.host }] },
          { name: 'exact-newer', gateways: 'exact', hostnames: ['abc.example.com'], matches: [{ path: { pathPrefix: '/path' }, headers: [{ name: 'header-a', value: { exact: 'A' } }] }], backends: [{ host: v2.host }] },
          { name: 'com-older', gateways: 'wild', hostnames: ['*.com'], matches: [{ path: { pathPrefix: '/path/prefix' }, headers: [{ name: 'header-b', value: { exact: 'B' } }] }], backends: [{ host: v1.host }] },
          { name: 'example-newer', gateways: 'wild', hostnames: ['*.example.com'], matches: [{ path: { pathPrefix: '/path' }, headers: [{ name: 'header-a', value: { exact: 'A' } }] }], backends: [{ host: v2.host }] },
          retryRoute('/retry/code-500-attempts-3', { codes: [500], attempts: 3, backoff: '10ms' }),
          retryRoute('/retry/code-all-attempts-2', { codes: [500, 502, 503, 504], attempts: 2, backoff: '10ms' }),
          retryRoute('/retry/code-all-attempts-0', { codes: [500, 502, 503, 504], attempts: 0, backoff: '10ms' }),
          retryRoute('/retry/request-timeout-500ms', { codes: [500], attempts: 5, backoff: '10ms' }, { timeout: { requestTimeout: '500ms' } }),
          retryRoute('/retry/backend-timeout-500ms', { codes: [500], attempts: 3, backoff: '10ms' }, { timeout: { requestTimeout: '15s', backendRequestTimeout: '500ms' } }),
          { name: 'full', gateways: 'default', matches: [{ path: { pathPrefix: '/full' } }], backends: [{ host: v1.host, policies: { urlRewrite: { path: { full: '/rewritten-full' } } } }] },
          { name: 'prefix', gateways: 'default', matches: [{ path: { pathPrefix: '/prefix' } }], backends: [{ host: v1.host, policies: { urlRewrite: { path: { prefix: '/rewritten-prefix' } } } }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await v1?.close()
    await v2?.close()
    await flaky?.close()
  })

  async function backendName (port: number, path: string, headers: Record<string, string>): Promise<string> {
    const r = await send(agent, `http://127.0.0.1:${port}${path}`, { headers: { host: 'abc.example.com', ...headers } })
    assert.equal(r.status, 200, r.text)
    return (JSON.parse(r.text) as EchoedRequest).name
  }

  test('an exact route hostname outranks a wildcard the listener narrowed to it, longer prefix and age notwithstanding; unmatched traffic falls through', async () => {
    assert.equal(await backendName(exactPort, '/path/prefix/longer', { 'header-a': 'A', 'header-b': 'B' }), 'v2')
    assert.equal(await backendName(exactPort, '/path/prefix/longer', { 'header-b': 'B' }), 'v1')
  })

  test('a more specific wildcard route hostname outranks a less specific one narrowed to the same name', async () => {
    assert.equal(await backendName(wildPort, '/path/prefix/longer', { 'header-a': 'A', 'header-b': 'B' }), 'v2')
    assert.equal(await backendName(wildPort, '/path/prefix/longer', { 'header-b': 'B' }), 'v1')
  })

  async function retried (path: string, responseCode: number, succeedAfter: number, extra: Record<string, string> = {}): Promise<{ status: number, tries: number }> {
    const id = randomUUID()
    const q = new URLSearchParams({ responseCode: String(responseCode), succeedAfter: String(succeedAfter), uuid: id, ...extra })
    const r = await send(agent, `http://127.0.0.1:${portico.port}${path}?${q.toString()}`)
    return { status: r.status, tries: sim.tries.get(id) ?? 0 }
  }

  test('retry codes: only the listed codes are retried, attempts times after the first try', async () => {
    assert.deepEqual(await retried('/retry/code-500-attempts-3', 500, 2), { status: 200, tries: 3 })
    assert.deepEqual(await retried('/retry/code-500-attempts-3', 500, 4), { status: 500, tries: 4 })
    assert.deepEqual(await retried('/retry/code-500-attempts-3', 503, 2), { status: 503, tries: 1 }, '503 is not listed')
    for (const code of [500, 502, 503, 504]) {
      assert.deepEqual(await retried('/retry/code-all-attempts-2', code, 1), { status: 200, tries: 2 }, `${code} once`)
      assert.deepEqual(await retried('/retry/code-all-attempts-2', code, 3), { status: code, tries: 3 }, `${code} past attempts`)
      assert.deepEqual(await retried('/retry/code-all-attempts-0', code, 1), { status: code, tries: 1 }, `${code} with attempts 0`)
    }
  })

  test('retry codes within timeouts: retries while the request timeout permits, 504 once it is spent; each try within the backend timeout', async () => {
    assert.deepEqual(await retried('/retry/request-timeout-500ms', 500, 1), { status: 200, tries: 2 })
    const spent = await retried('/retry/request-timeout-500ms', 500, 2, { delayRetry: '300ms' })
    assert.equal(spent.status, 504)
    // HTTPRouteRetryWithBackendTimeout: each try within the backend request timeout.
    assert.deepEqual(await retried('/retry/backend-timeout-500ms', 500, 2, { delayRetry: '100ms', delay: '100ms' }), { status: 200, tries: 3 })
    assert.equal((await retried('/retry/request-timeout-500ms', 500, 2, { delayRetry: '1000ms', delay: '1000ms' })).status, 504)
  })

  test('URLRewrite on a backend reference: ReplaceFullPath and ReplacePrefixMatch', async () => {
    const url = async (path: string) => (JSON.parse((await send(agent, `http://127.0.0.1:${portico.port}${path}`)).text) as EchoedRequest).url
    assert.equal(await url('/full/original'), '/rewritten-full')
    assert.equal(await url('/prefix/original'), '/rewritten-prefix/original')
  })
})

describe('Gateway API v1.7.0 TLS route hostname precedence', () => {
  let portico: PorticoProcess
  let wildPort: number
  const servers: net.Server[] = []
  const got: string[] = []

  before(async () => {
    // Backends that only note which of them the passthrough connection reached.
    const ports: Record<string, number> = {}
    for (const name of ['v1', 'v2']) {
      const s = net.createServer(c => { got.push(name); c.destroy() })
      await new Promise<void>(resolve => s.listen(0, '127.0.0.1', resolve))
      servers.push(s)
      ports[name] = (s.address() as AddressInfo).port
    }
    wildPort = await freePort()
    portico = await startPortico({
      config: (port): ConfigFile => ({
        gateways: {
          exact: { port, protocol: 'TLS', address: '127.0.0.1', hostname: 'abc.example.com' },
          wild: { port: wildPort, protocol: 'TLS', address: '127.0.0.1', hostname: '*.example.com' }
        },
        tlsRoutes: [
          { name: 'wc-older', gateways: 'exact', hostnames: ['*.example.com'], backends: [{ host: `127.0.0.1:${ports.v1!}` }] },
          { name: 'exact-newer', gateways: 'exact', hostnames: ['abc.example.com'], backends: [{ host: `127.0.0.1:${ports.v2!}` }] },
          { name: 'com-older', gateways: 'wild', hostnames: ['*.com'], backends: [{ host: `127.0.0.1:${ports.v1!}` }] },
          { name: 'example-newer', gateways: 'wild', hostnames: ['*.example.com'], backends: [{ host: `127.0.0.1:${ports.v2!}` }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    for (const s of servers) s.close()
  })

  /** A ClientHello for `abc.example.com`; the handshake fails (the backend closes): which backend saw it? */
  async function reached (port: number): Promise<string | undefined> {
    const before = got.length
    await new Promise<void>(resolve => {
      const s = tls.connect({ host: '127.0.0.1', port, servername: 'abc.example.com', rejectUnauthorized: false })
      s.on('error', () => resolve())
      s.on('close', () => resolve())
      s.setTimeout(5000, () => { s.destroy(); resolve() })
    })
    for (let i = 0; i < 50 && got.length === before; i++) await new Promise(resolve => setTimeout(resolve, 20))
    return got[before]
  }

  test('the SNI name picks the route for that name over an older wildcard narrowed to it, and *.example.com over *.com', async () => {
    assert.equal(await reached(portico.port), 'v2')
    assert.equal(await reached(wildPort), 'v2')
  })
})

describe('Gateway API v1.7.0 GRPCRoute RequestHeaderModifier', () => {
  const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b }
  const method = (path: string) => ({ path, requestStream: false, responseStream: false, requestSerialize: raw.serialize, requestDeserialize: raw.deserialize, responseSerialize: raw.serialize, responseDeserialize: raw.deserialize })
  const SERVICE: grpc.ServiceDefinition = { Echo: method('/test.Echo/Echo'), EchoTwo: method('/test.Echo/EchoTwo') }
  let server: grpc.Server
  let portico: PorticoProcess
  let client: grpc.Client & Record<string, (...args: unknown[]) => unknown>

  before(async () => {
    // The backend answers with the request's metadata as its response headers (as echo-basic's gRPC echo reports them).
    const echo = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const md = new grpc.Metadata()
      for (const k of Object.keys(call.metadata.getMap())) for (const value of call.metadata.get(k)) md.add(k, String(value))
      call.sendMetadata(md)
      cb(null, call.request)
    }
    server = new grpc.Server()
    server.addService(SERVICE, { Echo: echo, EchoTwo: echo })
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => err !== null ? reject(err) : resolve(p)))
    const backends = [{ host: `127.0.0.1:${port}` }]
    portico = await startPortico({
      config: (listen): ConfigFile => ({
        gateways: { default: { port: listen, address: '127.0.0.1' } },
        routes: [
          {
            name: 'echo',
            matches: [{ grpc: { service: 'test.Echo', method: 'Echo' } }],
            backends,
            policies: { requestHeaderModifier: { set: { 'X-Header-Set': 'set-overwrites-values' }, add: { 'X-Header-Add': 'add-appends-values' }, remove: ['X-Header-Remove'] } }
          },
          {
            name: 'echo-two',
            matches: [{ grpc: { service: 'test.Echo', method: 'EchoTwo' } }],
            backends,
            policies: { requestHeaderModifier: { set: { 'X-Header-Set-1': 'header-set-1', 'X-Header-Set-2': 'header-set-2' }, add: { 'X-Header-Add-1': 'header-add-1', 'X-Header-Add-2': 'header-add-2' }, remove: ['X-Header-Remove-1', 'X-Header-Remove-2'] } }
          }
        ]
      })
    })
    const Client = grpc.makeGenericClientConstructor(SERVICE, 'Echo')
    client = new Client(`127.0.0.1:${portico.port}`, grpc.credentials.createInsecure()) as typeof client
  })

  after(async () => {
    client?.close()
    await portico?.stop()
    await new Promise<void>(resolve => server ? server.tryShutdown(() => resolve()) : resolve())
  })

  /** The backend's view of the request metadata: name → values joined by `,`. */
  function call (name: 'Echo' | 'EchoTwo', sent: Record<string, string>): Promise<Record<string, string>> {
    const md = new grpc.Metadata()
    for (const [k, v] of Object.entries(sent)) md.set(k, v)
    return new Promise((resolve, reject) => {
      let headers: Record<string, string> = {}
      const c = (client[name] as (req: Buffer, md: grpc.Metadata, cb: (err: grpc.ServiceError | null) => void) => grpc.ClientUnaryCall)(Buffer.from('x'), md, err => {
        if (err !== null) reject(err)
        else resolve(headers)
      })
      c.on('metadata', (m: grpc.Metadata) => {
        // The test's own names only (not content-type, date, x-forwarded-*).
        const ours = Object.keys(m.getMap()).filter(k => k.startsWith('x-header-') || k === 'some-other-header')
        headers = Object.fromEntries(ours.map(k => [k, m.get(k).map(String).join(',').replaceAll(', ', ',')]))
      })
    })
  }

  test('set overwrites, add appends, remove removes; other metadata passes', async () => {
    assert.deepEqual(await call('Echo', { 'some-other-header': 'kept' }), { 'some-other-header': 'kept', 'x-header-set': 'set-overwrites-values', 'x-header-add': 'add-appends-values' })
    assert.deepEqual(await call('Echo', { 'x-header-set': 'this-value-should-be-overwritten', 'x-header-add': 'this-value-should-be-appended', 'x-header-remove': 'gone' }),
      { 'x-header-set': 'set-overwrites-values', 'x-header-add': 'this-value-should-be-appended,add-appends-values' })
  })

  test('several operations at once, filter names matched case-insensitively', async () => {
    assert.deepEqual(await call('EchoTwo', { 'x-header-set-1': 'original-set-1', 'x-header-add-1': 'existing-add-1', 'x-header-remove-1': 'gone', 'x-header-remove-2': 'gone', 'some-other-header': 'another-header-val' }), {
      'some-other-header': 'another-header-val',
      'x-header-set-1': 'header-set-1',
      'x-header-set-2': 'header-set-2',
      'x-header-add-1': 'existing-add-1,header-add-1',
      'x-header-add-2': 'header-add-2'
    })
  })
})
