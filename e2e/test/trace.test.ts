/**
 * /debug/trace against the real portico process: the full event sequence and fields of a GET,
 * a POST with a body, a 404, a refused backend, concurrent watchers, filters and framing.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { EFFECTIVE_POLICY_KEYS } from '@portico/engine'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { openTrace, sequence, type TraceRecord } from '@portico/testkit/trace'

let backend: Backend
let portico: PorticoProcess
let admin: string
let deadPort: number

before(async () => {
  backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c as Buffer))
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'set-cookie': 'session=secret' })
      res.end(`hello ${req.url} ${Buffer.concat(chunks).length}`)
    })
  })
  deadPort = await freePort()
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'dead', matches: [{ path: { pathPrefix: '/dead' } }], backends: [{ host: `127.0.0.1:${deadPort}` }] },
        {
          name: 'app',
          matches: [{ path: { pathPrefix: '/app' } }],
          policies: { requestHeaderModifier: { set: { 'x-route': 'app' } } },
          backends: [{ host: backend.host, policies: { responseHeaderModifier: { add: { 'x-backend': 'b1' } } } }]
        }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

async function traced (query: string, send: () => Promise<unknown>): Promise<TraceRecord[]> {
  const trace = await openTrace(admin, query)
  assert.equal(trace.status, 200)
  await trace.ready
  await send()
  return await trace.done
}

function get (path: string, headers: Record<string, string> = {}) {
  return request(`${portico.url}${path}`, { headers }).then(async r => ({ status: r.statusCode, body: await r.body.text() }))
}

function byType (events: TraceRecord[], type: string, stage?: string): TraceRecord[] {
  return events.filter(e => e.message.type === type && (stage === undefined || e.message.stage === stage))
}

function one (events: TraceRecord[], type: string, stage?: string): TraceRecord {
  const found = byType(events, type, stage)
  assert.equal(found.length, 1, `expected one ${type} ${stage ?? ''} in ${sequence(events).join(', ')}`)
  return found[0]!
}

function checkEnvelope (events: TraceRecord[]): void {
  let last = -1
  for (const e of events) {
    assert.deepEqual(Object.keys(e).sort(), ['eventEnd', 'eventStart', 'message', 'severity'])
    assert.ok(Number.isInteger(e.eventEnd) && e.eventEnd >= last, `eventEnd must not decrease: ${e.eventEnd} after ${last}`)
    last = e.eventEnd
    assert.ok(['info', 'warn', 'error'].includes(e.severity))
    if (e.message.type === 'backendCallResult') assert.ok(Number.isInteger(e.eventStart) && e.eventStart! <= e.eventEnd)
    else assert.equal(e.eventStart, null)
  }
  assert.equal(events[0]!.message.type, 'requestStarted')
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
}

function checkPolicySelections (events: TraceRecord[], phases: string[]): void {
  const selections = byType(events, 'policySelection')
  assert.deepEqual(selections.map(e => e.message.phase), phases)
  for (const s of selections) {
    assert.deepEqual(Object.keys(s.message.effectivePolicy as object), [...EFFECTIVE_POLICY_KEYS])
  }
}

test('a GET: every stage, in order, with the seed\'s fields', async () => {
  const events = await traced('path=/app/x', () => get('/app/x?q=1', { authorization: 'Bearer topsecret', cookie: 'a=b' }))
  assert.deepEqual(sequence(events), [
    'requestStarted',
    'requestSnapshot:initial request',
    'policySelection',
    'requestSnapshot:gateway policies',
    'routeSelection',
    'policySelection',
    'requestSnapshot:route policies',
    'policySelection',
    'requestSnapshot:final request',
    'backendCallStart',
    'backendCallResult',
    'responseSnapshot:raw response',
    'responseSnapshot:backend response ready',
    'responseSnapshot:final response',
    'bodySnapshot:response',
    'requestFinished'
  ])
  checkEnvelope(events)
  checkPolicySelections(events, ['gateway', 'route', 'backend'])
  assert.ok(events.every(e => e.severity === 'info'))

  const initial = one(events, 'requestSnapshot', 'initial request').message.requestState as Record<string, any>
  assert.equal(initial.request.method, 'GET')
  assert.equal(initial.request.path, '/app/x')
  assert.equal(initial.request.pathAndQuery, '/app/x?q=1')
  assert.equal(initial.request.uri, `http://127.0.0.1:${portico.port}/app/x?q=1`)
  assert.equal(initial.request.host, `127.0.0.1:${portico.port}`)
  assert.equal(initial.request.scheme, 'http')
  assert.equal(initial.request.version, 'HTTP/1.1')
  assert.match(initial.request.startTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  assert.equal(initial.request.headers.authorization, '<redacted>', 'credentials are masked')
  assert.equal(initial.request.headers.cookie, '<redacted>')
  assert.equal(initial.source.address, '127.0.0.1')
  assert.ok(Number.isInteger(initial.source.port) && initial.source.port === initial.source.rawPort)
  assert.deepEqual(initial.env, {})
  assert.equal(initial.backend, undefined)

  const route = one(events, 'routeSelection').message
  assert.equal(route.selectedRoute, 'app')
  assert.deepEqual(route.evaluatedRoutes, ['dead', 'app'])

  const routePolicies = byType(events, 'policySelection')[1]!.message.effectivePolicy as Record<string, unknown>
  // Values policies set on requests are redacted unless the header is a public one (ir/redact.ts).
  assert.deepEqual(routePolicies.requestHeaderModifier, { set: { 'x-route': '<redacted>' } })
  const afterRoute = one(events, 'requestSnapshot', 'route policies').message.requestState as Record<string, any>
  assert.equal(afterRoute.request.headers['x-route'], '<redacted>', 'snapshot after route policies shows their effect (the header, not its value)')

  const final = one(events, 'requestSnapshot', 'final request').message.requestState as Record<string, any>
  assert.deepEqual(final.backend, { name: backend.host, type: 'static', protocol: 'http' })
  assert.equal(one(events, 'backendCallStart').message.target, backend.host)

  const result = one(events, 'backendCallResult').message
  assert.equal(result.status, 200)
  assert.equal(result.error, null)

  const raw = one(events, 'responseSnapshot', 'raw response').message.requestState as Record<string, any>
  assert.equal(raw.response.code, 200)
  assert.match(raw.proxy.requestProcessingDuration, /^\d+\.\d+s$/)
  assert.match(raw.proxy.upstreamDuration, /^\d+\.\d+s$/)
  assert.equal(raw.response.headers['set-cookie'], '<redacted>')
  assert.equal(raw.response.headers['x-backend'], undefined)
  const ready = one(events, 'responseSnapshot', 'backend response ready').message.requestState as Record<string, any>
  assert.equal(ready.response.headers['x-backend'], 'b1', 'backend response policies ran before "backend response ready"')
  assert.equal(ready.proxy, undefined, 'durations only on the raw response')

  const body = one(events, 'bodySnapshot', 'response').message
  assert.equal(Buffer.from(body.body as string, 'base64').toString(), 'hello /app/x?q=1 0')
  assert.equal(body.truncated, false)
})

test('a POST with a body: the request body is captured, and capped at 64 KiB', async () => {
  const small = await traced('path=/app/post', () => request(`${portico.url}/app/post`, { method: 'POST', body: 'ping=1' }).then(r => r.body.text()))
  const reqBody = one(small, 'bodySnapshot', 'final request').message
  assert.equal(Buffer.from(reqBody.body as string, 'base64').toString(), 'ping=1')
  assert.equal(reqBody.truncated, false)
  checkEnvelope(small)

  const big = Buffer.alloc(200 * 1024, 'x')
  const large = await traced('path=/app/big', () => request(`${portico.url}/app/big`, { method: 'PUT', body: big }).then(r => r.body.text()))
  const capped = one(large, 'bodySnapshot', 'final request').message
  assert.equal(Buffer.from(capped.body as string, 'base64').length, 64 * 1024)
  assert.equal(capped.truncated, true)
})

test('a request with no route still gets a complete, truthful trace', async () => {
  const events = await traced('path=/nowhere', () => get('/nowhere'))
  assert.deepEqual(sequence(events), [
    'requestStarted',
    'requestSnapshot:initial request',
    'policySelection',
    'requestSnapshot:gateway policies',
    'routeSelection',
    'responseSnapshot:final response',
    'bodySnapshot:response',
    'requestFinished'
  ])
  checkEnvelope(events)
  const route = one(events, 'routeSelection')
  assert.equal(route.message.selectedRoute, null)
  assert.deepEqual(route.message.evaluatedRoutes, ['dead', 'app'])
  assert.equal(route.severity, 'error')
  assert.equal((one(events, 'responseSnapshot', 'final response').message.requestState as any).response.code, 404)
  assert.equal(events.at(-1)!.severity, 'warn')
})

test('a backend that refuses connections: the transport error is in backendCallResult', async () => {
  const events = await traced('route=dead', () => get('/dead/1'))
  checkEnvelope(events)
  const result = one(events, 'backendCallResult')
  assert.equal(result.message.status, null)
  assert.match(String(result.message.error), /ECONNREFUSED/)
  assert.equal(result.severity, 'error')
  assert.equal(one(events, 'backendCallStart').message.target, `127.0.0.1:${deadPort}`)
  assert.equal((one(events, 'responseSnapshot', 'final response').message.requestState as any).response.code, 503)
  assert.equal(byType(events, 'responseSnapshot', 'raw response').length, 0, 'no backend response, no raw response snapshot')
})

test('concurrent watchers each get their own request', async () => {
  const [a, b] = await Promise.all([openTrace(admin, 'path=/app/*'), openTrace(admin, 'path=/app/*')])
  await Promise.all([a!.ready, b!.ready])
  await Promise.all([get('/app/one'), get('/app/two')])
  const [ea, eb] = await Promise.all([a!.done, b!.done])
  const pathOf = (events: TraceRecord[]) => (one(events, 'requestSnapshot', 'initial request').message.requestState as any).request.path
  assert.deepEqual([pathOf(ea), pathOf(eb)].sort(), ['/app/one', '/app/two'])
})

test('filters pick the request: path, route and method', async () => {
  const trace = await openTrace(admin, 'path=/app/wanted&method=POST')
  await trace.ready
  await get('/app/wanted')
  await get('/app/other')
  await request(`${portico.url}/app/wanted`, { method: 'POST', body: 'x' }).then(r => r.body.text())
  const events = await trace.done
  const initial = one(events, 'requestSnapshot', 'initial request').message.requestState as any
  assert.equal(initial.request.method, 'POST')
  assert.equal(initial.request.path, '/app/wanted')
})

test('a header filter picks the request carrying that header', async () => {
  const trace = await openTrace(admin, 'header=x-trace-me:42')
  await trace.ready
  await get('/app/untagged')
  await get('/app/tagged', { 'x-trace-me': '42' })
  const events = await trace.done
  assert.equal((one(events, 'requestSnapshot', 'initial request').message.requestState as any).request.path, '/app/tagged')
  const bad = await request(`${admin}/debug/trace?header=nocolon`, { method: 'POST' })
  assert.equal(bad.statusCode, 400)
  await bad.body.text()
})

test('framing: ready first, keep-alive comments while waiting, GET works too', async () => {
  const trace = await openTrace(admin, 'path=/app/late', 'GET')
  await trace.ready
  assert.equal(trace.comments[0], 'ready')
  // The admin server sends one every second while nothing matches: wait for it, not a fixed 1.3 s.
  await waitUntil(() => trace.comments.includes('keepalive'), 5_000, 'a keepalive comment').catch(() => {})
  assert.ok(trace.comments.includes('keepalive'), `comments: ${trace.comments.join(',')}`)
  await get('/app/late')
  const events = await trace.done
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
})

test('a watcher that disconnects is disarmed; a CEL expression is refused for now', async () => {
  const trace = await openTrace(admin, 'path=/app/never')
  await trace.ready
  trace.close()
  await trace.done.catch(() => [])
  const bad = await request(`${admin}/debug/trace?expression=${encodeURIComponent('request.path == "/x"')}`, { method: 'POST' })
  assert.equal(bad.statusCode, 400)
  assert.match(await bad.body.text(), /^invalid expression/)
  // The proxy still serves.
  assert.equal((await get('/app/after')).status, 200)
})

test('DEBUG_TRACE=off: /debug/trace answers 404 and requests are served as usual', async () => {
  const adminPort = await freePort()
  const off = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, DEBUG_TRACE: 'off' },
    config: port => ({ gateways: { default: { port, address: '127.0.0.1' } }, routes: [{ name: 'hello', policies: { directResponse: { status: 200, body: 'hi' } } }] })
  })
  try {
    const res = await request(`http://127.0.0.1:${adminPort}/debug/trace`, { method: 'POST' })
    assert.equal(res.statusCode, 404)
    assert.match(await res.body.text(), /tracing is disabled/)
    assert.equal((await request(`${off.url}/`).then(r => r.body.text())), 'hi')
  } finally {
    await off.stop()
  }
})
