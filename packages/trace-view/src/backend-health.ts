/**
 * How a backend's HEALTH reads, the same in `porticoctl proxy config backends` and the web
 * UI: the words that explain it and the colour thresholds. The number itself comes from the
 * proxy (engine/backend-stats.ts), in /config_dump's `stats.health`.
 */

/** At or above: green (at most about 1 recent call in 20 failed). */
export const HEALTH_GOOD = 0.95
/** At or above (and below HEALTH_GOOD): yellow. Below: red (about 1 recent call in 4 failed, or more). */
export const HEALTH_POOR = 0.75

export type HealthLevel = 'good' | 'degraded' | 'poor' | 'none'

export interface HealthStats {
  requests: number
  health: number
  endpoints?: unknown
}

/** `none`: no call yet, nothing to judge (shown as `-`). */
export function healthLevel (stats: HealthStats | undefined): HealthLevel {
  if (stats === undefined || (stats.requests === 0 && stats.endpoints === undefined)) return 'none'
  return stats.health >= HEALTH_GOOD ? 'good' : stats.health >= HEALTH_POOR ? 'degraded' : 'poor'
}

/** HEALTH as printed: two decimals, `-` before the first call. */
export function healthText (stats: HealthStats | undefined): string {
  return healthLevel(stats) === 'none' ? '-' : stats!.health.toFixed(2)
}

/** The formula and the colours, in words (porticoctl's help, the UI's Backends view). */
export const HEALTH_EXPLAINED = 'HEALTH is the share of recent calls to the backend that succeeded, each call weighing 0.9 times the one after it ' +
  '(about the last 10-20 calls count; 1 call that failed: 0.00; 1 success then 1 failure: 0.47). A failure is a connection error, a timeout or a 5xx answer. ' +
  'With passive health (outlier ejection) it is at most the share of endpoints not ejected. ' +
  `Green from ${HEALTH_GOOD.toFixed(2)}, yellow from ${HEALTH_POOR.toFixed(2)}, red below; - before the first call.`
