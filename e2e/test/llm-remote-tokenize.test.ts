/**
 * `tokenize: true` against remoteRateLimit descriptors of type tokens, with the real thing:
 * Envoy's rate limit service (built by scripts/test-tools) and Redis. The prompt's estimate
 * is sent as hits before the call (taken at the service); a prompt over the budget is
 * refused 429 in the client's format and never reaches the provider; after the answer only
 * the usage the estimate did not cover is sent, so the service counts each token once. The
 * provider is the OpenAI-compatible server on loopback (one token per word).
 */

import { after, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'
import { requireTool } from '@portico/testkit/tools'
import { waitUntil } from '@portico/testkit/wait'
import { startRateLimitService, startRecordingRateLimitService, type RateLimitService } from '../lib/ratelimit.ts'
import { countTokens, promptTokens, startLlmServer, type LlmServer } from '../lib/llm.ts'

const BUDGET = 100
// A day's window: a run never straddles a reset (except at midnight UTC).
const SERVICE_CONFIG = `
domain: portico
descriptors:
  - key: llm_budget
    rate_limit: { unit: day, requests_per_unit: ${BUDGET} }
`
const REPLY = 'one two three four five six seven eight nine ten eleven twelve'
const SMALL = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'count to twelve please' }]
/** About 96 tokens: fits in a whole budget, not in what one small exchange leaves. */
const LARGE = [{ role: 'user', content: 'apple '.repeat(90).trim() }]
/** One word (one token to the provider here), about 17 to o200k_base: an estimate above the real usage. */
const DIGITS = [{ role: 'user', content: '1234567890'.repeat(5) }]

interface Setup { service: RateLimitService, llm: LlmServer, portico: PorticoProcess, admin: string }
let setup: Promise<Setup> | null = null

async function start (ratelimit: string, redis: string): Promise<Setup> {
  const service = await startRateLimitService({ ratelimit, redis }, SERVICE_CONFIG)
  const llm = await startLlmServer({ reply: REPLY })
  const adminPort = await freePort()
  const budget = { host: service.host, domain: 'portico', descriptors: [{ entries: [{ key: 'llm_budget', value: 'request.headers["x-user"]' }], type: 'tokens' as const }] }
  const portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{
        name: 'llm',
        policies: { remoteRateLimit: budget },
        backends: [{ ai: { name: 'llm', provider: { openAI: {} }, hostOverride: llm.host, tokenize: true } }]
      }, {
        // The same budget without tokenize: its check takes nothing, so its headers tell what is left.
        name: 'probe',
        matches: [{ path: { pathPrefix: '/probe' } }],
        policies: { remoteRateLimit: budget },
        backends: [{ ai: { name: 'probe', provider: { openAI: {} }, hostOverride: llm.host } }]
      }]
    })
  })
  return { service, llm, portico, admin: `http://127.0.0.1:${adminPort}` }
}

async function ready (t: TestContext): Promise<Setup | null> {
  const ratelimit = requireTool(t, 'RATELIMIT', 'ratelimit')
  const redis = requireTool(t, 'REDIS_SERVER', 'redis-server')
  if (ratelimit === null || redis === null) return null
  setup ??= start(ratelimit, redis)
  return await setup
}

after(async () => {
  const s = await setup?.catch(() => null)
  if (s == null) return
  await s.portico.stop()
  await s.llm.close()
  await s.service.close()
})

async function post (s: Setup, path: string, user: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.portico.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': user, ...headers }, body: JSON.stringify(body) })
  return { status: res.status, text: await res.text(), headers: res.headers }
}

/**
 * Waits until the service has counted `hits` for `user` (its counter in Redis): the hits
 * after an answer are sent fire and forget, so the next check must not run before they land.
 */
async function counted (s: Setup, user: string, hits: number): Promise<void> {
  let last = 0
  await waitUntil(async () => (last = await s.service.counted(`portico_llm_budget_${user}_*`)) === hits, 5_000,
    () => `the service to count ${hits} hits for ${user} (it has ${last})\n${s.service.output()}`, 50)
}

/** What the service says is left for `user` (the request's own check takes nothing). */
async function remaining (s: Setup, user: string): Promise<number> {
  const r = await post(s, '/probe/v1/chat/completions', user, { model: 'm', messages: [{ role: 'user', content: 'x' }] })
  return Number(r.headers.get('ratelimit-remaining'))
}

/** The hits the request sent for tokens: before the call (the estimate) and after the answer. */
function hitsOf (events: Array<{ message: Record<string, unknown> }>): number[] {
  return events.map(e => e.message)
    .filter(m => m.type === 'policy' && m.kind === 'remoteRateLimit' && (m.request as { hitsAddend?: number } | undefined)?.hitsAddend !== undefined)
    .map(m => (m.request as { hitsAddend: number }).hitsAddend)
}

test('the estimate is taken before the call and only the rest of the real usage after: each token counted once', async t => {
  const s = await ready(t)
  if (s === null) return
  const real = promptTokens(SMALL) + countTokens(REPLY) // 6 + 12
  const trace = await openTrace(s.admin, 'path=/v1/chat/completions')
  await trace.ready
  const first = await post(s, '/v1/chat/completions', 'ann', { model: 'm', messages: SMALL })
  assert.equal(first.status, 200, first.text + s.service.output())
  const events = await trace.done
  const [estimate, rest] = hitsOf(events)
  assert.ok(estimate! > 0 && estimate! < real, `the estimate (${estimate}) was sent before the call`)
  assert.equal(first.headers.get('ratelimit-remaining'), String(BUDGET - estimate!), 'the service\'s headers after the estimate was taken')
  assert.equal(rest, real - estimate!, 'after the answer: the usage less the estimate')
  await counted(s, 'ann', real)
  assert.equal(await remaining(s, 'ann'), BUDGET - real, 'the service counted the real usage, once')
})

test('an estimate above the real usage is what stays taken: nothing more is sent after the answer', async t => {
  const s = await ready(t)
  if (s === null) return
  const real = promptTokens(DIGITS) + countTokens(REPLY) // 1 + 12
  const trace = await openTrace(s.admin, 'path=/v1/chat/completions')
  await trace.ready
  const r = await post(s, '/v1/chat/completions', 'ben', { model: 'm', messages: DIGITS })
  assert.equal(r.status, 200, r.text)
  const events = await trace.done
  const hits = hitsOf(events)
  assert.equal(hits.length, 1, `only the estimate was sent: ${JSON.stringify(hits)}`)
  assert.ok(hits[0]! > real, `the estimate (${hits[0]}) is above the real usage (${real})`)
  assert.ok(events.some(e => /covered by the \d+ estimated/.test(String((e.message.result as { details?: string } | undefined)?.details))), 'the trace says why nothing more was sent')
  await counted(s, 'ben', hits[0]!)
  assert.equal(await remaining(s, 'ben'), BUDGET - hits[0]!)
})

test('a prompt over what the budget has left is refused with 429 in OpenAI\'s shape before the provider sees it', async t => {
  const s = await ready(t)
  if (s === null) return
  assert.equal((await post(s, '/v1/chat/completions', 'cat', { model: 'm', messages: SMALL })).status, 200)
  // The estimate before the call and the rest of the usage after it: the whole usage, once.
  await counted(s, 'cat', promptTokens(SMALL) + countTokens(REPLY))
  const seen = s.llm.bodies.length
  const refused = await post(s, '/v1/chat/completions', 'cat', { model: 'm', messages: LARGE })
  assert.equal(refused.status, 429, refused.text)
  assert.equal(s.llm.bodies.length, seen, 'the provider never saw it')
  assert.match(refused.headers.get('content-type') ?? '', /application\/json/)
  const body = JSON.parse(refused.text) as { error: { code: string, message: string } }
  assert.equal(body.error.code, 'rate_limit_exceeded')
  assert.match(body.error.message, /the prompt is about \d+ tokens, over what the token budget has left/)
  assert.equal(refused.headers.get('ratelimit-remaining'), '0', 'the service\'s RateLimit headers')
  // The service counts the refused hits too (Envoy's ratelimit adds every request's hits, as
  // for requests refused by count): the budget is now spent.
  assert.equal((await post(s, '/v1/chat/completions', 'cat', { model: 'm', messages: SMALL })).status, 429)
  // Another user's budget is untouched, and a whole budget takes the large prompt.
  assert.equal((await post(s, '/v1/chat/completions', 'dora', { model: 'm', messages: LARGE })).status, 200)
})

test('an Anthropic Messages client is refused in Anthropic\'s error shape', async t => {
  const s = await ready(t)
  if (s === null) return
  const anthropic = { 'anthropic-version': '2023-06-01' }
  const trace = await openTrace(s.admin, 'path=/v1/messages')
  await trace.ready
  const ok = await post(s, '/v1/messages', 'eve', { model: 'claude-test', max_tokens: 50, system: 'be brief', messages: [{ role: 'user', content: 'count to twelve please' }] }, anthropic)
  assert.equal(ok.status, 200, ok.text)
  // What the request sent as hits (the estimate, then the rest after the answer), counted.
  await counted(s, 'eve', hitsOf(await trace.done).reduce((a, b) => a + b, 0))
  const seen = s.llm.bodies.length
  const refused = await post(s, '/v1/messages', 'eve', { model: 'claude-test', max_tokens: 50, messages: LARGE }, anthropic)
  assert.equal(refused.status, 429, refused.text)
  assert.equal(s.llm.bodies.length, seen)
  const body = JSON.parse(refused.text) as { type: string, error: { type: string } }
  assert.equal(body.type, 'error')
  assert.equal(body.error.type, 'rate_limit_error')
})

test('a service that fails when the estimate is sent: failClosed answers 500 in the client\'s format, failOpen goes on and sends the whole usage after', async () => {
  // The request's own check (hits 0) succeeds; every call with hits fails.
  const hitsOf = (request: unknown) => ((request as { descriptors: Array<{ hits_addend?: { value?: number } | number }> }).descriptors[0]?.hits_addend)
  const hits = (request: unknown): number => { const h = hitsOf(request); return typeof h === 'number' ? h : Number(h?.value ?? 0) }
  const service = await startRecordingRateLimitService({ fail: request => hits(request) > 0 })
  const llm = await startLlmServer({ reply: REPLY })
  const budget = (failureMode: 'failOpen' | 'failClosed') => ({ host: service.host, domain: 'portico', failureMode, descriptors: [{ entries: [{ key: 'llm_budget', value: '"all"' }], type: 'tokens' as const }] })
  const portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: (['failOpen', 'failClosed'] as const).map(mode => ({
        name: mode,
        matches: [{ path: { pathPrefix: `/${mode}` } }],
        policies: { remoteRateLimit: budget(mode) },
        backends: [{ ai: { name: `${mode}-llm`, provider: { openAI: {} }, hostOverride: llm.host, tokenize: true } }]
      }))
    })
  })
  try {
    const send = async (path: string) => {
      const res = await fetch(`${portico.url}${path}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: SMALL }) })
      return { status: res.status, text: await res.text() }
    }
    const closed = await send('/failClosed')
    assert.equal(closed.status, 500, closed.text)
    assert.equal((JSON.parse(closed.text) as { error: { message: string } }).error.message, 'rate limit failed')
    assert.equal(llm.bodies.length, 0, 'the provider never saw it')

    const open = await send('/failOpen')
    assert.equal(open.status, 200, open.text)
    const real = promptTokens(SMALL) + countTokens(REPLY)
    // Sent after the answer, fire and forget: wait for the service to get it.
    await waitUntil(() => service.calls.some(c => hits(c.request) === real), 5_000,
      () => `nothing was taken before the call, so the whole usage (${real}) is sent after: ${JSON.stringify(service.calls.map(c => hits(c.request)))}`)
  } finally {
    await portico.stop()
    await llm.close()
    await service.close()
  }
})
