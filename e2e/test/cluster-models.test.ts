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
 *    the matched model; with it off the controller does not watch them.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { configJsonSchema } from '@portico/engine'
import { requireKubeTools, startCluster, type Cluster, type KubeObject } from '../cluster/harness.ts'
import { startController } from '../cluster/portico-processes.ts'
import { porticoBackendCrd, porticoModelCrd, porticoPolicyCrd } from '../../packages/controller/src/crds/portico-crds.ts'
import { waitUntil } from '../lib/client.ts'

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

test('PorticoModels on a real API server: the CRD, its CEL rules, and the controller\'s status per parent', { timeout: 240_000 }, async t => {
  const tools = requireKubeTools(t)
  if (tools === null) return
  const cluster = await startCluster({ tools, fakeKubelet: true })
  t.after(async () => await cluster.stop())
  const config = configJsonSchema()
  await cluster.apply([porticoPolicyCrd(config), porticoBackendCrd(config), porticoModelCrd(config)] as never)
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/porticomodels.portico.dev'])
  await cluster.createNamespace('apps')

  await t.test('concrete and virtual models applied with kubectl are kept as written', async () => {
    const gpt = model('gpt', {
      parentRefs: [{ name: 'web' }],
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
})
