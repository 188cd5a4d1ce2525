/**
 * oidc against a real OpenID provider (oidc-provider, PKCE required, confidential client):
 * the whole browser flow with real HTTP requests — redirect to the provider, its login and
 * consent forms, the callback, the session cookie, the backend call (without the cookie) —
 * then authorization rules on the ID token's claims, API clients, tampered cookies, a
 * forged state, logout through the provider's end_session_endpoint, sessions shared by
 * replicas with the same SESSION_KEY, redaction and config errors.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { Browser, isRedirect, startLoginIdp, type LoginIdp } from '../lib/oidc-login.ts'

const SESSION_KEY = 'a'.repeat(64)
const client = { id: 'portico-web', secret: 'portico-web-secret' }
let backend: Backend
let idp: LoginIdp
let idpPort: number
let portico: PorticoProcess
let replica: PorticoProcess
let admin: string

function oidcPolicy (issuer: string) {
  return {
    issuer,
    clientId: client.id,
    clientSecret: client.secret,
    redirectUri: '/oauth/callback',
    scopes: ['openid', 'email', 'profile', 'groups'],
    postLogoutRedirectUri: '/bye'
  }
}

function config (port: number) {
  const oidc = oidcPolicy(`http://127.0.0.1:${idpPort}`)
  return {
    gateways: { default: { port, address: '127.0.0.1' } },
    routes: [
      { name: 'bye', matches: [{ path: { exact: '/bye' } }], backends: [{ host: backend.host }] },
      {
        name: 'admin',
        matches: [{ path: { pathPrefix: '/admin' } }],
        policies: { oidc, authorization: { rules: [{ require: 'jwt.sub == "alice"' }] } },
        backends: [{ host: backend.host }]
      },
      { name: 'app', policies: { oidc }, backends: [{ host: backend.host }] }
    ]
  }
}

before(async () => {
  backend = await startEchoBackend('app')
  idpPort = await freePort()
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  // The provider's URL goes into the config before it runs: discovery happens on first use.
  portico = await startPortico({ env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, SESSION_KEY }, config: port => config(port) })
  replica = await startPortico({ env: { SESSION_KEY }, config: port => config(port) })
  idp = await startLoginIdp({
    port: idpPort,
    client: {
      ...client,
      redirectUris: [`${portico.url}/oauth/callback`, `${replica.url}/oauth/callback`],
      postLogoutRedirectUris: [`${portico.url}/bye`]
    },
    accounts: { alice: { email: 'alice@example.test', name: 'Alice', groups: ['admins'] }, bob: { email: 'bob@example.test', name: 'Bob', groups: [] } }
  })
})

after(async () => {
  await portico?.stop()
  await replica?.stop()
  await idp?.stop()
  await backend?.close()
})

function sessionCookie (browser: Browser, url = portico.url): string {
  const value = browser.cookies(url).get('portico_session')
  assert.ok(value !== undefined, 'a session cookie is set')
  return value
}

test('the full login: redirect with PKCE, provider login and consent, callback, session cookie, backend without the cookie', async () => {
  const browser = new Browser()
  browser.cookies(portico.url).set('theme', 'dark')

  const first = await browser.fetch(`${portico.url}/dashboard?tab=1`)
  assert.equal(first.status, 302)
  const auth = new URL(String(first.headers.location))
  assert.equal(`${auth.origin}`, idp.issuer)
  assert.equal(auth.searchParams.get('response_type'), 'code')
  assert.equal(auth.searchParams.get('client_id'), client.id)
  assert.equal(auth.searchParams.get('redirect_uri'), `${portico.url}/oauth/callback`)
  assert.equal(auth.searchParams.get('scope'), 'openid email profile groups')
  assert.equal(auth.searchParams.get('code_challenge_method'), 'S256')
  assert.match(auth.searchParams.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/)
  assert.ok((auth.searchParams.get('state') ?? '').length >= 20)
  assert.ok((auth.searchParams.get('nonce') ?? '').length >= 20)
  const loginCookie = first.setCookies.find(c => c.startsWith('portico_session_login='))!
  assert.match(loginCookie, /; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax$/)

  const landed = await browser.login(`${portico.url}/dashboard?tab=1`, 'alice')
  assert.equal(landed.status, 200, landed.text)
  assert.equal(landed.url, `${portico.url}/dashboard?tab=1`, 'back at the original URL')
  const echo = JSON.parse(landed.text) as EchoedRequest
  assert.equal(echo.url, '/dashboard?tab=1')
  assert.equal(echo.headers.cookie, 'theme=dark', 'the session cookie stays at the gateway; other cookies pass')

  const callback = browser.history.find(p => p.url.startsWith(`${portico.url}/oauth/callback?`))!
  assert.equal(callback.status, 302)
  assert.equal(callback.headers.location, '/dashboard?tab=1')
  const session = callback.setCookies.find(c => c.startsWith('portico_session='))!
  assert.match(session, /^portico_session=v1\.[A-Za-z0-9_-]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/)
  assert.ok(callback.setCookies.some(c => /^portico_session_login=; .*Max-Age=0/.test(c)), 'the login cookie is cleared')
  assert.equal(browser.cookies(portico.url).get('portico_session_login'), undefined)

  // Later requests pass with the cookie alone — no trip to the provider.
  const calls = browser.history.length
  const again = await browser.fetch(`${portico.url}/reports`)
  assert.equal(again.status, 200)
  assert.equal(browser.history.length, calls + 1)
  // An API call (not a navigation) with the session works too.
  const api = await request(`${portico.url}/api/me`, { headers: { cookie: `portico_session=${sessionCookie(browser)}`, accept: 'application/json' } })
  assert.equal(api.statusCode, 200)
  await api.body.text()
})

test('non-browser requests without a session get 401, not a redirect', async () => {
  const api = await request(`${portico.url}/api/data`, { headers: { accept: 'application/json' } })
  assert.equal(api.statusCode, 401)
  assert.equal(await api.body.text(), 'authentication required: no session')
  const post = await request(`${portico.url}/form`, { method: 'POST', headers: { accept: 'text/html' }, body: 'x=1' })
  assert.equal(post.statusCode, 401, 'only GET/HEAD navigations are redirected')
  await post.body.text()
})

test('authorization rules see the ID token claims as jwt: alice may use /admin, bob may not', async () => {
  const alice = new Browser()
  const a = await alice.login(`${portico.url}/admin/panel`, 'alice')
  assert.equal(a.status, 200, a.text)
  assert.equal((JSON.parse(a.text) as EchoedRequest).url, '/admin/panel')

  const bob = new Browser()
  const b = await bob.login(`${portico.url}/admin/panel`, 'bob')
  assert.equal(b.status, 403)
  assert.equal(b.text, 'authorization failed')
  const home = await bob.fetch(`${portico.url}/home`)
  assert.equal(home.status, 200, 'bob is logged in; only /admin is closed to him')
})

test('a tampered or foreign session cookie counts as no session', async () => {
  const browser = new Browser()
  await browser.login(`${portico.url}/x`, 'alice')
  const good = sessionCookie(browser)
  const body = good.slice(3)
  const flipped = `v1.${body.slice(0, 20)}${body[20] === 'A' ? 'B' : 'A'}${body.slice(21)}`
  for (const bad of [flipped, good.slice(0, -4), 'v1.AAAA', 'not-a-session']) {
    const api = await request(`${portico.url}/api/data`, { headers: { cookie: `portico_session=${bad}`, accept: 'application/json' } })
    assert.equal(api.statusCode, 401, bad)
    assert.equal(await api.body.text(), 'authentication required: invalid or expired session cookie')
  }
  const nav = await request(`${portico.url}/page`, { headers: { cookie: `portico_session=${flipped}`, accept: 'text/html' } })
  assert.equal(nav.statusCode, 302, 'a browser is sent to log in again')
  assert.ok(String(nav.headers.location).startsWith(`${idp.issuer}/auth?`))
  await nav.body.text()
})

test('the callback refuses a wrong state (400), no login in progress (400), and a code the provider does not know (401)', async () => {
  const browser = new Browser()
  const start = await browser.fetch(`${portico.url}/somewhere`)
  const state = new URL(String(start.headers.location)).searchParams.get('state')!

  const wrong = await browser.fetch(`${portico.url}/oauth/callback?code=abc&state=not-the-state&iss=${encodeURIComponent(idp.issuer)}`)
  assert.equal(wrong.status, 400)
  assert.equal(wrong.text, 'login failed: state mismatch')

  const stranger = await request(`${portico.url}/oauth/callback?code=abc&state=${state}`)
  assert.equal(stranger.statusCode, 400, 'a callback without the login cookie')
  assert.match(await stranger.body.text(), /no login in progress/)

  const again = new Browser()
  const s2 = await again.fetch(`${portico.url}/somewhere`)
  const state2 = new URL(String(s2.headers.location)).searchParams.get('state')!
  const forged = await again.fetch(`${portico.url}/oauth/callback?code=forged-code&state=${state2}&iss=${encodeURIComponent(idp.issuer)}`)
  assert.equal(forged.status, 401)
  assert.match(forged.text, /^login failed: invalid_grant/)
  assert.equal(again.cookies(portico.url).get('portico_session'), undefined)
})

test('logout clears the session and goes through the provider\'s end_session_endpoint back to postLogoutRedirectUri', async () => {
  const browser = new Browser()
  await browser.login(`${portico.url}/x`, 'alice')
  const out = await browser.fetch(`${portico.url}/logout`)
  assert.equal(out.status, 302)
  const end = new URL(String(out.headers.location))
  assert.equal(`${end.origin}${end.pathname}`, `${idp.issuer}/session/end`)
  assert.equal(end.searchParams.get('post_logout_redirect_uri'), `${portico.url}/bye`)
  assert.equal(end.searchParams.get('client_id'), client.id)
  assert.ok((end.searchParams.get('id_token_hint') ?? '').split('.').length === 3, 'id_token_hint is the ID token')
  assert.ok(out.setCookies.some(c => /^portico_session=; .*Max-Age=0/.test(c)))
  assert.equal(browser.cookies(portico.url).get('portico_session'), undefined)

  // The provider asks to confirm; confirming lands on /bye.
  let page = await browser.follow(end.href)
  const action = /<form[^>]*action="([^"]+)"/.exec(page.text)?.[1]
  assert.ok(action !== undefined, `a logout form: ${page.text.slice(0, 300)}`)
  const fields: Record<string, string> = {}
  for (const m of page.text.matchAll(/<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) fields[m[1]!] = m[2]!
  page = await browser.fetch(new URL(action, page.url).href, { form: { ...fields, logout: 'yes' } })
  while (isRedirect(page)) page = await browser.fetch(new URL(String(page.headers.location), page.url).href)
  assert.equal(page.status, 200)
  assert.equal(page.url, `${portico.url}/bye`)

  const after = await browser.fetch(`${portico.url}/x`)
  assert.equal(after.status, 302, 'logged out: the next navigation logs in again')
})

test('a replica with the same SESSION_KEY accepts the session; the trace and config dump never show the secrets', async () => {
  const browser = new Browser()
  await browser.login(`${portico.url}/x`, 'alice')
  const cookie = sessionCookie(browser)
  const onReplica = await request(`${replica.url}/api/data`, { headers: { cookie: `portico_session=${cookie}`, accept: 'application/json' } })
  assert.equal(onReplica.statusCode, 200)
  assert.equal((JSON.parse(await onReplica.body.text()) as EchoedRequest).headers.cookie, undefined)

  const trace = await openTrace(admin, 'path=/traced')
  await trace.ready
  const r = await request(`${portico.url}/traced`, { headers: { cookie: `portico_session=${cookie}` } })
  assert.equal(r.statusCode, 200)
  await r.body.text()
  const events = await trace.done
  const route = events.find(e => e.message.type === 'policySelection' && e.message.phase === 'route')!
  const effective = route.message.effectivePolicy as Record<string, any>
  assert.equal(effective.oidc.clientId, client.id)
  assert.equal(effective.oidc.clientSecret, '<redacted>')
  const decision = events.find(e => e.message.type === 'policy' && e.message.kind === 'oidc')!
  assert.deepEqual(decision.message.result, { type: 'apply', details: 'session of alice' })

  const dump = await (await request(`${admin}/config_dump`)).body.text()
  assert.ok(!dump.includes(client.secret), 'the client secret is not dumped')
  assert.match(dump, /"clientSecret": "<redacted>"/)
})

test('config errors: missing fields and bad URLs fail the schema; the logout path cannot be the callback', async () => {
  const dir = makeTempDir()
  const schema = join(dir, 'schema.yaml')
  writeFileSync(schema, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - policies:',
    '      oidc: {issuer: "idp.example.com", redirectUri: "callback", sessionKey: "short"}'
  ].join('\n'))
  const r1 = await runPortico(['--validate', '-f', schema])
  assert.equal(r1.code, 1)
  assert.match(r1.stderr, /routes\[0\]\.policies\.oidc: missing required field "clientId"|routes\[0\]\.policies\.oidc.*clientId/)
  assert.match(r1.stderr, /routes\[0\]\.policies\.oidc\.issuer: /)
  assert.match(r1.stderr, /routes\[0\]\.policies\.oidc\.redirectUri: /)
  assert.match(r1.stderr, /routes\[0\]\.policies\.oidc\.sessionKey: /)

  const semantic = join(dir, 'semantic.yaml')
  writeFileSync(semantic, [
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - policies:',
    '      oidc: {issuer: "https://idp.example.com", clientId: c, redirectUri: "/logout"}'
  ].join('\n'))
  const r2 = await runPortico(['--validate', '-f', semantic])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /routes\[0\]\.policies\.oidc\.logoutPath: must differ from the redirect URI's path/)
})
