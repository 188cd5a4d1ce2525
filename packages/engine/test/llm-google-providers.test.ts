/**
 * The Gemini and Vertex AI provider adapters (llm/providers/gemini.ts, vertex.ts) and Google
 * access tokens (google-token.ts) with the real google-auth-library: a service-account key
 * with a freshly generated RSA key whose `token_uri` points at a loopback OAuth server that
 * verifies the signed JWT assertion, and Application Default Credentials from a loopback
 * metadata server (GCE_METADATA_HOST). No network.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { generateKeyPairSync, createVerify, type KeyObject } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { geminiProvider, geminiModelPath } from '../src/llm/providers/gemini.ts'
import { vertexProvider, vertexHost } from '../src/llm/providers/vertex.ts'
import { googleAccessTokens, type ServiceAccountKey } from '../src/llm/providers/google-token.ts'
import type { ProviderRequest } from '../src/llm/provider.ts'
import { setForTest } from '../../testkit/src/for-test.ts'

const ORIGIN = { host: 'x', port: 443, protocol: 'https' as const }
const req = (over: Partial<ProviderRequest> = {}): ProviderRequest => ({ operation: 'chat', model: 'gemini-2.5-flash', streaming: false, body: Buffer.from('{}'), headers: {}, ...over })

test('google-auth-library is not loaded until a Vertex backend needs its first token', () => {
  const loaded = () => Object.keys(createRequire(import.meta.url).cache).some(k => k.includes('google-auth-library'))
  vertexProvider({ project: 'portico-test', keyFile: '/nonexistent/key.json' })
  assert.equal(loaded(), false)
})

test('gemini: paths per operation and streaming; the key in x-goog-api-key, client credentials dropped', () => {
  const p = geminiProvider({ apiKey: 'AIza-test-portico' })
  assert.equal(p.format, 'gemini')
  assert.equal(p.system, 'gcp.gemini')
  assert.equal(p.path(req()), '/v1beta/models/gemini-2.5-flash:generateContent')
  assert.equal(p.path(req({ streaming: true })), '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse')
  assert.equal(p.path(req({ model: 'models/gemini-2.0-flash' })), '/v1beta/models/gemini-2.0-flash:generateContent')
  assert.equal(p.path(req({ model: 'tunedModels/my-tune-42' })), '/v1beta/tunedModels/my-tune-42:generateContent')
  assert.equal(p.path(req({ operation: 'embeddings' })), '/v1beta/openai/embeddings')
  assert.equal(geminiModelPath('../../v1/files?x=1#'), 'models/..%2F..%2Fv1%2Ffiles%3Fx%3D1%23')
  const r = req({ headers: { authorization: 'Bearer client-token', 'x-api-key': 'sk-ant-client', 'content-type': 'application/json' } })
  p.authorize(r, ORIGIN)
  assert.deepEqual(r.headers, { 'content-type': 'application/json', 'x-goog-api-key': 'AIza-test-portico' })
  const e = req({ operation: 'embeddings', headers: {} })
  p.authorize(e, ORIGIN)
  assert.deepEqual(e.headers, { authorization: 'Bearer AIza-test-portico' })
  // No key configured: the client's headers are left alone (pass-through of its own credentials).
  const pass = req({ headers: { 'x-goog-api-key': 'client-key' } })
  geminiProvider().authorize(pass, ORIGIN)
  assert.deepEqual(pass.headers, { 'x-goog-api-key': 'client-key' })
  assert.throws(() => geminiProvider({ apiVersion: '../x' }))
})

test('vertex: Gemini and Claude paths, hosts, the Anthropic body change', async () => {
  const tokens = { token: async () => 'ya29.static-test' }
  const g = vertexProvider({ project: 'my-proj', region: 'us-central1', tokens })
  assert.equal(g.format, 'gemini')
  assert.equal(g.system, 'gcp.vertex_ai')
  assert.equal(g.defaultOrigin.host, 'us-central1-aiplatform.googleapis.com')
  assert.equal(g.path(req()), '/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent')
  assert.equal(g.path(req({ streaming: true, model: 'publishers/google/models/gemini-2.0-flash-001' })), '/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:streamGenerateContent?alt=sse')
  assert.equal(g.adaptBody, undefined)
  assert.throws(() => g.path(req({ operation: 'models' })), (e: { status: number }) => e.status === 404)
  assert.equal(g.path(req({ operation: 'embeddings', model: 'text-embedding-005' })), '/v1/projects/my-proj/locations/us-central1/publishers/google/models/text-embedding-005:predict')
  assert.equal(g.embeddings, 'vertex-predict')

  const c = vertexProvider({ project: 'my-proj', model: 'claude-sonnet-4-5@20250929', tokens })
  assert.equal(c.format, 'anthropic-messages')
  assert.equal(c.defaultOrigin.host, 'aiplatform.googleapis.com')
  assert.equal(vertexHost('europe-west1'), 'europe-west1-aiplatform.googleapis.com')
  assert.equal(vertexHost('eu'), 'aiplatform.eu.rep.googleapis.com')
  assert.equal(c.path(req({ model: 'claude-sonnet-4-5@20250929' })), '/v1/projects/my-proj/locations/global/publishers/anthropic/models/claude-sonnet-4-5%4020250929:rawPredict')
  assert.equal(c.path(req({ model: 'claude-sonnet-4-5', streaming: true })), '/v1/projects/my-proj/locations/global/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict')
  assert.deepEqual(c.adaptBody?.({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: [], stream: true }, { operation: 'chat', model: 'claude-sonnet-4-5', streaming: true }),
    { anthropic_version: 'vertex-2023-10-16', max_tokens: 10, messages: [], stream: true })

  const r = req({ headers: { 'x-api-key': 'sk-ant-client', authorization: 'Bearer portico-client', 'anthropic-version': '2023-06-01' } })
  await c.authorize(r, ORIGIN)
  assert.deepEqual(r.headers, { 'anthropic-version': '2023-06-01', authorization: 'Bearer ya29.static-test' })
  assert.throws(() => vertexProvider({ project: 'a/b', tokens }))
  assert.throws(() => vertexProvider({ project: 'p', region: 'us-central1/../x', tokens }))
})

/** A loopback OAuth token endpoint that verifies the JWT-bearer assertion like Google's. */
async function startTokenServer (publicKey: KeyObject, email: string, expiresIn: number): Promise<{ url: string, grants: number, close: () => Promise<void>, fail: boolean }> {
  const state = { url: '', grants: 0, fail: false, close: async () => {} }
  const server = http.createServer((request, response) => {
    let body = ''
    request.on('data', c => { body += String(c) })
    request.on('end', () => {
      const form = new URLSearchParams(body)
      const reply = (status: number, json: unknown) => { response.writeHead(status, { 'content-type': 'application/json' }); response.end(JSON.stringify(json)) }
      if (request.method !== 'POST' || request.url !== '/token') return reply(404, { error: 'not_found' })
      if (state.fail) return reply(400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' })
      if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return reply(400, { error: 'unsupported_grant_type' })
      const [h, p, s] = (form.get('assertion') ?? '').split('.')
      const verify = createVerify('RSA-SHA256')
      verify.update(`${h}.${p}`)
      if (s === undefined || !verify.verify(publicKey, Buffer.from(s, 'base64url'))) return reply(400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' })
      const header = JSON.parse(Buffer.from(h as string, 'base64url').toString()) as { alg: string }
      const claims = JSON.parse(Buffer.from(p as string, 'base64url').toString()) as { iss: string, scope: string, aud: string, exp: number, iat: number }
      if (header.alg !== 'RS256' || claims.iss !== email || claims.aud !== 'https://oauth2.googleapis.com/token' || !claims.scope.includes('https://www.googleapis.com/auth/cloud-platform') || claims.exp <= claims.iat) return reply(400, { error: 'invalid_grant', error_description: 'bad claims' })
      state.grants++
      reply(200, { access_token: `ya29.test-${state.grants}`, expires_in: expiresIn, token_type: 'Bearer' })
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`
  state.close = async () => { await new Promise(resolve => server.close(resolve)) }
  return state
}

function serviceAccount (tokenUri: string): { key: ServiceAccountKey, publicKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  return {
    publicKey,
    key: {
      type: 'service_account',
      project_id: 'portico-test',
      private_key_id: 'k1',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
      client_email: 'portico@portico-test.iam.gserviceaccount.com',
      client_id: '1',
      token_uri: tokenUri
    }
  }
}

test('vertex tokens: a service-account key signs a JWT for its token_uri; the token is cached and shared', async () => {
  const { key, publicKey } = serviceAccount('')
  const server = await startTokenServer(publicKey, key.client_email, 3600)
  try {
    key.token_uri = server.url
    const vertex = vertexProvider({ project: 'portico-test', region: 'us-east5', model: 'claude-x', key })
    const headers = await Promise.all([1, 2, 3].map(async () => { const r = req(); await vertex.authorize(r, ORIGIN); return r.headers.authorization }))
    assert.deepEqual(headers, ['Bearer ya29.test-1', 'Bearer ya29.test-1', 'Bearer ya29.test-1'])
    const again = req()
    await vertex.authorize(again, ORIGIN)
    assert.equal(again.headers.authorization, 'Bearer ya29.test-1')
    assert.equal(server.grants, 1, 'one token fetch for four requests')

    // From a key file, read at the first token.
    const dir = mkdtempSync(join(tmpdir(), 'portico-sa-'))
    writeFileSync(join(dir, 'key.json'), JSON.stringify(key))
    const fromFile = googleAccessTokens({ keyFile: join(dir, 'key.json') })
    assert.equal(await fromFile.token(), 'ya29.test-2')
  } finally {
    await server.close()
  }
})

test('vertex tokens: a token near its expiry is refreshed; failures are 503s that leak nothing', async () => {
  const { key, publicKey } = serviceAccount('')
  // Tokens that live 2 minutes are inside the 5-minute refresh margin: every use fetches anew.
  const server = await startTokenServer(publicKey, key.client_email, 120)
  try {
    key.token_uri = server.url
    const tokens = googleAccessTokens({ key })
    assert.equal(await tokens.token(), 'ya29.test-1')
    assert.equal(await tokens.token(), 'ya29.test-2')
    server.fail = true
    await assert.rejects(tokens.token(), (e: { status: number, kind: string, message: string }) => {
      assert.equal(e.status, 503)
      assert.equal(e.kind, 'api_error')
      assert.match(e.message, /could not get a Google access token: invalid_grant: Invalid JWT Signature/)
      assert.ok(!e.message.includes('PRIVATE KEY') && !e.message.includes('ya29') && !e.message.includes('eyJ'), e.message)
      return true
    })
    const dir = mkdtempSync(join(tmpdir(), 'portico-sa-'))
    writeFileSync(join(dir, 'bad.json'), '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMII')
    await assert.rejects(googleAccessTokens({ keyFile: join(dir, 'bad.json') }).token(), (e: { status: number, message: string }) => e.status === 503 && !e.message.includes('PRIVATE') && /is not JSON/.test(e.message))
  } finally {
    await server.close()
  }
})

test('vertex tokens: Application Default Credentials from the metadata server (GKE workload identity, GCE)', async t => {
  let served = 0
  const server = http.createServer((request, response) => {
    if (request.headers['metadata-flavor'] !== 'Google') { response.writeHead(403); response.end(); return }
    const url = new URL(request.url ?? '/', 'http://x')
    const send = (status: number, body: string, type = 'application/text') => { response.writeHead(status, { 'metadata-flavor': 'Google', 'content-type': type }); response.end(body) }
    if (url.pathname === '/computeMetadata/v1/instance/service-accounts/default/token') {
      served++
      return send(200, JSON.stringify({ access_token: `ya29.metadata-${served}`, expires_in: 3599, token_type: 'Bearer' }), 'application/json')
    }
    if (url.pathname === '/computeMetadata/v1/instance') return send(200, '')
    if (url.pathname === '/computeMetadata/v1/universe/universe-domain') return send(200, 'googleapis.com')
    if (url.pathname === '/computeMetadata/v1/project/project-id') return send(200, 'portico-test')
    send(404, 'not found')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  try {
    // The environment of this test only: put back in t.after (testkit's setForTest).
    setForTest(t, process.env, 'GCE_METADATA_HOST', `127.0.0.1:${(server.address() as AddressInfo).port}`)
    setForTest(t, process.env, 'METADATA_SERVER_DETECTION', 'assume-present')
    setForTest(t, process.env, 'HOME', mkdtempSync(join(tmpdir(), 'portico-home-')))
    setForTest(t, process.env, 'GOOGLE_APPLICATION_CREDENTIALS', undefined)
    setForTest(t, process.env, 'CLOUDSDK_CONFIG', undefined)
    const vertex = vertexProvider({ project: 'portico-test' })
    const r = req()
    await vertex.authorize(r, ORIGIN)
    assert.equal(r.headers.authorization, 'Bearer ya29.metadata-1')
    await vertex.authorize(req(), ORIGIN)
    assert.equal(served, 1)
  } finally {
    await new Promise(resolve => server.close(resolve))
  }
})
