/**
 * Failover across an `ai` backend's providers (`groups`): which provider a try goes to
 * (pipeline/failover.ts), how passive health counts and backs off for them
 * (http/endpoint-balancer.ts, one state per thread or shared by workers), and the config
 * that makes them (config/ai-to-ir.ts): one backend per provider with its own key, health on
 * by default, what is refused, and no key in a dump.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { Dispatcher } from 'undici'
import { loadConfigText } from '../src/index.ts'
import type { BackendIR, BackendRefIR } from '../src/ir/types.ts'
import type { BackendHealthIR } from '../src/ir/traffic.ts'
import type { CompiledBackendRef } from '../src/request/compiled.ts'
import { chooseProvider, firstProvider, providerCount } from '../src/pipeline/failover.ts'
import { EndpointBalancer, MAX_BACKOFF, SharedEndpointState, ejectionFor, failedStatus, retryAfterMs, type EndpointPool } from '../src/http/endpoint-balancer.ts'
import { Records } from '../src/util/shared-records.ts'
import { redactSecrets } from '../src/ir/redact.ts'

function provider (name: string): CompiledBackendRef {
  const backend = { key: `ai:${name}`, kind: 'ai', name, protocol: 'http', endpoints: [{ host: '127.0.0.1', port: 1 }], target: '127.0.0.1:1' } as BackendIR
  return { ir: { backend: backend.key, weight: 1, policies: {} }, backend, policies: { empty: true, policies: [] } as unknown as CompiledBackendRef['policies'] }
}

test('chooseProvider: the first group with a provider left, round robin within it, ejected and tried ones skipped', () => {
  const [a1, a2, b1, c1] = [provider('a1'), provider('a2'), provider('b1'), provider('c1')]
  const groups = [[a1, a2], [b1], [c1]]
  const ejected = new Set<string>()
  const healthy = (b: BackendIR): boolean => !ejected.has(b.name)
  assert.equal(providerCount(groups), 4)
  // Round robin in the first group.
  const firsts = [0, 1, 2, 3].map(() => chooseProvider(groups, new Set(), healthy)!.backend!.name)
  assert.deepEqual(firsts, ['a1', 'a2', 'a1', 'a2'])
  // Peeking does not move the group's turn.
  assert.equal(chooseProvider(groups, new Set(), healthy, true), a1)
  assert.equal(chooseProvider(groups, new Set(), healthy, true), a1)
  // A tried provider is not tried again; the group's other one is next, then the next group.
  assert.equal(chooseProvider(groups, new Set([a1]), healthy), a2)
  assert.equal(chooseProvider(groups, new Set([a1, a2]), healthy), b1)
  assert.equal(chooseProvider(groups, new Set([a1, a2, b1]), healthy), c1)
  assert.equal(chooseProvider(groups, new Set([a1, a2, b1, c1]), healthy), null)
  // Ejected ones are skipped: with the whole first group ejected, the second serves.
  ejected.add('a1').add('a2')
  assert.equal(chooseProvider(groups, new Set(), healthy), b1)
  ejected.add('b1')
  assert.equal(chooseProvider(groups, new Set(), healthy), c1)
  ejected.add('c1')
  assert.equal(chooseProvider(groups, new Set(), healthy), null)
  // Every provider ejected: a request still starts at the first (its call answers 503).
  assert.equal(firstProvider(groups, healthy), a1)
})

test('chooseProvider: a provider whose backend is missing or not ai is never chosen', () => {
  const missing = { ...provider('gone'), backend: undefined }
  const ok = provider('ok')
  assert.equal(chooseProvider([[missing], [ok]], new Set(), () => true), ok)
})

/** One endpoint that answers each call with the next status of `statuses`. */
function fakePool (statuses: number[]): EndpointPool {
  const controller = { abort () {}, pause () {}, resume () {} } as unknown as Dispatcher.DispatchController
  return {
    dispatch (_options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      const status = statuses.shift() ?? 200
      handler.onResponseStart?.(controller, status, {}, '')
      handler.onResponseEnd?.(controller, {})
      return true
    },
    close: async () => {},
    destroy: async () => {},
    stats: { connected: 0, free: 0, pending: 0, running: 0 }
  } as unknown as EndpointPool
}

function call (balancer: EndpointBalancer): void {
  balancer.dispatch({ path: '/', method: 'POST' }, { onResponseStart () {}, onResponseEnd () {}, onResponseError () {} })
}

test('passive health of a failover provider: a 429 ejects it, each ejection in a row lasts longer, a success resets the backoff', () => {
  const health: BackendHealthIR = { consecutiveFailures: 1, ejectionMs: 1000, rateLimited: true, backoff: true }
  const statuses: number[] = []
  let now = 10_000
  const balancer = new EndpointBalancer(['http://p:1'], health, () => fakePool(statuses), () => now)
  statuses.push(429)
  call(balancer)
  assert.deepEqual(balancer.ejected(), ['http://p:1'], 'a 429 counts')
  now += 999
  assert.equal(balancer.healthy, 0)
  now += 2
  assert.equal(balancer.healthy, 1, 're-admitted after 1s')
  statuses.push(503)
  call(balancer)
  now += 1999
  assert.equal(balancer.healthy, 0, 'the second ejection in a row lasts 2s')
  now += 2
  assert.equal(balancer.healthy, 1)
  statuses.push(200, 429)
  call(balancer)
  call(balancer)
  now += 1001
  assert.equal(balancer.healthy, 1, 'a success in between: back to 1s')
})

test('passive health of a failover provider: a 429\'s Retry-After makes its ejection longer, at most the longest backoff', () => {
  const health: BackendHealthIR = { consecutiveFailures: 1, ejectionMs: 1000, rateLimited: true, backoff: true }
  let now = 1_000_000
  const controller = { abort () {}, pause () {}, resume () {} } as unknown as Dispatcher.DispatchController
  let headers: Record<string, string> = {}
  const pool = {
    dispatch (_o: Dispatcher.DispatchOptions, h: Dispatcher.DispatchHandler): boolean {
      h.onResponseStart?.(controller, 429, headers, '')
      h.onResponseEnd?.(controller, {})
      return true
    },
    close: async () => {},
    destroy: async () => {},
    stats: { connected: 0, free: 0, pending: 0, running: 0 }
  } as unknown as EndpointPool
  const balancer = new EndpointBalancer(['http://p:1'], health, () => pool, () => now)
  headers = { 'retry-after': '5' }
  call(balancer)
  now += 4999
  assert.equal(balancer.healthy, 0, 'ejected for the 5s the provider asked')
  now += 2
  assert.equal(balancer.healthy, 1)
  assert.equal(retryAfterMs('3600', health, now), MAX_BACKOFF * 1000, 'capped')
  assert.equal(retryAfterMs(new Date(now + 3000).toUTCString(), health, now) > 1000, true, 'an HTTP date')
  assert.equal(retryAfterMs('soon', health, now), 0)
  assert.equal(retryAfterMs(undefined, health, now), 0)
})

test('passive health without rateLimited (host backends): a 429 is an answer, not a failure; no backoff', () => {
  const health: BackendHealthIR = { consecutiveFailures: 1, ejectionMs: 1000 }
  const statuses = [429, 500]
  let now = 0
  const balancer = new EndpointBalancer(['http://p:1'], health, () => fakePool(statuses), () => now)
  call(balancer)
  assert.equal(balancer.healthy, 1)
  call(balancer)
  assert.equal(balancer.healthy, 0)
  assert.equal(failedStatus(health, 429), false)
  assert.equal(failedStatus({ ...health, rateLimited: true }, 429), true)
  assert.equal(failedStatus(health, 404), false)
  assert.equal(ejectionFor(health, 5), 1000)
  assert.equal(ejectionFor({ ...health, backoff: true }, 3), 3000)
  assert.equal(ejectionFor({ ...health, backoff: true }, 1000), MAX_BACKOFF * 1000, 'capped')
})

test('shared passive health (data-plane workers): the same backoff, counted in the shared record', () => {
  const records = new Records(new SharedArrayBuffer(64 * 2))
  const a = new SharedEndpointState(records, 1)
  const b = new SharedEndpointState(records, 1)
  const health: BackendHealthIR = { consecutiveFailures: 2, ejectionMs: 100, backoff: true }
  const until = (k: number): number => ejectionFor(health, k)
  a.failed(2, until)
  assert.equal(a.ejectedUntil(), 0, 'one failure of two')
  b.failed(2, until)
  assert.equal(a.ejectedUntil(), 100, 'the second, seen by another worker, ejects')
  a.failed(2, until)
  b.failed(2, until)
  assert.equal(b.ejectedUntil(), 200, 'the second ejection in a row: twice as long')
  a.succeeded()
  a.failed(2, until)
  b.failed(2, until)
  assert.equal(a.ejectedUntil(), 100, 'a success resets the backoff')
})

function load (ai: Record<string, unknown>, policies?: Record<string, unknown>): { ir?: ReturnType<typeof irOf>, problems: string[] } {
  const config = { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ ai: { name: 'llm', ...ai }, ...(policies !== undefined ? { policies } : {}) }] }] }
  const result = loadConfigText(JSON.stringify(config), { baseDir: '/' })
  if (!result.ok) return { problems: result.diagnostics.map(d => `${d.path.join('.')}: ${d.message}`) }
  return { ir: irOf(result.config.ir), problems: [] }
}

function irOf (ir: { backends: BackendIR[], binds: Array<{ listeners: Array<{ routes: Array<{ backends: BackendRefIR[] }> }> }> }): { backends: BackendIR[], ref: BackendRefIR, whole: unknown } {
  return { backends: ir.backends, ref: ir.binds[0]!.listeners[0]!.routes[0]!.backends[0]!, whole: ir }
}

const GROUPS = [
  { providers: [{ name: 'openai', provider: { openAI: { model: 'gpt-4o-mini' } }, policies: { backendAuth: { key: 'sk-test-portico-openai' } } }, { name: 'azure', provider: { azure: { resourceName: 'res', deploymentName: 'gpt' } }, policies: { backendAuth: { key: 'azure-test-key' } } }] },
  { providers: [{ name: 'claude', provider: { anthropic: { model: 'claude-sonnet-4-6' } }, hostOverride: 'http://127.0.0.1:9001', policies: { backendAuth: { key: 'sk-ant-test-portico' }, health: { consecutiveFailures: 3, ejectionDuration: '5s' } } }] },
  { providers: [{ name: 'bedrock', provider: { bedrock: { region: 'us-east-1', model: 'm' } } }] }
]

test('groups → one ai backend per provider, each with its own key, format and passive health; the route\'s choice holds them by priority', () => {
  const { ir, problems } = load({ groups: GROUPS }, { requestHeaderModifier: { set: { 'x-team': 'a' } } })
  assert.deepEqual(problems, [])
  const byName = new Map(ir!.backends.map(b => [b.name, b]))
  assert.deepEqual([...byName.keys()], ['llm/openai', 'llm/azure', 'llm/claude', 'llm/bedrock'])
  assert.equal(byName.get('llm/openai')!.ai!.format, 'openai-chat')
  assert.equal(byName.get('llm/claude')!.ai!.format, 'anthropic-messages')
  assert.equal(byName.get('llm/claude')!.target, '127.0.0.1:9001')
  assert.equal(byName.get('llm/bedrock')!.ai!.format, 'bedrock-converse')
  assert.deepEqual(byName.get('llm/bedrock')!.ai!.bedrock!.auth, { kind: 'chain' })
  // Health on with the defaults, 429 counted, backoff; a provider's own settings win.
  assert.deepEqual(byName.get('llm/openai')!.health, { consecutiveFailures: 5, ejectionMs: 30_000, rateLimited: true, backoff: true })
  assert.deepEqual(byName.get('llm/claude')!.health, { consecutiveFailures: 3, ejectionMs: 5000, rateLimited: true, backoff: true })
  const ref = ir!.ref
  assert.deepEqual(ref.failover!.map(g => g.map(p => byName.get([...byName.values()].find(b => b.key === p.backend)!.name)!.name)), [['llm/openai', 'llm/azure'], ['llm/claude'], ['llm/bedrock']])
  assert.equal(ref.backend, ref.failover![0]![0]!.backend, 'the first provider stands for the set')
  // Each provider's key its provider's way; the entry's policies reach every provider.
  const policies = ref.failover!.flat().map(p => p.policies.requestHeaderModifier?.set)
  assert.deepEqual(policies, [
    { 'x-team': 'a', authorization: 'Bearer sk-test-portico-openai' },
    { 'x-team': 'a', 'api-key': 'azure-test-key' },
    { 'x-team': 'a', 'x-api-key': 'sk-ant-test-portico' },
    { 'x-team': 'a' }
  ])
  // No key in a dump.
  const dumped = JSON.stringify(redactSecrets(ir!.whole))
  for (const key of ['sk-test-portico-openai', 'azure-test-key', 'sk-ant-test-portico']) assert.doesNotMatch(dumped, new RegExp(key))
})

test('groups: what is refused, named at its place', () => {
  assert.deepEqual(load({ provider: { openAI: {} }, groups: GROUPS }).problems, ['routes.0.backends.0.ai.provider: provider and groups exclude each other: put the provider in a group'])
  assert.deepEqual(load({ groups: GROUPS, hostOverride: 'http://x:1' }).problems, ['routes.0.backends.0.ai.hostOverride: is set on each provider of groups'])
  assert.deepEqual(load({ groups: [{ providers: [{ name: 'a', provider: { openAI: {} } }, { name: 'a', provider: { openAI: {} } }] }] }).problems, ['routes.0.backends.0.ai.groups.0.providers.1.name: another provider of backend llm is named "a"'])
  assert.deepEqual(load({ groups: [{ providers: [{ name: 'c', provider: { custom: { format: 'openai-chat' } } }] }] }).problems, ['routes.0.backends.0.ai.groups.0.providers.0.hostOverride: is required for provider custom'])
  assert.deepEqual(load({ groups: [{ providers: [{ name: 'o', provider: { openAI: {} }, policies: { backendAuth: { aws: { accessKeyId: 'AKIDTEST' } } } }] }] }).problems, ['routes.0.backends.0.ai.groups.0.providers.0.policies.backendAuth.aws: applies to ai backends of provider bedrock only'])
  assert.deepEqual(load({ groups: [{ providers: [{ name: 'b', provider: { bedrock: { region: 'us-east-1' } }, policies: { backendAuth: { aws: { accessKeyId: 'AKIDTEST' } } } }] }] }).problems, ['routes.0.backends.0.ai.groups.0.providers.0.policies.backendAuth.aws: accessKeyId and secretAccessKey go together (or neither: the AWS default credential chain)'])
  assert.deepEqual(load({}).problems, ['routes.0.backends.0.ai: needs provider (or groups of providers)'])
})
