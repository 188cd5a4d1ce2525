/**
 * The path normaliser and request-target parser (http/request-target.ts), as a table:
 * RFC 3986 percent-encoding and dot-segment normalisation, slash merging, each
 * escapedSlashesAction, absolute-form, and what is refused.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { hostHeaderProblem, normalizePath, parseRequestTarget, type PathNormalization } from '../src/http/request-target.ts'
import { connectionHeaderProblem } from '../src/http/headers.ts'

const DEFAULTS: PathNormalization = { escapedSlashesAction: 'UnescapeAndRedirect', mergeSlashes: true }

test('normal form: escapes of unreserved characters decoded, dot segments resolved, slashes merged', () => {
  const cases: Array<[string, string]> = [
    ['/', '/'],
    ['/a/b', '/a/b'],
    ['/a/b/', '/a/b/'],
    ['/.well-known/x', '/.well-known/x'],
    ['/a/..b/.c', '/a/..b/.c'],
    ['/a/./b', '/a/b'],
    ['/a/../b', '/b'],
    ['/../../b', '/b'],
    ['/a/b/..', '/a/'],
    ['/a/b/.', '/a/b/'],
    ['/a/..', '/'],
    ['/..', '/'],
    ['//a///b//', '/a/b/'],
    ['/%61%62%63', '/abc'],
    ['/%2e%2E/a', '/a'],
    ['/a/%2e', '/a/'],
    ['/%7e%7E', '/~~'],
    ['/%3a%40%20%25', '/%3A%40%20%25'],
    ['/a%2fb', '/a/b'],
    ['/a%5Cb', '/a/b'],
    ['/a\\..\\b', '/b'],
    ['/é', '/%E9'],
    ['/a"<>^`{|}', '/a%22%3C%3E%5E%60%7B%7C%7D'],
    ['/%252e', '/%252e'],
    ['/a;b=c/d', '/a;b=c/d']
  ]
  for (const [raw, want] of cases) {
    const got = normalizePath(raw, DEFAULTS)
    assert.equal(typeof got === 'string' ? got : got.path, want, raw)
  }
})

test('escaped slashes follow the action', () => {
  const path = (raw: string, escapedSlashesAction: PathNormalization['escapedSlashesAction'], mergeSlashes = true) => normalizePath(raw, { escapedSlashesAction, mergeSlashes })
  assert.deepEqual(path('/a%2Fb', 'UnescapeAndRedirect'), { path: '/a/b', unescapedSlash: true })
  assert.deepEqual(path('/a%2fb', 'UnescapeAndForward'), { path: '/a/b', unescapedSlash: true })
  assert.equal(typeof path('/a%2fb', 'RejectRequest'), 'string')
  assert.equal(typeof path('/a\\b', 'RejectRequest'), 'string')
  assert.deepEqual(path('/a%2fb/%2e%2e%2fc', 'KeepUnchanged'), { path: '/a%2Fb/..%2Fc', unescapedSlash: false })
  assert.deepEqual(path('/a//b%5c', 'KeepUnchanged', false), { path: '/a//b%5C', unescapedSlash: false })
  assert.deepEqual(path('/a/b', 'UnescapeAndRedirect'), { path: '/a/b', unescapedSlash: false })
})

test('refused: bad escapes, relative paths, fragments, other schemes, userinfo', () => {
  for (const url of ['/a%zz', '/a%2', '/a%', 'a/b', '*', '/a#b', 'ftp://h/a', 'http://u@h/a', 'http:///a', 'http://h h/a', 'javascript:alert(1)']) {
    assert.equal(parseRequestTarget(url).ok, false, url)
  }
})

test('absolute-form: the authority is kept apart and the path normalised', () => {
  assert.deepEqual(parseRequestTarget('http://Example.test:8080/a/../b?x=/..'), { ok: true, path: '/b', query: 'x=/..', authority: 'Example.test:8080', redirect: false })
  assert.deepEqual(parseRequestTarget('HTTPS://h'), { ok: true, path: '/', query: '', authority: 'h', redirect: false })
  assert.deepEqual(parseRequestTarget('http://h?q'), { ok: true, path: '/', query: 'q', authority: 'h', redirect: false })
  assert.deepEqual(parseRequestTarget('/a%2fb?c'), { ok: true, path: '/a/b', query: 'c', authority: null, redirect: true })
})

test('Host lines: one, valid', () => {
  assert.equal(hostHeaderProblem(['Host', 'a.test', 'Accept', '*/*']), null)
  assert.equal(hostHeaderProblem(['Accept', '*/*']), null)
  assert.equal(hostHeaderProblem(['host', '[::1]:80']), null)
  assert.notEqual(hostHeaderProblem(['Host', 'a.test', 'HOST', 'b.test']), null)
  for (const bad of ['a b', 'a/b', 'a@b', 'a:b:c', '[::1', 'a\\b', 'a:8x']) assert.notEqual(hostHeaderProblem(['Host', bad]), null, bad)
})

test('a NUL in the path, escaped or raw, is refused; in the query it is the backend\'s business', () => {
  for (const path of ['/a%00b', '/%00', '/a/%00/../b', '/a\u0000b']) {
    assert.match(String(normalizePath(path)), /NUL/, path)
    assert.equal(parseRequestTarget(path).ok, false, path)
  }
  assert.equal(parseRequestTarget('/a?x=%00').ok, true)
})

test('Connection may not name a field the gateway routes, frames or identifies the client by', () => {
  for (const value of [undefined, '', 'close', 'keep-alive', 'Keep-Alive', 'Upgrade', 'close, X-Private', 'TE, close', ['close', 'x-a']]) {
    assert.equal(connectionHeaderProblem(value), null, JSON.stringify(value))
  }
  for (const name of ['Host', 'content-length', 'Transfer-Encoding', 'Forwarded', 'X-Forwarded-For', 'x-forwarded-host', 'X-FORWARDED-PROTO', ':authority', ':path']) {
    assert.match(connectionHeaderProblem(`close, ${name}`) ?? '', /names/, name)
  }
  assert.match(connectionHeaderProblem(['close', 'host']) ?? '', /names host/)
  // Envoy's limit: ten names or more.
  assert.equal(connectionHeaderProblem(Array.from({ length: 9 }, (_, i) => `x-${i}`).join(',')), null)
  assert.match(connectionHeaderProblem(Array.from({ length: 10 }, (_, i) => `x-${i}`).join(',')) ?? '', /10 fields/)
})
