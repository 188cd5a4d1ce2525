/**
 * Per-backend request counts, latency and a passive health score, fed by every finished
 * request. /config_dump shows them and `porticoctl proxy config backends` prints them as
 * HEALTH, REQUESTS and LATENCY.
 *
 * Health is an exponentially weighted success ratio (1.00 = every recent call succeeded),
 * where a failure is a transport error, a timeout or a 5xx from the backend. Latency is an
 * exponentially weighted mean of the time to response headers.
 */

import type { RequestContext } from '../pipeline/context.ts'

export interface BackendStat {
  requests: number
  failures: number
  /** 0..1, 1 = healthy. */
  health: number
  /** ms to response headers (EWMA); null before the first response. */
  latencyMs: number | null
}

const HEALTH_ALPHA = 0.1
const LATENCY_ALPHA = 0.2

export class BackendStats {
  private readonly stats = new Map<string, BackendStat>()

  record (ctx: RequestContext): void {
    const backend = ctx.backend
    if (backend === null || ctx.upstreamStart === 0) return
    let s = this.stats.get(backend.key)
    if (s === undefined) this.stats.set(backend.key, s = { requests: 0, failures: 0, health: 1, latencyMs: null })
    s.requests++
    const failed = ctx.reason === 'UpstreamFailure' || ctx.reason === 'Timeout' || (ctx.reason === 'Upstream' && ctx.status >= 500)
    if (failed) s.failures++
    s.health += HEALTH_ALPHA * ((failed ? 0 : 1) - s.health)
    if (ctx.upstreamHeadersAt > 0) {
      const ms = ctx.upstreamHeadersAt - ctx.upstreamStart
      s.latencyMs = s.latencyMs === null ? ms : s.latencyMs + LATENCY_ALPHA * (ms - s.latencyMs)
    }
  }

  get (backendKey: string): BackendStat {
    return this.stats.get(backendKey) ?? { requests: 0, failures: 0, health: 1, latencyMs: null }
  }

  /** Drops stats of backends that left the config. */
  retain (keys: Set<string>): void {
    for (const key of this.stats.keys()) if (!keys.has(key)) this.stats.delete(key)
  }
}
