/**
 * The model API (`models:`, docs/models.md) with a real model: llama.cpp's `llama-server`
 * serving SmolLM2-135M-Instruct as the concrete model `local`, the Anthropic emulator
 * (e2e/lib/llm-emulators/anthropic.ts) as the concrete model `claude`, and virtual models over
 * both, through the real gateway with the official `openai` and `@anthropic-ai/sdk` clients:
 *
 * - discovery lists the public models (the internal one not);
 * - `local` answers with a real generation, whole and streamed, its usage (the server's own
 *   counts) in the access log; `claude` is answered by the emulator;
 * - `assistant` (conditional on a header) serves from both, and the access log's
 *   `portico.model` / `portico.model.why` say which and why — an Anthropic client reaching
 *   SmolLM2 through the Messages ⇄ chat completions translation;
 * - `resilient` (failover) whose first target (the emulator answering 503) fails over to the
 *   real model in the same request, no client-visible error;
 * - a `promptGuard` regex mask on `local`'s requests: the prompt's email never reaches
 *   llama-server (a capturing proxy in front of it records what it received), and the real
 *   model answered the masked prompt (its prompt token count is the masked prompt's).
 *   A mask on the answer is not asserted here: a real model's text is not ours to choose
 *   (e2e/test/llm-guard.test.ts masks streamed answers across chunk boundaries with emulators).
 *
 * Generations are short and greedy (max_tokens ≤ 16, temperature 0). Without scripts/test-tools'
 * LLAMA_CPP_SERVER and SMOLLM2_GGUF the tests fail in CI and are skipped with that reason
 * elsewhere (as e2e/test/llm-real-model.test.ts).
 */

import { after, describe, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { existsSync } from 'node:fs'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ConfigFile } from '@portico/engine'
import { startLlamaServer, waitUntil, type LlamaServer } from '@portico/testkit'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { ANTHROPIC_TEST_KEY, loadAnthropicTranscripts, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'

const SYSTEM = 'You are a helpful assistant. Answer in one short sentence.'
const QUESTION = 'What is the capital of France?'
const MESSAGES = [{ role: 'system' as const, content: SYSTEM }, { role: 'user' as const, content: QUESTION }]
/**
 * Short and greedy: about a second a generation on 2 busy cores. No `seed`: `local` has a
 * promptGuard, so its requests go through the neutral shape, which has no seed (refused with a
 * 400 naming it, docs/llm.md "What is guarded"); llama-server is started with --seed anyway.
 */
const SAMPLING = { temperature: 0, max_tokens: 12 }
const PUBLIC_MODELS = ['assistant', 'claude', 'local', 'resilient']

interface Setup {
  llama: LlamaServer
  /** A proxy in front of llama-server recording the bodies it forwards: what the model server received. */
  capture: Backend & { bodies: Array<Record<string, unknown>> }
  anthropicEmu: AnthropicEmulator
  portico: PorticoProcess
  admin: string
}

interface Tools { cppServer: string, model: string }

/** llama-server and the model, or null after skipping (locally) / failing (CI). */
function requireModelServer (t: TestContext): Tools | null {
  const tools = { cppServer: process.env.LLAMA_CPP_SERVER ?? '', model: process.env.SMOLLM2_GGUF ?? '' }
  if (Object.values(tools).every(path => path !== '' && existsSync(path))) return tools
  const why = `llama.cpp's llama-server or the SmolLM2 model is missing (LLAMA_CPP_SERVER=${JSON.stringify(tools.cppServer)}, SMOLLM2_GGUF=${JSON.stringify(tools.model)}): run ./scripts/test-tools (./scripts/test does) and export the lines it prints`
  if (process.env.CI === 'true') throw new Error(why)
  t.skip(why)
  return null
}

/** Forwards every request to the model server as it is, answers stream through; keeps the JSON bodies. */
async function startCapture (target: LlamaServer): Promise<Setup['capture']> {
  const bodies: Array<Record<string, unknown>> = []
  const backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      if (body.length > 0) bodies.push(JSON.parse(body.toString('utf8')) as Record<string, unknown>)
      const upstream = http.request({ host: '127.0.0.1', port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } }, answer => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      upstream.on('error', () => res.destroy())
      upstream.end(body)
    })
  })
  return Object.assign(backend, { bodies })
}

let started: Promise<Setup> | null = null

async function setUp (tools: Tools): Promise<Setup> {
  const llama = await startLlamaServer({ kind: 'cpp', server: tools.cppServer, model: tools.model })
  const capture = await startCapture(llama)
  // A transcript answering 503, picked by the header the `claude-down` model sets.
  const transcripts = loadAnthropicTranscripts()
  transcripts.set('unavailable', { error: { status: 503, body: { type: 'error', error: { type: 'api_error', message: 'Service temporarily unavailable' } } } })
  const anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY, transcripts })
  const adminPort = await freePort()
  const claude = { provider: { anthropic: { model: 'claude-sonnet-4-6' } }, baseURL: anthropicEmu.url }
  const portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, LOG_LEVEL: 'info' },
    config: (port): ConfigFile => ({
      gateways: { default: gateway(port) },
      models: [
        {
          name: 'local',
          provider: { llamaCpp: { model: llama.model } },
          baseURL: `${capture.url}/v1`,
          policies: { promptGuard: { request: [{ regex: { action: 'mask', rules: [{ builtin: 'Email' }] } }] } }
        },
        { name: 'claude', ...claude, policies: { backendAuth: { key: ANTHROPIC_TEST_KEY } } },
        {
          name: 'claude-down',
          visibility: 'Internal',
          ...claude,
          policies: { backendAuth: { key: ANTHROPIC_TEST_KEY }, requestHeaderModifier: { set: { 'x-emulator-transcript': 'unavailable' } } }
        },
        { name: 'assistant', virtualModel: { conditional: { rules: [{ when: 'request.headers["x-tier"] == "premium"', model: 'claude' }], fallback: 'local' } } },
        { name: 'resilient', virtualModel: { failover: { groups: [{ models: ['claude-down'] }, { models: ['local'] }] } } }
      ]
    })
  })
  return { llama, capture, anthropicEmu, portico, admin: `http://127.0.0.1:${adminPort}` }
}

async function ready (t: TestContext): Promise<Setup | null> {
  const tools = requireModelServer(t)
  if (tools === null) return null
  started ??= setUp(tools)
  return await started
}

/** The first access log line after line `from` of a request `model` served (with usage, when asked). */
async function accessLog (s: Setup, from: number, model: string, usage = true): Promise<Record<string, unknown>> {
  const find = () => s.portico.logs().slice(from).find(l => l['portico.model'] === model && (!usage || l['gen_ai.usage.output_tokens'] !== undefined))
  await waitUntil(() => find() !== undefined, 5_000, `an access log line of model ${model} after line ${from}\n${s.portico.output}`)
  return find()!
}

describe('the model API with a real model: llama.cpp (SmolLM2) and the Anthropic emulator behind one gateway', () => {
  const openai = (s: Setup, headers: Record<string, string> = {}): OpenAI => new OpenAI({ apiKey: 'sk-test-portico', baseURL: `${s.portico.url}/v1`, maxRetries: 0, timeout: 60_000, defaultHeaders: headers })
  const anthropic = (s: Setup): Anthropic => new Anthropic({ apiKey: 'sk-ant-client-key', baseURL: s.portico.url, maxRetries: 0, timeout: 60_000 })

  after(async () => {
    if (started === null) return
    const s = await started.catch(() => null)
    await s?.portico.stop()
    await s?.capture.close()
    await s?.anthropicEmu.close()
    await s?.llama.close()
  })

  test('discovery: both SDKs\' model lists hold the public models, concrete and virtual, not the internal one', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const ids = []
    for await (const m of openai(s).models.list()) ids.push(m.id)
    assert.deepEqual(ids.sort(), PUBLIC_MODELS)
    const page = await anthropic(s).models.list()
    assert.deepEqual(page.data.map(m => m.id).sort(), PUBLIC_MODELS)
    assert.equal(s.capture.bodies.length, 0, 'the model server was not asked')
  })

  test('local: a real SmolLM2 answer, whole and streamed, with the server\'s usage in the access log', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    let from = s.portico.logs().length
    const completion = await openai(s).chat.completions.create({ model: 'local', messages: MESSAGES, ...SAMPLING })
    const answer = completion.choices[0]!.message.content ?? ''
    assert.notEqual(answer.trim(), '', JSON.stringify(completion))
    const usage = completion.usage!
    assert.ok(usage.prompt_tokens > 10 && usage.completion_tokens > 0 && usage.completion_tokens <= SAMPLING.max_tokens, JSON.stringify(usage))
    assert.equal(s.capture.bodies.at(-1)!.model, s.llama.model, 'the provider setting\'s model went to the server')
    let log = await accessLog(s, from, 'local')
    assert.equal(log.backend, 'model:local')
    assert.equal(log['gen_ai.usage.input_tokens'], usage.prompt_tokens)
    assert.equal(log['gen_ai.usage.output_tokens'], usage.completion_tokens)

    // Streamed: no stream_options from the client; Portico asks for llama-server's usage chunk.
    from = s.portico.logs().length
    let text = ''
    let contentChunks = 0
    let streamedUsage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of await openai(s).chat.completions.create({ model: 'local', messages: MESSAGES, ...SAMPLING, stream: true })) {
      const delta = chunk.choices[0]?.delta.content ?? ''
      if (delta !== '') contentChunks++
      text += delta
      if (chunk.usage != null) streamedUsage = chunk.usage
    }
    assert.notEqual(text.trim(), '')
    assert.ok(contentChunks > 1, `several content chunks (one per token): ${contentChunks}`)
    assert.ok(streamedUsage != null && streamedUsage.completion_tokens > 0 && streamedUsage.completion_tokens <= SAMPLING.max_tokens, JSON.stringify(streamedUsage))
    assert.equal(s.capture.bodies.at(-1)!.stream, true)
    log = await accessLog(s, from, 'local')
    assert.equal(log['gen_ai.usage.input_tokens'], streamedUsage.prompt_tokens)
    assert.equal(log['gen_ai.usage.output_tokens'], streamedUsage.completion_tokens)
  })

  test('claude: the Anthropic SDK answered by the emulator, the model server not asked', { timeout: 60_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const [emu, local] = [s.anthropicEmu.bodies.length, s.capture.bodies.length]
    const from = s.portico.logs().length
    const message = await anthropic(s).messages.create({ model: 'claude', max_tokens: SAMPLING.max_tokens, messages: [{ role: 'user', content: QUESTION }] })
    assert.equal(message.type, 'message')
    assert.notEqual(message.content.filter(b => b.type === 'text').map(b => b.text).join('').trim(), '')
    assert.equal(s.anthropicEmu.bodies.length, emu + 1)
    assert.equal(s.anthropicEmu.bodies.at(-1)!.model, 'claude-sonnet-4-6')
    assert.equal(s.capture.bodies.length, local)
    await accessLog(s, from, 'claude', false)
  })

  test('assistant (conditional on a header): premium → the emulator, anyone else → SmolLM2, even for an Anthropic client; the log says which and why', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const [emu, local] = [s.anthropicEmu.bodies.length, s.capture.bodies.length]
    let from = s.portico.logs().length
    const premium = await openai(s, { 'x-tier': 'premium' }).chat.completions.create({ model: 'assistant', messages: MESSAGES, ...SAMPLING })
    assert.equal(premium.object, 'chat.completion')
    assert.notEqual((premium.choices[0]!.message.content ?? '').trim(), '')
    assert.equal(s.anthropicEmu.bodies.length, emu + 1, 'premium: Claude (the chat completion translated to Messages)')
    assert.equal(s.capture.bodies.length, local)
    let log = await accessLog(s, from, 'claude', false)
    assert.equal(log['portico.model.why'], 'assistant: rule 1')

    // An Anthropic client on the fallback: Messages → chat completions → llama-server, and back.
    from = s.portico.logs().length
    // No temperature: this SDK's Messages types no longer carry one; max_tokens keeps it short.
    const message = await anthropic(s).messages.create({ model: 'assistant', max_tokens: SAMPLING.max_tokens, system: SYSTEM, messages: [{ role: 'user', content: QUESTION }] })
    assert.equal(message.type, 'message')
    assert.notEqual(message.content.filter(b => b.type === 'text').map(b => b.text).join('').trim(), '', JSON.stringify(message))
    assert.ok(message.usage.output_tokens > 0 && message.usage.output_tokens <= SAMPLING.max_tokens, JSON.stringify(message.usage))
    assert.equal(s.capture.bodies.length, local + 1, 'the real model answered')
    assert.ok(Array.isArray(s.capture.bodies.at(-1)!.messages), 'as a chat completion')
    assert.equal(s.anthropicEmu.bodies.length, emu + 1)
    log = await accessLog(s, from, 'local')
    assert.equal(log['portico.model.why'], 'assistant: fallback')
    assert.equal(log['gen_ai.usage.output_tokens'], message.usage.output_tokens)
  })

  test('resilient (failover): the emulator answers 503 → the real model answers in the same request, no client-visible error', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const [emu, local] = [s.anthropicEmu.headers.length, s.capture.bodies.length]
    const from = s.portico.logs().length
    const completion = await openai(s).chat.completions.create({ model: 'resilient', messages: MESSAGES, ...SAMPLING })
    assert.equal(completion.object, 'chat.completion')
    assert.notEqual((completion.choices[0]!.message.content ?? '').trim(), '', JSON.stringify(completion))
    assert.ok(s.anthropicEmu.headers.slice(emu).some(h => h['x-emulator-transcript'] === 'unavailable'), 'the first target was tried (and answered 503)')
    assert.equal(s.capture.bodies.length, local + 1, 'then SmolLM2 answered')
    const log = await accessLog(s, from, 'local')
    assert.equal(log.status, 200)
    assert.equal(log.backend, 'model:resilient/local')
    assert.match(String(log['portico.model.why']), /^resilient: failover; failed over from model:resilient\/claude-down/)
    assert.equal(log['gen_ai.usage.output_tokens'], completion.usage!.completion_tokens)
  })

  test('promptGuard mask on local\'s requests: the email in a streamed request never reaches llama-server, which answers the masked prompt', { timeout: 120_000 }, async t => {
    const s = await ready(t)
    if (s === null) return
    const email = 'alice.martin@example.com'
    const messages = [{ role: 'system' as const, content: SYSTEM }, { role: 'user' as const, content: `My email is ${email}. ${QUESTION}` }]
    const trace = await openTrace(s.admin, 'path=/v1/chat/completions')
    await trace.ready
    const local = s.capture.bodies.length
    let text = ''
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of await openai(s).chat.completions.create({ model: 'local', messages, ...SAMPLING, stream: true })) {
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.notEqual(text.trim(), '', 'a real answer')
    assert.ok(usage !== undefined)

    // What the model server received: the masked prompt, the email nowhere in the body.
    assert.equal(s.capture.bodies.length, local + 1)
    const received = s.capture.bodies.at(-1)!
    assert.doesNotMatch(JSON.stringify(received), /example\.com|alice/)
    const sent = received.messages as Array<{ role: string, content: unknown }>
    assert.deepEqual(sent.map(m => m.role), ['system', 'user'])
    const userText = typeof sent[1]!.content === 'string' ? sent[1]!.content : JSON.stringify(sent[1]!.content)
    assert.match(userText, /My email is <EMAIL_ADDRESS>\. What is the capital of France\?/)

    const events = await trace.done
    assert.deepEqual(events.find(e => e.message.type === 'guardrail')?.message, { type: 'guardrail', direction: 'request', guard: 'regex', action: 'mask', details: 'Email', index: 0 })
    assert.doesNotMatch(JSON.stringify(events), /alice|example\.com/, 'the trace does not carry the email either')

    // The model's own count agrees: the prompt it tokenised is the masked one. Asked directly
    // (one token each), the server counts exactly as many prompt tokens for the masked text,
    // and a different number for the text with the email (tokenisation is deterministic).
    const direct = new OpenAI({ apiKey: 'sk-test-portico', baseURL: `${s.llama.url}/v1`, maxRetries: 0, timeout: 60_000 })
    const promptTokens = async (user: string): Promise<number> => (await direct.chat.completions.create({ model: s.llama.model, messages: [messages[0]!, { role: 'user', content: user }], ...SAMPLING, max_tokens: 1 })).usage!.prompt_tokens
    assert.equal(usage.prompt_tokens, await promptTokens(`My email is <EMAIL_ADDRESS>. ${QUESTION}`))
    assert.notEqual(usage.prompt_tokens, await promptTokens(messages[1]!.content))
  })
})
