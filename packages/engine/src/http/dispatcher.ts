/**
 * What a backend call needs of a connection pool: undici's dispatch interface
 * (`dispatch(options, handler)` with its DispatchHandler callbacks), which Portico's HTTP/1.1
 * pool (http/h1-pool.ts), the endpoint balancer and undici's own pools all offer. Types
 * only: undici itself loads when an HTTP/2 pool is first made (util/undici.ts).
 */

import type { Dispatcher } from 'undici'

export interface PoolCounts { connected: number, free: number, pending: number, running: number }

/** Dispatches calls: what the upstream call, retries and mirrors hold. */
export interface UpstreamCaller {
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean
}

/** A pool: dispatches, counts its connections, closes. */
export interface UpstreamDispatcher extends UpstreamCaller {
  readonly stats: PoolCounts
  close(): Promise<void>
  destroy(): Promise<void>
}
