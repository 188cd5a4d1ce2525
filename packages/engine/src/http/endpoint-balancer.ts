/**
 * Round robin over a backend's endpoints, one keep-alive pool each (http/h1-pool.ts for
 * HTTP/1.1, undici's for HTTP/2), with optional passive health (outlier ejection, as Envoy's
 * consecutive-5xx detection): round robin over the endpoints not ejected. Every finished call is an observation: a connection error, a
 * timeout or a 5xx answer counts a failure, anything else resets the count; after
 * `consecutiveFailures` in a row the endpoint is ejected for `ejectionMs`, then gets traffic
 * again (and is ejected again if it keeps failing). With every endpoint ejected, the backend
 * call answers 503 `no healthy backends` without dispatching. The providers of an `ai`
 * backend's failover groups are backends of one endpoint each whose health also counts 429
 * answers (`rateLimited`) and backs off (`backoff`: the k-th ejection in a row lasts k times
 * as long, up to MAX_BACKOFF): pipeline/failover.ts skips the ejected ones.
 *
 * With several data-plane workers (config.workers) the failure counts and ejections live in
 * memory the workers share (EndpointState over util/shared-records.ts): failures seen by
 * any worker count toward one run, and an ejection holds for every worker.
 */

import type { Dispatcher } from 'undici'
import type { PoolCounts, UpstreamDispatcher } from './dispatcher.ts'
import type { H1Pool } from './h1-pool.ts'
import type { LendingHandler } from './h1-connection.ts'
import type { H2Pool } from './h2-pool.ts'
import type { BackendHealthIR } from '../ir/traffic.ts'
import { PorticoError, type PorticoErrorCode } from '../util/errors.ts'
import { Records } from '../util/shared-records.ts'

/** An endpoint's passive-health state: this thread's, or shared by the data-plane workers. */
export interface EndpointState {
  /** Until when (ms since the epoch) the endpoint is ejected; 0 = not. */
  ejectedUntil(): number
  /**
   * Counts a failure; at `threshold` in a row the endpoint is ejected until `until(k)`, k
   * being how many times it was ejected with no success in between, this one included.
   */
  failed(threshold: number, until: (ejections: number) => number): void
  succeeded(): void
}

class LocalEndpointState implements EndpointState {
  private failures = 0
  private ejections = 0
  private until = 0
  ejectedUntil (): number {
    return this.until
  }

  failed (threshold: number, until: (ejections: number) => number): void {
    if (++this.failures < threshold) return
    this.failures = 0
    this.until = until(++this.ejections)
  }

  succeeded (): void {
    this.failures = 0
    this.ejections = 0
  }
}

/** Int32 1 of the record: failures in a row; Float64 1: ejected until; Float64 2: ejections in a row. */
export class SharedEndpointState implements EndpointState {
  private readonly records: Records
  private readonly count: number
  private readonly until: number
  private readonly ejections: number

  constructor (records: Records, record: number) {
    this.records = records
    this.count = Records.int(record, 1)
    this.until = Records.float(record, 1)
    this.ejections = Records.float(record, 2)
  }

  ejectedUntil (): number {
    return this.records.f64[this.until]!
  }

  failed (threshold: number, until: (ejections: number) => number): void {
    if (Atomics.add(this.records.i32, this.count, 1) + 1 < threshold) return
    Atomics.store(this.records.i32, this.count, 0)
    // Only the worker whose failure reached the threshold gets here (the count went back to 0).
    const ejections = ++this.records.f64[this.ejections]!
    this.records.f64[this.until] = until(ejections)
  }

  succeeded (): void {
    if (Atomics.load(this.records.i32, this.count) !== 0) Atomics.store(this.records.i32, this.count, 0)
    if (this.records.f64[this.ejections] !== 0) this.records.f64[this.ejections] = 0
  }
}

/** The longest backoff: the k-th ejection in a row lasts min(k, MAX_BACKOFF) × ejectionMs. */
export const MAX_BACKOFF = 10

/** How long an endpoint is ejected for, the `ejections`-th time in a row. */
export function ejectionFor (health: BackendHealthIR, ejections: number): number {
  return health.backoff === true ? health.ejectionMs * Math.min(Math.max(1, ejections), MAX_BACKOFF) : health.ejectionMs
}

/**
 * A 429's `Retry-After` (seconds, or an HTTP date) in ms, as long an ejection it asks for:
 * at most MAX_BACKOFF × ejectionMs (a provider cannot take itself out for longer than the
 * longest backoff); 0 when absent or unreadable.
 */
export function retryAfterMs (value: unknown, health: BackendHealthIR, now: number): number {
  const text = Array.isArray(value) ? value[0] : value
  if (typeof text !== 'string' || text.length > 64) return 0
  const trimmed = text.trim()
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - now
  if (!Number.isFinite(ms) || ms <= 0) return 0
  return Math.min(ms, MAX_BACKOFF * health.ejectionMs)
}

/** Whether an answer of this status counts against the endpoint (5xx; 429 too when `rateLimited`). */
export function failedStatus (health: BackendHealthIR, status: number): boolean {
  return status >= 500 || (status === 429 && health.rateLimited === true)
}

/**
 * One endpoint's pool. The concrete classes, not UpstreamDispatcher, which a balancer is too:
 * a balancer can then never be made where a pool is expected, nor cast to one (or to
 * undici's Pool) -- their private fields make the type checker refuse the conversion.
 */
export type EndpointPool = H1Pool | H2Pool

interface Endpoint {
  origin: string
  pool: EndpointPool
  state: EndpointState
}

/** Makes an endpoint's pool. */
export type PoolFactory = (origin: string) => EndpointPool

/** Errors that say nothing about the endpoint: the client left, a retry or a policy dropped the answer. */
const NOT_THE_ENDPOINT = new Set<PorticoErrorCode>(['PORTICO_DOWNSTREAM_CLOSED', 'PORTICO_RETRY', 'PORTICO_RESPONSE_REPLACED'])

export class EndpointBalancer implements UpstreamDispatcher {
  private endpoints: Endpoint[] = []
  private next = 0
  /** Undefined: no passive health, every endpoint takes its turn. */
  private health: BackendHealthIR | undefined
  private readonly makePool: PoolFactory
  private readonly now: () => number
  private readonly stateOf: (origin: string) => EndpointState

  constructor (origins: string[], health: BackendHealthIR | undefined, makePool: PoolFactory, now: () => number = Date.now, stateOf?: (origin: string) => EndpointState | undefined) {
    this.health = health
    this.makePool = makePool
    this.now = now
    this.stateOf = origin => stateOf?.(origin) ?? new LocalEndpointState()
    this.update(origins, health)
  }

  /** New endpoints or settings (a reload): kept endpoints keep their pools and state. */
  update (origins: string[], health: BackendHealthIR | undefined): void {
    this.health = health
    const old = new Map(this.endpoints.map(e => [e.origin, e]))
    this.endpoints = origins.map(origin => old.get(origin) ?? { origin, pool: this.makePool(origin), state: this.stateOf(origin) })
    for (const [origin, e] of old) if (!origins.includes(origin)) e.pool.close().catch(() => {})
    this.next = 0
  }

  /** Endpoints currently ejected (their origins). */
  ejected (): string[] {
    const now = this.now()
    return this.endpoints.filter(e => e.state.ejectedUntil() > now).map(e => e.origin)
  }

  /** Passive health is on (ejections happen). */
  get watchesHealth (): boolean {
    return this.health !== undefined
  }

  get total (): number {
    return this.endpoints.length
  }

  get healthy (): number {
    const now = this.now()
    return this.endpoints.filter(e => e.state.ejectedUntil() <= now).length
  }

  get stats (): PoolCounts {
    const out = { connected: 0, free: 0, pending: 0, running: 0 }
    for (const e of this.endpoints) {
      const s = e.pool.stats
      out.connected += s.connected
      out.free += s.free
      out.pending += s.pending
      out.running += s.running
    }
    return out
  }

  dispatch (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const n = this.endpoints.length
    if (this.health === undefined && n > 0) {
      const e = this.endpoints[this.next % n]!
      this.next = (this.next + 1) % n
      return e.pool.dispatch(options, handler)
    }
    const now = this.now()
    for (let i = 0; i < n; i++) {
      const index = (this.next + i) % n
      const e = this.endpoints[index]!
      if (e.state.ejectedUntil() > now) continue
      this.next = (index + 1) % n
      return e.pool.dispatch(options, this.observe(e, handler))
    }
    handler.onResponseError?.(null as unknown as Dispatcher.DispatchController, new PorticoError('PORTICO_NO_HEALTHY_ENDPOINT', 'every endpoint is ejected (passive health)'))
    return true
  }

  private observe (e: Endpoint, handler: Dispatcher.DispatchHandler): LendingHandler {
    const health = this.health!
    let seen = false
    const record = (failed: boolean, retryAfterMs = 0): void => {
      if (seen) return
      seen = true
      if (!failed) e.state.succeeded()
      else e.state.failed(health.consecutiveFailures, k => this.now() + Math.max(ejectionFor(health, k), retryAfterMs))
    }
    return {
      onRequestStart: (c, context) => handler.onRequestStart?.(c, context),
      onRequestUpgrade: (c, status, headers, socket) => {
        record(false)
        handler.onRequestUpgrade?.(c, status, headers, socket)
      },
      onResponseStart: (c, status, headers, message) => {
        const failed = failedStatus(health, status)
        record(failed, failed && status === 429 && health.rateLimited === true ? retryAfterMs(headers['retry-after'], health, this.now()) : 0)
        handler.onResponseStart?.(c, status, headers, message)
      },
      onResponseData: (c, chunk) => handler.onResponseData?.(c, chunk),
      // It keeps no chunk: whether they are let go is the inner handler's to say (LendingHandler).
      chunkReleased: () => (handler as LendingHandler).chunkReleased?.() === true,
      onResponseEnd: (c, trailers) => handler.onResponseEnd?.(c, trailers),
      onResponseError: (c, err) => {
        if (!NOT_THE_ENDPOINT.has((err as PorticoError).code)) record(true)
        handler.onResponseError?.(c, err)
      }
    }
  }

  async close (): Promise<void> {
    await Promise.allSettled(this.endpoints.map(e => e.pool.close()))
  }

  async destroy (): Promise<void> {
    await Promise.allSettled(this.endpoints.map(e => e.pool.destroy()))
  }
}
