/**
 * Limits per model and per user (docs/llm.md "Limits per model and per user"): buckets per
 * key in a fixed-size table (least recently used of a set dropped), cost budgets charged with
 * the exact cost, fills per period, the same keyed bucket seen from two engines sharing
 * memory (WORKERS=2), and the config's rules. Through the gateway: e2e/test/llm-limits.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { keyHash, keysHeld, lookupKey, tableRecords, WAYS } from '../src/policy/bucket-keys.ts'
import { CostBucket } from '../src/policy/cost-bucket.ts'
import { formatPicos } from '../src/util/picos.ts'
import { localRateLimit } from '../src/policy/local-rate-limit.ts'
import { limitOverride } from '../src/policy/remote-rate-limit.ts'
import { compileCel } from '../src/cel/expression.ts'
import { RecordArena, Records } from '../src/util/shared-records.ts'
import { loadConfigText } from '../src/index.ts'
import type { LocalRateLimitIR } from '../src/ir/policy.ts'
import type { LlmLimitCall, LlmTokenRefusal, RequestContext } from '../src/request/context.ts'
import type { PolicyServices } from '../src/policy/services.ts'

/** The parts of a request a rate limit reads. */
function fakeCtx (options: { headers?: Record<string, string>, jwt?: Record<string, unknown> } = {}): RequestContext {
  return {
    req: { headers: options.headers ?? {} },
    method: 'POST',
    originalPath: '/v1/chat/completions',
    pathAndQuery: '/v1/chat/completions',
    hostname: 'gw',
    scheme: 'http',
    sourceAddress: '127.0.0.1',
    sourcePort: 1,
    auth: { jwt: options.jwt ?? null, apiKey: null, basicAuth: null },
    status: 0,
    responseHeaders: {},
    celBase: null,
    tracer: null,
    llmTokenHooks: null,
    llmTokenChecks: null,
    llmAdmissions: null
  } as unknown as RequestContext
}

const call = (model: string): LlmLimitCall => ({ requestModel: model, model, streaming: false, operation: 'chat', provider: 'openAI' })

/** Runs a request through the policy and, when it reaches the llm stage, its admission; returns the status (200 admitted). */
function admit (policy: ReturnType<typeof localRateLimit>, ctx: RequestContext, model = 'gpt-4o-mini'): number {
  const out = policy.onRequest!(ctx) as { action: string, status?: number }
  if (out.action === 'respond') return out.status!
  for (const a of ctx.llmAdmissions ?? []) if ((a(call(model)) as LlmTokenRefusal | null) !== null) return 429
  return 200
}

/** The answer's usage and cost handed to the hooks, as llm/usage.ts does. */
function answer (ctx: RequestContext, tokens: number, picos: bigint | null, currency = 'USD'): void {
  for (const hook of ctx.llmTokenHooks ?? []) hook(tokens, picos === null ? null : { amount: formatPicos(picos), picos, currency })
}

test('key table: a key keeps its record; a full set drops its least recently used; never more than maxKeys', () => {
  const count = tableRecords(WAYS)
  const records = Records.allocate(count, false)
  const inits: number[] = []
  const init = (r: number): void => { inits.push(r) }
  // One set: every key lands in it.
  const keys = Array.from({ length: WAYS }, (_, i) => `user-${i}`)
  const placed = keys.map((k, i) => lookupKey(records, 0, keyHash(k, count), i, init))
  assert.ok(placed.every(p => p.fresh && !p.evicted))
  assert.equal(new Set(placed.map(p => p.record)).size, WAYS)
  assert.deepEqual(lookupKey(records, 0, keyHash('user-3', count), 100, init), { record: placed[3]!.record, fresh: false, evicted: false })
  // user-0 used again: user-1 is now the least recently used.
  lookupKey(records, 0, keyHash('user-0', count), 101, init)
  const newcomer = lookupKey(records, 0, keyHash('user-new', count), 102, init)
  assert.deepEqual({ fresh: newcomer.fresh, evicted: newcomer.evicted, record: newcomer.record }, { fresh: true, evicted: true, record: placed[1]!.record })
  assert.equal(lookupKey(records, 0, keyHash('user-1', count), 103, init).fresh, true, 'user-1 comes back to a new, full bucket')
  assert.equal(keysHeld(records, 0, count), WAYS)
})

test('key table: a hostile client with 20,000 distinct keys fills the table and no more', () => {
  const count = tableRecords(1000)
  const records = Records.allocate(count, false)
  for (let i = 0; i < 20_000; i++) lookupKey(records, 0, keyHash(`attacker-${i}`, count), i, () => {})
  assert.ok(keysHeld(records, 0, count) <= count)
  assert.ok(keysHeld(records, 0, count) > count * 0.95, 'the table is used whole')
  assert.equal(records.f64.length, count * 8, 'the memory is what the compile took')
  // A 100 KB key costs its hash, not its length.
  const long = 'm'.repeat(100_000)
  const h = keyHash(long, count)
  assert.equal(lookupKey(records, 0, h, 30_000, () => {}).record, lookupKey(records, 0, keyHash(long, count), 30_001, () => {}).record)
})

test('cost bucket: exact in picos beyond 2^53 (a budget of 10,000 USD), fills per period, debt carried', () => {
  const records = Records.allocate(1, false)
  const budget = { maxPicos: 10_000_000_000_000_000n + 1n, perFillPicos: 2_500_000_000_000_000n, fillIntervalMs: 1000 }
  const b = new CostBucket(budget, () => records, 0)
  b.init(0)
  assert.equal(b.amount, budget.maxPicos)
  // 100,000 calls of 150,000 picos (0.00000015 each): exactly 0.015 taken.
  for (let i = 0; i < 100_000; i++) b.take(150_000n)
  assert.equal(b.amount, budget.maxPicos - 15_000_000_000n)
  assert.equal(formatPicos(b.amount), '9999.985000000001')
  b.refill(999)
  assert.equal(b.amount, budget.maxPicos - 15_000_000_000n, 'no fill before the boundary')
  b.refill(1000)
  assert.equal(b.amount, budget.maxPicos, 'a fill: capped at the budget')
  b.take(budget.maxPicos + 3_000_000_000_000_000n)
  assert.equal(b.amount, -3_000_000_000_000_000n)
  assert.equal(b.empty, true)
  assert.equal(formatPicos(b.amount), '-3000')
  assert.equal(b.untilHolding(1n, 1500), 1500, 'two fills pay the debt of 3000 at 2500 each')
  b.refill(3000)
  assert.equal(b.amount, 2_000_000_000_000_000n)
  assert.equal(b.empty, false)
})

test('keyed token buckets: each JWT subject has its own budget; the answer charges its own', () => {
  const ir: LocalRateLimitIR = [{ maxTokens: 100, tokensPerFill: 100, fillIntervalMs: 3_600_000, type: 'tokens', key: 'jwt.sub', maxKeys: 64 }]
  const policy = localRateLimit(ir)
  const alice = fakeCtx({ jwt: { sub: 'alice' } })
  assert.equal(admit(policy, alice), 200)
  answer(alice, 150, null)
  assert.equal(admit(policy, fakeCtx({ jwt: { sub: 'alice' } })), 429, 'alice is in debt')
  assert.equal(admit(policy, fakeCtx({ jwt: { sub: 'bob' } })), 200, 'bob has his own bucket')
  // No subject: this bucket does not limit the request.
  assert.equal(admit(policy, fakeCtx()), 200)
})

test('keyed token buckets per model: llm.model names the bucket; the refusal says what to do', () => {
  const policy = localRateLimit([{ maxTokens: 50, tokensPerFill: 50, fillIntervalMs: 60_000, type: 'tokens', key: 'llm.model', maxKeys: 16 }])
  const first = fakeCtx()
  assert.equal(admit(policy, first, 'gpt-4o'), 200)
  answer(first, 60, null)
  const again = fakeCtx()
  policy.onRequest!(again)
  const refusal = again.llmAdmissions![0]!(call('gpt-4o')) as LlmTokenRefusal | null
  assert.ok(refusal !== null)
  assert.equal(refusal.limit, '50')
  assert.equal(refusal.remaining, '0')
  assert.ok(refusal.retryAfterS! >= 1 && refusal.retryAfterS! <= 60)
  assert.match(refusal.message, /token budget \(maxTokens 50\) is spent; retry in \d+s/)
  assert.equal(refusal.policy, policy)
  assert.equal(admit(policy, fakeCtx(), 'gpt-4o-mini'), 200, 'another model, another bucket')
})

test('cost budget: charged the exact cost after each answer, refused once spent; tokenize checks the input cost', () => {
  const policy = localRateLimit([{ maxTokens: 0, tokensPerFill: 0, fillIntervalMs: 86_400_000, type: 'cost', key: 'jwt.sub', maxKeys: 64, cost: { maxMicros: 1000, perFillMicros: 1000, currency: 'USD' } }])
  // 0.001 USD per user per day; each call costs 0.000325 (e.g. 1000 in + 300 out of gpt-4o-mini).
  const statuses: number[] = []
  for (let i = 0; i < 5; i++) {
    const ctx = fakeCtx({ jwt: { sub: 'carol' } })
    const s = admit(policy, ctx)
    statuses.push(s)
    if (s === 200) answer(ctx, 1300, 325_000_000n)
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 429], '4 × 0.000325 = 0.0013: the fourth overdraws, the fifth is refused')
  // An answer in another currency, or with no cost, takes nothing.
  const dave = fakeCtx({ jwt: { sub: 'dave' } })
  assert.equal(admit(policy, dave), 200)
  answer(dave, 10, 999_000_000_000n, 'EUR')
  answer(dave, 10, null)
  // tokenize: the estimate's input cost against what is left (0.001).
  const check = (picos: bigint) => {
    const ctx = fakeCtx({ jwt: { sub: 'dave' } })
    assert.equal(admit(policy, ctx), 200)
    return ctx.llmTokenChecks![0]!({ tokens: 1000, cost: { picos, currency: 'USD' } })
  }
  assert.equal(check(1_000_000_000n), null, 'exactly what is left fits')
  const over = check(1_000_000_001n)
  assert.ok(over !== null)
  assert.equal(over.retryAfterS, null, 'more than the whole budget: never')
  assert.match(over.message, /would cost about 0\.001000000001 USD in input alone, more than the cost budget's maxCost 0\.001/)
  const ctx = fakeCtx({ jwt: { sub: 'dave' } })
  admit(policy, ctx)
  answer(ctx, 100, 600_000_000n)
  const after = fakeCtx({ jwt: { sub: 'dave' } })
  admit(policy, after)
  const short = after.llmTokenChecks![0]!({ tokens: 1000, cost: { picos: 500_000_000n, currency: 'USD' } })
  assert.ok(short !== null)
  assert.equal(short.remaining, '0.0004')
  assert.equal(short.limit, '0.001')
  assert.ok(short.retryAfterS !== null && short.retryAfterS > 0)
})

test('keyed by API key name and by the model the client asked for', () => {
  const byKey = localRateLimit([{ maxTokens: 10, tokensPerFill: 10, fillIntervalMs: 60_000, type: 'tokens', key: 'apiKey.name', maxKeys: 8 }])
  const withKey = (name: string) => {
    const ctx = fakeCtx()
    ;(ctx.auth as { apiKey: unknown }).apiKey = { name, metadata: {} }
    return ctx
  }
  const a = withKey('team-a')
  assert.equal(admit(byKey, a), 200)
  answer(a, 11, null)
  assert.equal(admit(byKey, withKey('team-a')), 429)
  assert.equal(admit(byKey, withKey('team-b')), 200)
  const byAsked = localRateLimit([{ maxTokens: 10, tokensPerFill: 10, fillIntervalMs: 60_000, type: 'tokens', key: 'llm.requestModel', maxKeys: 8 }])
  const first = fakeCtx()
  byAsked.onRequest!(first)
  assert.equal(first.llmAdmissions![0]!({ requestModel: 'asked', model: 'pinned', streaming: false, operation: 'chat', provider: 'openAI' }), null)
  answer(first, 11, null)
  const second = fakeCtx()
  byAsked.onRequest!(second)
  assert.notEqual(second.llmAdmissions![0]!({ requestModel: 'asked', model: 'pinned', streaming: false, operation: 'chat', provider: 'openAI' }), null)
  const third = fakeCtx()
  byAsked.onRequest!(third)
  assert.equal(third.llmAdmissions![0]!({ requestModel: 'other', model: 'pinned', streaming: false, operation: 'chat', provider: 'openAI' }), null, 'llm.requestModel: each name asked for its own bucket')
})

test('keyed requests buckets: per header value, before the body is read', () => {
  const policy = localRateLimit([{ maxTokens: 2, tokensPerFill: 2, fillIntervalMs: 60_000, type: 'requests', key: 'request.headers["x-team"]', maxKeys: 8 }])
  const status = (team: string) => (policy.onRequest!(fakeCtx({ headers: { 'x-team': team } })) as { action: string, status?: number }).status ?? 200
  assert.deepEqual([status('a'), status('a'), status('a'), status('b')], [200, 200, 429, 200])
})

test('WORKERS=2: two engines compiled over the same shared memory see one bucket per key', () => {
  const ir: LocalRateLimitIR = [
    { maxTokens: 1000, tokensPerFill: 1, fillIntervalMs: 3_600_000, type: 'requests' },
    { maxTokens: 100, tokensPerFill: 100, fillIntervalMs: 3_600_000, type: 'tokens', key: 'jwt.sub', maxKeys: 64 }
  ]
  const primaryArena = new RecordArena()
  const primary = localRateLimit(ir, { buckets: primaryArena } as unknown as PolicyServices)
  primaryArena.seal(true)
  const workerArena = new RecordArena(primaryArena.buffer!)
  const worker = localRateLimit(ir, { buckets: workerArena } as unknown as PolicyServices)
  workerArena.seal(true)
  const a = fakeCtx({ jwt: { sub: 'erin' } })
  assert.equal(admit(primary, a), 200)
  answer(a, 100, null)
  assert.equal(admit(worker, fakeCtx({ jwt: { sub: 'erin' } })), 429, 'the worker sees erin\'s spent bucket')
  assert.equal(admit(worker, fakeCtx({ jwt: { sub: 'frank' } })), 200)
})

test('config: cost buckets need maxCost and refuse maxTokens; keys compile; llm only where it is known', () => {
  const load = (buckets: string) => loadConfigText(`
gateways:
  default: { port: 1 }
routes:
  - name: chat
    policies:
      localRateLimit: ${buckets}
    backends:
      - ai: { name: openai, provider: { openAI: {} }, pricing: { input: "1", output: "2" } }
`, { baseDir: process.cwd() })
  const ok = load('[{ type: cost, maxCost: "0.5", fillInterval: 24h, key: jwt.sub }]')
  assert.ok(ok.ok, JSON.stringify(!ok.ok && ok.diagnostics))
  const bucket = JSON.parse(JSON.stringify(ok.config.ir).match(/"localRateLimit":(\[[^\]]*\])/)![1]!)[0]
  assert.deepEqual(bucket, { maxTokens: 0, tokensPerFill: 0, fillIntervalMs: 86_400_000, type: 'cost', cost: { maxMicros: 500_000, perFillMicros: 500_000, currency: 'USD' }, key: 'jwt.sub', maxKeys: 10_000 })
  const problems = (buckets: string): string => {
    const r = load(buckets)
    assert.equal(r.ok, false, buckets)
    return JSON.stringify(!r.ok && r.diagnostics)
  }
  assert.match(problems('[{ type: cost, fillInterval: 1h }]'), /needs maxCost/)
  assert.match(problems('[{ type: cost, maxCost: 1, maxTokens: 5, fillInterval: 1h }]'), /use maxCost and costPerFill/)
  assert.match(problems('[{ maxTokens: 5, tokensPerFill: 1, fillInterval: 1h, maxCost: 1 }]'), /only for type cost/)
  assert.match(problems('[{ type: tokens, fillInterval: 1h, tokensPerFill: 1 }]'), /needs maxTokens/)
  assert.match(problems('[{ maxTokens: 5, tokensPerFill: 1, fillInterval: 1h, key: llm.model }]'), /llm is known to buckets of type tokens and cost only/)
  assert.match(problems('[{ maxTokens: 5, tokensPerFill: 1, fillInterval: 1h, key: "jwt.sub +" }]'), /invalid CEL/)
  assert.match(problems('[{ maxTokens: 5, tokensPerFill: 1, fillInterval: 1h, maxKeys: 100 }]'), /only with key/)
  assert.match(problems('[{ type: cost, maxCost: "0.0000001", fillInterval: 1h }]'), /maxCost/)
})

test('config: remoteRateLimit token descriptors may name llm; requests descriptors may not', () => {
  const load = (type: string) => loadConfigText(`
gateways:
  default: { port: 1 }
routes:
  - name: chat
    policies:
      remoteRateLimit: { host: "127.0.0.1:8081", domain: d, descriptors: [{ entries: [{ key: model, value: llm.model }], type: ${type} }] }
    backends:
      - ai: { name: openai, provider: { openAI: {} } }
`, { baseDir: process.cwd() })
  const ok = load('tokens')
  assert.ok(ok.ok, JSON.stringify(!ok.ok && ok.diagnostics))
  const bad = load('requests')
  assert.equal(bad.ok, false)
  assert.match(JSON.stringify(!bad.ok && bad.diagnostics), /llm is known to descriptors of type tokens only/)
})

test('limitOverride: a map of requestsPerUnit and unit becomes Envoy\'s RateLimitOverride; anything else is left off', () => {
  const vars = { request: { headers: { 'x-tier': 'gold' } }, jwt: { tier: 'silver' } }
  const of = (source: string) => limitOverride(compileCel(source), vars)
  assert.deepEqual(of('request.headers["x-tier"] == "gold" ? {"requestsPerUnit": 100, "unit": "DAY"} : {"requestsPerUnit": 10, "unit": "day"}'), { requestsPerUnit: 100, unit: 4 })
  assert.deepEqual(of('{"requests_per_unit": 7, "unit": "minute"}'), { requestsPerUnit: 7, unit: 2 }, 'agentgateway\'s spelling too')
  assert.match(String(of('{"requestsPerUnit": 7, "unit": "fortnight"}')), /unit is not one of/)
  assert.match(String(of('{"requestsPerUnit": -1, "unit": "day"}')), /requestsPerUnit is not a whole number/)
  assert.match(String(of('"100/day"')), /not a map/)
  assert.match(String(of('jwt.missing')), /no such key|not found/)
})
