/**
 * The model API in a cluster against a real kube-apiserver (e2e/cluster/harness.ts):
 *
 * 1. the PorticoModel CRD (generated from the config file's JSON Schema, with agentgateway's
 *    CEL rules): PorticoModels applied with kubectl are kept as written; invalid ones are
 *    refused by the API server with the schema's message (both or neither of provider and
 *    virtualModel, bad wildcards, policies or Internal on a virtual model, baseURLs that are
 *    not absolute http(s) or point at loopback, link-local or metadata addresses);
 * 2. the controller with GATEWAY_MODELS_ENABLED=true watches PorticoModels and writes their
 *    status per parent (Accepted / ResolvedRefs with reasons), and `kubectl get pmodel` shows
 *    the matched model; with it off the controller does not watch them;
 * 3. a Gateway's proxy serves the models (an OpenAI and an Anthropic emulator reached at a
 *    non-loopback address) to the official openai and @anthropic-ai/sdk clients: selection by
 *    prefix and exact name, discovery, unknown and internal models refused, and an HTTPRoute
 *    rule with the model backend * serving a virtual model over an internal one.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { configJsonSchema } from '@portico/engine'
import { requireKubeTools, type Cluster, type KubeObject } from '../cluster/harness.ts'
import { startClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml, installPorticoParametersCrd, startController } from '../cluster/portico-processes.ts'
import { porticoBackendCrd, porticoModelCrd, porticoPolicyCrd } from '@portico/controller/crds'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { networkInterfaces } from 'node:os'
import { connect, createServer, type AddressInfo } from 'node:net'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { startOpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'

const MODELS = '/apis/portico.dev/v1alpha1/namespaces/apps/porticomodels'

function model (name: string, spec: Record<string, unknown>): KubeObject {
  return { apiVersion: 'portico.dev/v1alpha1', kind: 'PorticoModel', metadata: { name, namespace: 'apps' }, spec }
}

/** kubectl create of one object (YAML is JSON): resolves with stdout, rejects with the API server's message. */
async function kubectlCreate (cluster: Cluster, obj: KubeObject): Promise<string> {
  return await cluster.kubectl(['create', '-f', '-'], { input: JSON.stringify(obj) })
}

type Condition = { type: string, status: string, reason: string, message: string }

async function parentConditions (cluster: Cluster, name: string): Promise<Array<{ parentRef: Record<string, unknown>, conditions: Condition[] }> | undefined> {
  const obj = await cluster.api<KubeObject>('GET', `${MODELS}/${name}`)
  return obj.status?.parents
}

/** Portico's policy, backend and model CRDs, and PorticoParameters as the chart installs it. */
async function installModelCrds (cluster: Cluster): Promise<void> {
  const config = configJsonSchema()
  await cluster.apply([porticoPolicyCrd(config), porticoBackendCrd(config), porticoModelCrd(config)] as never)
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/porticomodels.portico.dev'])
  await installPorticoParametersCrd(cluster)
}

test('PorticoModels on a real API server: the CRD, its CEL rules, and the controller\'s status per parent', { timeout: 240_000 }, async t => {
  const suite = await startClusterGateway(t, { dir: 'portico-cluster-models-crd-', cluster: { fakeKubelet: true }, namespaces: ['apps'] })
  if (suite === null) return
  t.after(async () => await suite.stop())
  const { cluster } = suite
  await installModelCrds(cluster)

  await t.test('concrete and virtual models applied with kubectl are kept as written', async () => {
    const gpt = model('gpt', {
      parentRefs: [{ name: 'web' }, { kind: 'HTTPRoute', name: 'llm', sectionName: 'chat' }],
      match: { model: 'gpt-*' },
      provider: { openAI: {} },
      baseURL: 'https://api.openai.example/v1',
      policies: { backendAuth: { key: { secretRef: { name: 'keys', key: 'openai' } } } }
    })
    await kubectlCreate(cluster, gpt)
    const stored = await cluster.api<KubeObject>('GET', `${MODELS}/gpt`)
    assert.deepEqual(stored.spec, gpt.spec)
    const virtual = model('smart', { parentRefs: [{ name: 'web' }], virtualModel: { weighted: [{ model: 'gpt', weight: 3 }, { model: 'claude', weight: 1 }] } })
    await kubectlCreate(cluster, virtual)
    assert.deepEqual((await cluster.api<KubeObject>('GET', `${MODELS}/smart`)).spec, virtual.spec)
    // The short name works.
    assert.match(await cluster.kubectl(['get', 'pmodel', '-n', 'apps', 'gpt']), /^NAME\s+MODEL\s+AGE\n/)
  })

  await t.test('invalid models are refused by the API server with the schema\'s message', async () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['both provider and virtualModel', { provider: { openAI: {} }, virtualModel: { weighted: [{ model: 'a', weight: 1 }] } }, /exactly one of provider or virtualModel/],
      ['neither provider nor virtualModel', { match: { model: 'x' } }, /exactly one of provider or virtualModel/],
      ['a wildcard in the middle', { provider: { openAI: {} }, match: { model: 'gpt-*-mini' } }, /match\.model/],
      ['two wildcards', { provider: { openAI: {} }, match: { model: '*gpt*' } }, /match\.model/],
      ['a virtual model with policies', { virtualModel: { weighted: [{ model: 'a', weight: 1 }] }, policies: { health: { consecutiveFailures: 2 } } }, /a virtual model carries no policies/],
      ['an Internal virtual model', { virtualModel: { weighted: [{ model: 'a', weight: 1 }] }, visibility: 'Internal' }, /a virtual model is Public/],
      ['a virtualModel with two strategies', { virtualModel: { weighted: [{ model: 'a', weight: 1 }], conditional: { rules: [{ when: 'true', model: 'a' }], fallback: 'a' } } }, /exactly one of weighted, failover or conditional/],
      ['a relative baseURL', { provider: { openAI: {} }, baseURL: '/v1' }, /baseURL/],
      ['a baseURL of another scheme', { provider: { openAI: {} }, baseURL: 'ftp://files.example/v1' }, /baseURL/],
      ['the metadata service', { provider: { openAI: {} }, baseURL: 'http://169.254.169.254/latest' }, /must not point at a loopback, link-local or metadata address/],
      ['IPv6 loopback', { provider: { openAI: {} }, baseURL: 'http://[::1]:8080/v1' }, /must not point at a loopback, link-local or metadata address/],
      ['localhost with a trailing dot', { provider: { openAI: {} }, baseURL: 'http://localhost./v1' }, /must not point at a loopback, link-local or metadata address/],
      ['127.0.0.0/8', { provider: { openAI: {} }, baseURL: 'http://127.1.2.3:11434/v1' }, /must not point at a loopback, link-local or metadata address/],
      ['GCP metadata by name', { provider: { openAI: {} }, baseURL: 'http://metadata.google.internal/computeMetadata/v1' }, /must not point at a loopback, link-local or metadata address/],
      ['IPv6 link-local', { provider: { openAI: {} }, baseURL: 'http://[fe80::1]/v1' }, /must not point at a loopback, link-local or metadata address/],
      ['a key in clear', { provider: { openAI: {} }, policies: { backendAuth: { key: 'sk-in-clear-123' } } }, /key: Invalid value: "string"/]
    ]
    for (const [why, spec, message] of cases) {
      await assert.rejects(kubectlCreate(cluster, model(`bad-${cases.findIndex(c => c[0] === why)}`, spec)), (err: Error) => {
        assert.match(err.message, message, why)
        return true
      }, why)
    }
    // A routable address is fine.
    await kubectlCreate(cluster, model('ok-url', { provider: { ollama: {} }, baseURL: 'http://ollama.models.svc:11434/v1', visibility: 'Internal' }))
  })

  await t.test('the controller (GATEWAY_MODELS_ENABLED=true) writes each model\'s status per parent, as a route\'s', async (st) => {
    await cluster.apply(`${gatewayYaml('apps', 'web', 18080)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - name: chat
      matches: [{ path: { type: PathPrefix, value: /llm } }]
      backendRefs: [{ group: portico.dev, kind: PorticoModel, name: "*" }]
`)
    // Past the CEL rules, refused by the controller: loopback as an IPv4-compatible IPv6 address,
    // a tie with a-gpt (as old, first by name; gpt ties too but is not served without its
    // Secret), a target that does not exist, a Secret that does not exist, a listener that does not.
    await cluster.kubectl(['apply', '-f', '-'], {
      input: [
        model('a-gpt', { parentRefs: [{ name: 'web' }], match: { model: 'gpt-*' }, provider: { openAI: { model: 'gpt-4o-mini' } } }),
        model('gpt-newer', { parentRefs: [{ name: 'web' }], match: { model: 'gpt-*' }, provider: { openAI: { model: 'gpt-4o' } } }),
        model('loopback', { parentRefs: [{ name: 'web' }], provider: { openAI: {} }, baseURL: 'http://[::7f00:1]:8080/v1' }),
        model('dangling', { parentRefs: [{ kind: 'HTTPRoute', name: 'llm', sectionName: 'chat' }], virtualModel: { failover: { groups: [{ models: ['nowhere'] }] } } }),
        model('no-key', { parentRefs: [{ kind: 'HTTPRoute', name: 'llm' }], provider: { anthropic: {} }, policies: { backendAuth: { key: { secretRef: { name: 'absent', key: 'k' } } } } }),
        model('nowhere-listener', { parentRefs: [{ name: 'web', sectionName: 'https' }], provider: { anthropic: { model: 'claude-haiku-4-5' } } })
      ].map(o => JSON.stringify(o)).join('\n')
    })
    const controller = await startController(cluster, { env: { GATEWAY_MODELS_ENABLED: 'true', LEADER_ELECTION: 'false' } })
    st.after(async () => await controller.stop())
    const expect: Record<string, Array<[string, string, string, RegExp?]>> = {
      gpt: [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'False', 'SecretNotFound', /Secret apps\/keys/]],
      // Its targets: gpt cannot be served yet (no Secret), claude does not exist.
      smart: [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'False', 'BackendNotFound', /model "gpt" cannot be served: .*Secret apps\/keys|no model named "claude"/]],
      'a-gpt': [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'True', 'ResolvedRefs']],
      'gpt-newer': [['Accepted', 'False', 'ModelConflict', /ties with PorticoModel apps\/a-gpt/]],
      loopback: [['Accepted', 'False', 'UnsupportedValue', /loopback address \(127\.0\.0\.0\/8\)/]],
      dangling: [['Accepted', 'True', 'Accepted'], ['ResolvedRefs', 'False', 'BackendNotFound', /no model named "nowhere"/]],
      'no-key': [['ResolvedRefs', 'False', 'SecretNotFound', /Secret apps\/absent/]],
      'nowhere-listener': [['Accepted', 'False', 'NoMatchingParent', /no listener named https/]]
    }
    for (const [name, conditions] of Object.entries(expect)) {
      let parents: Awaited<ReturnType<typeof parentConditions>>
      try {
        await waitUntil(async () => {
          parents = await parentConditions(cluster, name)
          return parents?.[0]?.conditions.find(c => c.type === conditions[0]![0])?.reason === conditions[0]![2]
        }, 30_000, `PorticoModel ${name}'s status`, 200)
      } catch (err) {
        throw new Error(`${(err as Error).message}: ${JSON.stringify(parents!)}\n${controller.output().split("\n").filter(l => !l.includes("watch failed") && !l.includes("supportedFeatures")).slice(-40).join("\n")}`)
      }
      for (const [type, status, reason, message] of conditions) {
        const c = parents![0]!.conditions.find(x => x.type === type)
        assert.equal(c?.status, status, `${name} ${type}: ${JSON.stringify(c)}`)
        assert.equal(c?.reason, reason, `${name} ${type}: ${JSON.stringify(c)}`)
        if (message !== undefined) assert.match(c!.message, message, name)
      }
      assert.equal((parents![0] as unknown as { controllerName: string }).controllerName, 'portico.dev/gateway-controller')
    }
    // A Secret appears: gpt resolves; the printer column shows what each model matches.
    await cluster.apply('apiVersion: v1\nkind: Secret\nmetadata: { name: keys, namespace: apps }\nstringData: { openai: sk-test-portico }\n')
    await waitUntil(async () => (await parentConditions(cluster, 'gpt'))?.[0]?.conditions.find(c => c.type === 'ResolvedRefs')?.status === 'True', 30_000, 'gpt ResolvedRefs once the Secret exists', 200)
    const table = await cluster.kubectl(['get', 'pmodel', '-n', 'apps'])
    assert.match(table, /^gpt\s+gpt-\*\s+\S+$/m)
    assert.match(table, /^smart\s+smart\s+\S+$/m)
    assert.match(controller.output(), /model API on: watching PorticoModels/)
    // The HTTPRoute whose rule is the model backend * is Accepted with its refs resolved.
    const route = await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/apps/httproutes/llm')
    const conds = (route.status?.parents?.[0]?.conditions ?? []) as Condition[]
    assert.deepEqual(conds.map(c => [c.type, c.status]), [['Accepted', 'True'], ['ResolvedRefs', 'True']])
  })

  await t.test('with GATEWAY_MODELS_ENABLED unset the controller does not watch PorticoModels', async (st) => {
    await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(model('unwatched', { parentRefs: [{ name: 'web' }], provider: { openAI: { model: 'gpt-4.1' } }, match: { model: 'gpt-4.1' } })) })
    const controller = await startController(cluster, { env: { LEADER_ELECTION: 'false' } })
    st.after(async () => await controller.stop())
    // It has reconciled (the Gateway has our status) and said nothing of models.
    await waitUntil(async () => ((await cluster.api<KubeObject>('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/apps/gateways/web')).status?.conditions ?? []).some((c: Condition) => c.type === 'Accepted'), 30_000, 'Gateway web status', 200)
    await new Promise(resolve => setTimeout(resolve, 1000))
    assert.equal((await cluster.api<KubeObject>('GET', `${MODELS}/unwatched`)).status, undefined, 'no status written')
    assert.doesNotMatch(controller.output(), /PorticoModel|porticomodels/)
  })
})

/**
 * A TCP forwarder on this machine's first non-loopback IPv4 address to a loopback port: a
 * cluster refuses a model baseURL at a loopback address (SSRF), so the emulators are reached
 * the way a model served elsewhere is. Null when the machine has no such address.
 */
async function reachableAddress (target: number): Promise<{ url: string, close: () => Promise<void> } | null> {
  const address = Object.values(networkInterfaces()).flat().find(i => i !== undefined && i.family === 'IPv4' && !i.internal)?.address
  if (address === undefined) return null
  const server = createServer(socket => {
    const upstream = connect(target, '127.0.0.1')
    socket.pipe(upstream).pipe(socket)
    const end = () => { socket.destroy(); upstream.destroy() }
    socket.on('error', end)
    upstream.on('error', end)
  })
  await new Promise<void>(resolve => server.listen(0, address, resolve))
  return { url: `http://${address}:${(server.address() as AddressInfo).port}`, close: async () => await new Promise<void>(resolve => server.close(() => resolve())) }
}

test('PorticoModels served by a Gateway\'s proxy, through the official openai and @anthropic-ai/sdk clients', { timeout: 240_000 }, async t => {
  // The tools first: no emulator is started for a test that skips.
  if (requireKubeTools(t) === null) return
  const openai = await startOpenAIEmulator({ apiKey: 'sk-test-portico' })
  t.after(async () => await openai.close())
  const anthropic = await startAnthropicEmulator()
  t.after(async () => await anthropic.close())
  const openaiAt = await reachableAddress(openai.port)
  const anthropicAt = await reachableAddress(anthropic.port)
  if (openaiAt === null || anthropicAt === null) {
    t.skip('no non-loopback IPv4 address on this machine')
    return
  }
  t.after(async () => { await openaiAt.close(); await anthropicAt.close() })
  const suite = await startClusterGateway(t, { dir: 'portico-cluster-models-', cluster: { fakeKubelet: true }, namespaces: ['apps'] })
  if (suite === null) return
  t.after(async () => await suite.stop())
  const { cluster } = suite
  await installModelCrds(cluster)
  const port = await freePort()
  await cluster.apply(`${gatewayYaml('apps', 'web', port)}---
apiVersion: v1
kind: Secret
metadata: { name: llm-keys, namespace: apps }
stringData: { openai: sk-test-portico, anthropic: ${ANTHROPIC_TEST_KEY} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: team, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - name: chat
      matches: [{ path: { type: PathPrefix, value: /team } }]
      backendRefs: [{ group: portico.dev, kind: PorticoModel, name: "*" }]
---
apiVersion: portico.dev/v1alpha1
kind: PorticoModel
metadata: { name: gpt, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  match: { model: gpt-* }
  provider: { openAI: {} }
  baseURL: ${openaiAt.url}/v1
  policies: { backendAuth: { key: { secretRef: { name: llm-keys, key: openai } } } }
---
apiVersion: portico.dev/v1alpha1
kind: PorticoModel
metadata: { name: claude-haiku-4-5, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  provider: { anthropic: {} }
  baseURL: ${anthropicAt.url}/v1
  policies: { backendAuth: { key: { secretRef: { name: llm-keys, key: anthropic } } } }
---
apiVersion: portico.dev/v1alpha1
kind: PorticoModel
metadata: { name: private, namespace: apps }
spec:
  visibility: Internal
  provider: { openAI: { model: gpt-4o-mini } }
  baseURL: ${openaiAt.url}/v1
  policies: { backendAuth: { key: { secretRef: { name: llm-keys, key: openai } } } }
---
apiVersion: portico.dev/v1alpha1
kind: PorticoModel
metadata: { name: smart, namespace: apps }
spec:
  parentRefs: [{ kind: HTTPRoute, name: team, sectionName: chat }]
  virtualModel: { weighted: [{ model: private, weight: 1 }] }
`)
  const controller = await suite.startController({ env: { GATEWAY_MODELS_ENABLED: 'true', LEADER_ELECTION: 'false' } })
  const proxy = await suite.startProxy('apps', 'web')
  for (const name of ['gpt', 'claude-haiku-4-5', 'smart']) {
    await waitUntil(async () => (await parentConditions(cluster, name))?.[0]?.conditions.every(c => c.status === 'True') === true, 30_000, `${name} Accepted and ResolvedRefs`, 200)
  }
  const gpt = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'client-key-unused', maxRetries: 0 })

  await t.test('the openai SDK: a model by prefix, served by the OpenAI provider with the key from the Secret', async () => {
    let answer: OpenAI.Chat.Completions.ChatCompletion | undefined
    await waitUntil(async () => {
      answer = await gpt.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] }).catch(() => undefined)
      return answer !== undefined
    }, 30_000, 'the proxy serves the models', 200)
    assert.equal(answer!.object, 'chat.completion')
    const last = openai.received.at(-1)!
    assert.equal(last.headers.authorization, 'Bearer sk-test-portico')
    assert.equal(last.body?.model, 'gpt-4o-mini')
  })

  await t.test('the anthropic SDK: an exact model, served by the Anthropic provider', async () => {
    const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'client-key-unused', maxRetries: 0 })
    const message = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'Hello' }] })
    assert.equal(message.type, 'message')
    assert.equal(anthropic.headers.at(-1)?.['x-api-key'], ANTHROPIC_TEST_KEY)
  })

  await t.test('discovery lists the Gateway\'s public models named exactly; an unknown or internal model is a 404', async () => {
    const listed = (await gpt.models.list()).data.map(m => m.id).sort()
    assert.ok(listed.includes('claude-haiku-4-5'), JSON.stringify(listed))
    assert.ok(!listed.includes('private') && !listed.includes('smart'), JSON.stringify(listed))
    await assert.rejects(gpt.chat.completions.create({ model: 'mistral-large', messages: [{ role: 'user', content: 'Hi' }] }), (err: unknown) => err instanceof OpenAI.NotFoundError)
    await assert.rejects(gpt.chat.completions.create({ model: 'private', messages: [{ role: 'user', content: 'Hi' }] }), (err: unknown) => err instanceof OpenAI.NotFoundError)
  })

  await t.test('an HTTPRoute rule with the model backend *: its virtual model serves through the internal model', async () => {
    const team = new OpenAI({ baseURL: `http://127.0.0.1:${port}/team/v1`, apiKey: 'client-key-unused', maxRetries: 0 })
    const answer = await team.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'Hello' }] })
    assert.equal(answer.object, 'chat.completion')
    assert.equal(openai.received.at(-1)!.body?.model, 'gpt-4o-mini', 'the internal model asks for its provider model')
    // The Gateway's own models are not the route's.
    await assert.rejects(team.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }] }), (err: unknown) => err instanceof OpenAI.NotFoundError)
  })
})
