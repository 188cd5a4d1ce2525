import { test } from 'node:test'
import assert from 'node:assert/strict'
import { hostOnly, hostnameMatches, intersectHostnames, intersectHostnamesWithOrigins } from '../src/routing/hostname.ts'

test('host header normalisation', () => {
  assert.equal(hostOnly('Example.COM:8080'), 'example.com')
  assert.equal(hostOnly('[::1]:3000'), '[::1]')
  assert.equal(hostOnly('example.com.'), 'example.com')
  assert.equal(hostOnly(undefined), '')
})

test('wildcards are suffix matches needing one more label', () => {
  assert.ok(hostnameMatches('*.example.com', 'a.example.com'))
  assert.ok(hostnameMatches('*.example.com', 'a.b.example.com'))
  assert.ok(!hostnameMatches('*.example.com', 'example.com'))
  assert.ok(!hostnameMatches('*.example.com', 'aexample.com'))
  assert.ok(hostnameMatches('a.example.com', 'a.example.com'))
})

test('listener and route hostnames intersect as in the Gateway API', () => {
  assert.deepEqual(intersectHostnames(undefined, ['a.com']), ['a.com'])
  assert.deepEqual(intersectHostnames('a.com', []), [])
  assert.deepEqual(intersectHostnames('*.example.com', ['foo.example.com', 'other.org']), ['foo.example.com'])
  assert.deepEqual(intersectHostnames('foo.example.com', ['*.example.com']), ['foo.example.com'])
  assert.deepEqual(intersectHostnames('*.foo.example.com', ['*.example.com']), ['*.foo.example.com'])
  assert.equal(intersectHostnames('a.com', ['b.com']), null)
})

test('intersectHostnamesWithOrigins: the route\'s own hostname behind each served one, only when one differs', () => {
  assert.deepEqual(intersectHostnamesWithOrigins('abc.example.com', ['*.example.com']), { hostnames: ['abc.example.com'], hostnameOrigins: ['*.example.com'] })
  // Two route hostnames give the same name: the more specific one is its origin.
  assert.deepEqual(intersectHostnamesWithOrigins('abc.example.com', ['*.com', 'abc.example.com', '*.example.com']), { hostnames: ['abc.example.com'] })
  assert.deepEqual(intersectHostnamesWithOrigins('*.example.com', ['*.com', 'x.example.com']), { hostnames: ['*.example.com', 'x.example.com'], hostnameOrigins: ['*.com', 'x.example.com'] })
  assert.deepEqual(intersectHostnamesWithOrigins('*.example.com', ['a.example.com']), { hostnames: ['a.example.com'] })
  assert.deepEqual(intersectHostnamesWithOrigins(undefined, ['*.com']), { hostnames: ['*.com'] })
  assert.equal(intersectHostnamesWithOrigins('a.org', ['*.com']), null)
})
