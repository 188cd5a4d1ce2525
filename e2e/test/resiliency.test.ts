/**
 * Route resiliency against real loopback servers: retries (status codes, connection
 * failures with a new backend pick, bodies replayed, big bodies not retried, the trace),
 * request mirroring (headers and body copied, several mirrors, a percentage, a mirror that
 * is down), and passive health (failing endpoints ejected and skipped, every endpoint
 * ejected → 503 "no healthy backends", ejection ending) as /config_dump shows it. Config
 * errors at the end.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, randomBody, sha256, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { sleep, waitUntil } from '@portico/testkit/wait'
import { openTrace } from '@portico/testkit/trace'

let ok: Backend
let okB: Backend
let flaky: Backend
const flakySeen: Array<{ key: string, sha: string, length: number }> = []
const failures = new Map<string, number>()
let mirrorA: Backend
let mirrorB: Backend
const mirrored: Array<{ name: string, method: string, url: string, headers: Record<string, unknown>, sha: string }> = []
let deadPort: number
let deadPort2: number
let portico: PorticoProcess
let admin: string

/** Answers 503 to the first `x-fail` requests of each `x-key`, then 200. */
async function startFlaky (): Promise<Backend> {
  return await startBackend((req, res) => {
    const hash = createHash('sha256')
    let length = 0
    req.on('data', (c: Buffer) => { hash.update(c); length += c.length })
    req.on('end', () => {
      const key = String(req.headers['x-key'] ?? '')
      const sha = hash.digest('hex')
      flakySeen.push({ key, sha, length })
      const failed = failures.get(key) ?? 0
      // x-hang: the first N tries of a key get no answer for a second (a backend timeout).
      if (failed < Number(req.headers['x-hang'] ?? 0)) {
        failures.set(key, failed + 1)
        const timer = setTimeout(() => res.end('too late'), 1_000)
        res.on('close', () => clearTimeout(timer))
        return
      }
      if (failed < Number(req.headers['x-fail'] ?? 0)) {
        failures.set(key, failed + 1)
        res.writeHead(503, { 'content-type': 'text/plain' }).end('flaky says no')
        return
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'x-backend': 'flaky' }).end(`ok after ${failed} failures`)
    })
  })
}

async function startMirror (name: string): Promise<Backend> {
  return await startBackend((req, res) => {
    const hash = createHash('sha256')
    req.on('data', (c: Buffer) => hash.update(c))
    req.on('end', () => {
      mirrored.push({ name, method: req.method ?? '', url: req.url ?? '', headers: req.headers, sha: hash.digest('hex') })
      res.writeHead(500).end('mirrors answer whatever they like')
    })
  })
}

before(async () => {
  ok = await startEchoBackend('ok')
  okB = await startEchoBackend('okB')
  flaky = await startFlaky()
  mirrorA = await startMirror('A')
  mirrorB = await startMirror('B')
  deadPort = await freePort()
  deadPort2 = await freePort()
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  const retry = { attempts: 2, codes: [503], backoff: '10ms' }
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'retry', matches: [{ path: { pathPrefix: '/retry' } }], policies: { retry }, backends: [{ host: flaky.host }] },
        { name: 'no-retry', matches: [{ path: { pathPrefix: '/no-retry' } }], backends: [{ host: flaky.host }] },
        {
          name: 'slow-retry',
          matches: [{ path: { pathPrefix: '/slow-retry' } }],
          policies: { retry: { attempts: 2, backoff: '10ms' }, timeout: { backendRequestTimeout: '150ms' } },
          backends: [{ host: flaky.host }]
        },
        {
          name: 'deadline',
          matches: [{ path: { pathPrefix: '/deadline' } }],
          policies: { retry: { attempts: 5, backoff: '10ms' }, timeout: { requestTimeout: '300ms', backendRequestTimeout: '150ms' } },
          backends: [{ host: flaky.host }]
        },
        {
          name: 'conn',
          matches: [{ path: { pathPrefix: '/conn' } }],
          policies: { retry: { attempts: 5, backoff: '1ms' } },
          backends: [
            { host: `127.0.0.1:${deadPort}`, policies: { requestHeaderModifier: { add: { 'x-attempt': 'dead' } } } },
            { host: ok.host, policies: { requestHeaderModifier: { add: { 'x-attempt': 'ok' } } } }
          ]
        },
        {
          name: 'mirror',
          matches: [{ path: { pathPrefix: '/mirror' } }],
          policies: {
            requestHeaderModifier: { set: { 'x-route': 'mirror' } },
            requestMirror: [{ backend: { host: mirrorA.host } }, { backend: { host: mirrorB.host }, percentage: 50 }, { backend: { host: `127.0.0.1:${deadPort}` } }]
          },
          backends: [{ host: ok.host }]
        },
        {
          name: 'health',
          matches: [{ path: { pathPrefix: '/health' } }],
          policies: { retry: { attempts: 2, backoff: '1ms' } },
          backends: [{ endpoints: [ok.host, okB.host, `127.0.0.1:${deadPort}`], policies: { health: { consecutiveFailures: 2, ejectionDuration: '1m' } } }]
        },
        {
          name: 'all-down',
          matches: [{ path: { pathPrefix: '/all-down' } }],
          backends: [{ endpoints: [`127.0.0.1:${deadPort}`, `127.0.0.1:${deadPort2}`], policies: { health: { consecutiveFailures: 1, ejectionDuration: '700ms' } } }]
        }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  for (const b of [ok, okB, flaky, mirrorA, mirrorB]) await b?.close()
})

async function send (path: string, options: { method?: string, headers?: Record<string, string>, body?: Buffer | string } = {}) {
  const res = await request(`${portico.url}${path}`, { method: (options.method ?? 'GET') as 'GET', headers: options.headers, body: options.body })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text }
}

async function configDump (): Promise<{ backends: Array<{ key: string, name: string, stats: { requests: number, failures: number, health: number, latencyMs: number | null, endpoints?: { healthy: number, total: number, ejected: string[] } } }> }> {
  const res = await request(`${admin}/config_dump`)
  return await res.body.json() as never
}

test('retry: 503s are retried up to attempts, then the last answer is returned', async () => {
  const r = await send('/retry', { headers: { 'x-key': 'k1', 'x-fail': '2' } })
  assert.equal(r.status, 200)
  assert.equal(r.text, 'ok after 2 failures')
  assert.equal(flakySeen.filter(s => s.key === 'k1').length, 3)
  const gaveUp = await send('/retry', { headers: { 'x-key': 'k2', 'x-fail': '5' } })
  assert.equal(gaveUp.status, 503)
  assert.equal(gaveUp.text, 'flaky says no')
  assert.equal(flakySeen.filter(s => s.key === 'k2').length, 3, 'attempts: 2 = at most 3 calls')
  // Without the policy nothing is retried.
  assert.equal((await send('/no-retry', { headers: { 'x-key': 'k3', 'x-fail': '1' } })).status, 503)
  assert.equal(flakySeen.filter(s => s.key === 'k3').length, 1)
})

test('retry: a request body is replayed byte for byte; one over 1 MiB is not retried', async () => {
  const body = randomBody(200_000)
  const r = await send('/retry', { method: 'POST', headers: { 'x-key': 'k4', 'x-fail': '1' }, body })
  assert.equal(r.status, 200)
  const seen = flakySeen.filter(s => s.key === 'k4')
  assert.equal(seen.length, 2)
  for (const s of seen) assert.equal(s.sha, sha256(body))
  const big = randomBody(1024 * 1024 + 10)
  const r2 = await send('/retry', { method: 'POST', headers: { 'x-key': 'k5', 'x-fail': '1' }, body: big })
  assert.equal(r2.status, 503)
  const seen2 = flakySeen.filter(s => s.key === 'k5')
  assert.equal(seen2.length, 1)
  assert.equal(seen2[0]!.sha, sha256(big), 'the big body still streams to the backend intact')
})

test('retry: connection failures are retried on a backend picked again, with its own policies', async () => {
  for (let i = 0; i < 12; i++) {
    const r = await send('/conn')
    assert.equal(r.status, 200, r.text)
    const echo = JSON.parse(r.text) as EchoedRequest
    assert.equal(echo.headers['x-attempt'], 'ok', 'the dead backend\'s header modifier did not stick')
  }
})

test('retry: a try that hits the backend request timeout is retried (HTTPRouteRetryBackendTimeout)', async () => {
  const r = await send('/slow-retry', { headers: { 'x-key': 'k7', 'x-hang': '2' } })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.text, 'ok after 2 failures')
  assert.equal(flakySeen.filter(s => s.key === 'k7').length, 3)
  // Every try timed out: the last timeout is the answer.
  const gaveUp = await send('/slow-retry', { headers: { 'x-key': 'k8', 'x-hang': '5' } })
  assert.equal(gaveUp.status, 504)
  assert.equal(flakySeen.filter(s => s.key === 'k8').length, 3)
})

test('retry: the request timeout bounds every try together and is not retried', async () => {
  const started = performance.now()
  const r = await send('/deadline', { headers: { 'x-key': 'k9', 'x-hang': '10' } })
  const took = performance.now() - started
  assert.equal(r.status, 504)
  // Tries of 150 ms, 10 ms apart, inside 300 ms: two, and the second is cut by the request timeout.
  assert.equal(flakySeen.filter(s => s.key === 'k9').length, 2)
  assert.ok(took < 900, `took ${Math.round(took)} ms; the request timeout is 300 ms`)
})

test('retry: the trace shows each retry', async () => {
  const trace = await openTrace(admin, 'path=/retry/traced')
  await trace.ready
  assert.equal((await send('/retry/traced', { headers: { 'x-key': 'k6', 'x-fail': '2' } })).status, 200)
  const events = await trace.done
  const retries = events.filter(e => e.message.type === 'retry')
  assert.equal(retries.length, 2)
  assert.equal(retries[0]!.message.attempt, 2)
  assert.equal(retries[1]!.message.attempt, 3)
  assert.equal(retries[0]!.message.attempts, 3)
  assert.match(String(retries[0]!.message.reason), /answered 503/)
  assert.equal(events.filter(e => e.message.type === 'backendCallStart').length, 3)
})

test('mirror: copies with the final headers and the body go to every mirror; the client gets the backend\'s answer', async () => {
  const body = randomBody(50_000)
  const r = await send('/mirror/x?y=1', { method: 'PUT', headers: { 'x-client': 'c' }, body })
  assert.equal(r.status, 200)
  assert.equal((JSON.parse(r.text) as EchoedRequest).name, 'ok')
  const deadline = Date.now() + 3000
  while (!mirrored.some(m => m.name === 'A') && Date.now() < deadline) await sleep(20)
  const a = mirrored.find(m => m.name === 'A')!
  assert.equal(a.method, 'PUT')
  assert.equal(a.url, '/mirror/x?y=1')
  assert.equal(a.headers['x-client'], 'c')
  assert.equal(a.headers['x-route'], 'mirror', 'route header modifiers ran before mirroring')
  assert.equal(a.sha, sha256(body))
})

test('mirror: a percentage mirrors about that share of requests', async () => {
  const before = mirrored.filter(m => m.name === 'B').length
  const beforeA = mirrored.filter(m => m.name === 'A').length
  for (let i = 0; i < 200; i++) assert.equal((await send('/mirror/p')).status, 200)
  // Mirrors finish after the client's answer: wait until A (100 %) has all 200 instead of a
  // fixed 300 ms (B's copies leave alongside A's; a few still in flight stay within its bounds).
  await waitUntil(() => mirrored.filter(m => m.name === 'A').length - beforeA >= 200, 5_000, 'mirror A to see 200 copies').catch(() => {})
  const b = mirrored.filter(m => m.name === 'B').length - before
  const a = mirrored.filter(m => m.name === 'A').length - beforeA
  assert.equal(a, 200)
  assert.ok(b > 60 && b < 140, `mirror B got ${b} of 200 at 50%`)
  const trace = await openTrace(admin, 'path=/mirror/traced')
  await trace.ready
  await send('/mirror/traced')
  const mirrors = (await trace.done).filter(e => e.message.type === 'mirror')
  assert.ok(mirrors.some(m => m.message.backend === mirrorA.host && m.message.sent === true))
})

test('passive health: a failing endpoint is ejected and skipped; /config_dump shows it', async () => {
  for (let i = 0; i < 15; i++) assert.equal((await send('/health')).status, 200)
  const dump = await configDump()
  const b = dump.backends.find(x => x.name === `${ok.host},${okB.host},127.0.0.1:${deadPort}`)!
  assert.ok(b !== undefined, JSON.stringify(dump.backends.map(x => x.name)))
  assert.deepEqual(b.stats.endpoints, { healthy: 2, total: 3, ejected: [`http://127.0.0.1:${deadPort}`] })
  assert.ok(b.stats.health <= 0.67, `health ${b.stats.health}`)
  assert.ok(b.stats.requests >= 15)
  assert.ok(b.stats.latencyMs !== null)
  // Ejected: no more calls to the dead endpoint, so no more failures.
  const failuresBefore = b.stats.failures
  for (let i = 0; i < 10; i++) assert.equal((await send('/health')).status, 200)
  const after = (await configDump()).backends.find(x => x.key === b.key)!
  assert.equal(after.stats.failures, failuresBefore)
})

test('passive health: every endpoint ejected answers 503 "no healthy backends" until the ejection ends', async () => {
  const first = await send('/all-down')
  assert.equal(first.status, 503)
  assert.match(first.text, /^upstream call failed: /)
  assert.equal((await send('/all-down')).status, 503)
  const none = await send('/all-down')
  assert.equal(none.status, 503)
  assert.equal(none.text, 'no healthy backends')
  const dump = (await configDump()).backends.find(x => x.name.startsWith(`127.0.0.1:${deadPort},`))!
  assert.equal(dump.stats.endpoints!.healthy, 0)
  assert.equal(dump.stats.health, 0)
  await sleep(800)
  assert.match((await send('/all-down')).text, /^upstream call failed: /, 'after ejectionDuration the endpoints get traffic again')
})

test('config errors: retry, mirror, endpoints and health', async () => {
  const dir = makeTempDir()
  const bad = join(dir, 'bad.yaml')
  writeFileSync(bad, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - policies:',
    '      retry: {attempts: 11, codes: [200], backoff: soon}',
    '      requestMirror: {backend: {host: "127.0.0.1"}, percentage: 101}',
    '    backends:',
    '      - endpoints: ["127.0.0.1:1", "https://127.0.0.1:2"]',
    '      - endpoints: ["127.0.0.1:1"]',
    '        policies: {health: {consecutiveFailures: 0, ejectionDuration: 0s}}'
  ].join('\n'))
  const r = await runPortico(['--validate', '-f', bad])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /routes\[0\]\.policies\.retry\.attempts: /)
  assert.match(r.stderr, /routes\[0\]\.policies\.retry\.codes\[0\]: /)
  assert.match(r.stderr, /routes\[0\]\.policies\.retry\.backoff: /)
  assert.match(r.stderr, /routes\[0\]\.policies\.requestMirror/)
  assert.match(r.stderr, /routes\[0\]\.backends\[1\]\.policies\.health\.consecutiveFailures: /)

  const semantic = join(dir, 'semantic.yaml')
  writeFileSync(semantic, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - policies:',
    '      requestMirror: [{backend: {host: "127.0.0.1"}}]',
    '    backends:',
    '      - endpoints: ["127.0.0.1:1", "https://127.0.0.1:2"]',
    '      - endpoints: ["127.0.0.1:1"]',
    '        policies: {health: {ejectionDuration: 0s}}'
  ].join('\n'))
  const r2 = await runPortico(['--validate', '-f', semantic])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /routes\[0\]\.policies\.requestMirror\[0\]\.backend\.host: "127\.0\.0\.1" needs a port/)
  assert.match(r2.stderr, /routes\[0\]\.backends\[0\]\.endpoints: all endpoints of a backend must use one scheme/)
  assert.match(r2.stderr, /routes\[0\]\.backends\[1\]\.policies\.health\.ejectionDuration: must be more than 0/)
})
