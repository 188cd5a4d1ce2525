/**
 * Credentials of `ai` backends, end to end (the real gateway, emulators as the providers and
 * as Microsoft Entra ID, the official SDKs as clients):
 *
 * - the Entra emulator (e2e/lib/llm-emulators/entra.ts) checked first: the `openai` SDK's
 *   AzureOpenAI client, with an Entra token it fetched there by the documented client
 *   credentials grant, talks to the Azure OpenAI emulator directly; malformed grants are
 *   refused with Entra's error shape;
 * - Azure OpenAI through Portico with `backendAuth.azure`: client secret, workload identity
 *   (federated token file + AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_AUTHORITY_HOST, as the
 *   webhook sets them) and managed identity (IMDS), each token fetched once and reused, the
 *   client's own key never reaching Azure; an Entra failure is a 503 in OpenAI's error shape;
 * - `backendAuth.key: {file}`: read at load, read again at reload (SIGHUP) after the file
 *   changed;
 * - `backendAuth.passthrough`: the client's JWT (validated by jwtAuth) reaches OpenAI as its
 *   Bearer; the client's key (validated by apiKey) reaches Anthropic as `x-api-key`; without a
 *   validated token the request is refused (401, Anthropic's error shape) and nothing is sent;
 * - none of the secrets (client secret, the key file's content, Entra tokens, the passed-through
 *   JWT) appears in /config_dump, the trace or the logs.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI, { AzureOpenAI } from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { request } from 'undici'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'
import { startOpenAIEmulator, type OpenAIEmulator } from '../lib/llm-emulators/openai.ts'
import { ANTHROPIC_TEST_KEY, startAnthropicEmulator, type AnthropicEmulator } from '../lib/llm-emulators/anthropic.ts'
import { AZURE_AI_SCOPE, ENTRA_CLIENT_ID, ENTRA_CLIENT_SECRET, ENTRA_TENANT, startEntraEmulator, type EntraEmulator } from '../lib/llm-emulators/entra.ts'
import { startIdp, type Idp, type IdpClient } from '../lib/idp.ts'

const CLIENT_KEY = 'sk-client-not-for-providers'
const FILE_KEY_1 = 'sk-test-portico-from-file-1'
const FILE_KEY_2 = 'sk-test-portico-from-file-2'
/** A projected service-account token, as the kubelet writes it (a JWT; the emulator compares it). */
const FEDERATED_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YXBwczpwb3J0aWNvIn0.c2lnbmF0dXJlLXRlc3Q'
const MI_CLIENT_ID = '00000000-0000-0000-0000-0000000000dd'
const alice: IdpClient = { id: 'alice', secret: 'alice-secret', permissions: ['read'] }

/** The client credentials grant, sent exactly as the Microsoft identity platform docs show it. */
async function entraToken (entra: EntraEmulator, form: Record<string, string>): Promise<{ status: number, json: Record<string, unknown> }> {
  const res = await fetch(`${entra.url}/${ENTRA_TENANT}/oauth2/v2.0/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form).toString() })
  return { status: res.status, json: await res.json() as Record<string, unknown> }
}

describe('Entra emulator, checked by the openai SDK (AzureOpenAI with an Entra token)', () => {
  let entra: EntraEmulator
  let azure: OpenAIEmulator
  before(async () => {
    entra = await startEntraEmulator({ federatedToken: FEDERATED_TOKEN })
    azure = await startOpenAIEmulator({ azureKey: 'azure-test-key', azureBearer: t => entra.valid(t) })
  })
  after(async () => {
    await azure.close()
    await entra.close()
  })

  test('a token from the client credentials grant is accepted by Azure OpenAI as Authorization: Bearer', async () => {
    const client = new AzureOpenAI({
      endpoint: azure.url,
      apiVersion: '2024-10-21',
      deployment: 'gpt4o-deploy',
      maxRetries: 0,
      azureADTokenProvider: async () => {
        const { status, json } = await entraToken(entra, { client_id: ENTRA_CLIENT_ID, scope: AZURE_AI_SCOPE, client_secret: ENTRA_CLIENT_SECRET, grant_type: 'client_credentials' })
        assert.equal(status, 200)
        assert.equal(json.token_type, 'Bearer')
        assert.equal(typeof json.expires_in, 'number')
        return json.access_token as string
      }
    })
    const c = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(c.choices[0]!.message.content, 'Hello!')
    assert.match(String(azure.received.at(-1)!.headers.authorization), /^Bearer entra-test-token-\d+$/)
    const forged = new AzureOpenAI({ endpoint: azure.url, apiVersion: '2024-10-21', deployment: 'd', maxRetries: 0, azureADTokenProvider: async () => 'entra-test-token-999' })
    await assert.rejects(forged.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => err instanceof OpenAI.AuthenticationError)
  })

  test('grants are checked field by field, refusals in Entra\'s error shape', async () => {
    const base = { client_id: ENTRA_CLIENT_ID, scope: AZURE_AI_SCOPE, grant_type: 'client_credentials' }
    const cases: Array<[Record<string, string>, number, string, number]> = [
      [{ ...base, client_secret: 'wrong' }, 401, 'invalid_client', 7000215],
      [{ ...base, scope: 'https://cognitiveservices.azure.com' }, 400, 'invalid_scope', 1002012],
      [{ client_id: ENTRA_CLIENT_ID, grant_type: 'client_credentials', client_secret: ENTRA_CLIENT_SECRET }, 400, 'invalid_request', 900144],
      [{ ...base, grant_type: 'password', client_secret: ENTRA_CLIENT_SECRET }, 400, 'unsupported_grant_type', 70003],
      [{ ...base, client_secret: ENTRA_CLIENT_SECRET, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: FEDERATED_TOKEN }, 400, 'invalid_request', 50027],
      [{ ...base, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: 'a.b.c' }, 401, 'invalid_client', 700213],
      [{ ...base, client_secret: ENTRA_CLIENT_SECRET, resource: 'x' }, 400, 'invalid_request', 900144]
    ]
    for (const [form, status, error, code] of cases) {
      const r = await entraToken(entra, form)
      assert.equal(r.status, status, JSON.stringify(form))
      assert.equal(r.json.error, error)
      assert.deepEqual(r.json.error_codes, [code])
      assert.match(String(r.json.error_description), new RegExp(`^AADSTS${code}: `))
    }
    const ok = await entraToken(entra, { ...base, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: FEDERATED_TOKEN })
    assert.equal(ok.status, 200)
    const imds = await fetch(`${entra.url}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://cognitiveservices.azure.com`)
    assert.equal(imds.status, 400, 'IMDS needs Metadata: true')
  })
})

describe('ai backend credentials through Portico', () => {
  let entra: EntraEmulator
  let azure: OpenAIEmulator
  let plain: OpenAIEmulator
  let anthropicEmu: AnthropicEmulator
  let idp: Idp
  let portico: PorticoProcess
  let admin: string
  let keyFile: string

  before(async () => {
    entra = await startEntraEmulator({ federatedToken: FEDERATED_TOKEN, managedIdentityClientId: MI_CLIENT_ID })
    azure = await startOpenAIEmulator({ azureBearer: t => entra.valid(t) })
    plain = await startOpenAIEmulator()
    anthropicEmu = await startAnthropicEmulator({ apiKey: ANTHROPIC_TEST_KEY })
    idp = await startIdp({ clients: [alice] })
    const dir = makeTempDir()
    keyFile = join(dir, 'openai.key')
    // As a mounted Secret holds it: the key and a newline.
    writeFileSync(keyFile, `${FILE_KEY_1}\n`)
    writeFileSync(join(dir, 'federated-token'), FEDERATED_TOKEN)
    const adminAddr = `127.0.0.1:${await freePort()}`
    admin = `http://${adminAddr}`
    const azureAi = (name: string) => ({ name, provider: { azure: { deploymentName: 'gpt4o-deploy', apiVersion: '2024-10-21' } }, hostOverride: azure.url })
    const jwt = { mode: 'strict' as const, issuer: idp.issuer, audiences: [idp.audience], jwks: { url: idp.jwksUrl } }
    portico = await startPortico({
      dir,
      env: {
        LOG_LEVEL: 'info',
        ADMIN_ADDR: adminAddr,
        // What the Azure workload identity webhook injects into the pod.
        AZURE_FEDERATED_TOKEN_FILE: join(dir, 'federated-token'),
        AZURE_CLIENT_ID: ENTRA_CLIENT_ID,
        AZURE_TENANT_ID: ENTRA_TENANT,
        AZURE_AUTHORITY_HOST: entra.url
      },
      config: (port): ConfigFile => ({
        gateways: { default: gateway(port) },
        routes: [
          { name: 'azure-secret', matches: [{ path: { pathPrefix: '/azure-secret' } }], backends: [{ ai: azureAi('azure-secret'), policies: { backendAuth: { azure: { explicitConfig: { clientSecret: { tenantId: ENTRA_TENANT, clientId: ENTRA_CLIENT_ID, clientSecret: ENTRA_CLIENT_SECRET } }, authorityHost: entra.url } } } }] },
          { name: 'azure-bad-secret', matches: [{ path: { pathPrefix: '/azure-bad-secret' } }], backends: [{ ai: azureAi('azure-bad-secret'), policies: { backendAuth: { azure: { explicitConfig: { clientSecret: { tenantId: ENTRA_TENANT, clientId: ENTRA_CLIENT_ID, clientSecret: 'entra-wrong-secret' } }, authorityHost: entra.url } } } }] },
          { name: 'azure-workload', matches: [{ path: { pathPrefix: '/azure-workload' } }], backends: [{ ai: azureAi('azure-workload'), policies: { backendAuth: { azure: { explicitConfig: { workloadIdentity: {} } } } } }] },
          { name: 'azure-mi', matches: [{ path: { pathPrefix: '/azure-mi' } }], backends: [{ ai: azureAi('azure-mi'), policies: { backendAuth: { azure: { explicitConfig: { managedIdentity: { userAssignedIdentity: { clientId: MI_CLIENT_ID } } }, imdsEndpoint: `${entra.url}/metadata/identity/oauth2/token` } } } }] },
          { name: 'key-file', matches: [{ path: { pathPrefix: '/key-file' } }], backends: [{ ai: { name: 'key-file', provider: { openAI: {} }, hostOverride: plain.url }, policies: { backendAuth: { key: { file: 'openai.key' } } } }] },
          { name: 'pass-jwt', matches: [{ path: { pathPrefix: '/pass-jwt' } }], policies: { jwtAuth: jwt }, backends: [{ ai: { name: 'pass-jwt', provider: { openAI: {} }, hostOverride: plain.url }, policies: { backendAuth: { passthrough: {} } } }] },
          {
            name: 'pass-key',
            matches: [{ path: { pathPrefix: '/pass-key' } }],
            // The Anthropic SDK's key (it sends it as Authorization: Bearer), validated against the keys the
            // gateway knows (optional: a request without one goes on, and passthrough refuses it).
            policies: { apiKey: { mode: 'optional', keys: [{ name: 'team-a', key: ANTHROPIC_TEST_KEY }] } },
            backends: [{ ai: { name: 'pass-key', provider: { anthropic: {} }, hostOverride: anthropicEmu.url }, policies: { backendAuth: { passthrough: {} } } }]
          }
        ]
      })
    })
  })
  after(async () => {
    await portico?.stop()
    await Promise.all([entra.close(), azure.close(), plain.close(), anthropicEmu.close(), idp.stop()])
  })

  const azureClient = (path: string): AzureOpenAI => new AzureOpenAI({ endpoint: `${portico.url}${path}`, apiKey: CLIENT_KEY, apiVersion: '2024-06-01', deployment: 'ignored-by-portico', maxRetries: 0 })
  const headerValues = (h: Record<string, unknown>): string => Object.values(h).flat().join('\n')

  test('azure client secret: the AzureOpenAI SDK through Portico, an Entra token fetched once and reused, the client\'s key kept back', async () => {
    const before = entra.grants.length
    for (let i = 0; i < 3; i++) {
      const c = await azureClient('/azure-secret').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      assert.equal(c.choices[0]!.message.content, 'Hello!')
      const seen = azure.received.at(-1)!
      assert.equal(seen.url, '/openai/deployments/gpt4o-deploy/chat/completions?api-version=2024-10-21')
      assert.match(String(seen.headers.authorization), /^Bearer entra-test-token-\d+$/)
      assert.equal(seen.headers['api-key'], undefined)
      assert.doesNotMatch(headerValues(seen.headers), new RegExp(CLIENT_KEY))
    }
    const grants = entra.grants.slice(before)
    assert.equal(grants.length, 1, 'one token for three requests')
    assert.deepEqual(grants[0]!.form, { client_id: ENTRA_CLIENT_ID, scope: AZURE_AI_SCOPE, client_secret: ENTRA_CLIENT_SECRET, grant_type: 'client_credentials' })
    // Streaming too.
    const stream = await azureClient('/azure-secret').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    assert.ok(text.length > 0)
  })

  test('azure workload identity (federated token file) and managed identity (IMDS)', async () => {
    const before = entra.grants.length
    const w = await azureClient('/azure-workload').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(w.choices[0]!.message.content, 'Hello!')
    const workload = entra.grants.slice(before).find(g => g.kind === 'clientAssertion')!
    assert.deepEqual(workload.form, { client_id: ENTRA_CLIENT_ID, scope: AZURE_AI_SCOPE, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: FEDERATED_TOKEN, grant_type: 'client_credentials' })
    assert.equal(String(azure.received.at(-1)!.headers.authorization), `Bearer ${workload.token}`)

    const m = await azureClient('/azure-mi').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(m.choices[0]!.message.content, 'Hello!')
    const mi = entra.grants.slice(before).find(g => g.kind === 'managedIdentity')!
    assert.deepEqual(mi.query, { 'api-version': '2018-02-01', resource: 'https://cognitiveservices.azure.com', client_id: MI_CLIENT_ID })
    assert.equal(String(azure.received.at(-1)!.headers.authorization), `Bearer ${mi.token}`)
  })

  test('an Entra refusal is the gateway\'s 503 in OpenAI\'s error shape; Azure is not called', async () => {
    const before = azure.received.length
    await assert.rejects(azureClient('/azure-bad-secret').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.APIError)
      assert.equal(err.status, 503)
      assert.match(err.message, /could not get a Microsoft Entra ID token \(clientSecret\): .*answered 401 \(invalid_client\): AADSTS7000215/)
      assert.doesNotMatch(err.message, /entra-wrong-secret/)
      return true
    })
    assert.equal(azure.received.length, before)
  })

  test('backendAuth.key from a file: read at load, read again when the config reloads', async () => {
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${portico.url}/key-file/v1`, maxRetries: 0 })
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(plain.received.at(-1)!.headers.authorization, `Bearer ${FILE_KEY_1}`)
    writeFileSync(keyFile, `${FILE_KEY_2}\n`)
    const from = portico.stdout.length
    portico.signal('SIGHUP')
    await portico.waitForOutput('config reloaded', { fromStdout: from })
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(plain.received.at(-1)!.headers.authorization, `Bearer ${FILE_KEY_2}`)
  })

  test('passthrough: the client\'s JWT (jwtAuth) reaches OpenAI as its Bearer; without one jwtAuth refuses', async () => {
    const token = await idp.token(alice)
    const client = new OpenAI({ apiKey: token, baseURL: `${portico.url}/pass-jwt/v1`, maxRetries: 0 })
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(plain.received.at(-1)!.headers.authorization, `Bearer ${token}`)
    const before = plain.received.length
    const anonymous = new OpenAI({ apiKey: 'not-a-jwt', baseURL: `${portico.url}/pass-jwt/v1`, maxRetries: 0 })
    await assert.rejects(anonymous.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => err instanceof OpenAI.AuthenticationError)
    assert.equal(plain.received.length, before)
  })

  test('passthrough: the client\'s key (apiKey; the Anthropic SDK sends Authorization: Bearer) reaches Anthropic as x-api-key; no validated key: 401 in Anthropic\'s shape, nothing sent', async () => {
    const client = new Anthropic({ apiKey: ANTHROPIC_TEST_KEY, baseURL: `${portico.url}/pass-key`, maxRetries: 0 })
    const m = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(m.type, 'message')
    assert.equal(anthropicEmu.headers.at(-1)!['x-api-key'], ANTHROPIC_TEST_KEY)
    assert.equal(anthropicEmu.headers.at(-1)!.authorization, undefined)
    const before = anthropicEmu.headers.length
    const none = new Anthropic({ apiKey: null, authToken: null, defaultHeaders: { Authorization: null }, baseURL: `${portico.url}/pass-key`, maxRetries: 0 })
    await assert.rejects(none.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
      assert.ok(err instanceof Anthropic.AuthenticationError, String(err))
      assert.equal((err.error as { type: string }).type, 'error')
      assert.match((err.error as { error: { message: string } }).error.message, /no token that the gateway validated/)
      return true
    })
    assert.equal(anthropicEmu.headers.length, before)
  })

  test('no secret in /config_dump, the trace or the logs', async () => {
    const trace = await openTrace(admin, 'path=/azure-secret*')
    await trace.ready
    await azureClient('/azure-secret').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    const events = await trace.done
    const jwtTrace = await openTrace(admin, 'path=/pass-jwt*')
    await jwtTrace.ready
    const token = await idp.token(alice)
    await new OpenAI({ apiKey: token, baseURL: `${portico.url}/pass-jwt/v1`, maxRetries: 0 }).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    const jwtEvents = await jwtTrace.done
    const dump = await (await request(`${admin}/config_dump`)).body.text()
    assert.match(dump, /azure-secret/)
    const secrets = [ENTRA_CLIENT_SECRET, 'entra-wrong-secret', FILE_KEY_1, FILE_KEY_2, FEDERATED_TOKEN, ANTHROPIC_TEST_KEY, token, ...entra.grants.map(g => g.token)]
    const traced = JSON.stringify(events) + JSON.stringify(jwtEvents)
    assert.ok(events.some(e => e.message.type === 'llmRequest'), 'the trace saw the call')
    for (const secret of secrets) {
      assert.ok(!dump.includes(secret), `config_dump holds ${secret.slice(0, 12)}…`)
      assert.ok(!traced.includes(secret), `the trace holds ${secret.slice(0, 12)}…`)
      assert.ok(!portico.output.includes(secret), `the logs hold ${secret.slice(0, 12)}…`)
    }
  })
})
