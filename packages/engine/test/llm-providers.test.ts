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
    assert.deepEqual(headerPolicy, { set: { authorization: 'Bearer sk-test-portico' } }, name)
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
  assert.deepEqual(v1.headerPolicy, { set: { 'api-key': 'azure-test-key' }, remove: ['authorization'] })
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

test('providers without an adapter in this build are refused at load, with the reason; backendAuth does not apply to signed providers', () => {
  for (const provider of [{ anthropic: {} }, { gemini: {} }, { vertex: { projectId: 'my-project', region: 'us-central1' } }]) {
    const name = Object.keys(provider)[0]!
    assert.match(load({ provider }).problems.join('\n'), new RegExp(`provider.${name}: provider ${name} is not available in this build`))
  }
  assert.match(load({ provider: { custom: { format: 'anthropic-messages' } }, hostOverride: 'http://127.0.0.1:1' }).problems.join('\n'), /not available in this build/)
  assert.match(load({ provider: { custom: { format: 'openai-chat' } } }).problems.join('\n'), /hostOverride: is required for provider custom/)
  assert.match(load({ provider: { vertex: { projectId: 'my-project', region: 'us-central1' } } }, { backendAuth: { aws: {} } }).problems.join('\n'), /backendAuth.aws: applies to ai backends of provider bedrock only/)
  assert.equal(PROVIDERS.anthropic.key?.header, 'x-api-key')
  assert.equal(PROVIDERS.gemini.key?.header, 'x-goog-api-key')
})
