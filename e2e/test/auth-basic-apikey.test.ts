/**
 * basicAuth with an htpasswd file made by the real `htpasswd` (bcrypt, apr1, SHA), and
 * apiKey with keys in clear and hashed, in a header or the query; identities feed CEL rules
 * and never reach the backend or the config dump.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { requireTool } from '@portico/testkit/tools'

let backend: Backend
let portico: PorticoProcess | undefined
let admin: string

before(async () => {
  backend = await startEchoBackend('app')
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

async function start (t: import('node:test').TestContext): Promise<PorticoProcess | null> {
  if (portico !== undefined) return portico
  const htpasswd = requireTool(t, 'HTPASSWD', 'htpasswd')
  if (htpasswd === null) return null
  const dir = makeTempDir()
  const file = join(dir, 'users.htpasswd')
  const line = (flag: string, user: string, password: string) => execFileSync(htpasswd, [flag, user, password], { encoding: 'utf8' }).trim()
  writeFileSync(file, [line('-nbB', 'bcrypt-user', 'pw-bcrypt'), line('-nbm', 'apr1-user', 'pw-apr1'), line('-nbs', 'sha-user', 'pw-sha')].join('\n') + '\n')
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    dir,
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        {
          name: 'basic',
          matches: [{ path: { pathPrefix: '/basic' } }],
          policies: { basicAuth: { htpasswd: { file: 'users.htpasswd' }, realm: 'portico test' }, authorization: { rules: [{ deny: 'basicAuth.username == "sha-user" && request.path == "/basic/admin"' }] } },
          backends: [{ host: backend.host }]
        },
        {
          name: 'keys',
          matches: [{ path: { pathPrefix: '/keys' } }],
          policies: {
            apiKey: {
              keys: [
                { key: 'clear-key-123456', name: 'clear', metadata: { tier: 'gold' } },
                { keyHash: `sha256:${createHash('sha256').update('hashed-key-abcdef').digest('hex')}`, name: 'hashed', metadata: { tier: 'free' } }
              ]
            },
            authorization: { rules: ['apiKey.metadata.tier == "gold" || request.method == "GET"'] }
          },
          backends: [{ host: backend.host }]
        },
        {
          name: 'querykey',
          matches: [{ path: { pathPrefix: '/q' } }],
          policies: { apiKey: { keys: [{ key: 'query-key-000000' }], location: { query: 'api_key' } } },
          backends: [{ host: backend.host }]
        }
      ]
    })
  })
  return portico
}

async function call (path: string, headers: Record<string, string> = {}, method = 'GET') {
  const res = await request(`${portico!.url}${path}`, { method, headers })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, echo: res.statusCode === 200 ? JSON.parse(text) as EchoedRequest : null }
}

const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` })

test('basicAuth: bcrypt, apr1 and SHA entries from htpasswd; bad or missing credentials 401 with a challenge', async t => {
  if (await start(t) === null) return
  for (const [user, pw] of [['bcrypt-user', 'pw-bcrypt'], ['apr1-user', 'pw-apr1'], ['sha-user', 'pw-sha']]) {
    const ok = await call('/basic/x', basic(user!, pw!))
    assert.equal(ok.status, 200, user)
    assert.equal(ok.echo!.headers.authorization, undefined, 'credentials are not forwarded')
  }
  const bad = await call('/basic/x', basic('bcrypt-user', 'wrong'))
  assert.equal(bad.status, 401)
  assert.equal(bad.text, 'basic authentication failure: invalid credentials')
  assert.equal(bad.headers['www-authenticate'], 'Basic realm="portico test", charset="UTF-8"')
  assert.equal((await call('/basic/x')).status, 401)
  assert.equal((await call('/basic/x', basic('nobody', 'x'))).status, 401)
  assert.equal((await call('/basic/admin', basic('sha-user', 'pw-sha'))).status, 403, 'basicAuth.username in a rule')
  assert.equal((await call('/basic/admin', basic('apr1-user', 'pw-apr1'))).status, 200)
})

test('apiKey: clear and hashed keys, metadata in rules, query location; keys never forwarded', async t => {
  if (await start(t) === null) return
  const gold = await call('/keys/x', { authorization: 'Bearer clear-key-123456' }, 'POST')
  assert.equal(gold.status, 200)
  assert.equal(gold.echo!.headers.authorization, undefined)
  assert.equal((await call('/keys/x', { authorization: 'Bearer hashed-key-abcdef' })).status, 200)
  assert.equal((await call('/keys/x', { authorization: 'Bearer hashed-key-abcdef' }, 'POST')).status, 403, 'free tier may only GET')
  const unknown = await call('/keys/x', { authorization: 'Bearer not-a-key' })
  assert.equal(unknown.status, 401)
  assert.equal(unknown.text, 'api key authentication failure: unknown API key')
  assert.equal((await call('/keys/x')).text, 'api key authentication failure: no API key')
  assert.equal((await call('/q/x?api_key=query-key-000000')).status, 200)
  assert.equal((await call('/q/x?api_key=nope')).status, 401)
})

test('secrets stay out of /config_dump', async t => {
  if (await start(t) === null) return
  const dump = await (await request(`${admin}/config_dump`)).body.text()
  assert.ok(!dump.includes('clear-key-123456'), 'a key given in clear is stored hashed')
  assert.ok(!dump.includes('$2y$') && !dump.includes('$apr1$') && !dump.includes('{SHA}'), 'htpasswd entries are redacted')
  assert.match(dump, /"htpasswd": "<redacted>"/)
})
