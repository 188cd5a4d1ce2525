/**
 * HTTP/2 and gRPC to a TLS backend with a configured server name and several endpoints (the
 * Gateway API's BackendTLSPolicyGRPCRoute: a GRPCRoute whose Service has two ready pods under
 * a BackendTLSPolicy). Every endpoint must get the server name as SNI and be verified against
 * it, round robin, with and without passive health. Real node:http2 and grpc-js TLS servers
 * on loopback with certificates from a test CA; the client speaks HTTP/1.1 or gRPC (h2c) to
 * Portico.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import type { TLSSocket } from 'node:tls'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import * as grpc from '@grpc/grpc-js'
import { request } from 'undici'
import { makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { createTestCa } from '@portico/testkit/test-ca'

let dir: string
const h2Servers: http2.Http2SecureServer[] = []
const grpcServers: grpc.Server[] = []
let portico: PorticoProcess
let client: grpc.Client & Record<string, (...args: unknown[]) => unknown>
/** Which server answered, with the SNI it saw. */
const seen: Array<{ server: string, sni: string | false }> = []

const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b }
const SERVICE: grpc.ServiceDefinition = {
  Echo: { path: '/tls.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: raw.serialize, requestDeserialize: raw.deserialize, responseSerialize: raw.serialize, responseDeserialize: raw.deserialize }
}
const serviceAt = (name: string): grpc.ServiceDefinition => ({ Echo: { ...SERVICE.Echo!, path: `/${name}/Echo` } })

/** A CA, and a certificate for backend.test signed by it. */
function makeCerts (): void {
  createTestCa(dir, 'ca', { subject: '/CN=portico-test-ca' }).issue('server', { subject: '/CN=backend.test', sans: ['DNS:backend.test'] })
}

/** An h2-only TLS server (no HTTP/1.1 fallback) that says who it is. */
async function h2Server (name: string, key: Buffer, cert: Buffer): Promise<number> {
  const server = http2.createSecureServer({ key, cert }, (req, res) => {
    seen.push({ server: name, sni: (req.socket as TLSSocket).servername ?? false })
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`${name} over ${req.httpVersion}`)
  })
  h2Servers.push(server)
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

/**
 * A gRPC server over TLS whose Echo answers `<name>: <request>`, for every service name given.
 * Its certificate names only backend.test: a call to 127.0.0.1 verifies only if the server
 * name is what Portico checks.
 */
async function grpcServer (name: string, key: Buffer, cert: Buffer, services: string[]): Promise<number> {
  const server = new grpc.Server()
  for (const service of services) {
    server.addService(serviceAt(service), {
      Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        cb(null, Buffer.from(`${name}: ${call.request.toString()}`))
      }
    })
  }
  grpcServers.push(server)
  return await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: cert }]), (err, p) => err !== null ? reject(err) : resolve(p)))
}

before(async () => {
  dir = makeTempDir('portico-backend-tls-h2-')
  makeCerts()
  const key = readFileSync(join(dir, 'server.key'))
  const cert = readFileSync(join(dir, 'server.pem'))
  const h2a = await h2Server('h2-a', key, cert)
  const h2b = await h2Server('h2-b', key, cert)
  const services = ['tls.Echo', 'health.Echo', 'wrong.Echo']
  const ga = await grpcServer('grpc-a', key, cert, services)
  const gb = await grpcServer('grpc-b', key, cert, services)
  const trusted = { root: 'ca.pem', hostname: 'backend.test' }
  const health = { consecutiveFailures: 1, ejectionDuration: '1m' }
  // 127.0.0.1:1 refuses connections: with passive health it is ejected after one failure.
  const down = 'https://127.0.0.1:1'
  const h2 = (name: string, endpoints: string[], extra: { health?: typeof health } = {}, backendTLS: { root: string, hostname: string } = trusted) => ({
    name, matches: [{ path: { pathPrefix: `/${name}/` } }], backends: [{ endpoints, policies: { http: { version: 'HTTP2' as const }, backendTLS, ...extra } }]
  })
  // gRPC without `http.version`: Portico calls the backend over h2 (ALPN) on a pool of its own.
  const rpc = (name: string, service: string, endpoints: string[], extra: { health?: typeof health } = {}, backendTLS: { root: string, hostname: string } = trusted) => ({
    name, matches: [{ grpc: { service } }], backends: [{ endpoints, policies: { backendTLS, ...extra } }]
  })
  const both = (a: number, b: number) => [`https://127.0.0.1:${a}`, `https://127.0.0.1:${b}`]
  portico = await startPortico({
    dir,
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        h2('h2', both(h2a, h2b)),
        h2('h2-health', both(h2a, h2b), { health }),
        h2('h2-eject', [`https://127.0.0.1:${h2a}`, down], { health }),
        h2('h2-wrong-name', both(h2a, h2b), {}, { root: 'ca.pem', hostname: 'other.test' }),
        h2('h2-one', [`https://127.0.0.1:${h2a}`]),
        rpc('grpc', 'tls.Echo', both(ga, gb)),
        rpc('grpc-health', 'health.Echo', both(ga, gb), { health }),
        rpc('grpc-wrong-name', 'wrong.Echo', both(ga, gb), {}, { root: 'ca.pem', hostname: 'other.test' })
      ]
    })
  })
  const Client = grpc.makeGenericClientConstructor({ ...serviceAt('tls.Echo'), Health: serviceAt('health.Echo').Echo!, Wrong: serviceAt('wrong.Echo').Echo! }, 'Echo')
  client = new Client(`127.0.0.1:${portico.port}`, grpc.credentials.createInsecure()) as typeof client
})

after(async () => {
  client?.close()
  await portico?.stop()
  for (const s of h2Servers) await new Promise(resolve => s.close(resolve))
  for (const s of grpcServers) s.forceShutdown()
})

async function get (path: string): Promise<{ status: number, text: string }> {
  const res = await request(`${portico.url}${path}`)
  return { status: res.statusCode, text: await res.body.text() }
}

function unary (method: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    (client[method] as (req: Buffer, cb: (err: grpc.ServiceError | null, res: Buffer) => void) => void)(Buffer.from(body), (err, res) => err !== null ? reject(err) : resolve(res.toString()))
  })
}

for (const route of ['h2', 'h2-health']) {
  test(`HTTP/2 over TLS to two endpoints with a server name${route === 'h2-health' ? ', with passive health' : ''}: round robin, SNI and verification on each`, async () => {
    seen.length = 0
    const answers: string[] = []
    for (let i = 0; i < 6; i++) {
      const res = await get(`/${route}/${i}`)
      assert.equal(res.status, 200, res.text)
      answers.push(res.text)
    }
    assert.deepEqual(new Set(answers), new Set(['h2-a over 2.0', 'h2-b over 2.0']), 'both endpoints answer')
    assert.deepEqual(new Set(seen.map(s => s.sni)), new Set(['backend.test']), 'the configured server name is the SNI on every endpoint')
  })
}

test('one endpoint with a server name (no balancer) still works', async () => {
  seen.length = 0
  assert.deepEqual(await get('/h2-one/x'), { status: 200, text: 'h2-a over 2.0' })
  assert.deepEqual(seen, [{ server: 'h2-a', sni: 'backend.test' }])
})

test('HTTP/2 over TLS, two endpoints, a server name the certificate does not carry: 503 with the TLS error', async () => {
  const res = await get('/h2-wrong-name/x')
  assert.equal(res.status, 503)
  assert.match(res.text, /upstream TLS failed/)
})

test('passive health over h2 TLS: an endpoint that refuses connections is ejected, the other serves', async () => {
  const statuses: number[] = []
  for (let i = 0; i < 6; i++) statuses.push((await get(`/h2-eject/${i}`)).status)
  // At most the first call reaches the refusing endpoint (consecutiveFailures: 1).
  assert.ok(statuses.filter(s => s !== 200).length <= 1, `statuses ${statuses.join(',')}`)
  assert.deepEqual(statuses.slice(2), [200, 200, 200, 200])
})

test('gRPC over TLS to two endpoints with a server name, with and without passive health', async () => {
  for (const method of ['Echo', 'Health']) {
    const answers = new Set<string>()
    for (let i = 0; i < 6; i++) answers.add(await unary(method, 'hi'))
    assert.deepEqual(answers, new Set(['grpc-a: hi', 'grpc-b: hi']), `${method}: both endpoints answer`)
  }
})

test('gRPC over TLS, two endpoints, a server name the certificate does not carry: UNAVAILABLE', async () => {
  await assert.rejects(unary('Wrong', 'hi'), (err: grpc.ServiceError) => {
    assert.equal(err.code, grpc.status.UNAVAILABLE, err.details)
    return true
  })
})
