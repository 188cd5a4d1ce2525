/**
 * `pricing` on `ai` backends through the real gateway: each call's cost, from the answer's
 * real usage (input, cached input, cache writes, output), in the access log
 * (`portico.llm.cost`, `portico.llm.currency`), the trace's llmResponse event (the exact
 * decimal) and the `portico_gen_ai_client_cost_total` counter (summed exactly); the same for
 * a passed-through answer and a translated one, whole and streamed. Streams also give the
 * output-tokens-per-second and time-per-output-token histograms. Providers: the
 * OpenAI-compatible server on loopback (one token per word) and the Anthropic emulator
 * (recorded transcripts with prompt-cache counts), with the official SDKs as clients.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'
import { waitUntil } from '@portico/testkit/wait'
import { requireTool } from '@portico/testkit/tools'
import { startLlmServer, type LlmServer } from '../lib/llm.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { validateConfig } from '../lib/validate.ts'

const REPLY = 'one two three four five six seven eight nine ten eleven twelve'
const MESSAGES = [{ role: 'system' as const, content: 'be brief' }, { role: 'user' as const, content: 'count to twelve please' }]
/** Claude Sonnet's published rates per million tokens: input 3, output 15, cache reads 0.30, 5-minute cache writes 3.75. */
const SONNET = { input: '3', output: '15', cacheRead: '0.30', cacheWrite: '3.75' }

describe('ai backends with pricing', () => {
  let llm: LlmServer
  let anthropicEmu: AnthropicEmulator
  let portico: PorticoProcess
  let admin: string
  let stats: string

  const openai = (path: string): OpenAI => new OpenAI({ apiKey: 'sk-test-portico', baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const anthropic = (path: string): Anthropic => new Anthropic({ apiKey: 'sk-test-portico', baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const logsOf = (route: string) => portico.logs().filter(l => l.route === route && l['gen_ai.usage.output_tokens'] !== undefined)

  async function waitForLogs (route: string, count: number): Promise<Array<Record<string, unknown>>> {
    const deadline = Date.now() + 3000
    while (logsOf(route).length < count) {
      if (Date.now() > deadline) throw new Error(`${count} log lines of ${route} expected\n${portico.output}`)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    return logsOf(route)
  }

  async function metricLines (prefix: string): Promise<string[]> {
    const text = await (await fetch(`${stats}/metrics`)).text()
    return text.split('\n').filter(l => l.startsWith(prefix))
  }

  before(async () => {
    llm = await startLlmServer({ reply: REPLY })
    anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY })
    const [adminPort, statsPort] = [await freePort(), await freePort()]
    admin = `http://127.0.0.1:${adminPort}`
    stats = `http://127.0.0.1:${statsPort}`
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          {
            name: 'openai',
            matches: [{ path: { pathPrefix: '/openai' } }],
            backends: [{
              ai: {
                name: 'openai-llm',
                provider: { openAI: {} },
                hostOverride: llm.host,
                // gpt-4o-mini's published rates; any other model at the backend-wide ones.
                pricing: { input: '1', output: '2', models: [{ model: 'gpt-4o-mini*', input: '0.15', output: '0.60', cacheRead: '0.075' }] }
              }
            }]
          },
          {
            name: 'unpriced',
            matches: [{ path: { pathPrefix: '/unpriced' } }],
            backends: [{ ai: { name: 'unpriced-llm', provider: { openAI: {} }, hostOverride: llm.host, pricing: { models: [{ model: 'gpt-4o-mini', input: 0.15, output: 0.6 }] } } }]
          },
          {
            name: 'anthropic',
            matches: [{ path: { pathPrefix: '/anthropic' } }],
            backends: [{ ai: { name: 'anthropic-llm', provider: { anthropic: {} }, hostOverride: anthropicEmu.url, pricing: { currency: 'USD', models: [{ model: 'claude-sonnet-4*', ...SONNET }] } }, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } }]
          }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await llm?.close()
    await anthropicEmu?.close()
  })

  test('an OpenAI call costs its tokens at the matching model\'s rates: access log, trace and metric', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/openai/chat/completions')
    await trace.ready
    const c = await openai('/openai').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES })
    assert.equal(c.usage?.prompt_tokens, 6)
    assert.equal(c.usage?.completion_tokens, 12)
    // 6 × 0.15 + 12 × 0.60 per million = 8.1 millionths.
    const events = await trace.done
    const response = events.map(e => e.message).find(m => m.type === 'llmResponse')!
    assert.equal(response.cost, '0.0000081')
    assert.equal(response.currency, 'USD')
    const [log] = await waitForLogs('openai', 1)
    assert.equal(log!['portico.llm.cost'], 0.0000081)
    assert.equal(log!['portico.llm.currency'], 'USD')

    // Another model: the backend-wide rates (6 × 1 + 12 × 2 = 30 millionths).
    await openai('/openai').chat.completions.create({ model: 'gpt-other', messages: MESSAGES })
    const logs = await waitForLogs('openai', 2)
    assert.equal(logs[1]!['portico.llm.cost'], 0.00003)
  })

  test('the cost counter sums exactly: ten calls of 8.1 millionths are 81 millionths, not a float\'s approximation', { timeout: 15_000 }, async t => {
    const before = await metricLines('portico_gen_ai_client_cost_total{')
    const line = (lines: string[]) => lines.find(l => l.includes('gen_ai_request_model="gpt-4o-mini"') && l.includes('route="openai"'))
    const start = Number(line(before)?.split(' ').at(-1) ?? 0)
    for (let i = 0; i < 10; i++) await openai('/openai').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES })
    await waitForLogs('openai', 12)
    const after = line(await metricLines('portico_gen_ai_client_cost_total{'))
    assert.ok(after !== undefined)
    assert.match(after, /currency="USD"/)
    assert.match(after, /gen_ai_provider_name="openai"/)
    assert.match(after, /gen_ai_response_model="gpt-4o-mini-2024"/)
    // 11 calls so far (one in the test before): 89.1 millionths, printed as the exact decimal's nearest number.
    assert.equal(start, 0.0000081)
    assert.equal(after.split(' ').at(-1), '0.0000891')
    const promtool = requireTool(t, 'PROMTOOL', 'promtool')
    if (promtool === null) return
    const text = await (await fetch(`${stats}/metrics`)).text()
    const out = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' })
    assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`)
  })

  test('a model no rate matches has no cost (and the trace says so)', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/unpriced/chat/completions')
    await trace.ready
    await openai('/unpriced').chat.completions.create({ model: 'gpt-other', messages: MESSAGES })
    const response = (await trace.done).map(e => e.message).find(m => m.type === 'llmResponse')!
    assert.equal(response.cost, null)
    const [log] = await waitForLogs('unpriced', 1)
    assert.equal('portico.llm.cost' in log!, false)
    // A rate written as a YAML number is taken as written.
    await openai('/unpriced').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES })
    assert.equal((await waitForLogs('unpriced', 2))[1]!['portico.llm.cost'], 0.0000081)
  })

  test('Anthropic, translated and passed through, whole and streamed: cache reads and writes at their own rates, the same cost either way', { timeout: 15_000 }, async () => {
    // responses/text.json: 2095 input, 1800 cache reads, 120 cache writes, 503 output:
    // 2095 × 3 + 1800 × 0.30 + 120 × 3.75 + 503 × 15 = 14,820 millionths.
    await openai('/anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: MESSAGES, max_tokens: 100 })
    await anthropic('/anthropic').messages.create({ model: 'claude-sonnet-4-6', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
    // streams/text.sse: 25 input, 10 cache reads, 15 output: 25 × 3 + 10 × 0.30 + 15 × 15 = 303 millionths.
    const chunks = await openai('/anthropic').chat.completions.create({ model: 'claude-sonnet-4-6', messages: MESSAGES, max_tokens: 100, stream: true, stream_options: { include_usage: true } })
    for await (const _ of chunks) { /* drain */ }
    await anthropic('/anthropic').messages.stream({ model: 'claude-sonnet-4-6', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage()
    const logs = await waitForLogs('anthropic', 4)
    assert.deepEqual(logs.map(l => [l['portico.llm.input_format'] ?? 'anthropic-messages', l['gen_ai.usage.input_tokens'], l['portico.llm.cost']]), [
      ['openai-chat', 4015, 0.01482],
      ['anthropic-messages', 4015, 0.01482],
      ['openai-chat', 35, 0.000303],
      ['anthropic-messages', 35, 0.000303]
    ])
  })

  test('streams: output tokens per second and time per output token, beside time to first token', { timeout: 15_000 }, async () => {
    const stream = await openai('/openai').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES, stream: true })
    for await (const _ of stream) { /* drain */ }
    const count = async (name: string) => {
      const line = (await metricLines(`${name}_count{`)).find(l => l.includes('route="openai"'))
      return line === undefined ? 0 : Number(line.split(' ').at(-1))
    }
    // The stream's end reaches the client before the gateway records it: wait for the records.
    const timings = ['portico_gen_ai_server_time_to_first_token_seconds', 'portico_gen_ai_client_output_tokens_per_second', 'portico_gen_ai_server_time_per_output_token_seconds']
    await waitUntil(async () => (await Promise.all(timings.map(count))).every(n => n >= 1), 5_000, `each of ${timings.join(', ')} counting the stream`)
    const sum = Number((await metricLines('portico_gen_ai_client_output_tokens_per_second_sum{')).find(l => l.includes('route="openai"'))!.split(' ').at(-1))
    assert.ok(sum > 0, `tokens per second: ${sum}`)
  })

  test('config errors: a rate that is not an exact decimal, rates without input or output, pricing that prices nothing', async () => {
    const ai = (pricing: Record<string, unknown>) => ({ gateways: { default: { port: 3000 } }, routes: [{ backends: [{ ai: { name: 'a', provider: { openAI: {} }, pricing } }] }] }) as never
    const tooPrecise = await validateConfig(ai({ input: '0.0000001', output: '1' }))
    assert.match(tooPrecise.stderr, /pricing\.input: /)
    const noOutput = await validateConfig(ai({ input: '1' }))
    assert.match(noOutput.stderr, /pricing\.output: is required with the other rates/)
    const nothing = await validateConfig(ai({ currency: 'EUR' }))
    assert.match(nothing.stderr, /pricing: prices nothing/)
    const exponent = await validateConfig(ai({ models: [{ model: 'm', input: 1e-7, output: 1 }] }))
    assert.match(exponent.stderr, /pricing\.models\[0\]\.input: "1e-7" is not a price per million tokens/)
  })
})
