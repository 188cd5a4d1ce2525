/**
 * Unit tests: sealed cookies (AES-256-GCM with purpose-bound AAD) and cookie-header plumbing
 * for oidc, and how Envoy CheckResponses map to decisions and header changes for extAuthz.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { deriveKey, keyFromHex, open, readCookie, seal, setCookie, withoutCookies } from '../src/auth/session-cookie.ts'
import { checkResult } from '../src/auth/ext-authz-grpc.ts'
import { applyHeaderMutations, removeHeaders } from '../src/auth/ext-authz-check.ts'
import type { HeaderMap } from '../src/ir/header-map.ts'

const now = () => Math.floor(Date.now() / 1000)

test('sealed cookies open only with the same key and purpose, untampered and unexpired', () => {
  const key = randomBytes(32)
  const sealed = seal(key, 'session', { sub: 'alice' }, now() + 60)
  assert.match(sealed, /^v1\.[A-Za-z0-9_-]+$/)
  assert.deepEqual(open(key, 'session', sealed), { sub: 'alice' })
  assert.equal(open(randomBytes(32), 'session', sealed), null, 'another key')
  assert.equal(open(key, 'login', sealed), null, 'another purpose')
  const raw = Buffer.from(sealed.slice(3), 'base64url')
  raw[20] = raw[20]! ^ 1
  assert.equal(open(key, 'session', `v1.${raw.toString('base64url')}`), null, 'tampered')
  assert.equal(open(key, 'session', sealed.slice(0, -3)), null, 'truncated')
  assert.equal(open(key, 'session', 'garbage'), null)
  assert.equal(open(key, 'session', seal(key, 'session', 1, now() - 1)), null, 'expired')
  assert.notEqual(seal(key, 'session', 1, now() + 60), seal(key, 'session', 1, now() + 60), 'a fresh IV each time')
})

test('keys: 64 hex digits, and per-purpose derivation', () => {
  assert.equal(keyFromHex('ab'.repeat(32)).length, 32)
  assert.throws(() => keyFromHex('abc'), { code: 'PORTICO_BAD_SESSION_KEY' })
  const master = randomBytes(32)
  assert.equal(deriveKey(master, 'a').length, 32)
  assert.ok(!deriveKey(master, 'a').equals(deriveKey(master, 'b')))
  assert.ok(deriveKey(master, 'a').equals(deriveKey(master, 'a')))
})

test('cookie headers: read one, drop some, write Set-Cookie', () => {
  assert.equal(readCookie('a=1; portico_session=v1.x; b=2', 'portico_session'), 'v1.x')
  assert.equal(readCookie('a=1', 'portico_session'), null)
  assert.equal(readCookie(undefined, 'a'), null)
  assert.equal(withoutCookies('a=1; s=2; s_login=3; b=4', new Set(['s', 's_login'])), 'a=1; b=4')
  assert.equal(withoutCookies('s=2', new Set(['s'])), undefined)
  assert.equal(setCookie('s', 'v', { maxAge: 60, secure: true }), 's=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure')
  assert.equal(setCookie('s', '', { maxAge: 0, secure: false }), 's=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax; Expires=Thu, 01 Jan 1970 00:00:00 GMT')
})

test('CheckResponse → decision, as Envoy reads it', () => {
  assert.deepEqual(checkResult({}), { decision: 'allow', requestHeaders: [], removeHeaders: [], responseHeaders: [] }, 'no status is OK')
  const ok = checkResult({
    status: { code: 0 },
    ok_response: {
      headers: [
        { header: { key: 'X-A', value: '1' } },
        { header: { key: 'x-b', value: '2' }, append: { value: false } },
        { header: { key: 'x-c', value: '3' }, append: { value: true } },
        { header: { key: 'x-d', value: '4' }, append_action: 1 },
        { header: { key: 'x-e', value: '5' }, append_action: 3 },
        { header: { key: 'x-g', value: '7' }, append: {} },
        { header: { key: 'bad name', value: 'x' } },
        { header: { key: 'x-f', value: 'a\r\nb' } }
      ],
      headers_to_remove: ['X-Gone']
    }
  })
  assert.equal(ok.decision, 'allow')
  if (ok.decision !== 'allow') return
  assert.deepEqual(ok.requestHeaders.map(h => [h.name, h.action]), [['x-a', 'append'], ['x-b', 'overwrite'], ['x-c', 'append'], ['x-d', 'addIfAbsent'], ['x-e', 'overwriteIfExists'], ['x-g', 'overwrite']])
  assert.deepEqual(ok.removeHeaders, ['x-gone'])

  assert.deepEqual(checkResult({ status: { code: 7 } }), { decision: 'deny', status: 403, headers: [], body: '' })
  const denied = checkResult({ status: { code: 16 }, denied_response: { status: { code: 401 }, headers: [{ header: { key: 'www-authenticate', value: 'Bearer' } }], body: 'no' } })
  assert.deepEqual(denied, { decision: 'deny', status: 401, headers: [{ name: 'www-authenticate', value: 'Bearer', action: 'overwrite' }], body: 'no' })
  const error = checkResult({ status: { code: 13, message: 'boom' }, error_response: { status: { code: 503 }, body: 'down' } })
  assert.deepEqual(error, { decision: 'error', reason: 'service error INTERNAL: boom', headers: [], status: 503, body: 'down' })
})

test('header mutations: append comma-joins, the rest as named; Host and pseudo-headers are untouchable', () => {
  const headers: HeaderMap = { 'x-a': 'old', 'x-b': 'old', 'x-d': 'old', host: 'example.test' }
  applyHeaderMutations(headers, [
    { name: 'x-a', value: 'new', action: 'append' },
    { name: 'x-b', value: 'new', action: 'overwrite' },
    { name: 'x-c', value: 'new', action: 'addIfAbsent' },
    { name: 'x-d', value: 'new', action: 'addIfAbsent' },
    { name: 'x-e', value: 'new', action: 'overwriteIfExists' },
    { name: 'host', value: 'evil.test', action: 'overwrite' }
  ])
  assert.deepEqual(headers, { 'x-a': 'old,new', 'x-b': 'new', 'x-c': 'new', 'x-d': 'old', host: 'example.test' })
  removeHeaders(headers, ['X-A', 'host', ':path'])
  assert.deepEqual(headers, { 'x-b': 'new', 'x-c': 'new', 'x-d': 'old', host: 'example.test' })
})
