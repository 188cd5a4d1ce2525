import { test } from 'node:test'
import assert from 'node:assert/strict'
import { modifyPath, replacePrefixMatch } from '../src/policy/path-modifier.ts'
import { TokenBucket } from '../src/policy/local-rate-limit.ts'
import { canonicalOrigin, checkOriginPattern, normalizeOrigin } from '../src/ir/origin.ts'
import { RouteTable } from '../src/routing/route-table.ts'
import type { RouteIR } from '../src/ir/types.ts'

test('ReplacePrefixMatch follows the Gateway API table, trailing slashes included', () => {
  // Request path, prefix match, replacement, modified path: the HTTPPathModifier table.
  const table: Array<[string, string, string, string]> = [
    ['/foo/bar', '/foo', '/xyz', '/xyz/bar'],
    ['/foo/bar', '/foo', '/xyz/', '/xyz/bar'],
    ['/foo/bar', '/foo/', '/xyz', '/xyz/bar'],
    ['/foo/bar', '/foo/', '/xyz/', '/xyz/bar'],
    ['/foo', '/foo', '/xyz', '/xyz'],
    ['/foo/', '/foo', '/xyz', '/xyz/'],
    ['/foo/bar', '/foo', '', '/bar'],
    ['/foo/', '/foo', '', '/'],
    ['/foo', '/foo', '', '/'],
    ['/foo/', '/foo', '/', '/'],
    ['/foo', '/foo', '/', '/'],
    // A prefix of / matches everything and is replaced as an empty prefix.
    ['/a/b', '/', '/xyz', '/xyz/a/b'],
    ['/', '/', '/xyz', '/xyz/']
  ]
  for (const [path, prefix, replacement, expected] of table) {
    assert.equal(replacePrefixMatch(path, prefix, replacement), expected, `${path} with prefix ${prefix} → ${JSON.stringify(replacement)}`)
  }
  assert.equal(replacePrefixMatch('/foobar', '/foo', '/x'), null, 'not at a segment boundary')
})

test('modifyPath: full replaces the path; prefix needs a prefix match', () => {
  assert.equal(modifyPath('/a/b', { full: '/z' }, null), '/z')
  assert.equal(modifyPath('/a/b', { prefix: '/z' }, { kind: 'prefix', value: '/a' }), '/z/b')
  assert.match((modifyPath('/a/b', { prefix: '/z' }, { kind: 'exact', value: '/a/b' }) as { error: string }).error, /exact path match/)
  assert.match((modifyPath('/a/b', { prefix: '/z' }, null) as { error: string }).error, /no route match/)
})

test('route selection reports the path match that selected the request', () => {
  const route = (key: string, paths: Array<RouteIR['matches'][number]['path']>) => ({
    ir: { key, name: key, hostnames: [], matches: paths.map(path => ({ path, headers: [], query: [] })), policies: {}, backends: [], order: 0 } satisfies RouteIR
  })
  const table = new RouteTable([route('r', [{ kind: 'exact', value: '/x' }, { kind: 'prefix', value: '/api/' }])])
  const input = { method: 'GET', query: '', headers: {} }
  assert.deepEqual(table.select('h', { ...input, path: '/api/v1' }, false).matchedPath, { kind: 'prefix', value: '/api/' })
  assert.deepEqual(table.select('h', { ...input, path: '/x' }, false).matchedPath, { kind: 'exact', value: '/x' })
  assert.equal(table.select('h', { ...input, path: '/nothing' }, false).matchedPath, null)
})

test('token bucket: starts full, fills at interval boundaries, never above maxTokens', () => {
  const b = new TokenBucket({ maxTokens: 10, tokensPerFill: 3, fillIntervalMs: 1000, type: 'requests' }, 0)
  assert.equal(b.tokens, 10)
  b.tokens = 0
  b.refill(999)
  assert.equal(b.tokens, 0, 'no fill before the boundary')
  assert.equal(b.untilAvailable(999), 1)
  b.refill(1000)
  assert.equal(b.tokens, 3)
  b.refill(2500)
  assert.equal(b.tokens, 6, 'one more fill at 2000')
  assert.equal(b.untilAvailable(2500), 500, 'boundaries stay aligned to the start')
  b.refill(60_000)
  assert.equal(b.tokens, 10, 'capped at maxTokens')
})

test('token bucket in debt (LLM tokens taken after the answer): a token again only after enough fills', () => {
  const b = new TokenBucket({ maxTokens: 10, tokensPerFill: 5, fillIntervalMs: 1000, type: 'tokens' }, 0)
  b.tokens -= 18
  assert.equal(b.tokens, -8)
  assert.equal(b.untilAvailable(200), 1800, 'two fills: -8 → -3 → 2')
  b.refill(1000)
  assert.equal(b.tokens, -3)
  assert.equal(b.untilAvailable(1000), 1000)
  b.refill(2000)
  assert.equal(b.tokens, 2)
})

test('origins: canonical forms and allowOrigins patterns', () => {
  assert.equal(canonicalOrigin('https://WWW.Foo.com'), 'https://www.foo.com:443')
  assert.equal(canonicalOrigin('http://foo.com:8080'), 'http://foo.com:8080')
  assert.equal(canonicalOrigin('http://foo.com/path'), null)
  assert.equal(canonicalOrigin('null'), null)
  assert.equal(checkOriginPattern('*'), null)
  assert.equal(checkOriginPattern('https://*.example.com'), null)
  assert.match(checkOriginPattern('ftp://example.com') ?? '', /http or https/)
  assert.match(checkOriginPattern('example.com') ?? '', /not an origin/)
  assert.equal(normalizeOrigin('https://Example.com:443'), 'https://example.com')
  assert.equal(normalizeOrigin('https://example.com/x'), null)
})
