/**
 * `ai` backends and token-based rate limits, with the official OpenAI SDK (`openai`) as the
 * client and an OpenAI-compatible server on loopback: chat completions (plain and streamed)
 * go to the provider's path with the configured model; the token usage of each answer is
 * read (trace, metrics, access log) and taken from `localRateLimit` buckets of type
 * `tokens`, which refuse the next request once spent; bad requests, a dead provider and
 * configs that could never count a token get clear errors.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import OpenAI from 'openai'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'
import { requireTool } from '@portico/testkit/tools'
import { countTokens, promptTokens, startLlmServer, type LlmServer } from '../lib/llm.ts'
import { assertConfigError } from '../lib/validate.ts'

const REPLY = 'one two three four five six seven eight nine ten eleven twelve'
const MESSAGES = [{ role: 'system' as const, content: 'be brief' }, { role: 'user' as const, content: 'count to twelve please' }]
/** Tokens one exchange costs: 6 prompt + 12 completion. */
const COST = promptTokens(MESSAGES) + countTokens(REPLY)

describe('ai backends', () => {
  let llm: LlmServer
  let portico: PorticoProcess
  let admin: string
  let stats: string
  let deadPort: number

  const client = (path: string): OpenAI => new OpenAI({ apiKey: 'sk-test', baseURL: `${portico.url}${path}`, maxRetries: 0 })

  before(async () => {
    llm = await startLlmServer({ reply: REPLY })
    const [adminPort, statsPort] = [await freePort(), await freePort()]
    deadPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    stats = `http://127.0.0.1:${statsPort}`
    const ai = (name: string, extra: Record<string, unknown> = {}) => ({ name, provider: { openAI: {} }, hostOverride: llm.host, ...extra })
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'chat', matches: [{ path: { pathPrefix: '/openai' } }], backends: [{ ai: ai('local-llm') }] },
          { name: 'pinned', matches: [{ path: { pathPrefix: '/pinned' } }], backends: [{ ai: ai('pinned-llm', { provider: { openAI: { model: 'pinned-model' } } }) }] },
          { name: 'keyed', matches: [{ path: { pathPrefix: '/keyed' } }], backends: [{ ai: ai('keyed-llm'), policies: { backendAuth: { key: 'sk-provider-key-1234' } } }] },
          {
            name: 'budget',
            matches: [{ path: { pathPrefix: '/budget' } }],
            // Two exchanges fit (2 × 18 = 36 ≥ 30 - 18 > 0): the third finds the bucket spent.
            policies: { localRateLimit: [{ maxTokens: 30, tokensPerFill: 30, fillInterval: '1h', type: 'tokens' }] },
            backends: [{ ai: ai('budget-llm') }]
          },
          {
            name: 'stream-budget',
            matches: [{ path: { pathPrefix: '/stream-budget' } }],
            policies: { localRateLimit: [{ maxTokens: 20, tokensPerFill: 20, fillInterval: '1h', type: 'tokens' }, { maxTokens: 100, tokensPerFill: 100, fillInterval: '1h' }] },
            backends: [{ ai: ai('stream-llm') }]
          },
          {
            name: 'refill',
            matches: [{ path: { pathPrefix: '/refill' } }],
            // 18 tokens spent from 10: a debt of 8, paid by two fills of 5 (1 token left after 2 s).
            policies: { localRateLimit: [{ maxTokens: 10, tokensPerFill: 5, fillInterval: '1s', type: 'tokens' }] },
            backends: [{ ai: ai('refill-llm') }]
          },
          { name: 'dead', matches: [{ path: { pathPrefix: '/dead' } }], backends: [{ ai: { name: 'dead-llm', provider: { openAI: {} }, hostOverride: `127.0.0.1:${deadPort}` } }] },
          {
            // Nearly always the dead one first; the retry prepares the request again for the live one.
            name: 'retry',
            matches: [{ path: { pathPrefix: '/retry' } }],
            policies: { retry: { attempts: 1, codes: [503], backoff: '10ms' } },
            backends: [
              { ai: { name: 'dead-llm', provider: { openAI: {} }, hostOverride: `127.0.0.1:${deadPort}` }, weight: 1000 },
              { ai: ai('retry-llm', { provider: { openAI: { model: 'retry-model' } } }), weight: 1 }
            ]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await llm?.close()
  })

  test('a chat completion through the OpenAI SDK reaches the provider path, and its usage is read', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/openai/chat/completions')
    await trace.ready
    const before = llm.bodies.length
    const completion = await client('/openai').chat.completions.create({ model: 'gpt-test', messages: MESSAGES })
    assert.equal(completion.choices[0]!.message.content, REPLY)
    assert.deepEqual(completion.usage, { prompt_tokens: 6, completion_tokens: 12, total_tokens: 18 })
    assert.equal(completion.model, 'gpt-test-2024')
    assert.equal(llm.bodies.length, before + 1)
    const seen = llm.bodies.at(-1)!
    assert.equal(seen.model, 'gpt-test')
    assert.deepEqual(seen.messages, MESSAGES)
    const headers = llm.headers.at(-1)!
    assert.equal(headers.host, llm.host, 'Host is the provider\'s')
    assert.equal(headers['accept-encoding'], 'identity', 'an uncompressed answer is asked for, so its usage can be read')
    assert.equal(headers.authorization, 'Bearer sk-test', 'the client\'s credentials go through')

    const events = await trace.done
    const request = events.find(e => e.message.type === 'llmRequest')!.message
    assert.deepEqual({ ...request, type: undefined }, { type: undefined, provider: 'openAI', requestModel: 'gpt-test', model: 'gpt-test', streaming: false, path: '/v1/chat/completions' })
    const response = events.find(e => e.message.type === 'llmResponse')!.message
    assert.deepEqual(response, { type: 'llmResponse', responseModel: 'gpt-test-2024', inputTokens: 6, outputTokens: 12, totalTokens: 18 })
    const final = events.find(e => e.message.type === 'requestSnapshot' && e.message.stage === 'final request')!.message
    const state = final.requestState as { backend: { name: string, type: string }, request: { path?: string, uri?: string } }
    assert.deepEqual(state.backend, { name: 'local-llm', type: 'ai', protocol: 'http' })
  })

  test('backendAuth: the provider gets the configured key instead of the client\'s, and /config_dump does not show it', { timeout: 15_000 }, async () => {
    await client('/keyed').chat.completions.create({ model: 'gpt-test', messages: MESSAGES })
    assert.equal(llm.headers.at(-1)?.authorization, 'Bearer sk-provider-key-1234')
    const dump = await (await fetch(`${admin}/config_dump`)).text()
    assert.doesNotMatch(dump, /sk-provider-key-1234/)
  })

  test('provider.openAI.model replaces the request\'s model', { timeout: 15_000 }, async () => {
    const completion = await client('/pinned').chat.completions.create({ model: 'whatever', messages: MESSAGES })
    assert.equal(llm.bodies.at(-1)!.model, 'pinned-model')
    assert.equal(completion.model, 'pinned-model-2024')
  })

  test('a streamed completion: include_usage is asked for, and the last chunk\'s usage is counted', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/openai/chat/completions')
    await trace.ready
    const stream = await client('/openai').chat.completions.create({ model: 'gpt-test', messages: MESSAGES, stream: true })
    let text = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(text.trim(), REPLY)
    assert.deepEqual(usage, { prompt_tokens: 6, completion_tokens: 12, total_tokens: 18 }, 'the client gets the usage chunk too')
    assert.deepEqual(llm.bodies.at(-1)!.stream_options, { include_usage: true })
    const events = await trace.done
    assert.equal(events.find(e => e.message.type === 'llmRequest')!.message.streaming, true)
    assert.equal(events.find(e => e.message.type === 'llmResponse')!.message.totalTokens, 18)
  })

  test('localRateLimit type tokens: admitted while tokens are left, the answers\' usage is taken, then 429', { timeout: 15_000 }, async () => {
    const c = client('/budget')
    await c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES }) // 30 → 12
    await c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES }) // 12 → -6: the answer is not cut
    const trace = await openTrace(admin, 'path=/budget/chat/completions')
    await trace.ready
    const refused = await c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES }).then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof OpenAI.RateLimitError, `a 429 the SDK understands: ${String(refused)}`)
    assert.equal(refused.status, 429)
    assert.equal(refused.headers.get('x-ratelimit-limit'), '30')
    assert.equal(refused.headers.get('x-ratelimit-remaining'), '0')
    const reset = Number(refused.headers.get('retry-after'))
    assert.ok(reset > 3000 && reset <= 3600, `retry-after is the time to the next fill: ${reset}`)
    const deny = (await trace.done).find(e => e.message.type === 'policy' && e.message.kind === 'localRateLimit')!
    assert.match((deny.message.result as { details: string }).details, /^bucket 0 is empty \(-6 of maxTokens 30/)
    assert.equal(llm.bodies.filter(b => b.model === 'gpt-test').length >= 2, true)
  })

  test('streamed answers are counted too (beside a requests bucket)', { timeout: 15_000 }, async () => {
    const c = client('/stream-budget')
    const drain = async (): Promise<void> => {
      for await (const chunk of await c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES, stream: true })) void chunk
    }
    await drain() // 20 → 2
    await drain() // 2 → -16
    await assert.rejects(drain(), (err: unknown) => err instanceof OpenAI.RateLimitError)
  })

  test('a debt is paid by later fills before the next request gets in', { timeout: 15_000 }, async () => {
    const c = client('/refill')
    await c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES }) // 10 → -8
    const started = performance.now()
    await assert.rejects(c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES }), (err: unknown) => err instanceof OpenAI.RateLimitError)
    // Two fills (up to 2 s) bring the bucket back above zero.
    let admitted = 0
    while (admitted === 0 && performance.now() - started < 5000) {
      const ok = await c.chat.completions.create({ model: 'gpt-test', messages: MESSAGES }).then(() => true, () => false)
      if (ok) admitted = performance.now() - started
      else await new Promise(resolve => setTimeout(resolve, 50))
    }
    assert.ok(admitted > 900, `not admitted after one fill (${Math.round(admitted)} ms)`)
    assert.ok(admitted < 3000, `admitted after the second fill (${Math.round(admitted)} ms)`)
  })

  test('the usage shows in metrics (promtool accepts them) and in the access log', { timeout: 15_000 }, async t => {
    const text = await (await fetch(`${stats}/metrics`)).text()
    const line = text.split('\n').find(l => l.startsWith('portico_gen_ai_client_token_usage_sum{') && l.includes('gen_ai_token_type="output"') && l.includes('route="chat"'))
    assert.ok(line !== undefined, text.split('\n').filter(l => l.includes('gen_ai')).join('\n'))
    assert.match(line, /gen_ai_system="openai"/)
    assert.match(line, /gen_ai_request_model="gpt-test"/)
    assert.match(line, /gen_ai_response_model="gpt-test-2024"/)
    assert.equal(Number(line.split(' ').at(-1)) % 12, 0, 'output tokens: 12 per chat completion')
    const log = portico.logs().find(l => l.route === 'chat' && l['gen_ai.usage.output_tokens'] !== undefined)
    assert.ok(log !== undefined, portico.output)
    assert.equal(log['gen_ai.usage.input_tokens'], 6)
    assert.equal(log['gen_ai.request.model'], 'gpt-test')
    const promtool = requireTool(t, 'PROMTOOL', 'promtool')
    if (promtool === null) return
    const out = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' })
    assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`)
  })

  test('requests that are not chat completions are refused before the provider sees them', { timeout: 15_000 }, async () => {
    const before = llm.bodies.length
    const get = await fetch(`${portico.url}/openai/chat/completions`)
    assert.equal(get.status, 405)
    assert.equal(get.headers.get('allow'), 'POST')
    assert.match(await get.text(), /GET is not a chat completion/)
    const post = (body: string) => fetch(`${portico.url}/openai/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const notJson = await post('{"model": ')
    assert.equal(notJson.status, 400)
    assert.match(await notJson.text(), /^invalid LLM request: body is not JSON/)
    const array = await post('[1]')
    assert.equal(array.status, 400)
    assert.equal(await array.text(), 'invalid LLM request: body must be a JSON object')
    const noModel = await post('{"messages": []}')
    assert.equal(noModel.status, 400)
    assert.match(await noModel.text(), /model is required/)
    assert.equal(llm.bodies.length, before)
    // The provider's own errors come back as it sent them.
    const providerError = await post('{"model": "gpt-test"}')
    assert.equal(providerError.status, 400)
    assert.equal(((await providerError.json()) as { error: { code: string } }).error.code, 'missing_required_parameter')
  })

  test('a provider that is down: 503, and the SDK sees an APIError', { timeout: 15_000 }, async () => {
    const err = await client('/dead').chat.completions.create({ model: 'gpt-test', messages: MESSAGES }).then(() => null, (e: unknown) => e)
    assert.ok(err instanceof OpenAI.APIError, String(err))
    assert.equal(err.status, 503)
  })

  test('a retry to another ai backend prepares the request for it', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/retry/chat/completions')
    await trace.ready
    const completion = await client('/retry').chat.completions.create({ model: 'asked', messages: MESSAGES, stream: true })
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of completion) if (chunk.usage != null) usage = chunk.usage
    assert.equal(usage?.total_tokens, COST)
    const seen = llm.bodies.at(-1)!
    assert.equal(seen.model, 'retry-model')
    assert.deepEqual(seen.messages, MESSAGES)
    assert.deepEqual(seen.stream_options, { include_usage: true })
    const events = await trace.done
    // (One time in 1,001 the live backend is picked first and there is no retry.)
    if (events.some(e => e.message.type === 'retry')) {
      assert.deepEqual(events.filter(e => e.message.type === 'llmRequest').map(e => e.message.model), ['asked', 'retry-model'], 'the dead backend got the request as asked, the retry the pinned model')
    }
  })

  test('configs that could never count a token, and bad ai backends, are refused with the field', { timeout: 30_000 }, async () => {
    const base = (routes: unknown[]) => ({ gateways: { default: { port: 8080 } }, routes }) as unknown as ConfigFile
    const tokens = [{ maxTokens: 10, tokensPerFill: 1, fillInterval: '1s', type: 'tokens' }]
    await assertConfigError(base([{ policies: { localRateLimit: tokens }, backends: [{ host: '127.0.0.1:9' }] }]),
      'routes[0].policies.localRateLimit[0].type', /counts the LLM tokens of ai backends, and this route has none/)
    await assertConfigError(base([{ backends: [{ host: '127.0.0.1:9', policies: { localRateLimit: tokens } }] }]),
      'routes[0].backends[0].policies.localRateLimit[0].type', /this backend is a host/)
    await assertConfigError(base([{ policies: { remoteRateLimit: { host: '127.0.0.1:9', domain: 'd', descriptors: [{ entries: [{ key: 'k', value: '"v"' }], type: 'tokens' }] } }, backends: [{ host: '127.0.0.1:9' }] }]),
      'routes[0].policies.remoteRateLimit.descriptors[0].type', /counts the LLM tokens of ai backends, and this route has none/)
    await assertConfigError(base([
      { name: 'a', backends: [{ ai: { name: 'x', provider: { openAI: {} }, hostOverride: '127.0.0.1:1' } }] },
      { name: 'b', backends: [{ ai: { name: 'x', provider: { openAI: {} }, hostOverride: '127.0.0.1:2' } }] }
    ]), 'routes[1].backends[0].ai.name', /another ai backend is named "x" with different settings/)
    await assertConfigError(base([{ backends: [{ ai: { name: 'x', provider: { openAI: {} }, hostOverride: 'ftp://h:1' } }] }]),
      'routes[0].backends[0].ai.hostOverride', /unsupported scheme "ftp"/)
    await assertConfigError(base([{ backends: [{ ai: { name: 'x', provider: { gemini: {} }, pathOverride: '/v1beta/models/m:generateContent' } }] }]),
      'routes[0].backends[0].ai.provider.gemini', /provider gemini takes no pathOverride/)
    await assertConfigError(base([{ backends: [{ ai: { name: 'x', provider: { vertex: { projectId: 'my-project', region: 'us-central1' } } }, policies: { backendAuth: { gcp: { credential: '{"client_email":"a@b"}' } } } }] }]),
      'routes[0].backends[0].policies.backendAuth.gcp.credential', /is not a service-account key/)
    await assertConfigError(base([{ backends: [{ ai: { name: 'x', provider: { openAI: {}, groq: {} } } }] }]),
      'routes[0].backends[0].ai.provider', /needs exactly one provider \(got openAI, groq\)/)
    await assertConfigError(base([{ backends: [{ ai: { name: 'x', provider: { azure: {} } } }] }]),
      'routes[0].backends[0].ai.hostOverride', /set provider.azure.resourceName or hostOverride/)
    await assertConfigError(base([{ backends: [{ host: '127.0.0.1:9', ai: { name: 'x', provider: { openAI: {} } } }] }]),
      'routes[0].backends[0]', /needs exactly one backend kind: host, endpoints, mcp, ai or inferencePool \(got host, ai\)/)
  })
})
