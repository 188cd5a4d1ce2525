/**
 * Providers of `ai` backends (llm/providers/, config/ai-to-ir.ts): each preset's documented
 * base URL and path, Azure's two path shapes, where backendAuth's key goes, and the providers
 * this build has no adapter for refused at load with the reason.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText } from '../src/index.ts'
import type { BackendIR } from '../src/ir/types.ts'
import { providerAdapter, PROVIDERS } from '../src/llm/providers/index.ts'
import type { ProviderRequest } from '../src/llm/provider.ts'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { redactSecrets } from '../src/ir/redact.ts'

function load (ai: Record<string, unknown>, policies?: Record<string, unknown>): { backend?: BackendIR, problems: string[], headerPolicy?: unknown } {
  const config = { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ ai: { name: 'x', ...ai }, ...(policies !== undefined ? { policies } : {}) }] }] }
  const result = loadConfigText(JSON.stringify(config), { baseDir: '/' })
  if (!result.ok) return { problems: result.diagnostics.map(d => `${d.path}: ${d.message}`) }
  const ir = result.config.ir
  const backend = ir.backends.find(b => b.kind === 'ai')
  const ref = ir.binds[0]!.listeners[0]!.routes[0]!.backends[0]!
  return { backend, problems: [], headerPolicy: ref.policies.requestHeaderModifier }
}

const chat = (model = 'm'): ProviderRequest => ({ operation: 'chat', model, streaming: false, body: Buffer.alloc(0), headers: {} })

test('OpenAI-compatible presets: their documented base URL and chat path, Bearer keys', () => {
  const expected: Record<string, string> = {
    openAI: 'https://api.openai.com:443/v1/chat/completions',
    groq: 'https://api.groq.com:443/openai/v1/chat/completions',
    deepseek: 'https://api.deepseek.com:443/chat/completions',
    openrouter: 'https://openrouter.ai:443/api/v1/chat/completions',
    fireworks: 'https://api.fireworks.ai:443/inference/v1/chat/completions',
    together: 'https://api.together.ai:443/v1/chat/completions',
    mistral: 'https://api.mistral.ai:443/v1/chat/completions',
    xai: 'https://api.x.ai:443/v1/chat/completions',
    cerebras: 'https://api.cerebras.ai:443/v1/chat/completions',
    ollama: 'http://localhost:11434/v1/chat/completions',
    vllm: 'http://localhost:8000/v1/chat/completions',
    llamaCpp: 'http://localhost:8080/v1/chat/completions'
  }
  for (const [name, url] of Object.entries(expected)) {
    const { backend, problems, headerPolicy } = load({ provider: { [name]: { model: 'm' } } }, { backendAuth: { key: 'sk-test-portico' } })
    assert.deepEqual(problems, [], name)
    const adapter = providerAdapter(backend!.ai!)
    assert.ok(typeof adapter !== 'string')
    assert.equal(`${backend!.protocol}://${backend!.target}${adapter.path(chat())}`, url, name)
    assert.deepEqual(headerPolicy, { set: { authorization: 'Bearer sk-test-portico' }, remove: ['x-api-key', 'api-key', 'x-goog-api-key'] }, name)
    assert.equal(backend!.ai!.format, 'openai-chat')
  }
  const embeddings = providerAdapter(load({ provider: { groq: {} } }).backend!.ai!)
  assert.ok(typeof embeddings !== 'string')
  assert.equal(embeddings.path({ ...chat(), operation: 'embeddings' }), '/openai/v1/embeddings')
  assert.equal(embeddings.path({ ...chat(), operation: 'models' }), '/openai/v1/models')
})

test('pathOverride replaces the chat path; pathPrefix the base path', () => {
  const a = providerAdapter(load({ provider: { openAI: {} }, pathOverride: '/x/chat', pathPrefix: '/api' }).backend!.ai!)
  assert.ok(typeof a !== 'string')
  assert.equal(a.path(chat()), '/x/chat')
  assert.equal(a.path({ ...chat(), operation: 'models' }), '/api/models')
})

test('Azure: the v1 API by default, deployment paths with a dated apiVersion, the key in api-key and the client\'s Authorization removed', () => {
  const v1 = load({ provider: { azure: { resourceName: 'my-res', deploymentName: 'gpt4o' } } }, { backendAuth: { key: 'azure-test-key' } })
  assert.equal(v1.backend!.target, 'my-res.openai.azure.com:443')
  assert.equal(v1.backend!.ai!.model, 'gpt4o')
  const a1 = providerAdapter(v1.backend!.ai!)
  assert.ok(typeof a1 !== 'string')
  assert.equal(a1.path(chat('gpt4o')), '/openai/v1/chat/completions')
  assert.deepEqual(v1.headerPolicy, { set: { 'api-key': 'azure-test-key' }, remove: ['authorization', 'x-api-key', 'x-goog-api-key'] })
  const dated = load({ provider: { azure: { resourceName: 'my-res', deploymentName: 'gpt4o', apiVersion: '2024-10-21' } } })
  const a2 = providerAdapter(dated.backend!.ai!)
  assert.ok(typeof a2 !== 'string')
  assert.equal(a2.path(chat('gpt4o')), '/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21')
  assert.equal(a2.path({ ...chat(), operation: 'models' }), '/openai/models?api-version=2024-10-21')
  assert.match(load({ provider: { azure: {} } }).problems.join('\n'), /hostOverride: set provider.azure.resourceName or hostOverride/)
  const preview = providerAdapter(load({ provider: { azure: { resourceName: 'r', apiVersion: 'preview' } } }).backend!.ai!)
  assert.ok(typeof preview !== 'string')
  assert.equal(preview.path(chat()), '/openai/v1/chat/completions?api-version=preview')
  const foundry = load({ provider: { azure: { resourceName: 'my-res', resourceType: 'foundry', projectName: 'proj' } } })
  assert.equal(foundry.backend!.target, 'my-res.services.ai.azure.com:443')
  const a3 = providerAdapter(foundry.backend!.ai!)
  assert.ok(typeof a3 !== 'string')
  assert.equal(a3.path(chat()), '/api/projects/proj/openai/v1/chat/completions')
  assert.equal(a3.path({ ...chat(), format: 'openai-responses' }), '/api/projects/proj/openai/v1/responses')
})

test('anthropic, gemini, vertex: adapters, formats, one place for keys; backendAuth does not apply to signed providers', () => {
  const anthropic = load({ provider: { anthropic: {} } }, { backendAuth: { key: 'sk-ant-test-portico' } })
  assert.deepEqual(anthropic.problems, [])
  assert.equal(anthropic.backend!.ai!.format, 'anthropic-messages')
  assert.deepEqual(anthropic.headerPolicy, { set: { 'x-api-key': 'sk-ant-test-portico' }, remove: ['authorization', 'api-key', 'x-goog-api-key'] })
  const gemini = load({ provider: { gemini: { model: 'gemini-2.5-flash' } } }, { backendAuth: { key: 'gemini-test-key' } })
  assert.deepEqual(gemini.problems, [])
  assert.deepEqual(gemini.headerPolicy, { set: { 'x-goog-api-key': 'gemini-test-key' }, remove: ['authorization', 'x-api-key', 'api-key'] })
  const g = providerAdapter(gemini.backend!.ai!)
  assert.ok(typeof g !== 'string')
  assert.equal(g.path({ ...chat('gemini-2.5-flash'), streaming: true }), '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse')
  // The adapter places no key: the header policy did.
  const headers: Record<string, string> = { 'x-goog-api-key': 'gemini-test-key' }
  void g.authorize({ ...chat(), headers }, { host: 'h', port: 443, protocol: 'https' })
  assert.deepEqual(headers, { 'x-goog-api-key': 'gemini-test-key' })
  assert.match(load({ provider: { gemini: {} }, pathOverride: '/x' }).problems.join('\n'), /provider gemini takes no pathOverride/)
  const v1 = providerAdapter(load({ provider: { gemini: {} }, pathPrefix: '/v1' }).backend!.ai!)
  assert.ok(typeof v1 !== 'string')
  assert.equal(v1.path(chat('gemini-2.5-pro')), '/v1/models/gemini-2.5-pro:generateContent')
  assert.equal(v1.path({ ...chat(), operation: 'embeddings' }), '/v1/openai/embeddings')
  const overridden = providerAdapter(load({ provider: { anthropic: {} }, pathOverride: '/claude/messages' }).backend!.ai!)
  assert.ok(typeof overridden !== 'string')
  assert.equal(overridden.path(chat()), '/claude/messages')
  assert.equal(overridden.path({ ...chat(), operation: 'models' }), '/v1/models')
  // Anthropic- and Gemini-compatible servers: the providers' paths under their base path, their key headers.
  const customAnthropic = load({ provider: { custom: { format: 'anthropic-messages' } }, hostOverride: 'http://127.0.0.1:1', pathPrefix: '/api/v1' }, { backendAuth: { key: 'k' } })
  assert.deepEqual(customAnthropic.problems, [])
  const ca = providerAdapter(customAnthropic.backend!.ai!)
  assert.ok(typeof ca !== 'string')
  assert.equal(ca.format, 'anthropic-messages')
  assert.equal(ca.system, 'custom')
  assert.equal(ca.path(chat()), '/api/v1/messages')
  assert.deepEqual((customAnthropic.headerPolicy as { set: unknown }).set, { 'x-api-key': 'k' })
  const cg = providerAdapter(load({ provider: { custom: { format: 'gemini' } }, hostOverride: 'http://127.0.0.1:1' }).backend!.ai!)
  assert.ok(typeof cg !== 'string')
  assert.equal(cg.path({ ...chat('m'), streaming: true }), '/v1beta/models/m:streamGenerateContent?alt=sse')
  // A Responses-only server: chat at {base}/responses in the Responses format, the key as a bearer token.
  const customResponses = load({ provider: { custom: { format: 'openai-responses' } }, hostOverride: 'http://127.0.0.1:1' }, { backendAuth: { key: 'k' } })
  assert.deepEqual(customResponses.problems, [])
  const cr = providerAdapter(customResponses.backend!.ai!)
  assert.ok(typeof cr !== 'string')
  assert.equal(cr.format, 'openai-responses')
  assert.equal(cr.path(chat()), '/v1/responses')
  assert.equal(cr.path({ ...chat(), operation: 'models' }), '/v1/models')
  assert.deepEqual((customResponses.headerPolicy as { set: unknown }).set, { authorization: 'Bearer k' })

  const vertexGemini = load({ provider: { vertex: { projectId: 'my-project', region: 'us-central1', model: 'gemini-2.5-flash' } } })
  assert.deepEqual(vertexGemini.problems, [])
  assert.equal(vertexGemini.backend!.target, 'us-central1-aiplatform.googleapis.com:443')
  // The multi-regions have endpoints of their own, as the vertex adapter addresses them.
  assert.equal(load({ provider: { vertex: { projectId: 'my-project', region: 'eu', model: 'gemini-2.5-flash' } } }).backend!.target, 'aiplatform.eu.rep.googleapis.com:443')
  assert.equal(vertexGemini.backend!.ai!.format, 'gemini')
  const vertexClaude = load({ provider: { vertex: { projectId: 'my-project', region: 'global', model: 'claude-sonnet-4-5' } } }, { backendAuth: { gcp: {} } })
  assert.deepEqual(vertexClaude.problems, [])
  assert.equal(vertexClaude.backend!.ai!.format, 'anthropic-messages')
  const c = providerAdapter(vertexClaude.backend!.ai!)
  assert.ok(typeof c !== 'string')
  assert.equal(c.path(chat('claude-sonnet-4-5')), '/v1/projects/my-project/locations/global/publishers/anthropic/models/claude-sonnet-4-5:rawPredict')
  assert.deepEqual(c.adaptBody!({ model: 'claude-sonnet-4-5', max_tokens: 5 }, chat()), { anthropic_version: 'vertex-2023-10-16', max_tokens: 5 })

  assert.match(load({ provider: { vertex: { projectId: 'my-project', region: 'global' } } }, { backendAuth: { gcp: { credential: '{"client_email":"x"}' } } }).problems.join('\n'), /credential: the inline credential is not a service-account key/)
  assert.match(load({ provider: { vertex: { projectId: 'my-project', region: 'global' } } }, { backendAuth: { gcp: { credential: { file: '/nonexistent/key.json' } } } }).problems.join('\n'), /credential.file: cannot read \/nonexistent\/key.json/)
  assert.match(load({ provider: { anthropic: {} } }, { backendAuth: { gcp: {} } }).problems.join('\n'), /backendAuth.gcp: applies to ai backends of provider vertex/)
  assert.match(load({ provider: { openAI: {} } }, { backendAuth: {} }).problems.join('\n'), /backendAuth: needs exactly one of key, passthrough, aws, gcp or azure/)
  assert.match(load({ provider: { vertex: { projectId: 'my-project', region: 'us-central1' } } }, { backendAuth: { key: 'k' } }).problems.join('\n'), /backendAuth: does not apply to this provider/)
  assert.match(load({ provider: { custom: { format: 'openai-chat' } } }).problems.join('\n'), /hostOverride: is required for provider custom/)
  assert.match(load({ provider: { vertex: { projectId: 'my-project', region: 'us-central1' } } }, { backendAuth: { aws: {} } }).problems.join('\n'), /backendAuth.aws: applies to ai backends of provider bedrock only/)
  assert.equal(PROVIDERS.anthropic.key?.header, 'x-api-key')
  assert.equal(PROVIDERS.gemini.key?.header, 'x-goog-api-key')
})

test('vertex: backendAuth.gcp.credential inline or from a file, carried to the adapter, redacted in dumps', () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const key = { type: 'service_account', client_email: 'portico-test@my-project.iam.gserviceaccount.com', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), private_key_id: 'kid-test', token_uri: 'http://127.0.0.1:1/token' }
  const dir = mkdtempSync(join(tmpdir(), 'portico-vertex-'))
  writeFileSync(join(dir, 'key.json'), JSON.stringify(key))
  for (const credential of [JSON.stringify(key), { file: join(dir, 'key.json') }]) {
    const { backend, problems } = load({ provider: { vertex: { projectId: 'my-project', region: 'us-central1' } } }, { backendAuth: { gcp: { credential } } })
    assert.deepEqual(problems, [])
    assert.equal(backend!.ai!.vertex!.credential!.client_email, key.client_email)
    const dumped = JSON.stringify(redactSecrets(backend))
    assert.doesNotMatch(dumped, /PRIVATE KEY/)
    assert.ok(typeof providerAdapter(backend!.ai!) !== 'string')
  }
})
