/**
 * localRateLimit against the real portico process: under hundreds of concurrent requests
 * over many connections a bucket admits exactly its tokens (no more, no fewer); refills add
 * exactly tokensPerFill per interval (capped at maxTokens); several buckets must all allow;
 * gateway-level buckets are shared by the gateway's routes, backend-level ones are per
 * backend reference; refusals are 429 with x-ratelimit-* and retry-after; bad configs are
 * refused.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Pool } from 'undici'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { sleep } from '@portico/testkit/wait'
import { openTrace } from '@portico/testkit/trace'
import { assertConfigError } from '../lib/validate.ts'

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** `n` requests at once over `connections` connections (a fresh pool, closed after). */
async function burst (origin: string, path: string, n: number, connections = 100): Promise<Answer[]> {
  const pool = new Pool(origin, { connections, pipelining: 1 })
  try {
    return await Promise.all(Array.from({ length: n }, async () => {
      const res = await pool.request({ path, method: 'GET', headersTimeout: 20_000 })
      return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
    }))
  } finally {
    await pool.close()
  }
}

function count (answers: Answer[], status: number): number {
  return answers.filter(a => a.status === status).length
}

describe('localRateLimit', () => {
  let portico: PorticoProcess
  let backend: Backend
  let limitedPort: number
  let admin: string

  before(async () => {
    backend = await startEchoBackend()
    limitedPort = await freePort()
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: (port): ConfigFile => ({
        gateways: {
          default: gateway(port),
          // A gateway-level bucket: shared by every route on it.
          limited: gateway(limitedPort, { policies: { localRateLimit: [{ maxTokens: 7, tokensPerFill: 1, fillInterval: '1h' }] } })
        },
        routes: [
          {
            // No refill within the test: the burst must admit exactly maxTokens.
            name: 'burst',
            matches: [{ path: { pathPrefix: '/burst' } }],
            policies: { localRateLimit: [{ maxTokens: 25, tokensPerFill: 25, fillInterval: '1h' }] },
            backends: [{ host: backend.host }]
          },
          {
            name: 'refill',
            matches: [{ path: { pathPrefix: '/refill' } }],
            policies: { localRateLimit: [{ maxTokens: 10, tokensPerFill: 3, fillInterval: '2s' }] },
            backends: [{ host: backend.host }]
          },
          {
            // Two buckets: the smaller one decides.
            name: 'two-buckets',
            matches: [{ path: { pathPrefix: '/two' } }],
            policies: {
              localRateLimit: [
                { maxTokens: 6, tokensPerFill: 1, fillInterval: '1h', type: 'requests' },
                { maxTokens: 4, tokensPerFill: 1, fillInterval: '2h' }
              ]
            },
            backends: [{ host: backend.host }]
          },
          {
            name: 'per-backend',
            matches: [{ path: { pathPrefix: '/backend' } }],
            backends: [{ host: backend.host, policies: { localRateLimit: [{ maxTokens: 3, tokensPerFill: 1, fillInterval: '1h' }] } }]
          },
          { name: 'shared-a', gateways: 'limited', matches: [{ path: { pathPrefix: '/a' } }], backends: [{ host: backend.host }] },
          { name: 'shared-b', gateways: 'limited', matches: [{ path: { pathPrefix: '/b' } }], backends: [{ host: backend.host }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await backend?.close()
  })

  test('200 concurrent requests over 100 connections: exactly maxTokens pass', { timeout: 30_000 }, async () => {
    const answers = await burst(portico.url, '/burst', 200)
    assert.equal(count(answers, 200), 25, 'admitted')
    assert.equal(count(answers, 429), 175, 'refused')
    assert.equal(backend.requests.filter(r => r.url === '/burst').length, 25, 'the backend saw exactly the admitted ones')
    const refused = answers.find(a => a.status === 429)!
    assert.equal(refused.body, 'rate limit exceeded')
    assert.equal(refused.headers['x-ratelimit-limit'], '25')
    assert.equal(refused.headers['x-ratelimit-remaining'], '0')
    const reset = Number(refused.headers['x-ratelimit-reset'])
    assert.ok(reset > 3000 && reset <= 3600, `reset in seconds until the next fill (1h interval): ${reset}`)
    assert.equal(refused.headers['retry-after'], refused.headers['x-ratelimit-reset'])
    // Still empty afterwards: nothing was left over.
    assert.equal((await burst(portico.url, '/burst', 20, 20)).filter(a => a.status === 200).length, 0)
  })

  test('refills add tokensPerFill at each interval, capped at maxTokens', { timeout: 60_000 }, async () => {
    // Drain the bucket (a fill may land during the burst, so the count is not asserted here).
    await burst(portico.url, '/refill', 100, 50)
    // Find a fill boundary: poll until one request is admitted (it takes 1 of the 3 new tokens).
    const pool = new Pool(portico.url, { connections: 1 })
    let boundary = 0
    try {
      for (let i = 0; i < 200 && boundary === 0; i++) {
        const res = await pool.request({ path: '/refill/probe', method: 'GET' })
        await res.body.dump()
        if (res.statusCode === 200) boundary = performance.now()
        else {
          assert.equal(res.statusCode, 429)
          await sleep(20)
        }
      }
    } finally {
      await pool.close()
    }
    assert.ok(boundary > 0, 'a refill admitted a request within 4 s')

    // Right after the fill: the 2 remaining tokens, and not one more, under concurrency.
    let answers = await burst(portico.url, '/refill', 100, 50)
    assert.equal(count(answers, 200), 2, 'the rest of one fill')

    // Mid-way through the third interval after the boundary: two more fills of 3 each.
    await sleep(Math.max(0, boundary + 5_000 - performance.now()))
    answers = await burst(portico.url, '/refill', 100, 50)
    assert.equal(count(answers, 200), 6, 'two fills of tokensPerFill')

    // Four intervals later (4 fills × 3 = 12 > maxTokens 10): the bucket is full, not fuller.
    await sleep(Math.max(0, boundary + 13_000 - performance.now()))
    answers = await burst(portico.url, '/refill', 100, 50)
    assert.equal(count(answers, 200), 10, 'capped at maxTokens')
    const refused = answers.find(a => a.status === 429)!
    assert.equal(refused.headers['x-ratelimit-limit'], '10')
    assert.ok(['1', '2'].includes(String(refused.headers['retry-after'])), `retry-after within the 2 s interval: ${String(refused.headers['retry-after'])}`)
  })

  test('several buckets must all have a token', { timeout: 20_000 }, async () => {
    const answers = await burst(portico.url, '/two', 50, 25)
    assert.equal(count(answers, 200), 4, 'the 4-token bucket runs out first')
    const refused = answers.find(a => a.status === 429)!
    assert.equal(refused.headers['x-ratelimit-limit'], '4', 'the empty bucket is reported')
    assert.ok(Number(refused.headers['retry-after']) > 3600, 'its 2h interval decides when to come back')
  })

  test('a gateway-level bucket is shared by all its routes; a backend-level one per backend', { timeout: 20_000 }, async () => {
    const origin = `http://127.0.0.1:${limitedPort}`
    const [a, b] = await Promise.all([burst(origin, '/a', 30, 30), burst(origin, '/b', 30, 30)])
    assert.equal(count(a, 200) + count(b, 200), 7, 'one bucket of 7 for both routes')
    assert.equal(count(a, 429) + count(b, 429), 53)

    const answers = await burst(portico.url, '/backend', 20, 20)
    assert.equal(count(answers, 200), 3)
  })

  test('the trace shows the policy under localRateLimit and the refusal', { timeout: 20_000 }, async () => {
    const trace = await openTrace(admin, 'path=/burst/traced')
    await trace.ready
    const answers = await burst(portico.url, '/burst/traced', 1, 1)
    assert.equal(answers[0]!.status, 429)
    const events = await trace.done
    const route = events.filter(e => e.message.type === 'policySelection')[1]!
    assert.deepEqual((route.message.effectivePolicy as Record<string, unknown>).localRateLimit, [{ maxTokens: 25, tokensPerFill: 25, fillIntervalMs: 3_600_000, type: 'requests' }])
    const decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'localRateLimit')!
    assert.equal((decision.message.result as { type: string }).type, 'deny')
    assert.match((decision.message.result as { details: string }).details, /bucket 0 is empty/)
  })
})

describe('localRateLimit: bad configs', () => {
  const route = (localRateLimit: unknown) => `gateways:
  default: { port: 18080, address: 127.0.0.1 }
routes:
  - name: r
    policies:
      localRateLimit: ${JSON.stringify(localRateLimit)}
    backends: [{ host: 127.0.0.1:8080 }]
`
  test('type tokens on a route without an ai backend is refused with the reason (llm.test.ts covers the rest)', { timeout: 20_000 }, async () => {
    await assertConfigError(route([{ maxTokens: 10, tokensPerFill: 1, fillInterval: '1s', type: 'tokens' }]), 'routes[0].policies.localRateLimit[0].type', /counts the LLM tokens of ai backends, and this route has none/)
  })
  test('a zero fill interval, zero tokens, missing fields and an empty list are refused', { timeout: 20_000 }, async () => {
    await Promise.all([
      assertConfigError(route([{ maxTokens: 10, tokensPerFill: 1, fillInterval: '0s' }]), 'routes[0].policies.localRateLimit[0].fillInterval', /more than 0/),
      assertConfigError(route([{ maxTokens: 0, tokensPerFill: 1, fillInterval: '1s' }]), 'routes[0].policies.localRateLimit[0].maxTokens', />= 1/),
      assertConfigError(route([{ maxTokens: 5, fillInterval: '1s' }]), 'routes[0].policies.localRateLimit[0]', /tokensPerFill/),
      assertConfigError(route([{ maxTokens: 5, tokensPerFill: 1, fillInterval: 'soon' }]), 'routes[0].policies.localRateLimit[0].fillInterval', /invalid value "soon"/),
      assertConfigError(route([]), 'routes[0].policies.localRateLimit', /fewer than 1|at least/)
    ])
  })
})
