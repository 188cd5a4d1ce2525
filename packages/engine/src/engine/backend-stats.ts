/**
 * Per-backend request counts, latency and a passive health score, fed by every finished
 * request. /config_dump shows them and `porticoctl proxy config backends` prints them as
 * HEALTH, REQUESTS and LATENCY.
 *
 * Health is the share of recent calls that succeeded, each call weighing 0.9 times the one
 * after it (about the last 10-20 calls count): sum 0.9^age · success / sum 0.9^age, over the
 * calls made so far. It is exact from the first call on -- one call that failed is 0.00, one
 * of two 0.47 -- where a plain moving average started at 1 would still say 0.90 after a
 * single failure. A failure is a transport error, a timeout or a 5xx from the backend; 1
 * before any call. How it is coloured: @portico/trace-view's backend-health.ts. Latency is an
 * exponentially weighted mean of the time to response headers.
 *
 * A backend with passive health (outlier ejection) also reports its endpoints, and its
 * health is at most the share of endpoints not ejected (2 of 4 ejected: at most 0.50).
 * Retried attempts and mirrored copies count as calls of the backend they went to.
 *
 * With several data-plane workers the figures live in shared records (engine/shared-state.ts),
 * so every worker's calls feed one set per backend.
 */

import type { RequestContext } from '../request/context.ts'
import { Records } from '../util/shared-records.ts'
import { STATS, type SharedBackendState } from './shared-state.ts'

export interface BackendStat {
  requests: number
  failures: number
  /** 0..1, 1 = healthy. */
  health: number
  /** ms to response headers (EWMA); null before the first response. */
  latencyMs: number | null
  /** Passive health: endpoints not ejected, all endpoints, and the ejected ones. */
  endpoints?: { healthy: number, total: number, ejected: string[] }
}

const HEALTH_ALPHA = 0.1
const LATENCY_ALPHA = 0.2

/** The weighted sums behind `health`: sum weight · success and sum weight. */
interface HealthSums { ok: number, weight: number }

export class BackendStats {
  private readonly stats = new Map<string, BackendStat>()
  private readonly sums = new Map<string, HealthSums>()
  /** Passive health of a backend's endpoints (the upstream pools know it), or null. */
  endpointHealth: ((backendKey: string) => { healthy: number, total: number, ejected: string[] } | null) | null = null
  /** Set when data-plane workers share the figures. */
  shared: SharedBackendState | null = null

  record (ctx: RequestContext): void {
    const backend = ctx.backend
    if (backend === null || ctx.upstreamStart === 0) return
    const failed = ctx.reason === 'UpstreamFailure' || ctx.reason === 'Timeout' || (ctx.reason === 'Upstream' && ctx.status >= 500)
    this.recordCall(backend.key, failed, ctx.upstreamHeadersAt > 0 ? ctx.upstreamHeadersAt - ctx.upstreamStart : null)
  }

  /** One backend call that is not a request's last (a retried attempt, a mirrored copy). */
  recordCall (backendKey: string, failed: boolean, latencyMs: number | null): void {
    const record = this.shared?.statsRecord(backendKey)
    if (record !== undefined) return this.recordShared(this.shared!.records, record, failed, latencyMs)
    let s = this.stats.get(backendKey)
    if (s === undefined) this.stats.set(backendKey, s = { requests: 0, failures: 0, health: 1, latencyMs: null })
    s.requests++
    if (failed) s.failures++
    let h = this.sums.get(backendKey)
    if (h === undefined) this.sums.set(backendKey, h = { ok: 0, weight: 0 })
    h.ok = h.ok * (1 - HEALTH_ALPHA) + (failed ? 0 : 1)
    h.weight = h.weight * (1 - HEALTH_ALPHA) + 1
    s.health = h.ok / h.weight
    if (latencyMs !== null) s.latencyMs = s.latencyMs === null ? latencyMs : s.latencyMs + LATENCY_ALPHA * (latencyMs - s.latencyMs)
  }

  private recordShared (r: Records, record: number, failed: boolean, latencyMs: number | null): void {
    const f = r.f64
    const at = (slot: number) => Records.float(record, slot)
    r.lock(record)
    f[at(STATS.requests)]!++
    if (failed) f[at(STATS.failures)]!++
    // The same weighted sums as recordCall's, in the shared record.
    f[at(STATS.ok)] = f[at(STATS.ok)]! * (1 - HEALTH_ALPHA) + (failed ? 0 : 1)
    f[at(STATS.weight)] = f[at(STATS.weight)]! * (1 - HEALTH_ALPHA) + 1
    f[at(STATS.health)] = f[at(STATS.ok)]! / f[at(STATS.weight)]!
    if (latencyMs !== null) {
      const old = f[at(STATS.latencyMs)]!
      f[at(STATS.latencyMs)] = Number.isNaN(old) ? latencyMs : old + LATENCY_ALPHA * (latencyMs - old)
    }
    r.unlock(record)
  }

  private read (backendKey: string): BackendStat | undefined {
    const record = this.shared?.statsRecord(backendKey)
    if (record === undefined) return this.stats.get(backendKey)
    const f = this.shared!.records.f64
    const latency = f[Records.float(record, STATS.latencyMs)]!
    return { requests: f[Records.float(record, STATS.requests)]!, failures: f[Records.float(record, STATS.failures)]!, health: f[Records.float(record, STATS.health)]!, latencyMs: Number.isNaN(latency) ? null : latency }
  }

  get (backendKey: string): BackendStat {
    const s = this.read(backendKey) ?? { requests: 0, failures: 0, health: 1, latencyMs: null }
    const endpoints = this.endpointHealth?.(backendKey) ?? null
    if (endpoints === null || endpoints.total === 0) return s
    return { ...s, health: Math.min(s.health, endpoints.healthy / endpoints.total), endpoints }
  }

  /** Drops stats of backends that left the config. */
  retain (keys: Set<string>): void {
    for (const key of this.stats.keys()) {
      if (keys.has(key)) continue
      this.stats.delete(key)
      this.sums.delete(key)
    }
  }
}
