/**
 * Failover across providers (an `ai` backend's `groups`) through the real gateway, with the
 * official `openai` and `@anthropic-ai/sdk` SDKs as clients and the OpenAI, Anthropic and
 * Gemini emulators (e2e/lib/llm-emulators/) as providers. The OpenAI provider sits behind a small
 * switch in this file that answers 429, 503 or nothing at all when told to, and otherwise
 * passes the request to the OpenAI emulator. Each test has its own route and backend (own
 * passive-health state):
 *
 * - the OpenAI provider (group 1) answers 429 → the Anthropic provider (group 2) answers, the
 *   request re-encoded in Anthropic's format; the trace names each attempt's provider and why;
 * - 503, and a provider that hangs past the backend timeout, streamed, with the OpenAI SDK;
 * - ejection: an ejected provider gets no request until its ejection (backing off: the second
 *   in a row lasts twice as long) ends, then gets traffic again; /config_dump shows it;
 * - no failover once the answer started: a stream cut after its first bytes ends the
 *   client's stream, the next provider never sees the request;
 * - across three formats: OpenAI 503, Anthropic 429, Gemini answers an Anthropic client;
 * - /config_dump (each provider's policies, no key) and portico_gen_ai_failovers_total;
 * - every provider failing: the client gets the last provider's error, in its own format.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { request } from 'undici'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { sleep, waitUntil } from '@portico/testkit/wait'
import { openTrace } from '@portico/testkit/trace'
import { setForTest } from '@portico/testkit/for-test'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { startGeminiEmulator, type GeminiEmulator } from '../lib/llm-emulators/gemini.ts'

const OPENAI_KEY = 'sk-test-portico'
const ERRORS = fileURLToPath(new URL('../../packages/engine/test/golden/llm/openai-chat/errors/', import.meta.url))
const RATE_LIMIT = readFileSync(`${ERRORS}rate-limit.429.json`, 'utf8')
const OVERLOADED = readFileSync(`${ERRORS}overloaded.503.json`, 'utf8')

type Mode = 'ok' | '429' | '503' | 'hang'

/** The OpenAI provider as the gateway sees it: failing as told, else the OpenAI emulator. */
interface Switch extends Backend {
  mode: Mode
  /** Requests that reached the switch (whatever it answered). */
  seen: number
}

async function startSwitch (target: OpenAIEmulator): Promise<Switch> {
  const hung: http.ServerResponse[] = []
  const sw = await startBackend((req, res) => {
    sw.seen++
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c as Buffer))
    req.on('end', () => {
      if (sw.mode === '429') {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' })
        res.end(RATE_LIMIT)
        return
      }
      if (sw.mode === '503') {
        res.writeHead(503, { 'content-type': 'application/json' })
        res.end(OVERLOADED)
        return
      }
      if (sw.mode === 'hang') {
        hung.push(res)
        return
      }
      const up = http.request(`${target.url}${req.url}`, { method: req.method, headers: req.headers }, answer => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      up.on('error', () => res.destroy())
      up.end(Buffer.concat(chunks))
    })
  }) as Switch
  sw.mode = 'ok'
  sw.seen = 0
  const close = sw.close
  sw.close = async () => {
    for (const r of hung) r.destroy()
    await close()
  }
  return sw
}

describe('ai backends: failover across providers (groups)', () => {
  let openaiEmu: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let geminiEmu: GeminiEmulator
  let portico: PorticoProcess
  let admin: string
  let stats: string
  const switches = new Map<string, Switch>()
  const NAMES = ['rate', 'overload', 'hang', 'eject', 'cut', 'all', 'three']

  const openai = (path: string): OpenAI => new OpenAI({ apiKey: 'sk-client-key', baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const anthropic = (path: string): Anthropic => new Anthropic({ apiKey: 'sk-ant-client-key', baseURL: `${portico.url}${path}`, maxRetries: 0 })

  before(async () => {
    openaiEmu = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    anthropicEmu = await startAnthropicEmulator()
    geminiEmu = await startGeminiEmulator()
    for (const name of NAMES) switches.set(name, await startSwitch(openaiEmu))
    const adminPort = await freePort()
    const statsPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    stats = `http://127.0.0.1:${statsPort}`
    const route = (name: string, openaiModel: string, anthropicModel: string, ejection: string): NonNullable<ConfigFile['routes']>[number] => ({
      name,
      matches: [{ path: { pathPrefix: `/${name}` } }],
      policies: { timeout: { backendRequestTimeout: '1s' } },
      backends: [{
        ai: {
          name: `llm-${name}`,
          groups: [
            { providers: [{ name: 'openai', provider: { openAI: { model: openaiModel } }, hostOverride: name === 'cut' ? openaiEmu.url : switches.get(name)!.url, policies: { backendAuth: { key: OPENAI_KEY } } }] },
            { providers: [{ name: 'claude', provider: { anthropic: { model: anthropicModel } }, hostOverride: anthropicEmu.url, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }] }
          ]
        },
        policies: { health: { consecutiveFailures: 1, ejectionDuration: ejection } }
      }]
    })
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          route('rate', 'gpt-4o-mini', 'claude-sonnet-4-6', '100ms'),
          route('overload', 'gpt-4o-mini', 'claude-sonnet-4-6', '100ms'),
          route('hang', 'gpt-4o-mini', 'claude-sonnet-4-6', '100ms'),
          route('eject', 'gpt-4o-mini', 'claude-sonnet-4-6', '1s'),
          route('cut', 'cut-mid-tool-call', 'claude-sonnet-4-6', '100ms'),
          route('all', 'gpt-4o-mini', 'claude-sonnet-4-6', '100ms'),
          {
            name: 'three',
            matches: [{ path: { pathPrefix: '/three' } }],
            backends: [{
              ai: {
                name: 'llm-three',
                groups: [
                  { providers: [{ name: 'openai', provider: { openAI: { model: 'gpt-4o-mini' } }, hostOverride: switches.get('three')!.url, policies: { backendAuth: { key: OPENAI_KEY } } }] },
                  { providers: [{ name: 'claude', provider: { anthropic: { model: 'claude-sonnet-4-6' } }, hostOverride: anthropicEmu.url, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }] },
                  { providers: [{ name: 'gemini', provider: { gemini: { model: 'gemini-2.5-flash' } }, hostOverride: geminiEmu.url, policies: { backendAuth: { key: geminiEmu.apiKey } } }] }
                ]
              }
            }]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    for (const s of switches.values()) await s.close()
    await openaiEmu?.close()
    await anthropicEmu?.close()
    await geminiEmu?.close()
  })

  test('anthropic SDK: the OpenAI provider answers 429 → the Anthropic provider of the next group answers; each attempt traced', { timeout: 15_000 }, async t => {
    const sw = switches.get('rate')!
    setForTest(t, sw, 'mode', '429')
    const openaiBefore = openaiEmu.received.length
    const anthropicBefore = anthropicEmu.bodies.length
    const trace = await openTrace(admin, 'path=/rate/v1/messages')
    await trace.ready
    const m = await anthropic('/rate').messages.create({ model: 'any', max_tokens: 64, system: 'be brief', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(m.type, 'message')
    assert.equal(m.content[0]!.type === 'text' ? m.content[0]!.text : '', 'Bonjour ! Grüße — ✓ 日本語')
    assert.equal(sw.seen, 1, 'the OpenAI provider was tried first')
    assert.equal(openaiEmu.received.length, openaiBefore, 'its 429 came from the switch')
    assert.equal(anthropicEmu.bodies.length, anthropicBefore + 1)
    // Passed through to Anthropic (the client's own format), the backend's model in place.
    const sent = anthropicEmu.bodies.at(-1)!
    assert.equal(sent.model, 'claude-sonnet-4-6')
    assert.equal(sent.system, 'be brief')
    assert.equal(anthropicEmu.headers.at(-1)!['x-api-key'], ANTHROPIC_TEST_KEY)
    const events = await trace.done
    const requests = events.filter(e => e.message.type === 'llmRequest').map(e => [e.message.provider, e.message.providerFormat])
    assert.deepEqual(requests, [['openAI', 'openai-chat'], ['anthropic', 'anthropic-messages']], 'first encoded for OpenAI, then for Anthropic')
    const failover = events.find(e => e.message.type === 'retry')!.message
    assert.equal(failover.failover, true)
    assert.equal(failover.provider, 'llm-rate/openai')
    assert.match(String(failover.reason), /provider llm-rate\/openai \(openAI\) answered 429/)
    assert.equal(failover.attempt, 2)
    assert.equal(failover.attempts, 2)
  })

  test('openai SDK: the OpenAI provider answers 503 → the answer comes from Anthropic, translated to a chat completion', { timeout: 15_000 }, async t => {
    const sw = switches.get('overload')!
    setForTest(t, sw, 'mode', '503')
    const c = await openai('/overload').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], max_tokens: 100 })
    assert.equal(c.object, 'chat.completion')
    assert.equal(c.choices[0]!.message.content, 'Bonjour ! Grüße — ✓ 日本語')
    assert.equal(c.usage?.completion_tokens, 503)
    assert.equal(sw.seen, 1)
    // Re-encoded for Anthropic: the system message became `system`, max_tokens kept.
    const sent = anthropicEmu.bodies.at(-1)!
    assert.equal(sent.system, 'be brief')
    assert.equal(sent.max_tokens, 100)
    // The usage of the answer the client got is the one counted, under the provider that gave it.
    await waitUntil(() => portico.logs().some(l => l.route === 'overload' && l['gen_ai.usage.output_tokens'] === 503), 5_000, 'the access log line of the overload request')
    const log = portico.logs().find(l => l.route === 'overload' && l['gen_ai.usage.output_tokens'] === 503)!
    assert.equal(log.backend, 'llm-overload/claude')
  })

  test('openai SDK, streamed: the OpenAI provider hangs past the backend timeout → the Anthropic stream arrives as OpenAI chunks', { timeout: 15_000 }, async t => {
    const sw = switches.get('hang')!
    setForTest(t, sw, 'mode', 'hang')
    const started = Date.now()
    const stream = await openai('/hang').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk')
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(text, 'Bonjour ! Grüße — ✓ 日本語 🎉')
    assert.equal(usage?.completion_tokens, 15)
    assert.equal(sw.seen, 1)
    assert.ok(Date.now() - started >= 900, 'the first provider had its backend timeout (1s)')
    assert.equal(anthropicEmu.bodies.at(-1)!.stream, true)
  })

  test('ejection: an ejected provider gets no requests until its ejection ends — the second in a row twice as long — then gets traffic again', { timeout: 30_000 }, async t => {
    const sw = switches.get('eject')!
    const ask = async (): Promise<string> => {
      const c = await openai('/eject').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      return c.choices[0]!.message.content ?? ''
    }
    const dump = async (): Promise<{ requests: number, endpoints?: { healthy: number, total: number, ejected: string[] } }> => {
      const res = await request(`${admin}/config_dump`)
      const body = await res.body.json() as { backends: Array<{ name: string, stats: { requests: number, endpoints?: { healthy: number, total: number, ejected: string[] } } }> }
      return body.backends.find(b => b.name === 'llm-eject/openai')!.stats
    }
    assert.equal(await ask(), 'Hello!', 'healthy: the first group answers')
    assert.equal(sw.seen, 1)

    setForTest(t, sw, 'mode', '429')
    assert.equal(await ask(), 'Bonjour ! Grüße — ✓ 日本語', 'a 429: the next group answers')
    assert.equal(sw.seen, 2)
    assert.deepEqual((await dump()).endpoints, { healthy: 0, total: 1, ejected: [sw.url] }, '/config_dump shows the provider ejected')
    // Ejected (1s): requests go straight to the next group.
    assert.equal(await ask(), 'Bonjour ! Grüße — ✓ 日本語')
    assert.equal(sw.seen, 2, 'the ejected provider was not tried')

    await sleep(1100)
    // Re-admitted; it fails again: ejected again, now for 2s (backoff).
    assert.equal(await ask(), 'Bonjour ! Grüße — ✓ 日本語')
    assert.equal(sw.seen, 3, 're-admitted after its ejection')
    setForTest(t, sw, 'mode', 'ok')
    await sleep(1200)
    assert.equal(await ask(), 'Bonjour ! Grüße — ✓ 日本語', '1.2s later it is still ejected: the second ejection lasts 2s')
    assert.equal(sw.seen, 3)
    await sleep(1000)
    assert.equal(await ask(), 'Hello!', 'after 2s it takes requests again')
    assert.equal(sw.seen, 4)
    assert.deepEqual((await dump()).endpoints, { healthy: 1, total: 1, ejected: [] })
  })

  test('/config_dump: every provider a backend with its own policies, no key shown', { timeout: 15_000 }, async () => {
    const res = await request(`${admin}/config_dump`)
    const text = await res.body.text()
    const dump = JSON.parse(text) as { backends: Array<{ key: string, name: string, kind: string }>, policies: Array<{ target: string, policies: { requestHeaderModifier?: { set?: Record<string, string> } } }> }
    const providers = dump.backends.filter(b => b.name.startsWith('llm-rate/'))
    assert.deepEqual(providers.map(b => [b.name, b.kind]), [['llm-rate/openai', 'ai'], ['llm-rate/claude', 'ai']])
    for (const b of providers) {
      const attached = dump.policies.find(p => p.target === `backend/rate/${b.key}`)
      assert.ok(attached !== undefined, `${b.name}: its policies are listed`)
      assert.deepEqual(Object.values(attached.policies.requestHeaderModifier?.set ?? {}), ['<redacted>'])
    }
    assert.doesNotMatch(text, new RegExp(`${OPENAI_KEY}|${ANTHROPIC_TEST_KEY}`))
  })

  test('no failover after the first byte: a stream cut mid-tool-call ends the client\'s stream; the next provider never sees it', { timeout: 15_000 }, async () => {
    const anthropicBefore = anthropicEmu.bodies.length
    const stream = await openai('/cut').chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      stream: true
    })
    let chunks = 0
    await assert.rejects(async () => {
      for await (const _chunk of stream) chunks++
    })
    assert.ok(chunks > 0, 'the stream had started')
    // The gateway is done with the request once it logged it: no later try can come.
    await waitUntil(() => portico.logs().some(l => l.msg === 'request' && l.route === 'cut'), 5_000, 'the access log line of the cut request')
    assert.equal(anthropicEmu.bodies.length, anthropicBefore, 'no second provider after the answer began')
  })

  test('metrics: portico_gen_ai_failovers_total counts the dropped tries by route, provider and reason', { timeout: 15_000 }, async () => {
    const text = await (await fetch(`${stats}/metrics`)).text()
    const count = (labels: string): number => Number(new RegExp(`^portico_gen_ai_failovers_total\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
    assert.equal(count('route="rate",backend="llm-rate/openai",reason="429"'), 1, text.split('\n').filter(l => l.includes('failovers')).join('\n'))
    assert.equal(count('route="overload",backend="llm-overload/openai",reason="503"'), 1)
    assert.equal(count('route="hang",backend="llm-hang/openai",reason="timeout"'), 1)
    assert.equal(count('route="eject",backend="llm-eject/openai",reason="429"'), 2, 'two tries dropped; the ejected provider was not tried')
  })

  test('three formats: OpenAI answers 503, Anthropic 429, Gemini answers — an Anthropic client gets it as a Messages answer', { timeout: 15_000 }, async t => {
    const sw = switches.get('three')!
    setForTest(t, sw, 'mode', '503')
    const anthropicBefore = anthropicEmu.bodies.length
    const trace = await openTrace(admin, 'path=/three/v1/messages')
    await trace.ready
    // The Anthropic emulator answers its rate-limit transcript when the last user message names it.
    const m = await anthropic('/three').messages.create({ model: 'any', max_tokens: 64, system: 'be brief', messages: [{ role: 'user', content: 'rate-limit' }] })
    assert.equal(m.type, 'message')
    assert.equal(m.content[0]!.type === 'text' ? m.content[0]!.text : '', 'AI learns patterns from data to make predictions or decisions.')
    assert.equal(sw.seen, 1)
    assert.equal(anthropicEmu.bodies.length, anthropicBefore + 1)
    const call = geminiEmu.calls.at(-1)!
    assert.equal(call.path, '/v1beta/models/gemini-2.5-flash:generateContent')
    assert.deepEqual(call.body.systemInstruction, { parts: [{ text: 'be brief' }] }, 'encoded for Gemini: the system prompt as systemInstruction')
    assert.equal(call.headers['x-goog-api-key'], geminiEmu.apiKey)
    const events = await trace.done
    assert.deepEqual(events.filter(e => e.message.type === 'llmRequest').map(e => e.message.providerFormat), ['openai-chat', 'anthropic-messages', 'gemini'])
    assert.deepEqual(events.filter(e => e.message.type === 'retry').map(e => [e.message.provider, e.message.attempt, e.message.attempts]), [['llm-three/openai', 2, 3], ['llm-three/claude', 3, 3]])
  })

  test('every provider failing: the client gets the last provider\'s error, in its own format', { timeout: 15_000 }, async t => {
    const sw = switches.get('all')!
    setForTest(t, sw, 'mode', '503')
    // The Anthropic emulator answers a transcript's error when the last user message names it.
    const err = await openai('/all').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'overloaded' }] }).then(() => null, (e: unknown) => e)
    assert.ok(err instanceof OpenAI.APIError, String(err))
    assert.equal(err.status, 529)
    assert.match(err.message, /[Oo]verloaded/)
    assert.equal(sw.seen, 1)
  })
})

describe('ai backends: failover with data-plane workers (WORKERS=2)', () => {
  let openaiEmu: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let sw: Switch
  let portico: PorticoProcess

  before(async () => {
    openaiEmu = await startOpenAIEmulator({ apiKey: OPENAI_KEY })
    anthropicEmu = await startAnthropicEmulator()
    sw = await startSwitch(openaiEmu)
    sw.mode = '429'
    portico = await startPortico({
      env: { WORKERS: '2', LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [{
          name: 'llm',
          backends: [{
            ai: {
              name: 'llm',
              groups: [
                { providers: [{ name: 'openai', provider: { openAI: { model: 'gpt-4o-mini' } }, hostOverride: sw.url, policies: { backendAuth: { key: OPENAI_KEY } } }] },
                { providers: [{ name: 'claude', provider: { anthropic: { model: 'claude-sonnet-4-6' } }, hostOverride: anthropicEmu.url, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }] }
              ]
            },
            policies: { health: { consecutiveFailures: 3, ejectionDuration: '1m' } }
          }]
        }]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await sw?.close()
    await openaiEmu?.close()
    await anthropicEmu?.close()
  })

  test('the ejection is shared: after consecutiveFailures 429s in all, whichever worker saw them, no worker tries the provider', { timeout: 30_000 }, async () => {
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    for (let i = 0; i < 24; i++) {
      // A connection of its own each: the kernel spreads them over the workers.
      const res = await request(`${portico.url}/v1/chat/completions?i=${i}`, { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' }, body, reset: true })
      const answer = await res.body.json() as { choices: Array<{ message: { content: string } }> }
      assert.equal(res.statusCode, 200)
      assert.equal(answer.choices[0]!.message.content, 'Bonjour ! Grüße — ✓ 日本語', 'every answer from the next group')
    }
    // Per-worker state would take 3 failures on each worker (6 in all).
    assert.equal(sw.seen, 3, 'exactly consecutiveFailures tries reached the failing provider')
    const workers = new Set(portico.logs().filter(l => l.msg === 'request' && String(l.path).startsWith('/v1/chat/completions')).map(l => l.worker))
    assert.equal(workers.size, 2, 'both serving loops (the primary and worker 1) served')
  })
})
