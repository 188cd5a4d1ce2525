/**
 * remoteRateLimit against the real thing: Envoy's rate limit service
 * (github.com/envoyproxy/ratelimit, built from Go modules by scripts/test-tools) with Redis
 * (Debian's redis-server), both on random loopback ports, configured by a YAML file. Checks
 * limits enforced per descriptor value built by CEL from a header, the service's
 * RateLimit-* headers, a descriptor left out when its value is missing, a service that is
 * down or hangs (failClosed 500, failOpen through), the trace, config errors, and
 * descriptors of type tokens (LLM tokens of an `ai` backend sent as hits_addend).
 */

import { after, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server, type Socket } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { requireTool } from '@portico/testkit/tools'
import { waitUntil } from '@portico/testkit/wait'
import { startRateLimitService, type RateLimitService } from '../lib/ratelimit.ts'
import { startLlmServer, type LlmServer } from '../lib/llm.ts'

// Fixed windows of a day: a test run never straddles a reset (except at midnight UTC).
const SERVICE_CONFIG = `
domain: portico
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 3 }
  - key: route
    value: tight
    descriptors:
      - key: method
        rate_limit: { unit: day, requests_per_unit: 1 }
  - key: llm_user
    rate_limit: { unit: day, requests_per_unit: 40 }
`

interface Setup {
  service: RateLimitService
  backend: Backend
  portico: PorticoProcess
  admin: string
  hang: Server
  llm: LlmServer
}

let setup: Promise<Setup> | null = null
const sockets = new Set<Socket>()

async function start (ratelimit: string, redis: string): Promise<Setup> {
  const service = await startRateLimitService({ ratelimit, redis }, SERVICE_CONFIG)
  const backend = await startEchoBackend('app')
  const llm = await startLlmServer({ reply: 'The quick brown fox jumps over the lazy dog again' })
  const deadPort = await freePort()
  // Accepts connections and never answers: a service that hangs.
  const hang = createServer(s => { sockets.add(s); s.on('error', () => {}) })
  await new Promise<void>(resolve => hang.listen(0, '127.0.0.1', resolve))
  const hangPort = (hang.address() as { port: number }).port
  const adminPort = await freePort()
  const rl = (extra: Record<string, unknown> = {}) => ({
    host: service.host,
    domain: 'portico',
    descriptors: [{ entries: [{ key: 'user', value: 'request.headers["x-user"]' }] }],
    ...extra
  })
  const portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'user', matches: [{ path: { pathPrefix: '/user' } }], policies: { remoteRateLimit: rl() }, backends: [{ host: backend.host }] },
        {
          name: 'nested',
          matches: [{ path: { pathPrefix: '/nested' } }],
          policies: { remoteRateLimit: rl({ descriptors: [{ entries: [{ key: 'route', value: '"tight"' }, { key: 'method', value: 'request.method' }] }] }) },
          backends: [{ host: backend.host }]
        },
        { name: 'down-closed', matches: [{ path: { pathPrefix: '/down-closed' } }], policies: { remoteRateLimit: rl({ host: `127.0.0.1:${deadPort}` }) }, backends: [{ host: backend.host }] },
        { name: 'down-open', matches: [{ path: { pathPrefix: '/down-open' } }], policies: { remoteRateLimit: rl({ host: `http://127.0.0.1:${deadPort}`, failureMode: 'failOpen' }) }, backends: [{ host: backend.host }] },
        { name: 'hang', matches: [{ path: { pathPrefix: '/hang' } }], policies: { remoteRateLimit: rl({ host: `127.0.0.1:${hangPort}`, timeout: '300ms' }) }, backends: [{ host: backend.host }] },
        {
          name: 'llm',
          matches: [{ path: { pathPrefix: '/llm' } }],
          policies: { remoteRateLimit: rl({ descriptors: [{ entries: [{ key: 'llm_user', value: 'request.headers["x-user"]' }], type: 'tokens' }] }) },
          backends: [{ ai: { name: 'llm', provider: { openAI: {} }, hostOverride: llm.host } }]
        },
        { name: 'backend-level', matches: [{ path: { pathPrefix: '/backend-level' } }], backends: [{ host: backend.host, policies: { remoteRateLimit: rl({ descriptors: [{ entries: [{ key: 'user', value: '"backend-" + request.headers["x-user"]' }] }] }) } }] }
      ]
    })
  })
  return { service, backend, portico, admin: `http://127.0.0.1:${adminPort}`, hang, llm }
}

async function ready (t: TestContext): Promise<Setup | null> {
  const ratelimit = requireTool(t, 'RATELIMIT', 'ratelimit')
  const redis = requireTool(t, 'REDIS_SERVER', 'redis-server')
  if (ratelimit === null || redis === null) return null
  setup ??= start(ratelimit, redis)
  return await setup
}

after(async () => {
  if (setup === null) return
  const s = await setup.catch(() => null)
  if (s === null) return
  await s.portico.stop()
  await s.backend.close()
  for (const socket of sockets) socket.destroy()
  s.hang.close()
  await s.llm.close()
  await s.service.close()
})

async function send (s: Setup, path: string, headers: Record<string, string> = {}, method = 'GET') {
  const res = await request(`${s.portico.url}${path}`, { method, headers })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, echo: res.headers['x-backend'] !== undefined ? JSON.parse(text) as EchoedRequest : null }
}

test('limits are enforced per descriptor value built by CEL from a header, with the service\'s headers', async t => {
  const s = await ready(t)
  if (s === null) return
  for (let i = 1; i <= 3; i++) {
    const r = await send(s, '/user', { 'x-user': 'alice' })
    assert.equal(r.status, 200, `request ${i} of alice: ${r.text}\n${s.service.output()}`)
    assert.match(String(r.headers['ratelimit-limit']), /^3\b/)
    assert.equal(r.headers['ratelimit-remaining'], String(3 - i))
  }
  const over = await send(s, '/user', { 'x-user': 'alice' })
  assert.equal(over.status, 429)
  assert.equal(over.text, 'rate limit exceeded')
  assert.equal(over.headers['ratelimit-remaining'], '0')
  assert.ok(Number(over.headers['ratelimit-reset']) > 0)
  assert.equal(s.backend.requests.filter(r => r.headers['x-user'] === 'alice').length, 3, 'the refused request never reached the backend')

  // Another header value is another descriptor: bob has his own budget.
  assert.equal((await send(s, '/user', { 'x-user': 'bob' })).status, 200)
  // No x-user: the descriptor cannot be built, the service is not asked, the request passes.
  for (let i = 0; i < 5; i++) assert.equal((await send(s, '/user')).status, 200)
  // At the backend level the same service and domain count other values.
  for (let i = 0; i < 3; i++) assert.equal((await send(s, '/backend-level', { 'x-user': 'alice' })).status, 200)
  assert.equal((await send(s, '/backend-level', { 'x-user': 'alice' })).status, 429)
})

test('nested descriptors: a static entry and the method (CEL) select a tighter limit', async t => {
  const s = await ready(t)
  if (s === null) return
  assert.equal((await send(s, '/nested')).status, 200)
  assert.equal((await send(s, '/nested')).status, 429)
  // POST is another descriptor value (route=tight, method=POST).
  assert.equal((await send(s, '/nested', {}, 'POST')).status, 200)
  assert.equal((await send(s, '/nested', {}, 'POST')).status, 429)
})

test('a service that is down or hangs: failClosed answers 500, failOpen lets requests through', async t => {
  const s = await ready(t)
  if (s === null) return
  const closed = await send(s, '/down-closed', { 'x-user': 'carol' })
  assert.equal(closed.status, 500)
  assert.equal(closed.text, 'rate limit failed')
  const open = await send(s, '/down-open', { 'x-user': 'carol' })
  assert.equal(open.status, 200)
  assert.equal(open.echo?.url, '/down-open')
  const started = Date.now()
  const hung = await send(s, '/hang', { 'x-user': 'carol' })
  assert.equal(hung.status, 500)
  assert.equal(hung.text, 'rate limit failed')
  assert.ok(Date.now() - started < 3000, 'the timeout (300ms) bounds the wait')
  await s.portico.waitForOutput(/rate limit service 127\.0\.0\.1:\d+ failed: UNAVAILABLE/)
})

test('the trace shows remoteRateLimit in effectivePolicy and the descriptors sent', async t => {
  const s = await ready(t)
  if (s === null) return
  const trace = await openTrace(s.admin, 'path=/user/traced')
  await trace.ready
  assert.equal((await send(s, '/user/traced', { 'x-user': 'dave' })).status, 200)
  const events = await trace.done
  const route = events.find(e => e.message.type === 'policySelection' && e.message.phase === 'route')!
  const effective = (route.message.effectivePolicy as Record<string, any>).remoteRateLimit
  assert.equal(effective.host, `http://${s.service.host}`)
  assert.equal(effective.domain, 'portico')
  assert.equal(effective.failureMode, 'failClosed')
  assert.equal(effective.timeoutMs, 1000)
  const decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'remoteRateLimit')!
  assert.equal((decision.message.result as { type: string }).type, 'apply')
  assert.deepEqual(decision.message.request, { domain: 'portico', descriptors: [{ user: 'dave' }] })

  const down = await openTrace(s.admin, 'path=/down-open/traced')
  await down.ready
  await send(s, '/down-open/traced', { 'x-user': 'dave' })
  const skip = (await down.done).find(e => e.message.type === 'policy' && e.message.kind === 'remoteRateLimit')!
  assert.equal((skip.message.result as { type: string }).type, 'skip')
  assert.match((skip.message.result as { details: string }).details, /failureMode failOpen: UNAVAILABLE/)
})

test('descriptors of type tokens: checked without a hit, then the answer\'s LLM tokens are the hits', async t => {
  const s = await ready(t)
  if (s === null) return
  // 8 prompt + 10 completion = 18 tokens an exchange; the service allows 40 a day per user.
  const chat = async (user: string) => await request(`${s.portico.url}/llm/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user': user },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'one two three four five six seven eight' }] })
  }).then(async res => ({ status: res.statusCode, text: await res.body.text(), remaining: res.headers['ratelimit-remaining'] }))
  const trace = await openTrace(s.admin, 'path=/llm/chat/completions')
  await trace.ready
  const first = await chat('erin')
  assert.equal(first.status, 200, first.text)
  assert.equal(first.remaining, '40', 'the check took nothing')
  const events = await trace.done
  const [check, sent] = events.filter(e => e.message.type === 'policy' && e.message.kind === 'remoteRateLimit').map(e => e.message)
  assert.match((check!.result as { details: string }).details, /1 token descriptor checked without a hit/)
  assert.deepEqual(sent!.request, { domain: 'portico', descriptors: [{ llm_user: 'erin' }], hitsAddend: 18 })

  // The hits are sent after the answer, fire and forget: wait until the service has counted
  // each answer's 18 (its counter in Redis) before the next check reads what is left.
  const counted = async (answers: number) => await waitUntil(async () => await s.service.counted('portico_llm_user_erin_*') === 18 * answers, 5_000,
    () => `the service to count ${18 * answers} hits for erin\n${s.service.output()}`, 50)
  for (const [answers, expected] of [[1, '22'], [2, '4']] as const) {
    await counted(answers)
    const answer = await chat('erin')
    assert.equal(answer.status, 200, answer.text)
    assert.equal(answer.remaining, expected, 'what the earlier answers spent')
  }
  // 54 tokens spent of 40: the next check is over the limit; another user is not.
  await counted(3)
  const over = await chat('erin')
  assert.equal(over.status, 429, over.text)
  assert.equal((await chat('frank')).status, 200)
})

test('config errors: bad CEL, an unknown variable, a bad host; schema errors for a bad failureMode and no descriptors', async () => {
  const dir = makeTempDir()
  const bad = join(dir, 'bad.yaml')
  writeFileSync(bad, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - name: a',
    '    policies:',
    '      remoteRateLimit:',
    '        host: 127.0.0.1:8081',
    '        domain: d',
    '        descriptors:',
    '          - entries: [{key: user, value: "request.headers[\\"x-user\\""}]',
    '          - entries: [{key: user, value: "alice"}]',
    '  - name: b',
    '    policies:',
    '      remoteRateLimit: {host: "127.0.0.1", domain: d, descriptors: [{entries: [{key: k, value: "\\"v\\""}]}]}'
  ].join('\n'))
  const result = await runPortico(['--validate', '-f', bad])
  assert.equal(result.code, 1)
  assert.match(result.stderr, /bad\.yaml:9:\d+: routes\[0\]\.policies\.remoteRateLimit\.descriptors\[0\]\.entries\[0\]\.value: invalid CEL expression/)
  assert.match(result.stderr, /routes\[0\]\.policies\.remoteRateLimit\.descriptors\[1\]\.entries\[0\]\.value: invalid CEL expression "alice": unknown variable "alice"/)
  assert.match(result.stderr, /routes\[1\]\.policies\.remoteRateLimit\.host: "127\.0\.0\.1" needs a port: host:port/)

  const schema = join(dir, 'schema.yaml')
  writeFileSync(schema, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      remoteRateLimit: {host: "127.0.0.1:8081", domain: d, descriptors: [], failureMode: deny, timeout: soon}\n')
  const r2 = await runPortico(['--validate', '-f', schema])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /remoteRateLimit\.descriptors: /)
  assert.match(r2.stderr, /remoteRateLimit\.failureMode: /)
  assert.match(r2.stderr, /remoteRateLimit\.timeout: /)
})
