/**
 * A balancer is never a pool, checked by the type checker: `pnpm run typecheck` covers test
 * files, and each `@ts-expect-error` below fails it ("unused directive") the day the
 * conversion it marks compiles again. The 503 `dispatcher.compose is not a function` of an
 * HTTP/2 TLS backend with a server name and several endpoints came from
 * `(dispatcher as Pool).compose(...)` on what was an EndpointBalancer.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { Pool } from 'undici'
import { EndpointBalancer, type EndpointPool, type PoolFactory } from '../src/http/endpoint-balancer.ts'
import { H1Pool } from '../src/http/h1-pool.ts'
import type { H2Pool } from '../src/http/h2-pool.ts'

/** Never called: its body is what the type checker judges. */
function conversions (balancer: EndpointBalancer, pool: EndpointPool, either: EndpointPool | EndpointBalancer, makePool: PoolFactory): unknown[] {
  return [
    // @ts-expect-error a balancer is not undici's Pool
    balancer as Pool,
    // @ts-expect-error what a backend's entry holds (a pool or a balancer) is not undici's Pool: the old cast
    either as Pool,
    // @ts-expect-error an endpoint's pool is not undici's Pool either (undici's is wrapped, http/h2-pool.ts)
    pool as Pool,
    // @ts-expect-error a balancer is not an HTTP/2 pool
    balancer as H2Pool,
    // @ts-expect-error a balancer is not an HTTP/1.1 pool
    balancer as H1Pool,
    // @ts-expect-error nor is it an endpoint's pool
    balancer as EndpointPool,
    // @ts-expect-error a pool factory cannot make a balancer (a balancer over balancers)
    ((origin: string) => new EndpointBalancer([origin], undefined, makePool)) satisfies PoolFactory
  ]
}

test('a pool factory makes pools; a balancer balances over them (the conversions above do not compile)', async () => {
  assert.equal(typeof conversions, 'function')
  const balancer = new EndpointBalancer(['http://127.0.0.1:1', 'http://127.0.0.1:2'], undefined, origin => new H1Pool(origin))
  assert.equal(balancer.total, 2)
  await balancer.close()
})
