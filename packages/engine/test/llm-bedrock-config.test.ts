/**
 * `ai.provider.bedrock` from config to adapter: region and endpoint, guardrail, the three ways
 * of authorising (a Bedrock API key, explicit AWS keys, the default credential chain), what is
 * refused, and that the credentials never show in a dump (ir/redact.ts).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText } from '../src/index.ts'
import type { BackendIR } from '../src/ir/types.ts'
import { redactSecrets } from '../src/ir/redact.ts'
import { providerAdapter } from '../src/llm/providers/index.ts'
import type { ProviderRequest } from '../src/llm/provider.ts'

function load (ai: Record<string, unknown>, policies?: Record<string, unknown>): { backend?: BackendIR, problems: string[] } {
  const config = { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ ai: { name: 'b', ...ai }, ...(policies !== undefined ? { policies } : {}) }] }] }
  const result = loadConfigText(JSON.stringify(config), { baseDir: '/' })
  if (!result.ok) return { problems: result.diagnostics.map(d => `${d.path}: ${d.message}`) }
  return { backend: result.config.ir.backends.find(b => b.kind === 'ai'), problems: [] }
}

const KEYS = { accessKeyId: 'AKIDPORTICOTESTONLY', secretAccessKey: 'portico-test-secret-not-a-real-key', sessionToken: 'portico-test-session' }

test('bedrock: the regional endpoint, the model in the path, the guardrail in every body', () => {
  const { backend, problems } = load({ provider: { bedrock: { region: 'eu-west-3', model: 'anthropic.claude-3-haiku-20240307-v1:0', guardrailIdentifier: 'gr-abc', guardrailVersion: '2' } } })
  assert.deepEqual(problems, [])
  assert.equal(backend!.target, 'bedrock-runtime.eu-west-3.amazonaws.com:443')
  assert.equal(backend!.protocol, 'https')
  assert.deepEqual(backend!.ai!.bedrock, { region: 'eu-west-3', guardrail: { identifier: 'gr-abc', version: '2' }, auth: { kind: 'chain' } })
  const adapter = providerAdapter(backend!.ai!)
  assert.ok(typeof adapter !== 'string')
  const request: ProviderRequest = { operation: 'chat', model: 'anthropic.claude-3-haiku-20240307-v1:0', streaming: true, body: Buffer.alloc(0), headers: {} }
  assert.equal(adapter.path(request), '/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream')
  assert.deepEqual(adapter.adaptBody!({ messages: [] }, request), { messages: [], guardrailConfig: { guardrailIdentifier: 'gr-abc', guardrailVersion: '2' } })
})

test('bedrock: backendAuth key is a Bedrock API key (Bearer), aws keys sign, nothing is the default chain; client credentials do not go on', async () => {
  const origin = { host: 'bedrock-runtime.us-east-1.amazonaws.com', port: 443, protocol: 'https' as const }
  const headers = (): Record<string, string> => ({ authorization: 'Bearer sk-client', 'x-api-key': 'sk-ant-client', 'x-amz-security-token': 'injected', 'x-request-id': 'r1' })

  const keyed = load({ provider: { bedrock: { region: 'us-east-1' } } }, { backendAuth: { key: 'bedrock-api-key-test' } })
  assert.deepEqual(keyed.backend!.ai!.bedrock!.auth, { kind: 'apiKey', apiKey: 'bedrock-api-key-test' })
  const a1 = providerAdapter(keyed.backend!.ai!)
  assert.ok(typeof a1 !== 'string')
  const r1: ProviderRequest = { operation: 'chat', model: 'm', streaming: false, body: Buffer.from('{}'), headers: headers() }
  await a1.authorize(r1, origin)
  assert.equal(r1.headers.authorization, 'Bearer bedrock-api-key-test')
  assert.equal(r1.headers['x-api-key'], undefined)
  assert.equal(r1.headers['x-amz-security-token'], undefined)
  assert.equal(r1.headers['x-request-id'], 'r1')

  const signed = load({ provider: { bedrock: { region: 'us-east-1' } } }, { backendAuth: { aws: KEYS } })
  assert.deepEqual(signed.backend!.ai!.bedrock!.auth, { kind: 'keys', ...KEYS })
  const a2 = providerAdapter(signed.backend!.ai!)
  assert.ok(typeof a2 !== 'string')
  const r2: ProviderRequest = { operation: 'chat', model: 'm', streaming: false, body: Buffer.from('{}'), headers: headers() }
  await a2.authorize(r2, origin)
  assert.match(r2.headers.authorization!, /^AWS4-HMAC-SHA256 Credential=AKIDPORTICOTESTONLY\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=accept;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/)
  assert.equal(r2.headers['x-amz-security-token'], 'portico-test-session', 'the session token signed, the client\'s dropped')
  assert.equal(r2.headers['x-api-key'], undefined)

  assert.deepEqual(load({ provider: { bedrock: { region: 'us-east-1' } } }).backend!.ai!.bedrock!.auth, { kind: 'chain' })
  assert.deepEqual(load({ provider: { bedrock: { region: 'us-east-1' } } }, { backendAuth: { aws: {} } }).backend!.ai!.bedrock!.auth, { kind: 'chain' })
  // No header policy carries a Bedrock key: the adapter sends it.
  const config = { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ ai: { name: 'b', provider: { bedrock: { region: 'us-east-1' } } }, policies: { backendAuth: { key: 'bedrock-api-key-test' } } }] }] }
  const result = loadConfigText(JSON.stringify(config), { baseDir: '/' })
  assert.ok(result.ok)
  assert.equal(result.config.ir.binds[0]!.listeners[0]!.routes[0]!.backends[0]!.policies.requestHeaderModifier, undefined)
})

test('bedrock: credentials are redacted wherever the IR is shown', () => {
  for (const policies of [{ backendAuth: { key: 'bedrock-api-key-test' } }, { backendAuth: { aws: KEYS } }]) {
    const { backend } = load({ provider: { bedrock: { region: 'us-east-1' } } }, policies)
    const shown = JSON.stringify(redactSecrets(backend))
    assert.doesNotMatch(shown, /bedrock-api-key-test|AKIDPORTICOTESTONLY|portico-test-secret|portico-test-session/)
    assert.match(shown, /<redacted>/)
  }
})

test('bedrock: what is refused at load', () => {
  const bedrock = { region: 'us-east-1' }
  assert.match(load({ provider: { bedrock } }, { backendAuth: { aws: { accessKeyId: 'AKIDX' } } }).problems.join('\n'), /accessKeyId and secretAccessKey go together/)
  assert.match(load({ provider: { bedrock } }, { backendAuth: { key: 'k', aws: KEYS } }).problems.join('\n'), /exactly one of key, passthrough, aws, gcp or azure/)
  assert.match(load({ provider: { bedrock } }, { backendAuth: {} }).problems.join('\n'), /backendAuth: needs exactly one of key, passthrough, aws, gcp or azure/)
  assert.match(load({ provider: { bedrock: { ...bedrock, guardrailIdentifier: 'g' } } }).problems.join('\n'), /guardrailIdentifier and guardrailVersion go together/)
  assert.match(load({ provider: { bedrock }, pathOverride: '/x' }).problems.join('\n'), /pathOverride: does not apply to provider bedrock/)
  assert.match(load({ provider: { bedrock: { region: 'US_EAST' } } }).problems.join('\n'), /region/)
  assert.match(load({ provider: { openAI: {} } }, { backendAuth: { aws: KEYS } }).problems.join('\n'), /applies to ai backends of provider bedrock only/)
})
