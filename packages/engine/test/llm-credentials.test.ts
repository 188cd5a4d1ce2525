/**
 * Credentials of `ai` backends (backendAuth): a key read from a file, the client's validated
 * token passed through, and Microsoft Entra ID tokens for Azure — the config each is loaded
 * from and refused for, where each goes, redaction, and the Entra token cache (fetched once,
 * renewed in the background before expiry, waited for only when none is valid).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfigText } from '../src/index.ts'
import type { AzureAuthIR, BackendIR, ProxyIR } from '../src/ir/types.ts'
import { passthroughHeader, providerAdapter } from '../src/llm/providers/index.ts'
import { azureAdapter } from '../src/llm/providers/azure.ts'
import { azureAccessTokens, AZURE_REFRESH_MARGIN_MS } from '../src/llm/providers/azure-token.ts'
import type { ProviderRequest } from '../src/llm/provider.ts'
import { redactSecrets } from '../src/ir/redact.ts'
import { waitUntil } from '../../testkit/src/wait.ts'

type Json = Record<string, unknown>

function load (config: Json, options: { fragment?: boolean } = {}): { ir?: ProxyIR, problems: string[] } {
  const result = loadConfigText(JSON.stringify(config), { baseDir: '/', ...options })
  return result.ok ? { ir: result.config.ir, problems: [] } : { problems: result.diagnostics.map(d => `${d.path.join('.')}: ${d.message}`) }
}

/** One route with one backend; `route` and `gateway` add policies there. */
function oneBackend (backend: Json, route: Json = {}, gateway: Json = {}): Json {
  return { gateways: { default: { port: 3000, ...gateway } }, routes: [{ name: 'r', ...route, backends: [backend] }] }
}

function only (ir: ProxyIR): { backend: BackendIR, refPolicies: Json } {
  const ref = ir.binds[0]!.listeners[0]!.routes[0]!.backends[0]!
  return { backend: ir.backends.find(b => b.key === ref.backend)!, refPolicies: ref.policies as Json }
}

const chat: ProviderRequest = { operation: 'chat', model: 'm', streaming: false, body: Buffer.alloc(0), headers: {} }

test('backendAuth.key from a file: read at load (trimmed), in the provider\'s header, re-read by a new load; bad files refused without echoing them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-keyfile-'))
  const file = join(dir, 'key')
  writeFileSync(file, 'sk-ant-test-from-file\n')
  const anthropic = (f: string) => oneBackend({ ai: { name: 'a', provider: { anthropic: {} } }, policies: { backendAuth: { key: { file: f } } } })
  const first = load(anthropic(file))
  assert.deepEqual(first.problems, [])
  assert.deepEqual(only(first.ir!).refPolicies.requestHeaderModifier, { set: { 'x-api-key': 'sk-ant-test-from-file' }, remove: ['authorization', 'api-key', 'x-goog-api-key'] })
  assert.doesNotMatch(JSON.stringify(redactSecrets(first.ir)), /sk-ant-test-from-file/)
  // A reload is a new load: it reads the file again.
  writeFileSync(file, '  sk-ant-test-rotated  \n')
  assert.equal((only(load(anthropic(file)).ir!).refPolicies.requestHeaderModifier as { set: Json }).set['x-api-key'], 'sk-ant-test-rotated')

  // A host backend: Authorization: Bearer, as an inline key.
  const host = load(oneBackend({ host: '127.0.0.1:9', policies: { backendAuth: { key: { file } } } }))
  assert.deepEqual(only(host.ir!).refPolicies.requestHeaderModifier, { set: { authorization: 'Bearer sk-ant-test-rotated' } })
  // Bedrock takes its API key into its own IR.
  const bedrock = load(oneBackend({ ai: { name: 'b', provider: { bedrock: { region: 'us-east-1', model: 'm' } } }, policies: { backendAuth: { key: { file } } } }))
  assert.deepEqual(bedrock.problems, [])
  assert.deepEqual(only(bedrock.ir!).backend.ai!.bedrock!.auth, { kind: 'apiKey', apiKey: 'sk-ant-test-rotated' })

  writeFileSync(file, 'two words-of-secret-text\n')
  const spaced = load(anthropic(file)).problems.join('\n')
  assert.match(spaced, /backendAuth.key.file: .*key does not hold one key \(printable ASCII without spaces or line breaks expected\)/)
  assert.doesNotMatch(spaced, /words-of-secret-text/)
  writeFileSync(file, '\n')
  assert.match(load(anthropic(file)).problems.join('\n'), /does not hold one key \(it is empty\)/)
  assert.match(load(anthropic(join(dir, 'missing'))).problems.join('\n'), /backendAuth.key.file: cannot read .*missing/)
  assert.match(load(anthropic(dir)).problems.join('\n'), /backendAuth.key.file: cannot read .*a directory/)
})

test('backendAuth.passthrough: needs a jwtAuth or apiKey policy where it runs; removes the client\'s credential headers; refused where no token can stand in', () => {
  const jwtAuth = { mode: 'strict', issuer: 'https://idp.example', audiences: ['portico'], jwks: { url: 'https://idp.example/jwks' } }
  const apiKey = { keys: [{ name: 'a', key: 'sk-client-key-1' }] }
  const pass = (policies: Json = {}) => ({ ai: { name: 'o', provider: { openAI: {} } }, policies: { backendAuth: { passthrough: {} }, ...policies } })

  const alone = load(oneBackend(pass())).problems.join('\n')
  assert.match(alone, /routes.0.backends.0.policies.backendAuth.passthrough: needs a jwtAuth or apiKey policy on the route, the backend or gateway "default"/)
  for (const [what, config] of [
    ['route jwtAuth', oneBackend(pass(), { policies: { jwtAuth } })],
    ['route apiKey', oneBackend(pass(), { policies: { apiKey } })],
    ['backend apiKey', oneBackend(pass({ apiKey }))],
    ['gateway jwtAuth', oneBackend(pass(), {}, { policies: { jwtAuth } })]
  ] as const) {
    const { ir, problems } = load(config)
    assert.deepEqual(problems, [], what)
    const { backend, refPolicies } = only(ir!)
    assert.equal(backend.ai!.passthrough, true, what)
    assert.deepEqual((refPolicies.requestHeaderModifier as Json).remove, ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'], what)
  }
  // A fragment (the controller's PorticoBackend policies): the route's policies come later.
  assert.deepEqual(load(oneBackend(pass()), { fragment: true }).problems, [])

  assert.match(load(oneBackend({ host: '127.0.0.1:9', policies: { backendAuth: { passthrough: {} } } }, { policies: { jwtAuth } })).problems.join('\n'), /passthrough: applies to ai backends \(a host backend gets the client's token with jwtAuth keepToken: true\)/)
  for (const provider of [{ vertex: { projectId: 'my-project', region: 'us-central1' } }, { bedrock: { region: 'us-east-1' } }]) {
    assert.match(load(oneBackend({ ai: { name: 'x', provider }, policies: { backendAuth: { passthrough: {} } } }, { policies: { jwtAuth } })).problems.join('\n'), /passthrough: does not apply to this provider/)
  }
  assert.match(load(oneBackend({ ai: { name: 'o', provider: { openAI: {} } }, policies: { backendAuth: { passthrough: {}, key: 'sk-x' } } }, { policies: { jwtAuth } })).problems.join('\n'), /needs exactly one of key, passthrough, aws, gcp or azure/)
  assert.match(load(oneBackend(pass({ requestHeaderModifier: { set: { 'x-api-key': 'k' } } }), { policies: { jwtAuth } })).problems.join('\n'), /the x-api-key header is also set by requestHeaderModifier/)

  // Where the token goes: the provider's key header; Azure takes a JWT (an Entra token) as Bearer.
  const bearer = { header: 'authorization', bearer: true }
  assert.deepEqual(passthroughHeader({ provider: 'openAI', format: 'openai-chat' }, 'jwt'), bearer)
  assert.deepEqual(passthroughHeader({ provider: 'groq', format: 'openai-chat' }, 'apiKey'), bearer)
  assert.deepEqual(passthroughHeader({ provider: 'anthropic', format: 'anthropic-messages' }, 'jwt'), { header: 'x-api-key', bearer: false })
  assert.deepEqual(passthroughHeader({ provider: 'gemini', format: 'gemini' }, 'apiKey'), { header: 'x-goog-api-key', bearer: false })
  assert.deepEqual(passthroughHeader({ provider: 'azure', format: 'openai-chat' }, 'jwt'), bearer)
  assert.deepEqual(passthroughHeader({ provider: 'azure', format: 'openai-chat' }, 'apiKey'), { header: 'api-key', bearer: false })
  assert.deepEqual(passthroughHeader({ provider: 'custom', format: 'anthropic-messages' }, 'apiKey'), { header: 'x-api-key', bearer: false })
})

test('backendAuth.azure: agentgateway\'s shapes to the IR, mistakes refused, the client secret redacted', () => {
  const azure = (auth: Json, provider: Json = { azure: { resourceName: 'res' } }) => load(oneBackend({ ai: { name: 'az', provider }, policies: { backendAuth: { azure: auth } } }))
  const ir = (auth: Json): AzureAuthIR | undefined => {
    const r = azure(auth)
    assert.deepEqual(r.problems, [], JSON.stringify(auth))
    return only(r.ir!).backend.ai!.azure!.auth
  }
  assert.deepEqual(ir({ explicitConfig: { clientSecret: { tenantId: 't', clientId: 'c', clientSecret: 'entra-test-secret' } } }), { kind: 'clientSecret', tenantId: 't', clientId: 'c', clientSecret: 'entra-test-secret' })
  assert.deepEqual(ir({ explicitConfig: { workloadIdentity: {} }, authorityHost: 'https://login.microsoftonline.us/' }), { kind: 'workloadIdentity', authorityHost: 'https://login.microsoftonline.us' })
  assert.deepEqual(ir({ explicitConfig: { managedIdentity: {} } }), { kind: 'managedIdentity' })
  assert.deepEqual(ir({ explicitConfig: { managedIdentity: { userAssignedIdentity: { objectId: 'o-1' } } }, imdsEndpoint: 'http://127.0.0.1:1/token' }), { kind: 'managedIdentity', userAssignedIdentity: { objectId: 'o-1' }, imdsEndpoint: 'http://127.0.0.1:1/token' })
  assert.deepEqual(ir({ implicit: {} }), { kind: 'implicit' })

  assert.match(azure({}).problems.join('\n'), /backendAuth.azure: needs exactly one of explicitConfig or implicit/)
  assert.match(azure({ implicit: {}, explicitConfig: { workloadIdentity: {} } }).problems.join('\n'), /needs exactly one of explicitConfig or implicit/)
  assert.match(azure({ explicitConfig: { workloadIdentity: {}, managedIdentity: {} } }).problems.join('\n'), /explicitConfig: needs exactly one of clientSecret, managedIdentity or workloadIdentity/)
  assert.match(azure({ explicitConfig: { managedIdentity: { userAssignedIdentity: { clientId: 'a', objectId: 'b' } } } }).problems.join('\n'), /userAssignedIdentity: needs exactly one of clientId, objectId or resourceId/)
  assert.match(azure({ explicitConfig: { developerImplicit: {} } }).problems.join('\n'), /developerImplicit/)
  assert.match(azure({ implicit: {} }, { openAI: {} }).problems.join('\n'), /backendAuth.azure: applies to ai backends of provider azure/)

  const secret = azure({ explicitConfig: { clientSecret: { tenantId: 't', clientId: 'c', clientSecret: 'entra-test-secret' } } })
  const dumped = JSON.stringify(redactSecrets(secret.ir))
  assert.doesNotMatch(dumped, /entra-test-secret/)
  assert.match(dumped, /"clientSecret":"<redacted>"/)
  // The client's own credentials are removed; the adapter sends the Entra token.
  assert.deepEqual((only(secret.ir!).refPolicies.requestHeaderModifier as Json).remove, ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'])
})

test('the azure adapter sends the Entra token as Authorization: Bearer and drops other key headers', async () => {
  const spec = only(load(oneBackend({ ai: { name: 'az', provider: { azure: { resourceName: 'res' } } }, policies: { backendAuth: { azure: { implicit: {} } } } })).ir!).backend.ai!
  const adapter = azureAdapter(spec, { token: async () => 'entra-token-1' })
  const request = { ...chat, headers: { 'api-key': 'client', authorization: 'Bearer client', 'x-api-key': 'client', accept: 'application/json' } }
  await adapter.authorize(request, { host: 'res.openai.azure.com', port: 443, protocol: 'https' })
  assert.deepEqual(request.headers, { authorization: 'Bearer entra-token-1', accept: 'application/json' })
  // Without backendAuth.azure the adapter sets nothing (the key comes from the header policy).
  const plain = providerAdapter({ ...spec, azure: {} })
  assert.ok(typeof plain !== 'string')
  const untouched = { ...chat, headers: { 'api-key': 'k' } }
  await plain.authorize(untouched, { host: 'h', port: 443, protocol: 'https' })
  assert.deepEqual(untouched.headers, { 'api-key': 'k' })
})

/** A token endpoint on loopback: counts requests, optionally held, answers what `reply` says. */
async function tokenServer (reply: (n: number, req: http.IncomingMessage, body: string) => { status: number, json: unknown }): Promise<{ url: string, calls: Array<{ url: string, body: string, headers: http.IncomingHttpHeaders }>, hold: Promise<void> | null, close: () => Promise<void> }> {
  const state = { url: '', calls: [] as Array<{ url: string, body: string, headers: http.IncomingHttpHeaders }>, hold: null as Promise<void> | null, close: async () => {} }
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', c => { body += String(c) })
    req.on('end', () => {
      void (async () => {
        state.calls.push({ url: req.url ?? '', body, headers: req.headers })
        const n = state.calls.length
        if (state.hold !== null) await state.hold
        const { status, json } = reply(n, req, body)
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(json))
      })()
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  state.close = async () => { server.closeAllConnections(); await new Promise(resolve => server.close(resolve)) }
  return state
}

test('Entra tokens: one fetch for concurrent requests, reused, renewed in the background inside the margin, waited for once expired', async () => {
  const server = await tokenServer(n => ({ status: 200, json: { token_type: 'Bearer', expires_in: 3600, ext_expires_in: 3600, access_token: `tok-${n}` } }))
  try {
    let clock = 1_000_000
    const tokens = azureAccessTokens({ auth: { kind: 'clientSecret', tenantId: 'tenant-1', clientId: 'client-1', clientSecret: 'entra-test-secret', authorityHost: server.url }, env: {}, now: () => clock })
    assert.deepEqual(await Promise.all([tokens.token(), tokens.token(), tokens.token()]), ['tok-1', 'tok-1', 'tok-1'])
    assert.equal(server.calls.length, 1)
    assert.equal(server.calls[0]!.url, '/tenant-1/oauth2/v2.0/token')
    assert.equal(server.calls[0]!.headers['content-type'], 'application/x-www-form-urlencoded')
    assert.deepEqual(Object.fromEntries(new URLSearchParams(server.calls[0]!.body)), { client_id: 'client-1', scope: 'https://cognitiveservices.azure.com/.default', client_secret: 'entra-test-secret', grant_type: 'client_credentials' })

    clock += 3600_000 - AZURE_REFRESH_MARGIN_MS - 1000
    assert.equal(await tokens.token(), 'tok-1', 'still fresh')
    assert.equal(server.calls.length, 1)

    // Inside the margin: the cached token answers at once while the renewal is held.
    let release!: () => void
    server.hold = new Promise<void>(resolve => { release = resolve })
    clock += 2000
    assert.equal(await tokens.token(), 'tok-1')
    assert.equal(await tokens.token(), 'tok-1')
    await waitUntil(() => server.calls.length >= 2, 5_000, 'the background renewal at the server')
    assert.equal(server.calls.length, 2, 'one background renewal')
    release()
    server.hold = null
    // The cached token answers until the renewal lands (asking meanwhile starts no other).
    await waitUntil(async () => await tokens.token() === 'tok-2', 5_000, 'the renewed token')
    assert.equal(server.calls.length, 2)

    // Expired: the request waits for a new one.
    clock += 3600_000
    assert.equal(await tokens.token(), 'tok-3')
  } finally {
    await server.close()
  }
})

test('Entra tokens: failures are 503s that name the endpoint\'s error, never a secret; workload identity reads its environment; implicit falls back to IMDS', async () => {
  const server = await tokenServer((n, req) => {
    if (req.url!.startsWith('/metadata/')) return { status: 200, json: { access_token: `mi-${n}`, expires_in: '3599', expires_on: '0', resource: 'https://cognitiveservices.azure.com', token_type: 'Bearer' } }
    if (n === 1) return { status: 401, json: { error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret provided.\r\nTrace ID: x', error_codes: [7000215] } }
    return { status: 200, json: { token_type: 'Bearer', expires_in: 3599, access_token: `wi-${n}` } }
  })
  try {
    const failing = azureAccessTokens({ auth: { kind: 'clientSecret', tenantId: 't', clientId: 'c', clientSecret: 'entra-test-secret-x', authorityHost: server.url }, env: {} })
    await assert.rejects(failing.token(), (err: unknown) => {
      const e = err as { status: number, kind: string, message: string }
      assert.equal(e.status, 503)
      assert.equal(e.kind, 'api_error')
      assert.match(e.message, /^could not get a Microsoft Entra ID token \(clientSecret\): http:\/\/127\.0\.0\.1:\d+\/t\/oauth2\/v2\.0\/token answered 401 \(invalid_client\): AADSTS7000215: Invalid client secret provided\.$/)
      assert.doesNotMatch(e.message, /entra-test-secret-x/)
      return true
    })

    const dir = mkdtempSync(join(tmpdir(), 'portico-wi-'))
    writeFileSync(join(dir, 'token'), 'header.payload.signature\n')
    const env = { AZURE_FEDERATED_TOKEN_FILE: join(dir, 'token'), AZURE_CLIENT_ID: 'wi-client', AZURE_TENANT_ID: 'wi-tenant', AZURE_AUTHORITY_HOST: `${server.url}/` }
    assert.match(await azureAccessTokens({ auth: { kind: 'workloadIdentity' }, env }).token(), /^wi-\d+$/)
    const sent = server.calls.at(-1)!
    assert.equal(sent.url, '/wi-tenant/oauth2/v2.0/token')
    assert.deepEqual(Object.fromEntries(new URLSearchParams(sent.body)), { client_id: 'wi-client', scope: 'https://cognitiveservices.azure.com/.default', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: 'header.payload.signature', grant_type: 'client_credentials' })
    // implicit: workload identity when its environment is there...
    assert.match(await azureAccessTokens({ auth: { kind: 'implicit' }, env }).token(), /^wi-\d+$/)
    // ...else managed identity, a user-assigned one by AZURE_CLIENT_ID.
    assert.match(await azureAccessTokens({ auth: { kind: 'implicit', imdsEndpoint: `${server.url}/metadata/identity/oauth2/token` }, env: { AZURE_CLIENT_ID: 'mi-client' } }).token(), /^mi-\d+$/)
    const imds = server.calls.at(-1)!
    assert.equal(imds.url, '/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fcognitiveservices.azure.com&client_id=mi-client')
    assert.equal(imds.headers.metadata, 'true')

    const message = (m: RegExp) => (err: unknown) => { assert.match((err as Error).message, m); return true }
    await assert.rejects(azureAccessTokens({ auth: { kind: 'workloadIdentity' }, env: { AZURE_CLIENT_ID: 'x' } }).token(), message(/workload identity needs AZURE_FEDERATED_TOKEN_FILE, AZURE_TENANT_ID \(set by the Azure workload identity webhook\)/))
    await assert.rejects(azureAccessTokens({ auth: { kind: 'managedIdentity', imdsEndpoint: 'http://127.0.0.1:1/metadata/identity/oauth2/token' }, env: {} }).token(), message(/could not get a Microsoft Entra ID token \(managedIdentity\)/))
  } finally {
    await server.close()
  }
})

test('Entra tokens: a hostile token endpoint (oversized, not JSON, no token, a token unfit for a header) is a clean 503', async () => {
  const answers: Array<{ status: number, json: unknown }> = [
    { status: 200, json: { access_token: 'x'.repeat(70 * 1024), expires_in: 3599 } },
    { status: 200, json: ['not', 'an', 'object'] },
    { status: 200, json: { token_type: 'Bearer', expires_in: 3599 } },
    { status: 200, json: { access_token: 'bad token\r\nx-injected: 1', expires_in: 3599 } },
    { status: 200, json: { access_token: 'ok', expires_in: 'soon' } },
    { status: 500, json: 'plain text' }
  ]
  const server = await tokenServer(n => answers[n - 1]!)
  try {
    const expected = [/answered more than 65536 bytes/, /answered no access_token/, /answered no access_token/, /answered no access_token/, /answered no valid expires_in/, /answered 500 \(no error code\)$/]
    for (const m of expected) {
      const tokens = azureAccessTokens({ auth: { kind: 'clientSecret', tenantId: 't', clientId: 'c', clientSecret: 's', authorityHost: server.url }, env: {} })
      await assert.rejects(tokens.token(), (err: unknown) => {
        assert.equal((err as { status: number }).status, 503)
        assert.match((err as Error).message, m)
        return true
      })
    }
  } finally {
    await server.close()
  }
})
