/**
 * The model API (`models:`, docs/models.md) through the real gateway, with the official
 * `openai` and `@anthropic-ai/sdk` SDKs as clients and the OpenAI and Anthropic emulators
 * (e2e/lib/llm-emulators/) as providers:
 *
 * - discovery: GET /v1/models in OpenAI's and Anthropic's shapes lists the public models with
 *   an exact name, virtual ones included, internal ones not, no provider asked;
 * - selection: an exact name, a prefix wildcard (the client's model passed on), Anthropic's
 *   SDK on a suffix wildcard, a Gemini client naming the model in its path;
 * - unknown and internal models: the client format's 404, naming nothing else; a 100 KB name;
 * - weighted: 1,000 requests split 1:3 within 4 standard deviations of the binomial;
 * - failover: the first target answering 503, 429 or not listening at all → the client gets
 *   the next group's answer, no error; the access log names the model that served and why;
 * - conditional: a JWT claim sends premium users to Claude, the rest to the fallback;
 * - transformations: body fields set by CEL before conversion and after, removed, left alone
 *   when an expression fails.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { request } from 'undici'
import { importJWK, SignJWT } from 'jose'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { openTrace } from '@portico/testkit/trace'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { newSigningKey } from '../lib/idp.ts'

const OPENAI_KEY = 'sk-test-portico'
const ISSUER = 'https://idp.portico.test/'
const AUDIENCE = 'https://api.portico.test'

describe('the model API: models chosen by the model a client asks for', () => {
  let openaiA: OpenAIEmulator
  let openaiB: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let portico: PorticoProcess
  let signingKey: Awaited<ReturnType<typeof newSigningKey>>
  let admin: string

  const openai = (userToken?: string): OpenAI => new OpenAI({ apiKey: 'sk-client-key', baseURL: `${portico.url}/v1`, maxRetries: 0, ...(userToken !== undefined ? { defaultHeaders: { 'x-user-token': `Bearer ${userToken}` } } : {}) })
  const anthropic = (): Anthropic => new Anthropic({ apiKey: 'sk-ant-client-key', baseURL: portico.url, maxRetries: 0 })
  const hi = [{ role: 'user' as const, content: 'hi' }]

  before(async () => {
    openaiA = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    openaiB = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY })
    signingKey = await newSigningKey()
    const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicKey } = signingKey
    const closedPort = await freePort()
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    const openAIAt = (url: string, model?: string) => ({ provider: { openAI: model === undefined ? {} : { model } }, baseURL: `${url}/v1`, policies: { backendAuth: { key: OPENAI_KEY } } })
    const claude = { provider: { anthropic: { model: 'claude-sonnet-4-6' } }, baseURL: anthropicEmu.url, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }
    portico = await startPortico({
      env: { LOG_LEVEL: 'info', ADMIN_ADDR: `127.0.0.1:${adminPort}` },
      config: (port): ConfigFile => ({
        gateways: {
          default: {
            ...gateway(port),
            // Optional: a request with a valid token gets its claims as jwt in CEL, one without goes on
            // (the SDKs' own Authorization is the client's provider key, not this token).
            policies: { jwtAuth: { mode: 'optional', issuer: ISSUER, audiences: [AUDIENCE], jwks: { keys: [publicKey] }, location: { header: 'x-user-token', prefix: 'Bearer ' } } }
          }
        },
        models: [
          { name: 'gpt-4o', ...openAIAt(openaiA.url) },
          { name: 'gpt-family', match: { model: 'gpt-*' }, ...openAIAt(openaiB.url) },
          { name: 'claude-latest', match: { model: '*-latest' }, ...claude },
          { name: 'claude-sonnet', visibility: 'Internal', ...claude },
          { name: 'secret', visibility: 'Internal', ...openAIAt(openaiB.url, 'gpt-4o-mini') },
          { name: 'mix', virtualModel: { weighted: [{ model: 'gpt-4o', weight: 1 }, { model: 'secret', weight: 3 }] } },
          // The emulator answers `error-<fixture>` models with that recorded error.
          { name: 'overloaded', visibility: 'Internal', ...openAIAt(openaiA.url, 'error-overloaded') },
          { name: 'limited', visibility: 'Internal', ...openAIAt(openaiA.url, 'error-rate-limit') },
          { name: 'down', visibility: 'Internal', ...openAIAt(`http://127.0.0.1:${closedPort}`, 'gpt-4o-mini') },
          { name: 'safe-503', virtualModel: { failover: { groups: [{ models: ['overloaded'] }, { models: ['claude-sonnet'] }] } } },
          { name: 'safe-429', virtualModel: { failover: { groups: [{ models: ['limited'] }, { models: ['claude-sonnet'] }] } } },
          { name: 'safe-down', virtualModel: { failover: { groups: [{ models: ['down'] }, { models: ['secret'] }] } } },
          {
            name: 'tuned',
            ...openAIAt(openaiA.url, 'gpt-4o-mini'),
            policies: {
              backendAuth: { key: OPENAI_KEY },
              transformations: {
                request: {
                  // In the client's format (here OpenAI's), then in the provider's (here also OpenAI's).
                  beforeConversion: { set: { max_tokens: '42', user: 'jwt.sub' }, remove: ['temperature'] },
                  afterConversion: { set: { 'metadata.messages': 'string(llm.request.messageCount)' } }
                }
              }
            }
          },
          {
            name: 'tuned-claude',
            ...claude,
            policies: {
              backendAuth: { key: ANTHROPIC_TEST_KEY },
              transformations: {
                request: {
                  beforeConversion: { set: { max_tokens: 'llm.request.messageCount * 100' } },
                  // After conversion the body is Anthropic's: `system` and `metadata.user_id` are its fields.
                  afterConversion: { set: { system: '"be brief"', 'metadata.user_id': '"model-" + llm.request.model' } }
                }
              }
            }
          },
          { name: 'router', virtualModel: { conditional: { rules: [{ when: 'jwt.tier == "premium"', model: 'claude-sonnet' }, { when: 'llm.request.messageCount > 3', model: 'gpt-4o' }], fallback: 'secret' } } }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await openaiA?.close()
    await openaiB?.close()
    await anthropicEmu?.close()
  })

  test('discovery: OpenAI\'s and Anthropic\'s model lists hold the public models with an exact name, from the config', async () => {
    const before = openaiA.received.length + openaiB.received.length + anthropicEmu.bodies.length
    const ids = []
    for await (const m of openai().models.list()) ids.push(m.id)
    assert.deepEqual(ids.sort(), ['gpt-4o', 'mix', 'router', 'safe-429', 'safe-503', 'safe-down', 'tuned', 'tuned-claude'])
    const page = await anthropic().models.list()
    assert.deepEqual(page.data.map(m => m.id).sort(), ['gpt-4o', 'mix', 'router', 'safe-429', 'safe-503', 'safe-down', 'tuned', 'tuned-claude'])
    assert.equal(page.data[0]!.type, 'model')
    assert.equal(openaiA.received.length + openaiB.received.length + anthropicEmu.bodies.length, before, 'no provider was asked')
  })

  test('selection: exact, prefix and suffix wildcards, and a Gemini client\'s model in its path', async () => {
    const a = openaiA.received.length
    const c = await openai().chat.completions.create({ model: 'gpt-4o', messages: hi })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    assert.equal(openaiA.received.length, a + 1, 'gpt-4o: the exact model, on A')
    assert.equal(openaiA.received.at(-1)!.body!.model, 'gpt-4o')
    assert.equal(openaiA.received.at(-1)!.headers.authorization, `Bearer ${OPENAI_KEY}`, 'the model\'s key, not the client\'s')

    const b = openaiB.received.length
    await openai().chat.completions.create({ model: 'gpt-3.5-turbo', messages: hi })
    assert.equal(openaiB.received.length, b + 1, 'gpt-*: B')
    assert.equal(openaiB.received.at(-1)!.body!.model, 'gpt-3.5-turbo', 'a wildcard model passes the client\'s model on')

    const before = anthropicEmu.bodies.length
    const m = await anthropic().messages.create({ model: 'claude-3-5-latest', max_tokens: 64, messages: hi })
    assert.equal(m.type, 'message')
    assert.equal(anthropicEmu.bodies.length, before + 1, '*-latest: the Anthropic model')
    assert.equal(anthropicEmu.bodies.at(-1)!.model, 'claude-sonnet-4-6')

    // A Gemini client names the model in the path; the OpenAI provider gets a chat completion.
    const g = await request(`${portico.url}/v1beta/models/gpt-4o:generateContent`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-goog-api-key': 'client-key' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }) })
    const answer = await g.body.json() as { candidates: Array<{ content: { parts: Array<{ text: string }> } }> }
    assert.equal(g.statusCode, 200)
    assert.equal(answer.candidates[0]!.content.parts[0]!.text, 'Hello!')
    assert.equal(openaiA.received.at(-1)!.body!.model, 'gpt-4o')

    // OpenAI Responses, and a Bedrock Converse client (the model in its path), to the exact model.
    const r = await openai().responses.create({ model: 'gpt-4o', input: 'hi' })
    assert.equal(r.object, 'response')
    assert.equal(openaiA.received.at(-1)!.body!.model, 'gpt-4o')
    const bedrock = await request(`${portico.url}/model/gpt-4o/converse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'hi' }] }] }) })
    const converse = await bedrock.body.json() as { output: { message: { content: Array<{ text: string }> } } }
    assert.equal(bedrock.statusCode, 200)
    assert.equal(converse.output.message.content[0]!.text, 'Hello!')

    // Paths that are no LLM API's are not the models' (no route: 404 as without models).
    const other = await request(`${portico.url}/healthz`)
    await other.body.dump()
    assert.equal(other.statusCode, 404)
  })

  test('unknown and internal models: the client format\'s 404, naming nothing else served; a 100 KB model name', async () => {
    const a = openaiA.received.length + openaiB.received.length
    for (const model of ['o3-pro', 'secret', 'claude-sonnet']) {
      const err = await openai().chat.completions.create({ model, messages: hi }).catch(e => e)
      assert.ok(err instanceof OpenAI.NotFoundError, `${model}: ${String(err)}`)
      assert.equal(err.status, 404)
      assert.match(err.message, new RegExp(`The model \`${model}\` does not exist or is not served here`))
      for (const other of ['gpt-4o', 'mix', 'secret', 'claude'].filter(o => !model.includes(o))) assert.doesNotMatch(err.message, new RegExp(other), 'no other model is named')
    }
    const err = await anthropic().messages.create({ model: 'secret', max_tokens: 8, messages: hi }).catch(e => e)
    assert.ok(err instanceof Anthropic.NotFoundError, String(err))
    assert.equal((err.error as { type: string, error: { type: string } }).error.type, 'not_found_error')

    const huge = 'm'.repeat(100 * 1024)
    const res = await request(`${portico.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: huge, messages: hi }) })
    const text = await res.body.text()
    assert.equal(res.statusCode, 404)
    assert.ok(text.length < 1024, `the error does not echo the whole name (${text.length} bytes)`)
    assert.equal(openaiA.received.length + openaiB.received.length, a, 'no provider was asked')
  })

  test('an internal model served through a virtual model; weighted 1:3 over 1,000 requests within 4 sigma', { timeout: 120_000 }, async () => {
    const a = openaiA.received.length
    const b = openaiB.received.length
    const N = 1000
    const client = openai()
    for (let i = 0; i < N; i += 25) {
      await Promise.all(Array.from({ length: Math.min(25, N - i) }, () => client.chat.completions.create({ model: 'mix', messages: hi })))
    }
    const toA = openaiA.received.length - a
    const toB = openaiB.received.length - b
    assert.equal(toA + toB, N)
    // Binomial(1000, 1/4): mean 250, sigma = sqrt(1000 · 1/4 · 3/4) ≈ 13.7.
    const sigma = Math.sqrt(N * 0.25 * 0.75)
    assert.ok(Math.abs(toA - N / 4) <= 4 * sigma, `gpt-4o got ${toA} of ${N} (expected 250 ± ${Math.round(4 * sigma)})`)
    // The internal model's provider got its own model name, not the virtual one.
    assert.equal(openaiB.received.at(-1)!.body!.model, 'gpt-4o-mini')
    await waitFor(() => portico.logs().some(l => l['portico.model'] === 'secret' && String(l['portico.model.why']).startsWith('mix: weight 3 of 4')))
  })

  for (const [name, what] of [['safe-503', 'answers 503'], ['safe-429', 'answers 429'], ['safe-down', 'is not listening']] as const) {
    test(`failover: the first target ${what} → the next group answers, no client-visible error; the log says why`, { timeout: 15_000 }, async () => {
      const c = await openai().chat.completions.create({ model: name, messages: hi, max_tokens: 50 })
      assert.equal(c.object, 'chat.completion')
      assert.ok((c.choices[0]!.message.content ?? '').length > 0)
      const served = name === 'safe-down' ? 'secret' : 'claude-sonnet'
      await waitFor(() => portico.logs().some(l => l['portico.model'] === served && String(l['portico.model.why']).startsWith(`${name}: failover; failed over from model:${name}/`)))
      const line = portico.logs().find(l => l['portico.model'] === served && String(l['portico.model.why']).startsWith(`${name}: failover`))!
      assert.equal(line.status, 200)
      assert.equal(line.backend, `model:${name}/${served}`)
      // Ejected now: the next request goes to the second group straight away, still no error.
      const again = await openai().chat.completions.create({ model: name, messages: hi, max_tokens: 50 })
      assert.equal(again.object, 'chat.completion')
    })
  }

  test('conditional: a JWT claim picks Claude, a long conversation gpt-4o, anything else the fallback', async () => {
    const key = await importJWK(signingKey, 'RS256')
    const now = Math.floor(Date.now() / 1000)
    const token = (tier: string) => new SignJWT({ tier }).setProtectedHeader({ alg: 'RS256', kid: signingKey.kid }).setIssuer(ISSUER).setAudience(AUDIENCE).setSubject('alice').setIssuedAt(now).setExpirationTime(now + 300).sign(key)

    const claudeBefore = anthropicEmu.bodies.length
    const premium = await openai(await token('premium')).chat.completions.create({ model: 'router', messages: hi })
    assert.equal(premium.object, 'chat.completion')
    assert.equal(anthropicEmu.bodies.length, claudeBefore + 1, 'tier premium: Claude (translated from the chat completion)')

    const a = openaiA.received.length
    await openai(await token('basic')).chat.completions.create({ model: 'router', messages: [...hi, { role: 'assistant', content: 'hello' }, ...hi, { role: 'assistant', content: 'yes?' }] })
    assert.equal(openaiA.received.length, a + 1, 'four messages: rule 2, gpt-4o')

    const b = openaiB.received.length
    await openai().chat.completions.create({ model: 'router', messages: hi })
    assert.equal(openaiB.received.length, b + 1, 'no token: the fallback')
    assert.equal(openaiB.received.at(-1)!.body!.model, 'gpt-4o-mini')
    await waitFor(() => ['router: rule 1', 'router: rule 2', 'router: fallback'].every(why => portico.logs().some(l => l['portico.model.why'] === why)))
  })

  test('transformations: CEL edits of body fields before conversion (client format) and after (provider format)', async () => {
    await openai().chat.completions.create({ model: 'tuned', messages: hi, temperature: 0.3, max_tokens: 7 })
    const sent = openaiA.received.at(-1)!.body!
    assert.equal(sent.model, 'gpt-4o-mini')
    assert.equal(sent.max_tokens, 42, 'set before conversion')
    assert.equal(sent.temperature, undefined, 'removed')
    assert.equal(sent.user, undefined, 'jwt.sub fails without a token: the field is left as it was')
    assert.deepEqual(sent.metadata, { messages: '1' }, 'set after conversion')

    await openai().chat.completions.create({ model: 'tuned-claude', messages: [...hi, { role: 'assistant', content: 'hello' }, ...hi] })
    const claudeBody = anthropicEmu.bodies.at(-1)!
    assert.equal(claudeBody.max_tokens, 300, 'three messages × 100, set on the OpenAI body and translated')
    assert.equal(claudeBody.system, 'be brief')
    assert.deepEqual(claudeBody.metadata, { user_id: 'model-tuned-claude' })
  })

  test('the trace says which model served and why; /config_dump lists the models', async () => {
    const trace = await openTrace(admin, 'path=/v1/chat/completions')
    await trace.ready
    await openai().chat.completions.create({ model: 'router', messages: hi })
    const events = await trace.done
    const selection = events.find(e => e.message.type === 'modelSelection')!.message
    assert.deepEqual({ ...selection }, { type: 'modelSelection', requestModel: 'router', matched: 'router', model: 'secret', why: ['router: fallback'] })
    assert.equal(events.find(e => e.message.type === 'llmRequest')!.message.model, 'gpt-4o-mini')

    const res = await request(`${admin}/config_dump`)
    const dump = await res.body.json() as { models: Array<Record<string, unknown>>, backends: Array<{ key: string, name: string }> }
    const mix = dump.models.find(m => m.name === 'mix')!
    assert.deepEqual(mix, { listener: 'default', route: 'models:default', name: 'mix', match: 'mix', visibility: 'Public', attached: true, kind: 'virtual', virtual: { kind: 'weighted', targets: [{ model: 'gpt-4o', weight: 1 }, { model: 'secret', weight: 3 }] } })
    const secret = dump.models.find(m => m.name === 'secret')!
    assert.equal(secret.attached, false, 'internal: reached only through virtual models')
    assert.ok(dump.backends.some(b => b.key === secret.backend && b.name === 'model:secret'))
    assert.doesNotMatch(JSON.stringify(dump), new RegExp(OPENAI_KEY), 'keys are redacted')
  })
})

async function waitFor (check: () => boolean, timeoutMs = 5000): Promise<void> {
  await waitUntil(check, timeoutMs, 'the condition', 25)
}
