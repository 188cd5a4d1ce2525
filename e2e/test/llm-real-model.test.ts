/**
 * Real generations end to end: the official OpenAI SDK → Portico's `ai` backend → llama.cpp
 * serving SmolLM2-135M-Instruct on loopback, through both servers scripts/test-tools builds:
 * llama-cpp-python's OpenAI-compatible server and llama.cpp's own `llama-server`. A chat
 * completion answers with text whose usage — the token counts the model server itself
 * reported — shows in Portico's trace, access log and metrics; streamed answers arrive in
 * several chunks, and llama-server's final usage chunk is counted; a tool forced by
 * `tool_choice` comes back as a tool call; and a `localRateLimit` of type `tokens` refuses the
 * request after the one that spent its budget, streamed or not; and the official Anthropic SDK
 * reaches the same model through Portico's Messages ⇄ chat completions translation, whole
 * and streamed, with the usage counted. Generations are short, greedy
 * (temperature 0) and seeded, so the file takes seconds on 2 cores and answers are the same
 * every run.
 *
 * Without scripts/test-tools' LLAMA_SERVER, LLAMA_CPP_SERVER and SMOLLM2_GGUF the tests fail
 * in CI and are skipped with that reason elsewhere (the convention of every tool-dependent
 * test).
 */

import { after, describe, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ConfigFile } from '@portico/engine'
import { startLlamaServer, waitUntil, type LlamaServer } from '@portico/testkit'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'

const MESSAGES = [
  { role: 'system' as const, content: 'You are a helpful assistant. Answer in one short sentence.' },
  { role: 'user' as const, content: 'What is the capital of France?' }
]
/** Short, greedy and seeded: the same answer every run, in about a second. */
const SAMPLING = { temperature: 0, seed: 42, max_tokens: 12 }
/** The token budget of the `/budget` route: less than one exchange costs (prompt ~30 + answer ≤ 12). */
const BUDGET = 20

interface Setup {
  /** llama-cpp-python's server. */
  llama: LlamaServer
  /** llama.cpp's llama-server. */
  llamaCpp: LlamaServer
  portico: PorticoProcess
  admin: string
  stats: string
}

/**
 * The model server and the tools' paths, or null after skipping (locally) / failing (CI):
 * the same rule as requireTool, for two variables that must name files.
 */
function requireModelServer (t: TestContext): Tools | null {
  const tools = { server: process.env.LLAMA_SERVER ?? '', cppServer: process.env.LLAMA_CPP_SERVER ?? '', model: process.env.SMOLLM2_GGUF ?? '' }
  if (Object.values(tools).every(path => path !== '' && existsSync(path))) return tools
  const why = `llama.cpp's servers or the SmolLM2 model are missing (LLAMA_SERVER=${JSON.stringify(tools.server)}, LLAMA_CPP_SERVER=${JSON.stringify(tools.cppServer)}, SMOLLM2_GGUF=${JSON.stringify(tools.model)}): run ./scripts/test-tools (./scripts/test does) and export the lines it prints`
  if (process.env.CI === 'true') throw new Error(why)
  t.skip(why)
  return null
}

interface Tools { server: string, cppServer: string, model: string }

let started: Promise<Setup> | null = null

/** The access log line of the route's request with usage (written once the answer has ended). */
async function accessLog (s: Setup, route: string): Promise<Record<string, unknown>> {
  const find = () => s.portico.logs().find(l => l.route === route && l['gen_ai.usage.output_tokens'] !== undefined)
  await waitUntil(() => find() !== undefined, 5_000, `the access log line of route ${route}\n${s.portico.output}`)
  return find()!
}

async function setUp (tools: Tools): Promise<Setup> {
  const llama = await startLlamaServer({ kind: 'python', server: tools.server, model: tools.model })
  const llamaCpp = await startLlamaServer({ kind: 'cpp', server: tools.cppServer, model: tools.model })
  const [adminPort, statsPort] = [await freePort(), await freePort()]
  const ai = (name: string, server = llama) => ({ name, provider: { openAI: {} }, hostOverride: server.host })
  const portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
    config: (port): ConfigFile => ({
      gateways: { default: gateway(port) },
      routes: [
        { name: 'chat', matches: [{ path: { pathPrefix: '/chat' } }], backends: [{ ai: ai('llama') }] },
        { name: 'stream', matches: [{ path: { pathPrefix: '/stream' } }], backends: [{ ai: ai('llama-stream') }] },
        { name: 'tools', matches: [{ path: { pathPrefix: '/tools' } }], backends: [{ ai: ai('llama-tools') }] },
        {
          name: 'budget',
          matches: [{ path: { pathPrefix: '/budget' } }],
          policies: { localRateLimit: [{ maxTokens: BUDGET, tokensPerFill: BUDGET, fillInterval: '1h', type: 'tokens' }] },
          backends: [{ ai: ai('llama-budget') }]
        },
        { name: 'cpp-stream', matches: [{ path: { pathPrefix: '/cpp-stream' } }], backends: [{ ai: ai('llama-cpp', llamaCpp) }] },
        // An Anthropic Messages client on an OpenAI-format server: translated both ways.
        { name: 'anthropic', matches: [{ path: { pathPrefix: '/anthropic' } }], backends: [{ ai: ai('llama-anthropic', llamaCpp) }] },
        {
          name: 'cpp-budget',
          matches: [{ path: { pathPrefix: '/cpp-budget' } }],
          policies: { localRateLimit: [{ maxTokens: BUDGET, tokensPerFill: BUDGET, fillInterval: '1h', type: 'tokens' }] },
          backends: [{ ai: ai('llama-cpp-budget', llamaCpp) }]
        }
      ]
    })
  })
  return { llama, llamaCpp, portico, admin: `http://127.0.0.1:${adminPort}`, stats: `http://127.0.0.1:${statsPort}` }
}

async function ready (t: TestContext): Promise<Setup | null> {
  const tools = requireModelServer(t)
  if (tools === null) return null
  started ??= setUp(tools)
  return await started
}

describe('a real model (llama.cpp serving SmolLM2-135M-Instruct) through Portico', () => {
  const client = (s: Setup, path: string): OpenAI => new OpenAI({ apiKey: 'sk-test-portico', baseURL: `${s.portico.url}${path}`, maxRetries: 0, timeout: 60_000 })

  after(async () => {
    if (started === null) return
    const s = await started.catch(() => null)
    await s?.portico.stop()
    await s?.llama.close()
    await s?.llamaCpp.close()
  })

  test('a chat completion: a real answer, and the usage the model server reported in the trace, access log and metrics', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const trace = await openTrace(s.admin, 'path=/chat/chat/completions')
    await trace.ready
    const completion = await client(s, '/chat').chat.completions.create({ model: s.llama.model, messages: MESSAGES, ...SAMPLING })
    const answer = completion.choices[0]!.message.content ?? ''
    assert.notEqual(answer.trim(), '', `a non-empty answer: ${JSON.stringify(completion)}`)
    assert.equal(completion.model, s.llama.model)
    const usage = completion.usage!
    assert.ok(usage.prompt_tokens > 10 && usage.completion_tokens > 0 && usage.completion_tokens <= SAMPLING.max_tokens, JSON.stringify(usage))
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens)

    // The same request straight to the model server: the same greedy answer and the same
    // counts, so what Portico passed on and counted is the server's own.
    const direct = await new OpenAI({ apiKey: 'sk-test-portico', baseURL: `${s.llama.url}/v1`, maxRetries: 0 }).chat.completions.create({ model: s.llama.model, messages: MESSAGES, ...SAMPLING })
    assert.equal(direct.choices[0]!.message.content, answer)
    assert.deepEqual(direct.usage, usage)

    const events = await trace.done
    const response = events.find(e => e.message.type === 'llmResponse')!.message
    assert.deepEqual(response, { type: 'llmResponse', responseModel: s.llama.model, inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, totalTokens: usage.total_tokens })

    const log = await accessLog(s, 'chat')
    assert.equal(log['gen_ai.usage.input_tokens'], usage.prompt_tokens)
    assert.equal(log['gen_ai.usage.output_tokens'], usage.completion_tokens)
    assert.equal(log['gen_ai.response.model'], s.llama.model)

    const metrics = await (await fetch(`${s.stats}/metrics`)).text()
    const sum = (type: string): number | undefined => {
      const line = metrics.split('\n').find(l => l.startsWith('portico_gen_ai_client_token_usage_sum{') && l.includes(`gen_ai_token_type="${type}"`) && l.includes('route="chat"'))
      return line === undefined ? undefined : Number(line.split(' ').at(-1))
    }
    assert.equal(sum('input'), usage.prompt_tokens, metrics.split('\n').filter(l => l.includes('gen_ai')).join('\n'))
    assert.equal(sum('output'), usage.completion_tokens)
  })

  test('a streamed completion (llama-cpp-python): the answer arrives in chunks; this server sends no usage to count', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const trace = await openTrace(s.admin, 'path=/stream/chat/completions')
    await trace.ready
    const stream = await client(s, '/stream').chat.completions.create({ model: s.llama.model, messages: MESSAGES, ...SAMPLING, stream: true, stream_options: { include_usage: true } })
    let text = ''
    let contentChunks = 0
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content ?? ''
      if (delta !== '') contentChunks++
      text += delta
      finish = chunk.choices[0]?.finish_reason ?? finish
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.notEqual(text.trim(), '')
    assert.ok(contentChunks > 1, `several content chunks (one per token): ${contentChunks}`)
    assert.ok(finish === 'length' || finish === 'stop', String(finish))
    const events = await trace.done
    assert.equal(events.find(e => e.message.type === 'llmRequest')!.message.streaming, true)
    // llama-cpp-python's server (0.3.36) ignores stream_options.include_usage: its streams
    // carry no usage, so Portico has none to count, and says so (a warning, not a guess).
    assert.equal(usage, undefined, 'llama-cpp-python now sends usage in streams: assert it is counted here')
    const response = events.find(e => e.message.type === 'llmResponse')!
    assert.deepEqual(response.message, { type: 'llmResponse', usage: null, reason: 'the answer carried no usage' })
  })

  test('tools: a function forced by tool_choice comes back as a tool call with arguments that fit its schema', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const completion = await client(s, '/tools').chat.completions.create({
      model: s.llama.model,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [{
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'The current weather in a city',
          parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'London', 'Tokyo'] }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] }
        }
      }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      ...SAMPLING,
      max_tokens: 40
    })
    const call = completion.choices[0]!.message.tool_calls?.[0]
    assert.ok(call !== undefined && call.type === 'function', JSON.stringify(completion))
    assert.equal(call.function.name, 'get_weather')
    const args = JSON.parse(call.function.arguments) as { city: string, unit: string }
    assert.ok(['Paris', 'London', 'Tokyo'].includes(args.city), call.function.arguments)
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit), call.function.arguments)
    assert.ok(completion.usage!.completion_tokens > 0)
  })

  test('localRateLimit type tokens: the real usage is taken from the budget, and the next request is refused with 429', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const c = client(s, '/budget')
    const first = await c.chat.completions.create({ model: s.llama.model, messages: MESSAGES, ...SAMPLING })
    const spent = first.usage!.total_tokens
    assert.ok(spent > BUDGET, `one exchange costs more than the budget: ${spent}`)
    const trace = await openTrace(s.admin, 'path=/budget/chat/completions')
    await trace.ready
    const refused = await c.chat.completions.create({ model: s.llama.model, messages: MESSAGES, ...SAMPLING }).then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof OpenAI.RateLimitError, `a 429 the SDK understands: ${String(refused)}`)
    assert.equal(refused.status, 429)
    assert.equal(refused.headers.get('x-ratelimit-limit'), String(BUDGET))
    assert.equal(refused.headers.get('x-ratelimit-remaining'), '0')
    const events = await trace.done
    const deny = events.find(e => e.message.type === 'policy' && e.message.kind === 'localRateLimit')!
    assert.match((deny.message.result as { details: string }).details, new RegExp(`^bucket 0 is empty \\(${BUDGET - spent} of maxTokens ${BUDGET}`), 'the debt is exactly the tokens the model server counted')
    assert.equal(events.some(e => e.message.type === 'llmRequest'), false, 'refused before the model server saw it')
  })

  test('a streamed completion (llama-server): chunks as the model generates them, and the usage chunk Portico asked for is counted', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const trace = await openTrace(s.admin, 'path=/cpp-stream/chat/completions')
    await trace.ready
    // No stream_options from the client: Portico asks for the usage chunk itself.
    const stream = await client(s, '/cpp-stream').chat.completions.create({ model: s.llamaCpp.model, messages: MESSAGES, ...SAMPLING, stream: true })
    let text = ''
    let contentChunks = 0
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content ?? ''
      if (delta !== '') contentChunks++
      text += delta
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.notEqual(text.trim(), '')
    assert.ok(contentChunks > 1, `several content chunks (one per token): ${contentChunks}`)
    assert.ok(usage !== undefined && usage !== null, 'the final chunk carries usage')
    assert.ok(usage.prompt_tokens > 10 && usage.completion_tokens > 0 && usage.completion_tokens <= SAMPLING.max_tokens, JSON.stringify(usage))
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens)
    const events = await trace.done
    assert.equal(events.find(e => e.message.type === 'llmRequest')!.message.streaming, true)
    const response = events.find(e => e.message.type === 'llmResponse')!.message
    assert.deepEqual(response, { type: 'llmResponse', responseModel: s.llamaCpp.model, inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, totalTokens: usage.total_tokens })
    const log = await accessLog(s, 'cpp-stream')
    assert.equal(log['gen_ai.usage.input_tokens'], usage.prompt_tokens)
    assert.equal(log['gen_ai.usage.output_tokens'], usage.completion_tokens)
  })

  test('localRateLimit type tokens on streams (llama-server): the final chunk\'s usage is taken, and the next stream is refused with 429', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const c = client(s, '/cpp-budget')
    let spent = 0
    for await (const chunk of await c.chat.completions.create({ model: s.llamaCpp.model, messages: MESSAGES, ...SAMPLING, stream: true })) {
      if (chunk.usage != null) spent = chunk.usage.total_tokens
    }
    assert.ok(spent > BUDGET, `one exchange costs more than the budget: ${spent}`)
    const trace = await openTrace(s.admin, 'path=/cpp-budget/chat/completions')
    await trace.ready
    const refused = await c.chat.completions.create({ model: s.llamaCpp.model, messages: MESSAGES, ...SAMPLING, stream: true }).then(() => null, (err: unknown) => err)
    assert.ok(refused instanceof OpenAI.RateLimitError, `a 429 the SDK understands: ${String(refused)}`)
    const deny = (await trace.done).find(e => e.message.type === 'policy' && e.message.kind === 'localRateLimit')!
    assert.match((deny.message.result as { details: string }).details, new RegExp(`^bucket 0 is empty \\(${BUDGET - spent} of maxTokens ${BUDGET}`))
  })

  test('an Anthropic client (the official SDK) → Portico (Messages → chat completions) → llama-server: a real answer, whole and streamed, usage counted', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const anthropic = new Anthropic({ apiKey: 'sk-ant-test-portico', baseURL: `${s.portico.url}/anthropic`, maxRetries: 0, timeout: 60_000 })
    const request = { model: s.llamaCpp.model, max_tokens: SAMPLING.max_tokens, system: MESSAGES[0]!.content, messages: [{ role: 'user' as const, content: MESSAGES[1]!.content }] }
    const message = await anthropic.messages.create(request)
    assert.equal(message.type, 'message')
    assert.equal(message.role, 'assistant')
    const text = message.content.filter(b => b.type === 'text').map(b => b.text).join('')
    assert.notEqual(text.trim(), '', JSON.stringify(message))
    assert.ok(['end_turn', 'max_tokens'].includes(message.stop_reason ?? ''), String(message.stop_reason))
    // Anthropic counts prompt-cache reads apart from input_tokens; llama-server caches the
    // prompt the earlier tests sent, and reports it as cached_tokens — translated to
    // cache_read_input_tokens. The gateway's own count (access log) is the whole prompt.
    const usage = message.usage
    const prompt = usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0)
    assert.ok(prompt > 10 && usage.output_tokens > 0 && usage.output_tokens <= SAMPLING.max_tokens, JSON.stringify(usage))
    const log = await accessLog(s, 'anthropic')
    assert.equal(log['gen_ai.usage.input_tokens'], prompt)
    assert.equal(log['gen_ai.usage.output_tokens'], usage.output_tokens)

    // Streamed: Anthropic's typed events, translated from the server's chunks as they come.
    const stream = anthropic.messages.stream(request)
    let deltas = 0
    stream.on('text', () => { deltas++ })
    const final = await stream.finalMessage()
    const streamed = final.content.filter(b => b.type === 'text').map(b => b.text).join('')
    assert.notEqual(streamed.trim(), '')
    assert.ok(deltas > 1, `several text deltas (one per token): ${deltas}`)
    assert.ok(final.usage.output_tokens > 0 && final.usage.output_tokens <= SAMPLING.max_tokens, JSON.stringify(final.usage))
  })
})
