/**
 * mcpAuthentication and authorization rules against a real identity provider (oidc-provider
 * issuing client-credentials JWTs with a `permissions` claim), with the official MCP SDK
 * client: the seed's configuration, every kind of bad token, key rotation, the provider
 * going down, the RFC 9728 metadata, and tools hidden by rules.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { SignJWT } from 'jose'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { openTrace } from '@portico/testkit/trace'
import { startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'
import { startIdp, type Idp, type IdpClient } from '../lib/idp.ts'

const reader: IdpClient = { id: 'reader', secret: 'reader-secret', permissions: ['read'] }
const writer: IdpClient = { id: 'writer', secret: 'writer-secret', permissions: ['read', 'write'] }
const nobody: IdpClient = { id: 'nobody', secret: 'nobody-secret', permissions: [] }

let idp: Idp
let sdk: SdkServer
let portico: PorticoProcess
let admin: string
let mcp: string

before(async () => {
  idp = await startIdp({ clients: [reader, writer, nobody] })
  sdk = await startSdkServer('tools')
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, protocol: 'HTTP', address: '127.0.0.1' } },
      routes: [{
        // The service document's example, to the letter.
        name: 'mcp',
        matches: [{ path: { pathPrefix: '/mcp' } }],
        policies: {
          mcpAuthentication: {
            mode: 'strict',
            issuer: idp.issuer,
            audiences: [idp.audience],
            jwks: { url: idp.jwksUrl },
            scopesSupported: ['mcp']
          },
          authorization: {
            rules: [
              '"read" in jwt.permissions',
              { deny: 'mcp.tool.name == "elicit" && !("write" in jwt.permissions)' },
              { deny: 'mcp.tool.name.startsWith("item-")' }
            ]
          }
        },
        backends: [{ mcp: { targets: [{ name: 'tools', mcp: { host: sdk.url } }] } }]
      }]
    })
  })
  mcp = `${portico.url}/mcp`
})

after(async () => {
  await portico?.stop()
  await sdk?.close()
  await idp?.stop()
})

async function connect (token: string): Promise<Client> {
  const client = new Client({ name: 'auth-test', version: '1' }, { capabilities: { elicitation: {} } })
  await client.connect(new StreamableHTTPClientTransport(new URL(mcp), { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
  return client
}

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } })

async function initWith (authorization: string | null) {
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }
  if (authorization !== null) headers.authorization = authorization
  const res = await request(mcp, { method: 'POST', headers, body: INIT })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, json: text.startsWith('{') ? JSON.parse(text) : null }
}

test('a client-credentials token from the provider opens the MCP route; tools filtered by the rules', async () => {
  const client = await connect(await idp.token(reader))
  const names = (await client.listTools()).tools.map(t => t.name)
  assert.ok(names.includes('add') && names.includes('sample'))
  assert.ok(!names.includes('elicit'), 'reader may not use elicit: it is not listed')
  assert.ok(!names.some(n => n.startsWith('item-')), 'denied for everyone')
  assert.equal(textOf(await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })), '3')
  const denied = await client.callTool({ name: 'elicit', arguments: {} }).catch((err: Error) => err)
  assert.ok(denied instanceof Error)
  assert.match(denied.message, /-32602.*Unknown tool: elicit/)
  await client.close()

  const w = await connect(await idp.token(writer))
  assert.ok((await w.listTools()).tools.some(t => t.name === 'elicit'), 'a writer sees elicit')
  await w.close()
})

test('a token without the permission is refused with 403 before any MCP traffic', async () => {
  const r = await initWith(`Bearer ${await idp.token(nobody)}`)
  assert.equal(r.status, 403)
  assert.deepEqual(r.json, { error: 'forbidden', error_description: 'authorization failed' })
})

test('no token: 401 with WWW-Authenticate resource_metadata; the metadata document is served', async () => {
  const r = await initWith(null)
  assert.equal(r.status, 401)
  const metadataUrl = `${portico.url}/.well-known/oauth-protected-resource/mcp`
  assert.equal(r.headers['www-authenticate'], `Bearer resource_metadata="${metadataUrl}"`)
  assert.deepEqual(r.json, { error: 'unauthorized', error_description: 'no bearer token' })

  const doc = await request(metadataUrl)
  assert.equal(doc.statusCode, 200)
  assert.equal(doc.headers['access-control-allow-origin'], '*')
  assert.deepEqual(await doc.body.json(), {
    resource: `${portico.url}/mcp`,
    authorization_servers: [idp.issuer],
    bearer_methods_supported: ['header'],
    scopes_supported: ['mcp']
  })
  const root = await request(`${portico.url}/.well-known/oauth-protected-resource`)
  assert.equal(root.statusCode, 200, 'one protected route: the bare path serves it too')
  await root.body.text()
})

test('bad tokens are refused with 401 and a reason', async () => {
  const now = Math.floor(Date.now() / 1000)
  const cases: Array<[string, string | Promise<string>, RegExp]> = [
    ['expired', idp.forge({ exp: now - 3600, iat: now - 7200, permissions: ['read'] }), /token expired/],
    ['not yet valid', idp.forge({ nbf: now + 3600, permissions: ['read'] }), /token not yet valid/],
    ['wrong issuer', idp.forge({ iss: 'https://evil.example/', permissions: ['read'] }), /wrong issuer/],
    ['wrong audience', idp.forge({ aud: 'https://other.api', permissions: ['read'] }), /wrong audience/],
    ['alg none', unsigned({ iss: idp.issuer, aud: idp.audience, exp: now + 300, permissions: ['read'] }), /alg none/],
    ['HS256 with the RSA public key as secret', hmacWithPublicKey(), /algorithm HS256 not allowed/],
    ['tampered payload', tamper(await idp.forge({ permissions: ['read'] })), /invalid signature/],
    ['malformed', 'abc.def', /malformed token/],
    ['unknown kid', idp.forge({ permissions: ['read'] }, { kid: 'no-such-key' }), /unknown signing key/]
  ]
  for (const [name, token, reason] of cases) {
    const r = await initWith(`Bearer ${await token}`)
    assert.equal(r.status, 401, `${name}: ${r.text}`)
    assert.equal(r.json.error, 'invalid_token', name)
    assert.match(r.json.error_description, reason, name)
    assert.match(String(r.headers['www-authenticate']), /^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="/, name)
  }
  // A 64 KiB token is over any sane header limit: refused before parsing, proxy unharmed.
  const huge = await initWith(`Bearer ${'x'.repeat(64 * 1024)}`)
  assert.ok(huge.status === 431 || huge.status === 401, `64 KiB token: ${huge.status}`)
  assert.equal((await initWith(`Bearer ${await idp.token(reader)}`)).status, 200, 'still serving')
})

test('key rotation: a token signed with a new key is accepted after the JWKS refresh', async () => {
  // Refreshes on unknown kids are rate-limited (one per 2 s); the previous test just used one.
  await new Promise(resolve => setTimeout(resolve, 2100))
  await idp.rotate()
  const token = await idp.token(reader)
  const r = await initWith(`Bearer ${token}`)
  assert.equal(r.status, 200, r.text)
})

test('the provider goes down: cached keys keep working; new keys cannot be learned', async () => {
  const token = await idp.token(reader)
  await idp.stop()
  try {
    assert.equal((await initWith(`Bearer ${token}`)).status, 200, 'served from the cached JWKS')
    const unknown = await initWith(`Bearer ${await idp.forge({ permissions: ['read'] }, { kid: 'rotated-while-down' })}`)
    assert.equal(unknown.status, 401)
  } finally {
    await idp.start()
  }
})

test('the trace shows the jwt policy, its decision, and which rules allowed or denied', async () => {
  const trace = await openTrace(admin, 'path=/mcp')
  await trace.ready
  await initWith(`Bearer ${await idp.token(nobody)}`)
  const events = await trace.done
  const route = events.find(e => e.message.type === 'policySelection' && e.message.phase === 'route')!
  const effective = route.message.effectivePolicy as Record<string, any>
  assert.equal(effective.jwt.provider.issuer, idp.issuer)
  assert.equal(effective.authorization.rules.length, 3)
  const jwt = events.find(e => e.message.type === 'policy' && e.message.kind === 'jwt')!
  assert.equal((jwt.message.result as { type: string }).type, 'apply')
  const decision = events.find(e => e.message.type === 'authorizationResult')!
  assert.equal(decision.message.result, 'deny')
  assert.deepEqual((decision.message.rules as Array<{ rule: string, matched: boolean }>).map(r => [r.rule, r.matched]), [['"read" in jwt.permissions', false]])
  const initial = events.find(e => e.message.type === 'requestSnapshot')!
  assert.equal((initial.message.requestState as any).request.headers.authorization, '<redacted>')
})

test('the trace of a tools/call MCP authorization refused has no backend call (none was made); an allowed one has it', async () => {
  const authorization = `Bearer ${await idp.token(reader)}`
  const init = await initWith(authorization)
  assert.equal(init.status, 200)
  const headers = { authorization, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': '2025-11-25' }
  const traced = async (id: number, name: string) => {
    const trace = await openTrace(admin, 'path=/mcp&method=POST')
    await trace.ready
    const res = await request(mcp, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { a: 1, b: 2 } } }) })
    const text = await res.body.text()
    return { status: res.statusCode, text, events: await trace.done }
  }
  const refused = await traced(2, 'elicit')
  assert.equal(refused.status, 200)
  assert.match(refused.text, /Unknown tool: elicit/)
  const types = refused.events.map(e => e.message.type)
  assert.ok(!types.includes('backendCallStart'), `no backend call started: ${types.join(',')}`)
  assert.ok(!types.includes('backendCallResult'), `no backend result: ${types.join(',')}`)
  assert.ok(refused.events.some(e => e.message.type === 'responseSnapshot' && e.message.stage === 'final response'), 'the answer is still traced')

  const allowed = await traced(3, 'add')
  assert.match(allowed.text, /"text":"3"/)
  assert.equal(allowed.events.find(e => e.message.type === 'backendCallStart')?.message.target, 'tools')
  assert.equal(allowed.events.find(e => e.message.type === 'backendCallResult')?.message.status, 200)
})

function unsigned (claims: Record<string, unknown>): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc(claims)}.`
}

async function hmacWithPublicKey (): Promise<string> {
  // The classic confusion attack: HS256 keyed with the provider's public key.
  const jwks = await (await request(idp.jwksUrl, { reset: true })).body.json() as { keys: Array<Record<string, string>> }
  const secret = new TextEncoder().encode(JSON.stringify(jwks.keys[0]))
  return await new SignJWT({ iss: idp.issuer, aud: idp.audience, permissions: ['read'] }).setProtectedHeader({ alg: 'HS256', kid: jwks.keys[0]!.kid! }).setExpirationTime('5m').sign(secret)
}

function tamper (token: string): string {
  const [h, p, s] = token.split('.')
  const claims = JSON.parse(Buffer.from(p!, 'base64url').toString())
  claims.permissions = ['read', 'write', 'admin']
  return `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`
}
