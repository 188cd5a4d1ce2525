/**
 * jwtAuth and authorization on plain HTTP routes, against a real identity provider and a
 * real backend: modes, where the token goes, claims to headers, CEL decisions, a provider
 * that is down when the first token arrives, keys from a file, and config errors.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { startIdp, type Idp, type IdpClient } from '../lib/idp.ts'

const alice: IdpClient = { id: 'alice', secret: 'alice-secret', permissions: ['read'] }
let idp: Idp
let backend: Backend
let portico: PorticoProcess

before(async () => {
  idp = await startIdp({ clients: [alice] })
  backend = await startEchoBackend('app')
  const provider = { issuer: idp.issuer, audiences: [idp.audience], jwks: { url: idp.jwksUrl } }
  portico = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'strict', matches: [{ path: { pathPrefix: '/strict' } }], policies: { jwtAuth: { mode: 'strict', ...provider, claimsToHeaders: [{ claim: 'sub', header: 'x-user' }] } }, backends: [{ host: backend.host }] },
        { name: 'optional', matches: [{ path: { pathPrefix: '/optional' } }], policies: { jwtAuth: { mode: 'optional', providers: [provider] } }, backends: [{ host: backend.host }] },
        { name: 'permissive', matches: [{ path: { pathPrefix: '/permissive' } }], policies: { jwtAuth: { mode: 'permissive', ...provider } }, backends: [{ host: backend.host }] },
        { name: 'keep', matches: [{ path: { pathPrefix: '/keep' } }], policies: { jwtAuth: { mode: 'strict', ...provider, keepToken: true } }, backends: [{ host: backend.host }] },
        {
          name: 'rules',
          matches: [{ path: { pathPrefix: '/rules' } }],
          policies: {
            jwtAuth: { mode: 'strict', ...provider },
            authorization: { rules: [{ allow: '"read" in jwt.permissions && request.method == "GET"' }, { deny: 'request.path.endsWith("/secret")' }] }
          },
          backends: [{ host: backend.host }]
        }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
  await idp?.stop()
})

async function call (path: string, token?: string, method = 'GET') {
  const headers: Record<string, string> = {}
  if (token !== undefined) headers.authorization = `Bearer ${token}`
  const res = await request(`${portico.url}${path}`, { method, headers })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, echo: res.statusCode === 200 ? JSON.parse(text) as EchoedRequest : null }
}

test('strict: no token 401, a valid token passes; the token is not forwarded; claims become headers', async () => {
  const none = await call('/strict')
  assert.equal(none.status, 401)
  assert.equal(none.text, 'authentication failure: no bearer token')
  assert.equal(none.headers['www-authenticate'], 'Bearer')
  const token = await idp.token(alice)
  const ok = await call('/strict', token)
  assert.equal(ok.status, 200)
  assert.equal(ok.echo!.headers.authorization, undefined, 'the token stays at the gateway')
  assert.equal(ok.echo!.headers['x-user'], 'alice')
  const keep = await call('/keep', token)
  assert.equal(keep.echo!.headers.authorization, `Bearer ${token}`, 'keepToken forwards it')
})

test('optional: no token passes, a bad one is refused; permissive: never refuses', async () => {
  assert.equal((await call('/optional')).status, 200)
  const bad = await call('/optional', await idp.forge({ aud: 'https://other.api' }))
  assert.equal(bad.status, 401)
  assert.equal(bad.text, 'authentication failure: wrong audience')
  assert.match(String(bad.headers['www-authenticate']), /^Bearer error="invalid_token"/)
  assert.equal((await call('/permissive', 'garbage')).status, 200)
})

test('authorization rules over jwt and request: 403 with a body when denied', async () => {
  const token = await idp.token(alice)
  assert.equal((await call('/rules/doc', token)).status, 200)
  const post = await call('/rules/doc', token, 'POST')
  assert.equal(post.status, 403)
  assert.equal(post.text, 'authorization failed')
  assert.equal((await call('/rules/secret', token)).status, 403, 'deny wins over allow')
  const noPerm = await call('/rules/doc', await idp.forge({ permissions: [] }))
  assert.equal(noPerm.status, 403)
})

test('a provider that is down when the first token arrives: 401, then it recovers', async () => {
  const dir = makeTempDir()
  const down = await startIdp({ clients: [alice] })
  const token = await down.token(alice)
  await down.stop()
  const p = await startPortico({
    dir,
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'r', policies: { jwtAuth: { mode: 'strict', issuer: down.issuer, audiences: [down.audience], jwks: { url: down.jwksUrl } } }, backends: [{ host: backend.host }] }]
    })
  })
  try {
    const r = await request(`${p.url}/x`, { headers: { authorization: `Bearer ${token}` } })
    assert.equal(r.statusCode, 401)
    assert.match(await r.body.text(), /signing keys unavailable/)
    await down.start()
    await new Promise(resolve => setTimeout(resolve, 2100)) // past the refresh rate limit
    const again = await request(`${p.url}/x`, { headers: { authorization: `Bearer ${token}` } })
    assert.equal(again.statusCode, 200)
    await again.body.text()
  } finally {
    await p.stop()
    await down.stop()
  }
})

test('keys from a JWKS file; config errors name the field (bad CEL, missing provider parts)', async () => {
  const dir = makeTempDir()
  const { kty, n, e, kid, alg } = idp.key as unknown as Record<string, string>
  writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [{ kty, n, e, kid, alg }] }))
  const p = await startPortico({
    dir,
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{ name: 'r', policies: { jwtAuth: { mode: 'strict', issuer: idp.issuer, audiences: [idp.audience], jwks: { file: 'jwks.json' } } }, backends: [{ host: backend.host }] }]
    })
  })
  try {
    const r = await request(`${p.url}/x`, { headers: { authorization: `Bearer ${await idp.forge({})}` } })
    assert.equal(r.statusCode, 200)
    await r.body.text()
  } finally {
    await p.stop()
  }

  const bad = join(makeTempDir(), 'bad.yaml')
  writeFileSync(bad, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - name: r',
    '    policies:',
    '      authorization:',
    '        rules:',
    '          - \'"read" in jwt.permissions &&\'',
    '          - {deny: \'foo.bar == 1\'}',
    '      jwtAuth: {issuer: x}'
  ].join('\n'))
  const result = await runPortico(['--validate', '-f', bad])
  assert.equal(result.code, 1)
  assert.match(result.stderr, /bad\.yaml:7:13: routes\[0\]\.policies\.authorization\.rules\[0\]: invalid CEL expression/)
  assert.match(result.stderr, /bad\.yaml:8:13: routes\[0\]\.policies\.authorization\.rules\[1\]: invalid CEL expression "foo\.bar == 1": unknown variable "foo"/)
  assert.match(result.stderr, /routes\[0\]\.policies\.jwtAuth: missing audiences, jwks/)
})
