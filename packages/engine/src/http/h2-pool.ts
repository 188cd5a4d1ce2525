/**
 * Keep-alive HTTP/2 connections to one backend endpoint (h2c, h2 by ALPN, gRPC): undici's
 * Pool behind the same small interface as Portico's HTTP/1.1 pool (http/h1-pool.ts), with
 * the configured TLS server name pinned on every request -- undici takes a request's SNI from
 * its Host header over the connect options' servername, so without the pin a Host of
 * `api.example.com` would be sent as SNI and checked against the backend's certificate.
 *
 * Undici's Pool is never handed out itself: what the balancer and the upstream call hold is
 * an H2Pool, H1Pool or EndpointBalancer, which are distinct types (private fields), so the
 * type checker refuses treating one as another (the 503 `dispatcher.compose is not a
 * function` came from casting a balancer to undici's Pool to compose the server name in).
 */

import type { Dispatcher, Pool } from 'undici'
import type { PoolCounts, UpstreamDispatcher } from './dispatcher.ts'
import { undici } from '../util/undici.ts'

export class H2Pool implements UpstreamDispatcher {
  /** The one endpoint this pool connects to (`https://10.0.0.1:8443`). */
  readonly origin: string
  private readonly pool: Pool
  private readonly serverName: string | undefined

  constructor (origin: string, options: Pool.Options, serverName?: string) {
    this.origin = origin
    this.pool = new (undici().Pool)(origin, options)
    this.serverName = serverName
  }

  get stats (): PoolCounts {
    return this.pool.stats
  }

  dispatch (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (this.serverName === undefined) return this.pool.dispatch(options, handler)
    // `servername` is read by undici's client (a change reconnects) though its types omit it.
    const pinned: Dispatcher.DispatchOptions & { servername: string } = { ...options, servername: this.serverName }
    return this.pool.dispatch(pinned, handler)
  }

  close (): Promise<void> {
    return this.pool.close()
  }

  destroy (): Promise<void> {
    return this.pool.destroy()
  }
}
