import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RouteTable, type MatchInput } from '../src/routing/route-table.ts'
import type { RouteIR, RouteMatchIR } from '../src/ir/types.ts'
import { validateRoute } from '../src/ir/validate.ts'

let order = 0
function route (key: string, matches: Array<Partial<RouteMatchIR>>, hostnames: string[] = []): { ir: RouteIR } {
  return {
    ir: {
      key,
      name: key,
      hostnames,
      matches: matches.map(m => ({ path: { kind: 'prefix', value: '/' }, headers: [], query: [], ...m })),
      policies: {},
      backends: [],
      order: order++
    }
  }
}

function select (table: RouteTable<{ ir: RouteIR }>, host: string, input: Partial<MatchInput>): string | null {
  return table.select(host, { method: 'GET', path: '/', query: '', headers: {}, ...input }, false).route?.ir.key ?? null
}

test('exact beats the longest prefix, which beats a shorter prefix, which beats regex', () => {
  const table = new RouteTable([
    route('regex', [{ path: { kind: 'regex', value: '/api/.*' } }]),
    route('short', [{ path: { kind: 'prefix', value: '/api' } }]),
    route('long', [{ path: { kind: 'prefix', value: '/api/v1/' } }]),
    route('exact', [{ path: { kind: 'exact', value: '/api/v1/users' } }])
  ])
  assert.equal(select(table, 'h', { path: '/api/v1/users' }), 'exact')
  assert.equal(select(table, 'h', { path: '/api/v1/users/7' }), 'long')
  assert.equal(select(table, 'h', { path: '/api/v1' }), 'long', 'trailing slash of a prefix is ignored')
  assert.equal(select(table, 'h', { path: '/api/v2' }), 'short')
  assert.equal(select(table, 'h', { path: '/other' }), null)
})

test('prefixes match whole path segments', () => {
  const table = new RouteTable([route('p', [{ path: { kind: 'prefix', value: '/abc' } }])])
  assert.equal(select(table, 'h', { path: '/abc' }), 'p')
  assert.equal(select(table, 'h', { path: '/abc/' }), 'p')
  assert.equal(select(table, 'h', { path: '/abc/def' }), 'p')
  assert.equal(select(table, 'h', { path: '/abcd' }), null)
})

test('regex matches the whole path', () => {
  const table = new RouteTable([route('r', [{ path: { kind: 'regex', value: '/v[0-9]+' } }])])
  assert.equal(select(table, 'h', { path: '/v12' }), 'r')
  assert.equal(select(table, 'h', { path: '/v12/x' }), null)
  assert.equal(select(table, 'h', { path: '/x/v12' }), null)
})

test('with equal paths: method, then more headers, then more query params, then order', () => {
  const p = { kind: 'prefix' as const, value: '/x' }
  const table = new RouteTable([
    route('plain', [{ path: p }]),
    route('query', [{ path: p, query: [{ name: 'a', kind: 'exact', value: '1' }] }]),
    route('oneHeader', [{ path: p, headers: [{ name: 'h1', kind: 'exact', value: 'v' }] }]),
    route('twoHeaders', [{ path: p, headers: [{ name: 'h1', kind: 'exact', value: 'v' }, { name: 'h2', kind: 'regex', value: 'a+' }] }]),
    route('method', [{ path: p, method: 'POST' }]),
    route('plainLater', [{ path: p }])
  ])
  assert.equal(select(table, 'h', { path: '/x', method: 'POST', headers: { h1: 'v', h2: 'aa' } }), 'method')
  assert.equal(select(table, 'h', { path: '/x', headers: { h1: 'v', h2: 'aa' }, query: 'a=1' }), 'twoHeaders')
  assert.equal(select(table, 'h', { path: '/x', headers: { h1: 'v', h2: 'b' }, query: 'a=1' }), 'oneHeader')
  assert.equal(select(table, 'h', { path: '/x', query: 'a=1&a=2' }), 'query', 'first value of a repeated parameter')
  assert.equal(select(table, 'h', { path: '/x', query: 'a=2&a=1' }), 'plain')
  assert.equal(select(table, 'h', { path: '/x' }), 'plain', 'earlier route wins a full tie')
})

test('a route matches if any of its matches does; match order breaks ties within a route', () => {
  const table = new RouteTable([
    route('multi', [{ path: { kind: 'exact', value: '/a' } }, { path: { kind: 'exact', value: '/b' } }])
  ])
  assert.equal(select(table, 'h', { path: '/a' }), 'multi')
  assert.equal(select(table, 'h', { path: '/b' }), 'multi')
  assert.equal(select(table, 'h', { path: '/c' }), null)
})

test('exact hostnames beat wildcards, which beat routes without hostnames; falls through on no match', () => {
  const table = new RouteTable([
    route('any', [{}]),
    route('wild', [{ path: { kind: 'prefix', value: '/w' } }], ['*.example.com']),
    route('deepwild', [{ path: { kind: 'prefix', value: '/w' } }], ['*.foo.example.com']),
    route('exact', [{ path: { kind: 'prefix', value: '/e' } }], ['a.foo.example.com'])
  ])
  assert.equal(select(table, 'a.foo.example.com', { path: '/e' }), 'exact')
  assert.equal(select(table, 'a.foo.example.com', { path: '/w' }), 'deepwild')
  assert.equal(select(table, 'b.example.com', { path: '/w' }), 'wild')
  assert.equal(select(table, 'example.com', { path: '/w' }), 'any', 'a wildcard needs one more label')
  assert.equal(select(table, 'a.foo.example.com', { path: '/z' }), 'any')
})

test('routes sharing a served hostname rank by their own hostname first (GatewayRouteHostnameIntersectionPrecedence)', () => {
  // A listener for abc.example.com: an older route for *.example.com serves abc.example.com
  // (the intersection) with a longer prefix; a newer route for abc.example.com itself wins,
  // and what it does not match falls through to the older one.
  const exact = new RouteTable([
    { ir: { ...route('older-wild', [{ path: { kind: 'prefix', value: '/path/prefix' }, headers: [{ name: 'header-b', kind: 'exact', value: 'B' }] }], ['abc.example.com']).ir, hostnameOrigins: ['*.example.com'] } },
    route('newer-exact', [{ path: { kind: 'prefix', value: '/path' }, headers: [{ name: 'header-a', kind: 'exact', value: 'A' }] }], ['abc.example.com'])
  ])
  assert.equal(select(exact, 'abc.example.com', { path: '/path/prefix/longer', headers: { 'header-a': 'A', 'header-b': 'B' } }), 'newer-exact')
  assert.equal(select(exact, 'abc.example.com', { path: '/path/prefix/longer', headers: { 'header-b': 'B' } }), 'older-wild')
  // A listener for *.example.com: *.com narrowed to *.example.com ranks below *.example.com itself.
  const wild = new RouteTable([
    { ir: { ...route('older-com', [{ path: { kind: 'prefix', value: '/path/prefix' } }], ['*.example.com']).ir, hostnameOrigins: ['*.com'] } },
    route('newer-example', [{ path: { kind: 'prefix', value: '/path' } }], ['*.example.com'])
  ])
  assert.equal(select(wild, 'abc.example.com', { path: '/path/prefix/longer' }), 'newer-example')
  // Without origins (standalone, no narrowing) the older, longer prefix wins as before.
  const plain = new RouteTable([
    route('older', [{ path: { kind: 'prefix', value: '/path/prefix' } }], ['abc.example.com']),
    route('newer', [{ path: { kind: 'prefix', value: '/path' } }], ['abc.example.com'])
  ])
  assert.equal(select(plain, 'abc.example.com', { path: '/path/prefix/longer' }), 'older')
  // A malformed origins list (hostile IR) counts as the served hostnames.
  const bad = new RouteTable([
    { ir: { ...route('older', [{ path: { kind: 'prefix', value: '/path/prefix' } }], ['abc.example.com']).ir, hostnameOrigins: [42 as unknown as string] } },
    route('newer', [{ path: { kind: 'prefix', value: '/path' } }], ['abc.example.com'])
  ])
  assert.equal(select(bad, 'abc.example.com', { path: '/path/prefix/longer' }), 'older')
})

test('validateRoute: hostnameOrigins must give one hostname per served hostname', () => {
  const r = route('r', [{}], ['abc.example.com']).ir
  assert.deepEqual(validateRoute({ ...r, hostnameOrigins: ['*.example.com'] }), [])
  for (const bad of [['*.example.com', '*.com'], [''], [42], 'abc'] as unknown as string[][]) {
    assert.deepEqual(validateRoute({ ...r, hostnameOrigins: bad }).map(d => d.path.join('.')), ['hostnameOrigins'], JSON.stringify(bad))
  }
})

test('evaluated routes are listed in the order they were tried', () => {
  const table = new RouteTable([
    route('a', [{ path: { kind: 'exact', value: '/a' } }]),
    route('b', [{ path: { kind: 'prefix', value: '/b' } }]),
    route('c', [{}])
  ])
  const result = table.select('h', { method: 'GET', path: '/b/1', query: '', headers: {} }, true)
  assert.equal(result.route?.ir.key, 'b')
  assert.deepEqual(result.evaluated, ['a', 'b'])
})
