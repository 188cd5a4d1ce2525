/**
 * extAuthz against real counterparts: a gRPC server speaking Envoy's Authorization/Check
 * (@grpc/grpc-js with the repository's protos) and a node:http authorization service, in
 * front of a real backend. Checks what the service receives (and, decoding the raw bytes by
 * Envoy's field numbers alone, that it is Envoy's wire format), allow with header changes,
 * denials, a service that is down or too slow, bodies, the trace and config errors.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, randomBody, sha256, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { setForTest } from '@portico/testkit/for-test'
import { openTrace } from '@portico/testkit/trace'
import { encodeWire, OK, startAuthzServer, wireFields, wireMap, wireNumber, wirePath, wireString, type AuthzServer, type CheckRequest } from '../lib/ext-authz.ts'
import type { ConfigFile } from '@portico/engine'

let backend: Backend
let authz: AuthzServer
let httpAuthz: Backend
const httpAuthzSeen: Array<{ method: string, url: string, headers: http.IncomingHttpHeaders, body: string }> = []
let deadPort: number
let portico: PorticoProcess
let gw2Port: number
let admin: string

/** Allow; set x-user (replacing what the client sent), append x-tag, remove x-remove-me, add a response header. */
function allowWithHeaders (): Record<string, unknown> {
  return {
    status: { code: 0 },
    ok_response: {
      headers: [
        { header: { key: 'x-user', value: 'alice' }, append: { value: false } },
        { header: { key: 'x-tag', value: 'from-authz' }, append_action: 0 }
      ],
      headers_to_remove: ['x-remove-me'],
      response_headers_to_add: [{ header: { key: 'x-authz', value: 'checked' }, append_action: 2 }]
    }
  }
}

before(async () => {
  backend = await startEchoBackend('app')
  authz = await startAuthzServer(() => allowWithHeaders())
  httpAuthz = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c as Buffer))
    req.on('end', () => {
      httpAuthzSeen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') })
      if (req.headers['x-allow'] === 'yes') {
        res.writeHead(200, { 'x-auth-user': 'bob', 'x-not-copied': 'no', 'x-envoy-auth-headers-to-remove': 'x-allow' }).end()
      } else {
        res.writeHead(401, { 'www-authenticate': 'Custom realm="http-authz"', 'content-type': 'text/plain', 'x-reason': 'no-allow-header' }).end('http says no')
      }
    })
  })
  deadPort = await freePort()
  gw2Port = await freePort()
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => config(port)
  })
})

function config (port: number, tenant = 'acme'): ConfigFile {
  const grpc = { host: authz.host, contextExtensions: { tenant }, timeout: '2s' }
  return {
    gateways: {
      default: { port, address: '127.0.0.1' },
      gw2: { port: gw2Port, address: '127.0.0.1', policies: { extAuthz: { host: `http://${authz.host}`, protocol: { grpc: {} } } } }
    },
    routes: [
      { name: 'grpc', matches: [{ path: { pathPrefix: '/grpc' } }], policies: { extAuthz: grpc }, backends: [{ host: backend.host }] },
      { name: 'body', matches: [{ path: { pathPrefix: '/body' } }], backends: [{ host: backend.host, policies: { extAuthz: { ...grpc, includeRequestBody: { maxBytes: 4096 } } } }] },
      { name: 'bytes', matches: [{ path: { pathPrefix: '/bytes' } }], policies: { extAuthz: { ...grpc, includeRequestBody: { maxBytes: 1 << 20, packAsBytes: true } } }, backends: [{ host: backend.host }] },
      { name: 'headers', matches: [{ path: { pathPrefix: '/some-headers' } }], policies: { extAuthz: { ...grpc, includeRequestHeaders: ['X-Client'] } }, backends: [{ host: backend.host }] },
      {
        name: 'http',
        matches: [{ path: { pathPrefix: '/http' } }],
        policies: { extAuthz: { host: httpAuthz.host, protocol: { http: { path: '/check', allowedResponseHeaders: ['X-Auth-User'] } }, includeRequestBody: { maxBytes: 1024 } } },
        backends: [{ host: backend.host }]
      },
      { name: 'down-deny', matches: [{ path: { pathPrefix: '/down-deny' } }], policies: { extAuthz: { host: `127.0.0.1:${deadPort}` } }, backends: [{ host: backend.host }] },
      { name: 'down-allow', matches: [{ path: { pathPrefix: '/down-allow' } }], policies: { extAuthz: { host: `127.0.0.1:${deadPort}`, failureMode: 'allow' } }, backends: [{ host: backend.host }] },
      { name: 'slow', matches: [{ path: { pathPrefix: '/slow' } }], policies: { extAuthz: { host: authz.host, timeout: '300ms' } }, backends: [{ host: backend.host }] },
      { name: 'gw2', gateways: 'gw2', backends: [{ host: backend.host }] }
    ]
  }
}

after(async () => {
  await portico?.stop()
  await authz?.close()
  await httpAuthz?.close()
  await backend?.close()
})

interface Reply {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
  echo: EchoedRequest | null
  /** The client's own port, as the gateway saw it. */
  localPort: number
}

/** One request on a fresh connection (so the client's port is known). */
async function send (path: string, options: { method?: string, headers?: Record<string, string>, body?: Buffer | string, port?: number } = {}): Promise<Reply> {
  return await new Promise((resolve, reject) => {
    let localPort = 0
    const req = http.request({ host: '127.0.0.1', port: options.port ?? portico.port, path, method: options.method ?? 'GET', headers: options.headers, agent: false }, res => {
      const chunks: Buffer[] = []
      res.on('data', c => chunks.push(c as Buffer))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, echo: res.statusCode === 200 && res.headers['x-backend'] !== undefined ? JSON.parse(text) as EchoedRequest : null, localPort })
      })
    })
    req.on('socket', s => s.on('connect', () => { localPort = s.localPort ?? 0 }))
    req.on('error', reject)
    req.end(options.body)
  })
}

function lastCall (): AuthzServer['calls'][number] {
  const call = authz.calls.at(-1)
  assert.ok(call !== undefined, 'the authorization service was called')
  return call
}

test('gRPC: the service receives Envoy\'s CheckRequest; allow applies its header changes upstream and on the response', async t => {
  setForTest(t, authz, 'handler', () => allowWithHeaders())
  const r = await send('/grpc/items?x=1&y=2', {
    method: 'POST',
    headers: { 'X-Client': 'abc', 'x-user': 'mallory', 'x-tag': 'client', 'x-remove-me': 'secret', 'x-request-id': 'req-123', 'content-type': 'text/plain' },
    body: 'hello'
  })
  assert.equal(r.status, 200, r.text)
  // Upstream: x-user replaced, x-tag appended (Envoy's APPEND_IF_EXISTS_OR_ADD), x-remove-me gone; body intact.
  assert.equal(r.echo!.headers['x-user'], 'alice')
  assert.equal(r.echo!.headers['x-tag'], 'client,from-authz')
  assert.equal(r.echo!.headers['x-remove-me'], undefined)
  assert.equal(r.echo!.bodySha256, sha256('hello'))
  assert.equal(r.headers['x-authz'], 'checked', 'response_headers_to_add reaches the client')

  const { request } = lastCall()
  const a = request.attributes
  const h = a.request!.http!
  assert.equal(h.id, 'req-123')
  assert.equal(h.method, 'POST')
  assert.equal(h.path, '/grpc/items?x=1&y=2')
  assert.equal(h.host, `127.0.0.1:${portico.port}`)
  assert.equal(h.scheme, 'http')
  assert.equal(h.protocol, 'HTTP/1.1')
  assert.equal(h.size, 5)
  assert.equal(h.body, undefined, 'no body unless includeRequestBody')
  assert.equal(h.headers!['x-client'], 'abc', 'header names are lower-case')
  assert.equal(h.headers![':method'], 'POST')
  assert.equal(h.headers![':path'], '/grpc/items?x=1&y=2')
  assert.equal(h.headers![':authority'], `127.0.0.1:${portico.port}`)
  assert.equal(h.headers!['x-forwarded-for'], '127.0.0.1')
  assert.equal(a.source!.address!.socket_address!.address, '127.0.0.1')
  assert.equal(a.source!.address!.socket_address!.port_value, r.localPort)
  assert.equal(a.destination!.address!.socket_address!.port_value, portico.port)
  assert.deepEqual(a.context_extensions, { tenant: 'acme' })
  assert.ok(Math.abs((a.request!.time!.seconds ?? 0) - Date.now() / 1000) < 30, 'request time is now')
})

test('gRPC wire format: the raw CheckRequest decodes by Envoy\'s field numbers alone, and a hand-encoded CheckResponse is understood', async t => {
  // CheckResponse{ status(1){code(1)=0}, ok_response(3){ headers(2){ header(1){key(1),value(2)}, append(2){} }, headers_to_remove(5) } }
  // append is a BoolValue false, encoded as protobuf encoders do: an empty message.
  const headerValueOption = encodeWire([[1, encodeWire([[1, 'x-wire'], [2, 'hand-encoded']])], [2, Buffer.alloc(0)]])
  setForTest(t, authz, 'handler', () => encodeWire([[1, encodeWire([[1, 0]])], [3, encodeWire([[2, headerValueOption], [5, 'x-drop']])]]))
  const r = await send('/grpc/wire?q=1', { headers: { 'x-client': 'raw', 'x-drop': 'bye', 'x-wire': 'from-client' } })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.echo!.headers['x-wire'], 'hand-encoded', 'append: false replaces')
  assert.equal(r.echo!.headers['x-drop'], undefined)

  const { raw } = lastCall()
  // CheckRequest.attributes = 1; AttributeContext.source = 1, destination = 2, request = 4,
  // context_extensions = 10; Peer.address = 1; Address.socket_address = 1;
  // SocketAddress.address = 2, port_value = 3; Request.time = 1, http = 2;
  // HttpRequest: id 1, method 2, headers 3, path 4, host 5, scheme 6, size 9, protocol 10.
  const attributes = wirePath(raw, 1)
  const source = wirePath(attributes, 1, 1, 1)
  assert.equal(wireString(source, 2), '127.0.0.1')
  assert.equal(wireNumber(source, 3), r.localPort)
  assert.equal(wireNumber(wirePath(attributes, 2, 1, 1), 3), portico.port)
  const httpRequest = wirePath(attributes, 4, 2)
  assert.equal(wireString(httpRequest, 2), 'GET')
  assert.equal(wireString(httpRequest, 4), '/grpc/wire?q=1')
  assert.equal(wireString(httpRequest, 5), `127.0.0.1:${portico.port}`)
  assert.equal(wireString(httpRequest, 6), 'http')
  assert.equal(wireString(httpRequest, 10), 'HTTP/1.1')
  assert.equal(wireNumber(httpRequest, 9), 0)
  assert.equal(wireMap(httpRequest, 3)['x-client'], 'raw')
  assert.deepEqual(wireMap(attributes, 10), { tenant: 'acme' })
  assert.ok((wireNumber(wirePath(attributes, 4, 1), 1) ?? 0) > 1_700_000_000, 'Timestamp.seconds')
  assert.deepEqual([...wireFields(attributes).keys()].sort((x, y) => x - y), [1, 2, 4, 10])
})

test('gRPC: a denial answers with the service\'s status, headers and body', async t => {
  setForTest(t, authz, 'handler', () => ({
    status: { code: 7 },
    denied_response: {
      status: { code: 401 },
      headers: [{ header: { key: 'www-authenticate', value: 'Bearer realm="authz"' } }, { header: { key: 'x-denied-by', value: 'grpc' } }],
      body: 'not you'
    }
  }))
  const before = backend.requests.length
  const r = await send('/grpc/secret')
  assert.equal(r.status, 401)
  assert.equal(r.text, 'not you')
  assert.equal(r.headers['www-authenticate'], 'Bearer realm="authz"')
  assert.equal(r.headers['x-denied-by'], 'grpc')
  assert.equal(backend.requests.length, before, 'the backend never sees a denied request')

  setForTest(t, authz, 'handler', () => ({ status: { code: 7, message: 'permission denied' } }))
  const plain = await send('/grpc/secret')
  assert.equal(plain.status, 403, 'a denial without denied_response is 403')
})

test('gRPC: includeRequestBody sends the body (string or bytes) and the backend still gets it intact; too large is 413', async t => {
  setForTest(t, authz, 'handler', () => OK)
  const r = await send('/body/upload', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"amount":42}' })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.echo!.bodySha256, sha256('{"amount":42}'))
  assert.equal(lastCall().request.attributes.request!.http!.body, '{"amount":42}')
  assert.equal(lastCall().request.attributes.request!.http!.size, 13)

  const binary = randomBody(100_000)
  const b = await send('/bytes/blob', { method: 'POST', body: binary })
  assert.equal(b.status, 200, b.text)
  assert.equal(b.echo!.bodySha256, sha256(binary))
  assert.ok(Buffer.from(lastCall().request.attributes.request!.http!.raw_body!).equals(binary), 'packAsBytes: raw_body carries the exact bytes')

  // Chunked (no content-length): still buffered and replayed.
  const chunked = await new Promise<{ status: number, text: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: portico.port, path: '/body/chunked', method: 'POST', agent: false }, res => {
      let text = ''
      res.setEncoding('utf8').on('data', c => { text += c }).on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    req.write('part one, ')
    setTimeout(() => req.end('part two'), 50)
  })
  assert.equal(chunked.status, 200, chunked.text)
  assert.equal((JSON.parse(chunked.text) as EchoedRequest).bodySha256, sha256('part one, part two'))
  assert.equal(lastCall().request.attributes.request!.http!.body, 'part one, part two')

  const calls = authz.calls.length
  const big = await send('/body/upload', { method: 'POST', body: randomBody(5000) })
  assert.equal(big.status, 413)
  assert.equal(authz.calls.length, calls, 'not sent to the service')
})

test('includeRequestHeaders limits the headers sent (pseudo-headers always go)', async t => {
  setForTest(t, authz, 'handler', () => OK)
  const r = await send('/some-headers/x', { headers: { 'x-client': 'kept', 'x-other': 'dropped' } })
  assert.equal(r.status, 200)
  const headers = lastCall().request.attributes.request!.http!.headers!
  assert.deepEqual(Object.keys(headers).sort(), [':authority', ':method', ':path', ':scheme', 'x-client'])
  assert.equal(r.echo!.headers['x-other'], 'dropped', 'the backend still gets every header')
})

test('a service that is down: failureMode deny answers 403 with the reason, allow lets the request through', async () => {
  const deny = await send('/down-deny/x')
  assert.equal(deny.status, 403)
  assert.match(deny.text, /^external authorization failed: UNAVAILABLE: /)
  const allow = await send('/down-allow/x')
  assert.equal(allow.status, 200)
  assert.equal(allow.echo!.url, '/down-allow/x')
})

test('a service that hangs past the timeout: 403 after the timeout, not later', async t => {
  setForTest(t, authz, 'handler', () => 'hang')
  const started = Date.now()
  const r = await send('/slow/x')
  const took = Date.now() - started
  assert.equal(r.status, 403)
  assert.equal(r.text, 'external authorization failed: timed out after 300ms')
  assert.ok(took >= 250 && took < 2000, `answered after ${took} ms`)
})

test('gateway-level extAuthz checks every request on the gateway', async t => {
  setForTest(t, authz, 'handler', () => ({ status: { code: 16 }, denied_response: { status: { code: 401 }, body: 'gateway says no' } }))
  const r = await send('/anything', { port: gw2Port })
  assert.equal(r.status, 401)
  assert.equal(r.text, 'gateway says no')
  setForTest(t, authz, 'handler', () => OK)
  assert.equal((await send('/anything', { port: gw2Port })).status, 200)
})

test('HTTP service: method, prefixed path, headers and body go to it; 2xx copies the allowed headers; other statuses deny', async () => {
  const ok = await send('/http/orders?id=7', { method: 'POST', headers: { 'x-allow': 'yes', 'x-auth-user': 'forged' }, body: 'order' })
  assert.equal(ok.status, 200, ok.text)
  assert.equal(ok.echo!.headers['x-auth-user'], 'bob', 'allowed response header replaces the client\'s')
  assert.equal(ok.echo!.headers['x-not-copied'], undefined)
  assert.equal(ok.echo!.headers['x-allow'], undefined, 'x-envoy-auth-headers-to-remove is honoured')
  assert.equal(ok.echo!.bodySha256, sha256('order'))
  const seen = httpAuthzSeen.at(-1)!
  assert.equal(seen.method, 'POST')
  assert.equal(seen.url, '/check/http/orders?id=7')
  assert.equal(seen.headers['x-allow'], 'yes')
  assert.equal(seen.body, 'order')

  const denied = await send('/http/orders')
  assert.equal(denied.status, 401)
  assert.equal(denied.text, 'http says no')
  assert.equal(denied.headers['www-authenticate'], 'Custom realm="http-authz"')
  assert.equal(denied.headers['x-reason'], 'no-allow-header')
})

test('a reload reuses the gRPC channel: the new context extensions arrive over the same connection', async t => {
  setForTest(t, authz, 'handler', () => OK)
  assert.equal((await send('/grpc/before-reload')).status, 200)
  const before = lastCall()
  assert.deepEqual(before.request.attributes.context_extensions, { tenant: 'acme' })
  const from = portico.stdout.length
  portico.replaceConfig(config(portico.port, 'globex'))
  // The gateway is shared by the file's tests: back to the first config even if this fails.
  t.after(async () => {
    const back = portico.stdout.length
    portico.replaceConfig(config(portico.port))
    await portico.waitForOutput('config reloaded', { fromStdout: back })
  })
  await portico.waitForOutput('config reloaded', { fromStdout: from })
  assert.equal((await send('/grpc/after-reload')).status, 200)
  const after = lastCall()
  assert.deepEqual(after.request.attributes.context_extensions, { tenant: 'globex' })
  assert.equal(after.peer, before.peer, 'same client connection')
})

test('the trace shows extAuthz in effectivePolicy and its decision', async t => {
  setForTest(t, authz, 'handler', () => allowWithHeaders())
  const trace = await openTrace(admin, 'path=/grpc/traced')
  await trace.ready
  const r = await send('/grpc/traced')
  assert.equal(r.status, 200)
  const events = await trace.done
  const route = events.find(e => e.message.type === 'policySelection' && e.message.phase === 'route')!
  const effective = route.message.effectivePolicy as Record<string, any>
  assert.equal(effective.extAuthz.host, `http://${authz.host}`)
  assert.deepEqual(effective.extAuthz.protocol, { grpc: {} })
  const decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'extAuthz')!
  const result = decision.message.result as { type: string, details: string }
  assert.equal(result.type, 'apply')
  assert.match(result.details, /^allowed by 127\.0\.0\.1:\d+ \(\d+ms\); set x-user, x-tag; removed x-remove-me$/)

  const denyTrace = await openTrace(admin, 'path=/down-allow/traced')
  await denyTrace.ready
  assert.equal((await send('/down-allow/traced')).status, 200)
  const skip = (await denyTrace.done).find(e => e.message.type === 'policy' && e.message.kind === 'extAuthz')!
  assert.equal((skip.message.result as { type: string }).type, 'skip')
  assert.match((skip.message.result as { details: string }).details, /failureMode allow: UNAVAILABLE/)
})

test('config errors: a bad host, a bad scheme, two protocols; a bad timeout fails the schema', async () => {
  const dir = makeTempDir()
  const bad = join(dir, 'bad.yaml')
  writeFileSync(bad, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - name: a',
    '    policies:',
    '      extAuthz: {host: "127.0.0.1"}',
    '  - name: b',
    '    policies:',
    '      extAuthz: {host: "ftp://127.0.0.1:21"}',
    '  - name: c',
    '    policies:',
    '      extAuthz: {host: "127.0.0.1:9000", protocol: {grpc: {}, http: {}}}'
  ].join('\n'))
  const result = await runPortico(['--validate', '-f', bad])
  assert.equal(result.code, 1)
  assert.match(result.stderr, /bad\.yaml:5:\d+: routes\[0\]\.policies\.extAuthz\.host: "127\.0\.0\.1" needs a port: host:port/)
  assert.match(result.stderr, /routes\[1\]\.policies\.extAuthz\.host: unsupported scheme "ftp"/)
  assert.match(result.stderr, /routes\[2\]\.policies\.extAuthz\.protocol: needs exactly one of grpc or http/)

  const schema = join(dir, 'schema.yaml')
  writeFileSync(schema, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      extAuthz: {host: "127.0.0.1:9000", timeout: soon, failureMode: open}\n')
  const r2 = await runPortico(['--validate', '-f', schema])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /routes\[0\]\.policies\.extAuthz\.timeout: /)
  assert.match(r2.stderr, /routes\[0\]\.policies\.extAuthz\.failureMode: /)
})
