/**
 * selectStreamRoute: which TLSRoute a connection's SNI name picks. Routes narrowed to the
 * same name by the listener rank by their own hostnames (GatewayRouteHostnameIntersectionPrecedence).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { selectStreamRoute } from '../src/stream/stream-proxy.ts'
import type { StreamRouteIR } from '../src/ir/types.ts'

type Listener = Parameters<typeof selectStreamRoute>[0]

function listener (routes: Array<Partial<StreamRouteIR> & { key: string }>): Listener {
  return { streamRoutes: routes.map((r, i) => ({ ir: { name: r.key, kind: 'tls', hostnames: [], backends: [], order: i, ...r } })) } as unknown as Listener
}

test('an older route narrowed to the SNI name loses to a newer one for that name itself', () => {
  const l = listener([
    { key: 'older-wild', hostnames: ['abc.example.com'], hostnameOrigins: ['*.example.com'] },
    { key: 'newer-exact', hostnames: ['abc.example.com'] }
  ])
  assert.equal(selectStreamRoute(l, 'abc.example.com')?.ir.key, 'newer-exact')
})

test('*.com narrowed to *.example.com loses to *.example.com; without origins the older route wins the tie', () => {
  const wild = listener([
    { key: 'older-com', hostnames: ['*.example.com'], hostnameOrigins: ['*.com'] },
    { key: 'newer-example', hostnames: ['*.example.com'] }
  ])
  assert.equal(selectStreamRoute(wild, 'abc.example.com')?.ir.key, 'newer-example')
  const plain = listener([{ key: 'older', hostnames: ['*.example.com'] }, { key: 'newer', hostnames: ['*.example.com'] }])
  assert.equal(selectStreamRoute(plain, 'abc.example.com')?.ir.key, 'older')
})
