/**
 * promptGuard (guardrails) through the real gateway, with the official `openai` and
 * `@anthropic-ai/sdk` clients and the OpenAI emulator as the provider:
 *
 * - a regex guard rejecting a request, the refusal in each client format's error shape and
 *   status (Chat Completions, Responses, Anthropic Messages), the provider never asked;
 * - a regex guard masking a request (the provider gets <EMAIL_ADDRESS>, <CREDIT_CARD>);
 * - a regex guard masking an answer, whole and streamed, with the email address split
 *   across two SSE chunks by the provider — the SDKs read a well-formed stream with the
 *   address masked; and a streamed answer rejected mid-stream (the SDK raises a clean error);
 * - a webhook guard on a real node:http service on loopback: reject, mask, the JSON it is
 *   sent, timeouts, an oversized answer and a dead service with failureMode open and closed;
 * - OpenAI's moderation endpoint (the emulator's /v1/moderations) flagging a request;
 * - portico_guardrail_decisions_total and the guardrail trace event.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type http from 'node:http'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { setForTest } from '@portico/testkit/for-test'

const KEY = 'sk-test-portico'
const CLIENT_KEY = 'sk-client-not-for-providers'

interface WebhookCall { direction: string, model: string, messages: Array<{ role: string, content: string }> }

describe('ai backends: promptGuard', () => {
  let emu: OpenAIEmulator
  let hook: Backend
  let portico: PorticoProcess
  let admin: string
  let stats: string
  const hookCalls: WebhookCall[] = []

  const openai = (path: string): OpenAI => new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const anthropic = (path: string): Anthropic => new Anthropic({ apiKey: CLIENT_KEY, baseURL: `${portico.url}${path}`, maxRetries: 0 })
  const ai = (name: string, policies: Record<string, unknown>) => ({ ai: { name, provider: { openAI: {} }, hostOverride: emu.url }, policies: { backendAuth: { key: KEY }, ...policies } })

  before(async () => {
    emu = await startOpenAIEmulator({ apiKey: KEY })
    // The webhook: rejects text with "forbidden", masks "secret", answers slowly for
    // "slow", too much for "huge", nonsense for "nonsense"; passes the rest.
    hook = await startBackend((req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as WebhookCall
        hookCalls.push(call)
        const all = call.messages.map(m => m.content).join(' ')
        const answer = (value: unknown): void => {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end(JSON.stringify(value))
        }
        if (all.includes('forbidden')) return answer({ action: 'reject', reason: 'topic not allowed' })
        if (all.includes('slow')) { setTimeout(() => answer({ action: 'pass' }), 1500); return }
        if (all.includes('huge')) return answer({ action: 'pass', padding: 'x'.repeat(2 * 1024 * 1024) })
        if (all.includes('nonsense')) return answer({ verdict: 'ok' })
        if (all.includes('secret')) return answer({ action: 'mask', messages: call.messages.map(m => ({ role: m.role, content: m.content.replaceAll('secret', '[redacted]') })) })
        answer({ action: 'pass' })
      })
    })
    const adminPort = await freePort()
    const statsPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    stats = `http://127.0.0.1:${statsPort}`
    const regex = (action: 'reject' | 'mask', builtins: string[], extra: Record<string, unknown> = {}) => ({ regex: { action, rules: builtins.map(b => ({ builtin: b })), ...extra } })
    const webhook = (url: string, extra: Record<string, unknown> = {}) => ({ webhook: { url, timeout: '500ms', ...extra } })
    portico = await startPortico({
      env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'reject', matches: [{ path: { pathPrefix: '/reject' } }], backends: [ai('reject-llm', { promptGuard: { request: [regex('reject', ['Email', 'Ssn'], { rejection: { message: 'personal data is not allowed here' } })] } })] },
          { name: 'mask-request', matches: [{ path: { pathPrefix: '/mask-request' } }], backends: [ai('mask-request-llm', { promptGuard: { request: [regex('mask', ['Email', 'CreditCard', 'ApiKey'])] } })] },
          { name: 'mask-response', matches: [{ path: { pathPrefix: '/mask-response' } }], backends: [ai('mask-response-llm', { promptGuard: { response: [regex('mask', ['Email', 'PhoneNumber'])] } })] },
          { name: 'reject-response', matches: [{ path: { pathPrefix: '/reject-response' } }], backends: [ai('reject-response-llm', { promptGuard: { response: [regex('reject', ['CreditCard'])] } })] },
          { name: 'webhook', matches: [{ path: { pathPrefix: '/webhook' } }], backends: [ai('webhook-llm', { promptGuard: { request: [webhook(`${hook.url}/guard`)], response: [webhook(`${hook.url}/guard`)] } })] },
          { name: 'webhook-open', matches: [{ path: { pathPrefix: '/hook-open' } }], backends: [ai('webhook-open-llm', { promptGuard: { request: [webhook(`${hook.url}/guard`, { failureMode: 'open' })] } })] },
          { name: 'webhook-dead', matches: [{ path: { pathPrefix: '/hook-dead' } }], backends: [ai('webhook-dead-llm', { promptGuard: { request: [webhook('http://127.0.0.1:9/guard')] } })] },
          { name: 'moderation', matches: [{ path: { pathPrefix: '/moderation' } }], backends: [ai('moderation-llm', { promptGuard: { request: [{ openAIModeration: { baseURL: emu.url, auth: { key: KEY } } }] } })] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await hook?.close()
    await emu?.close()
  })

  const lastUserText = (): string => {
    const body = emu.received.at(-1)!.body as { messages: Array<{ role: string, content: unknown }> }
    return JSON.stringify(body.messages)
  }

  test('reject: the refusal in each client format, with the configured message and 403; the provider is not asked', { timeout: 15_000 }, async () => {
    const before = emu.received.length
    await assert.rejects(
      openai('/reject').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'mail bob@example.org please' }] }),
      (err: unknown) => err instanceof OpenAI.PermissionDeniedError && err.status === 403 && err.message.includes('personal data is not allowed here') && (err.error as { type?: string }).type === 'invalid_request_error'
    )
    await assert.rejects(
      openai('/reject').responses.create({ model: 'gpt-4o-mini', input: 'my ssn is 123-45-6789' }),
      (err: unknown) => err instanceof OpenAI.PermissionDeniedError && err.message.includes('personal data is not allowed here')
    )
    await assert.rejects(
      anthropic('/reject').messages.create({ model: 'gpt-4o-mini', max_tokens: 50, system: 'mail ops@example.com on errors', messages: [{ role: 'user', content: 'hi' }] }),
      (err: unknown) => err instanceof Anthropic.PermissionDeniedError && err.status === 403 && err.message.includes('personal data is not allowed here') && (err.error as { error?: { type?: string } }).error?.type === 'permission_error'
    )
    // Streams are refused before they start, the same way.
    await assert.rejects(
      openai('/reject').chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'bob@example.org' }] }),
      (err: unknown) => err instanceof OpenAI.PermissionDeniedError
    )
    assert.equal(emu.received.length, before, 'the provider was never asked')
    // Clean text goes through (the same format both sides, via the neutral shape).
    const ok = await openai('/reject').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(ok.choices[0]!.message.content, 'Hello!')
    const okA = await anthropic('/reject').messages.create({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(okA.content[0]!.type === 'text' ? okA.content[0].text : '', 'Hello!')
  })

  test('mask on the request: the provider gets the placeholders, from every client format', { timeout: 15_000 }, async () => {
    await openai('/mask-request').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'key sk-proj-abcdefghijklmnopqrstuvwxyz0123' }, { role: 'user', content: 'mail a.b@example.com, card 4111 1111 1111 1111' }] })
    let sent = lastUserText()
    assert.ok(sent.includes('mail <EMAIL_ADDRESS>, card <CREDIT_CARD>'), sent)
    assert.ok(sent.includes('key <API_KEY>'), sent)
    assert.ok(!sent.includes('example.com') && !sent.includes('4111'))
    await anthropic('/mask-request').messages.create({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'text', text: 'I am c@d.io' }] }] })
    sent = lastUserText()
    assert.ok(sent.includes('I am <EMAIL_ADDRESS>'), sent)
  })

  test('mask on the answer: whole, and streamed with the address split across two SSE chunks', { timeout: 15_000 }, async t => {
    setForTest(t, emu, 'script', ['Write to jane.ro', 'e@example.com or call 555-', '234-5678 today'])
    const whole = await openai('/mask-response').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(whole.choices[0]!.message.content, 'Write to <EMAIL_ADDRESS> or call <PHONE_NUMBER> today')
    const stream = await openai('/mask-response').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    let finish: string | null = null
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
      if (chunk.usage != null) usage = chunk.usage
    }
    assert.equal(text, 'Write to <EMAIL_ADDRESS> or call <PHONE_NUMBER> today')
    assert.equal(finish, 'stop')
    assert.equal(usage?.completion_tokens, 3)
    // The Anthropic client's stream, translated from the same provider stream.
    const a = anthropic('/mask-response').messages.stream({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
    const final = await a.finalMessage()
    const first = final.content[0]!
    assert.equal(first.type === 'text' ? first.text : '', 'Write to <EMAIL_ADDRESS> or call <PHONE_NUMBER> today')
    // The raw SSE the client got: every event whole, no piece of the address anywhere.
    const res = await fetch(`${portico.url}/mask-response/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` }, body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] }) })
    const raw = await res.text()
    assert.ok(!raw.includes('jane') && !raw.includes('example.com'), raw)
    for (const event of raw.split('\n\n').filter(e => e.trim() !== '')) {
      assert.match(event, /^data: /)
      const data = event.slice(6)
      if (data !== '[DONE]') JSON.parse(data)
    }
  })

  test('reject on a streamed answer: the SDK gets a clean error event before any of the match', { timeout: 15_000 }, async t => {
    setForTest(t, emu, 'script', ['Your card: 4111 1111 ', '1111 1111, thanks'])
    const stream = await openai('/reject-response').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let text = ''
    await assert.rejects((async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
    })(), (err: unknown) => err instanceof Error && /rejected by a guardrail/.test(err.message))
    assert.ok(!text.includes('4111'), text)
    // A whole answer: the refusal instead of the answer.
    await assert.rejects(openai('/reject-response').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => err instanceof OpenAI.PermissionDeniedError && /response was rejected by a guardrail \(regex: CreditCard\)/.test(err.message))
  })

  test('webhook: the JSON it gets, reject with its reason, mask', { timeout: 15_000 }, async () => {
    hookCalls.length = 0
    await assert.rejects(
      openai('/webhook').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'a forbidden topic' }] }),
      (err: unknown) => err instanceof OpenAI.PermissionDeniedError && err.message.includes('topic not allowed')
    )
    assert.deepEqual(hookCalls[0], { direction: 'request', model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'a forbidden topic' }] })
    await assert.rejects(
      anthropic('/webhook').messages.create({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'forbidden' }] }),
      (err: unknown) => err instanceof Anthropic.PermissionDeniedError && err.message.includes('topic not allowed')
    )
    hookCalls.length = 0
    const c = await openai('/webhook').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'my secret plan' }] })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    assert.ok(lastUserText().includes('my [redacted] plan'), lastUserText())
    // The answer went through the webhook too (direction response).
    assert.deepEqual(hookCalls.map(h => h.direction), ['request', 'response'])
    assert.deepEqual(hookCalls[1]!.messages, [{ role: 'assistant', content: 'Hello!' }])
  })

  test('webhook failures: timeout, oversized or undocumented answer, dead service — closed refuses (503), open lets through', { timeout: 20_000 }, async () => {
    for (const text of ['slow', 'huge', 'nonsense']) {
      await assert.rejects(
        openai('/webhook').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }] }),
        (err: unknown) => err instanceof OpenAI.InternalServerError && err.status === 503 && /could not be checked/.test(err.message),
        text
      )
      const c = await openai('/hook-open').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }] })
      assert.equal(c.choices[0]!.message.content, 'Hello!', text)
    }
    await assert.rejects(
      anthropic('/hook-dead').messages.create({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
      (err: unknown) => err instanceof Anthropic.APIError && err.status === 503
    )
  })

  test('OpenAI moderation: flagged text refused with the categories, clean text served', { timeout: 15_000 }, async () => {
    const before = emu.received.length
    await assert.rejects(
      openai('/moderation').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'something [flag:violence]' }] }),
      (err: unknown) => err instanceof OpenAI.PermissionDeniedError && /flagged: violence/.test(err.message)
    )
    const asked = emu.received.slice(before)
    assert.equal(asked.length, 1)
    assert.equal(asked[0]!.url, '/v1/moderations')
    assert.equal(asked[0]!.headers.authorization, `Bearer ${KEY}`)
    assert.deepEqual(asked[0]!.body, { model: 'omni-moderation-latest', input: ['something [flag:violence]'] })
    const ok = await anthropic('/moderation').messages.create({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'a calm question' }] })
    assert.equal(ok.content[0]!.type === 'text' ? ok.content[0].text : '', 'Hello!')
  })

  test('each decision is a guardrail trace event and counted in portico_guardrail_decisions_total', { timeout: 15_000 }, async () => {
    const trace = await openTrace(admin, 'path=/reject/chat/completions')
    await trace.ready
    await assert.rejects(openai('/reject').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x@y.io' }] }))
    const events = await trace.done
    const g = events.find(e => e.message.type === 'guardrail')?.message
    assert.deepEqual(g, { type: 'guardrail', direction: 'request', guard: 'regex', action: 'reject', details: 'Email', index: 0 })
    const text = await (await fetch(`${stats}/metrics`)).text()
    const count = (labels: string): number => Number(new RegExp(`^portico_guardrail_decisions_total\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
    assert.ok(count('model="gpt-4o-mini",guard="regex",action="reject"') >= 6, text.split('\n').filter(l => l.includes('guardrail')).join('\n'))
    assert.ok(count('model="gpt-4o-mini",guard="regex",action="mask"') >= 3)
    assert.ok(count('model="gpt-4o-mini",guard="webhook",action="error"') >= 4)
    assert.ok(count('model="gpt-4o-mini",guard="openAIModeration",action="reject"') >= 1)
    assert.ok(count('model="gpt-4o-mini",guard="openAIModeration",action="pass"') >= 1)
  })
})
