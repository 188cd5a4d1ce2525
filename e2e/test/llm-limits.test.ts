/**
 * Limits per model and per user (docs/llm.md "Limits per model and per user") through the real
 * gateway, with the official `openai` and `@anthropic-ai/sdk` clients and the provider
 * emulators (e2e/lib/llm-emulators): token budgets keyed by JWT subject (two users, separate
 * budgets) and by model, a cost budget charged the exact cost of each answer and refused in
 * each client's error shape once spent, a `tokenize` refusal of a prompt whose input alone
 * costs more than the budget (the provider never sees it; the decision metric says
 * `limited`), and keyed buckets shared by two data-plane workers (WORKERS=2).
 *
 * The emulators answer recorded transcripts: OpenAI's text answer uses 19 + 10 = 29 tokens;
 * Anthropic's uses 2095 input, 1800 cache reads, 120 cache writes and 503 output tokens.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { request } from 'undici'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { requireTool } from '@portico/testkit/tools'
import { waitUntil } from '@portico/testkit/wait'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { startIdp, type Idp } from '../lib/idp.ts'
import { startRateLimitService, type RateLimitService } from '../lib/ratelimit.ts'

/**
 * What one Anthropic answer costs at Claude Sonnet's rates (3 / 15 per million, cache reads
 * 0.30, writes 3.75): 2095 × 3 + 1800 × 0.3 + 120 × 3.75 + 503 × 15 millionths = 0.01482 USD.
 */
const ANTHROPIC_COST = '0.01482'

describe('limits per model and per user', () => {
  let openaiEmu: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let idp: Idp
  let portico: PorticoProcess
  let stats: string
  const tokens = new Map<string, string>()

  const token = async (sub: string): Promise<string> => {
    let t = tokens.get(sub)
    if (t === undefined) tokens.set(sub, t = await idp.forge({ sub }))
    return t
  }
  const openai = (path: string, apiKey: string): OpenAI => new OpenAI({ baseURL: `${portico.url}${path}`, apiKey, maxRetries: 0 })
  const anthropic = (path: string, authToken: string): Anthropic => new Anthropic({ baseURL: `${portico.url}${path}`, authToken, maxRetries: 0 })
  const chat = async (client: OpenAI, model = 'gpt-4o-mini'): Promise<number> => {
    try {
      await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] })
      return 200
    } catch (err) {
      if (err instanceof OpenAI.APIError) return err.status ?? 0
      throw err
    }
  }
  const decisions = async (route: string, decision: string): Promise<number> => {
    const text = await (await fetch(`${stats}/metrics`)).text()
    const line = text.split('\n').find(l => l.startsWith('portico_rate_limit_decisions_total{') && l.includes(`route="${route}"`) && l.includes('policy="localRateLimit"') && l.includes(`decision="${decision}"`))
    return line === undefined ? 0 : Number(line.split(' ').at(-1))
  }

  before(async () => {
    openaiEmu = await startOpenAIEmulator()
    anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY })
    idp = await startIdp({ clients: [] })
    const statsPort = await freePort()
    stats = `http://127.0.0.1:${statsPort}`
    const jwtAuth = { mode: 'strict' as const, issuer: idp.issuer, audiences: [idp.audience], jwks: { url: idp.jwksUrl } }
    const toOpenAI = (name: string, extra: Record<string, unknown> = {}) => ({ ai: { name, provider: { openAI: {} }, hostOverride: openaiEmu.url, ...extra }, policies: { backendAuth: { key: 'sk-test-portico' } } })
    portico = await startPortico({
      env: { STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          {
            name: 'per-user',
            matches: [{ path: { pathPrefix: '/per-user' } }],
            policies: { jwtAuth, localRateLimit: [{ type: 'tokens', maxTokens: 50, tokensPerFill: 50, fillInterval: '1h', key: 'jwt.sub' }] },
            backends: [toOpenAI('per-user')]
          },
          {
            name: 'per-model',
            matches: [{ path: { pathPrefix: '/per-model' } }],
            policies: { localRateLimit: [{ type: 'tokens', maxTokens: 20, tokensPerFill: 20, fillInterval: '1h', key: 'llm.model' }] },
            backends: [toOpenAI('per-model')]
          },
          {
            name: 'cost',
            matches: [{ path: { pathPrefix: '/cost' } }],
            policies: { jwtAuth, localRateLimit: [{ type: 'cost', maxCost: '0.02', fillInterval: '24h', key: 'jwt.sub' }] },
            backends: [{
              ai: { name: 'claude', provider: { anthropic: {} }, hostOverride: anthropicEmu.url, pricing: { input: '3', output: '15', cacheRead: '0.3', cacheWrite: '3.75' } },
              policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } }
            }]
          },
          {
            name: 'cost-tokenize',
            matches: [{ path: { pathPrefix: '/cost-tokenize' } }],
            // 1000 per million input tokens: a prompt of a few dozen tokens costs more than 0.01 in input alone.
            policies: { localRateLimit: [{ type: 'cost', maxCost: '0.01', fillInterval: '1h' }] },
            backends: [toOpenAI('cost-tokenize', { tokenize: true, pricing: { input: '1000', output: '1000' } })]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await Promise.all([openaiEmu?.close(), anthropicEmu?.close(), idp?.stop()])
  })

  test('two JWT subjects, two token budgets: alice spends hers (429 in OpenAI\'s shape), bob still has his', { timeout: 20_000 }, async () => {
    const alice = openai('/per-user', await token('alice'))
    const bob = openai('/per-user', await token('bob'))
    // 50 tokens: the first answer leaves 21, the second is admitted (not empty) and leaves -8.
    assert.equal(await chat(alice), 200)
    assert.equal(await chat(alice), 200)
    const seen = openaiEmu.received.length
    const refused = await alice.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof OpenAI.RateLimitError, `OpenAI's SDK reads a RateLimitError: ${String(refused)}`)
    assert.equal(refused.status, 429)
    assert.equal((refused.error as { code?: string }).code, 'rate_limit_exceeded')
    assert.match(refused.message, /token budget \(maxTokens 50\) is spent; retry in \d+s/)
    assert.equal(refused.headers?.get('x-ratelimit-limit'), '50')
    assert.equal(refused.headers?.get('x-ratelimit-remaining'), '0')
    assert.ok(Number(refused.headers?.get('retry-after')) > 3000, 'the next fill is about an hour away')
    assert.equal(openaiEmu.received.length, seen, 'the provider never saw it')
    assert.equal(await chat(bob), 200, 'bob\'s budget is his own')
    assert.equal(await decisions('per-user', 'limited'), 1)
  })

  test('per-model token budgets: gpt-4o spends its own, gpt-4o-mini is untouched', { timeout: 20_000 }, async () => {
    const client = openai('/per-model', 'sk-client')
    assert.equal(await chat(client, 'gpt-4o'), 200)
    assert.equal(await chat(client, 'gpt-4o'), 429, '20 − 29 < 0')
    assert.equal(await chat(client, 'gpt-4o-mini'), 200)
    assert.equal(await chat(client, 'gpt-4o-mini'), 429)
    assert.equal(await chat(client, 'o3'), 200)
  })

  test('a cost budget: charged the exact cost of each answer; spent, refused in Anthropic\'s and in OpenAI\'s shape', { timeout: 20_000 }, async () => {
    const carol = anthropic('/cost', await token('carol'))
    const ask = async () => await carol.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] })
    await ask()
    const logs = () => portico.logs().filter(l => l.route === 'cost' && l['portico.llm.cost'] !== undefined)
    await waitUntil(() => logs().length > 0, 5_000, 'the access log line of the priced answer')
    assert.equal(String(logs().at(-1)?.['portico.llm.cost']), ANTHROPIC_COST, 'the access log prices the answer as the budget is charged')
    // 0.02 − 0.01482 = 0.00518 left: admitted, and charged into debt.
    await ask()
    const seen = anthropicEmu.bodies.length
    const refused = await ask().then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof Anthropic.RateLimitError, `Anthropic's SDK reads a RateLimitError: ${String(refused)}`)
    assert.equal(refused.status, 429)
    assert.equal((refused.error as { type: string, error: { type: string } }).error.type, 'rate_limit_error')
    assert.match(refused.message, /the cost budget \(maxCost 0\.02 USD\) is spent; retry in \d+s/)
    assert.equal(refused.headers?.get('x-ratelimit-limit'), '0.02')
    assert.equal(anthropicEmu.bodies.length, seen, 'the provider never saw it')
    // The same user through an OpenAI client (translated to Anthropic): OpenAI's shape.
    const asOpenAI = openai('/cost', await token('carol'))
    const viaOpenAI = await asOpenAI.chat.completions.create({ model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (err: unknown) => err)
    assert.ok(viaOpenAI instanceof OpenAI.RateLimitError, String(viaOpenAI))
    assert.equal((viaOpenAI.error as { code?: string }).code, 'rate_limit_exceeded')
    // Another user has the whole budget.
    const dave = anthropic('/cost', await token('dave'))
    const ok = await dave.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] })
    assert.equal(ok.type, 'message')
    assert.equal(await decisions('cost', 'limited'), 2)
  })

  test('tokenize: a prompt whose input alone costs more than the budget is refused before the provider sees it, and counted limited', { timeout: 20_000 }, async () => {
    const client = openai('/cost-tokenize', 'sk-client')
    const seen = openaiEmu.received.length
    const refused = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'tell me about the weather in Paris in the spring please' }] }).then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused))
    assert.match(refused.message, /would cost about 0\.0\d+ USD in input alone, more than the cost budget's maxCost 0\.01/)
    assert.equal(refused.headers?.get('retry-after'), null, 'it can never fit')
    assert.equal(openaiEmu.received.length, seen)
    assert.equal(await decisions('cost-tokenize', 'limited'), 1)
    assert.equal(await decisions('cost-tokenize', 'allowed'), 0, 'a tokenize refusal is not an allowed decision')
    // A short prompt (5 tokens or so: about 0.005 in input) fits and goes on.
    assert.equal(await chat(client), 200)
  })
})

describe('keyed buckets with two data-plane workers (WORKERS=2)', () => {
  let portico: PorticoProcess
  let openaiEmu: OpenAIEmulator

  before(async () => {
    openaiEmu = await startOpenAIEmulator()
    portico = await startPortico({
      env: { WORKERS: '2' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          {
            name: 'teams',
            matches: [{ path: { pathPrefix: '/teams' } }],
            policies: { localRateLimit: [{ maxTokens: 30, tokensPerFill: 1, fillInterval: '1h', key: 'request.headers["x-team"]' }] },
            backends: [{ ai: { name: 'teams', provider: { openAI: {} }, hostOverride: openaiEmu.url } }]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await openaiEmu?.close()
  })

  test('each team gets exactly its 30 requests, whichever worker serves them', { timeout: 60_000 }, async () => {
    const send = async (team: string): Promise<number> => {
      const res = await request(`${portico.url}/teams/v1/chat/completions`, {
        method: 'POST',
        headers: { connection: 'close', 'content-type': 'application/json', 'x-team': team },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
        reset: true
      })
      await res.body.text()
      return res.statusCode
    }
    const statuses = await Promise.all(Array.from({ length: 160 }, (_, i) => send(i % 2 === 0 ? 'red' : 'blue')))
    const admitted = (team: number) => statuses.filter((s, i) => i % 2 === team && s === 200).length
    assert.equal(admitted(0), 30)
    assert.equal(admitted(1), 30)
    assert.equal(statuses.filter(s => s === 429).length, 100)
    const workers = new Set(portico.logs().filter(l => l.msg === 'request' && String(l.path).startsWith('/teams')).map(l => l.worker))
    assert.equal(workers.size, 2, 'both serving loops (the primary and worker 1) served')
  })
})

describe('remoteRateLimit token descriptors naming the model and the user (Envoy\'s ratelimit service)', () => {
  let service: RateLimitService | null = null
  let openaiEmu: OpenAIEmulator | null = null
  let portico: PorticoProcess | null = null

  after(async () => {
    await portico?.stop()
    await openaiEmu?.close()
    await service?.close()
  })

  test('each model and user has its own token budget at the service; spent, 429 in OpenAI\'s shape before the provider sees it', { timeout: 60_000 }, async t => {
    const ratelimit = requireTool(t, 'RATELIMIT', 'ratelimit')
    const redis = requireTool(t, 'REDIS_SERVER', 'redis-server')
    if (ratelimit === null || redis === null) return
    // 50 tokens a day per (model, user): two answers of 29 tokens spend it.
    service = await startRateLimitService({ ratelimit, redis }, `
domain: portico-limits
descriptors:
  - key: model
    descriptors:
      - key: user
        rate_limit: { unit: day, requests_per_unit: 50 }
  - key: tier_user
    rate_limit: { unit: minute, requests_per_unit: 100 }
`)
    openaiEmu = await startOpenAIEmulator()
    const emu = openaiEmu
    const svc = service
    const statsPort = await freePort()
    portico = await startPortico({
      env: { STATS_ADDR: `127.0.0.1:${statsPort}` },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [{
          name: 'remote',
          policies: { remoteRateLimit: { host: svc.host, domain: 'portico-limits', descriptors: [{ entries: [{ key: 'model', value: 'llm.model' }, { key: 'user', value: 'request.headers["x-user"]' }], type: 'tokens' }] } },
          backends: [{ ai: { name: 'remote', provider: { openAI: {} }, hostOverride: emu.url } }]
        }, {
          // agentgateway's limitOverride: the limit comes with the request (here from a header; a JWT claim alike).
          name: 'tiers',
          matches: [{ path: { pathPrefix: '/tiers' } }],
          policies: {
            remoteRateLimit: {
              host: svc.host,
              domain: 'portico-limits',
              descriptors: [{
                entries: [{ key: 'tier_user', value: 'request.headers["x-user"]' }],
                limitOverride: 'request.headers["x-tier"] == "gold" ? {"requestsPerUnit": 3, "unit": "minute"} : {"requestsPerUnit": 2, "unit": "minute"}'
              }]
            }
          },
          backends: [{ ai: { name: 'tiers', provider: { openAI: {} }, hostOverride: emu.url } }]
        }]
      })
    })
    const p = portico
    // A unique user per run: the service's counters live in Redis for the day.
    const run = Math.random().toString(36).slice(2, 8)
    const client = (user: string): OpenAI => new OpenAI({ baseURL: p.url, apiKey: 'sk-client', maxRetries: 0, defaultHeaders: { 'x-user': `${user}-${run}` } })
    // The service's counters for `user` (every model), summed, from its Redis.
    const counted = async (user: string) => await svc.counted(`portico-limits_model_*_user_${user}-${run}_*`)
    const ask = async (user: string, model: string): Promise<number> => {
      const before = await counted(user)
      try {
        await client(user).chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] })
        // The answer's tokens reach the service fire and forget: the next check must not
        // run before they land, so wait for the service's counter to take them.
        await waitUntil(async () => await counted(user) > before, 5_000, () => `the service to count ${user}'s answer\n${svc.output()}`, 50)
        return 200
      } catch (err) {
        if (err instanceof OpenAI.APIError) return err.status ?? 0
        throw err
      }
    }
    assert.equal(await ask('ann', 'gpt-4o'), 200, svc.output())
    assert.equal(await ask('ann', 'gpt-4o'), 200)
    const seen = emu.received.length
    const refused = await client('ann').chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused))
    assert.equal((refused.error as { code?: string }).code, 'rate_limit_exceeded')
    assert.equal(emu.received.length, seen, 'the provider never saw it')
    const metrics = await (await fetch(`http://127.0.0.1:${statsPort}/metrics`)).text()
    assert.ok(metrics.split('\n').some(l => l.startsWith('portico_rate_limit_decisions_total{') && l.includes('route="remote"') && l.includes('policy="remoteRateLimit"') && l.includes('decision="limited"') && l.endsWith(' 1')), 'counted limited against remoteRateLimit')
    assert.equal(await ask('ann', 'gpt-4o-mini'), 200, 'another model: another budget')
    assert.equal(await ask('bob', 'gpt-4o'), 200, 'another user: another budget')

    // limitOverride: 2 a minute for a basic user, 3 for a gold one (the service's own limit is 100).
    const tier = async (user: string, level: string): Promise<number> => {
      const res = await fetch(`${p.url}/tiers/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': `${user}-${run}`, 'x-tier': level }, body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }) })
      await res.text()
      return res.status
    }
    const basic = []
    for (let i = 0; i < 3; i++) basic.push(await tier('carl', 'basic'))
    assert.deepEqual(basic, [200, 200, 429])
    const gold = []
    for (let i = 0; i < 4; i++) gold.push(await tier('gina', 'gold'))
    assert.deepEqual(gold, [200, 200, 200, 429])
  })
})
