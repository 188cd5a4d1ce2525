/**
 * The PorticoPolicy and PorticoBackend CRDs, generated from the config file's JSON Schema
 * (scripts/gen-crds.ts), against a real kube-apiserver: the API server takes them as
 * structural schemas, keeps a policy written as the standalone block with secretRefs, refuses
 * credentials written in clear and values the standalone schema refuses (in `policies`, a
 * `frontend` and a PorticoBackend's own policies), and refuses an MCP target that would run a
 * command.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { configJsonSchema } from '@portico/engine'
import { requireKubeTools, startCluster } from '../cluster/harness.ts'
import { porticoBackendCrd, porticoPolicyCrd } from '@portico/controller/crds'
import { readFileSync } from 'node:fs'
import { renderCrds } from '@portico/controller/crds-render'

test('the chart\'s generated CRD templates are current', () => {
  for (const [path, text] of renderCrds()) assert.equal(readFileSync(path, 'utf8'), text, `${path}: run node scripts/gen-crds.ts`)
})

test('PorticoPolicy and PorticoBackend CRDs on a real API server', { timeout: 180_000 }, async t => {
  const tools = requireKubeTools(t)
  if (tools === null) return
  const cluster = await startCluster({ tools })
  t.after(async () => await cluster.stop())
  const config = configJsonSchema()
  await cluster.apply([porticoPolicyCrd(config), porticoBackendCrd(config)] as never)
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/porticopolicies.portico.dev', 'crd/porticobackends.portico.dev'])
  await cluster.createNamespace('apps')

  const policy = (policies: unknown) => ({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'PorticoPolicy',
    metadata: { name: 'p', namespace: 'apps' },
    spec: { targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'mcp' }], policies }
  })
  const create = async (obj: { kind: string, metadata: { name: string } }, plural: string) => {
    try {
      await cluster.api('DELETE', `/apis/portico.dev/v1alpha1/namespaces/apps/${plural}/${obj.metadata.name}`)
    } catch {}
    return await cluster.api('POST', `/apis/portico.dev/v1alpha1/namespaces/apps/${plural}`, obj)
  }

  await t.test('the seed\'s MCP policy, with JWKS and htpasswd from Secrets, is kept as written', async () => {
    const policies = {
      mcpAuthentication: { issuer: 'https://idp.example', audiences: ['mcp'], jwks: { secretRef: { name: 'idp', key: 'jwks.json' } } },
      authorization: { rules: ['"read" in jwt.permissions', { deny: 'request.method == "DELETE"' }] },
      basicAuth: { htpasswd: { secretRef: { name: 'users', key: 'htpasswd' } } },
      localRateLimit: [{ maxTokens: 10, tokensPerFill: 10, fillInterval: '1s' }]
    }
    const created = await create(policy(policies), 'porticopolicies')
    assert.deepEqual(created.spec.policies, policies)
  })

  await t.test('credentials in clear and values the standalone schema refuses are rejected by the API server', async () => {
    for (const [policies, why] of [
      [{ basicAuth: { htpasswd: 'alice:$apr1$x$y' } }, /htpasswd: Invalid value: "string": .*must be of type object/],
      [{ apiKey: { keys: [{ key: 'sk-in-clear-123' }] } }, /key: Invalid value: "string"/],
      [{ timeout: { requestTimeout: 'soon' } }, /requestTimeout: Invalid value: "soon"/],
      [{ jwtAuth: { mode: 'sometimes' } }, /mode: Unsupported value: "sometimes"/]
    ] as const) {
      await assert.rejects(create(policy(policies), 'porticopolicies'), (err: Error) => { assert.match(err.message, why); return true }, JSON.stringify(policies))
    }
  })

  await t.test('a frontend is kept as written; a policy with neither policies nor frontend, and a bad frontend value, are refused', async () => {
    const frontend = { path: { escapedSlashesAction: 'RejectRequest' }, timeout: { http: { requestHeadersTimeout: '5s' } }, clientIPDetection: { xForwardedFor: { numTrustedHops: 1 } }, upgrades: ['websocket'], http2: false }
    const gatewayPolicy = (spec: Record<string, unknown>) => ({ ...policy({}), spec: { targetRefs: [{ kind: 'Gateway', name: 'web' }], ...spec } })
    const created = await create(gatewayPolicy({ frontend }), 'porticopolicies')
    assert.deepEqual(created.spec.frontend, frontend)
    await assert.rejects(create(gatewayPolicy({}), 'porticopolicies'), /a PorticoPolicy sets policies, frontend or both/)
    await assert.rejects(create(gatewayPolicy({ frontend: { path: { escapedSlashesAction: 'Sometimes' } } }), 'porticopolicies'), /escapedSlashesAction: Unsupported value: "Sometimes"/)
  })

  await t.test('a PorticoBackend takes its provider key as a secretRef in its own policies, never in clear', async () => {
    const backend = (policies: unknown) => ({ apiVersion: 'portico.dev/v1alpha1', kind: 'PorticoBackend', metadata: { name: 'llm', namespace: 'apps' }, spec: { ai: { name: 'openai', provider: { openAI: {} } }, policies } })
    const policies = { backendAuth: { key: { secretRef: { name: 'openai', key: 'api-key' } } } }
    const created = await create(backend(policies), 'porticobackends')
    assert.deepEqual(created.spec.policies, policies)
    await assert.rejects(create(backend({ backendAuth: { key: 'sk-in-clear-123' } }), 'porticobackends'), /key: Invalid value: "string"/)
    // Vertex AI: the service-account key from a Secret too, never inline.
    const vertex = (policies: unknown) => ({ apiVersion: 'portico.dev/v1alpha1', kind: 'PorticoBackend', metadata: { name: 'vertex', namespace: 'apps' }, spec: { ai: { name: 'vertex', provider: { vertex: { projectId: 'my-project', region: 'us-central1' } } }, policies } })
    const gcp = { backendAuth: { gcp: { credential: { secretRef: { name: 'gcp-sa', key: 'key.json' } } } } }
    assert.deepEqual((await create(vertex(gcp), 'porticobackends')).spec.policies, gcp)
    const inClear = vertex({ backendAuth: { gcp: { credential: '{"private_key":"x"}' } } })
    inClear.metadata.name = 'vertex-clear'
    await assert.rejects(create(inClear, 'porticobackends'), /credential: Invalid value: "string"/)
  })

  await t.test('a bedrock PorticoBackend takes AWS keys as secretRefs, never in clear', async () => {
    const backend = (name: string, policies: unknown) => ({ apiVersion: 'portico.dev/v1alpha1', kind: 'PorticoBackend', metadata: { name, namespace: 'apps' }, spec: { ai: { name: 'claude', provider: { bedrock: { region: 'us-east-1', guardrailIdentifier: 'gr-1', guardrailVersion: '1' } } }, policies } })
    const policies = { backendAuth: { aws: { accessKeyId: { secretRef: { name: 'aws', key: 'id' } }, secretAccessKey: { secretRef: { name: 'aws', key: 'secret' } } } } }
    const created = await create(backend('bedrock', policies), 'porticobackends')
    assert.deepEqual(created.spec.policies, policies)
    assert.deepEqual(created.spec.ai.provider.bedrock, { region: 'us-east-1', guardrailIdentifier: 'gr-1', guardrailVersion: '1' })
    await assert.rejects(create(backend('bedrock-clear', { backendAuth: { aws: { accessKeyId: 'AKIDPORTICOTESTONLY', secretAccessKey: 'portico-test-secret-not-real' } } }), 'porticobackends'), /accessKeyId: Invalid value: "string"/)
  })

  await t.test('a PorticoBackend with failover groups takes each provider\'s key as a secretRef, never in clear', async () => {
    const backend = (name: string, key: unknown) => ({ apiVersion: 'portico.dev/v1alpha1', kind: 'PorticoBackend', metadata: { name, namespace: 'apps' }, spec: { ai: { name: 'llm', groups: [{ providers: [{ name: 'openai', provider: { openAI: { model: 'gpt-4o-mini' } }, policies: { backendAuth: { key } } }] }, { providers: [{ name: 'claude', provider: { anthropic: {} }, policies: { backendAuth: { key: { secretRef: { name: 'anthropic', key: 'api-key' } } } } }] }] }, policies: { health: { consecutiveFailures: 2 } } } })
    const created = await create(backend('groups', { secretRef: { name: 'openai', key: 'api-key' } }), 'porticobackends')
    assert.deepEqual(created.spec.ai.groups[0].providers[0].policies, { backendAuth: { key: { secretRef: { name: 'openai', key: 'api-key' } } } })
    assert.equal(created.spec.ai.groups[1].providers[0].name, 'claude')
    await assert.rejects(create(backend('groups-clear', 'sk-in-clear-123'), 'porticobackends'), /key: Invalid value: "string"/)
  })

  await t.test('a PorticoBackend takes MCP targets by Service or URL, never a command', async () => {
    const backend = (mcp: unknown) => ({ apiVersion: 'portico.dev/v1alpha1', kind: 'PorticoBackend', metadata: { name: 'b', namespace: 'apps' }, spec: { mcp } })
    const mcp = { targets: [{ name: 'everything', service: { name: 'mcp-everything', port: 3001 } }, { name: 'remote', mcp: { host: 'https://mcp.example.com/mcp' } }] }
    const created = await create(backend(mcp), 'porticobackends')
    assert.deepEqual(created.spec.mcp, mcp)
    // An unknown field is pruned, not stored: a stdio target cannot be written at all.
    const pruned = await create(backend({ targets: [{ name: 'shell', stdio: { cmd: 'sh' }, mcp: { host: 'http://a/mcp' } }] }), 'porticobackends')
    assert.equal(pruned.spec.mcp.targets[0].stdio, undefined)
  })
})
