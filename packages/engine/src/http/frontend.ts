/**
 * What a listener accepts from its clients, defaults filled in: how long a request head and
 * an idle request body may take, whether X-Forwarded-* headers from the client are believed,
 * which HTTP/1.1 upgrades reach a backend, and how request paths are normalised. The IR leaves defaults out (an absent field is
 * the default), so a config that does not mention these settings dumps unchanged.
 */

import type { BindIR, FrontendIR, SamplingIR } from '../ir/types.ts'
import { DEFAULT_PATH_NORMALIZATION, pathNormalization, type PathNormalization } from './request-target.ts'

/**
 * Request head: 10 s. Node's own default is 60 s; a request head is a few hundred bytes, and
 * a client that needs longer is most likely holding the socket on purpose (slowloris).
 */
export const DEFAULT_REQUEST_HEADERS_TIMEOUT_MS = 10_000

/** Request body silence: 5 min, Envoy's (and Envoy Gateway's) stream idle timeout default. */
export const DEFAULT_REQUEST_BODY_IDLE_TIMEOUT_MS = 300_000

/** WebSocket only, as Envoy Gateway and the Gateway API implementations allow by default. */
export const DEFAULT_UPGRADES: readonly string[] = ['websocket']

export interface FrontendSettings {
  requestBodyIdleTimeoutMs: number
  xffNumTrustedHops: number
  upgrades: ReadonlySet<string>
  path: PathNormalization
  /** This listener's tracing sampling over config.tracing's; null: the global one. */
  sampling: SamplingIR | null
}

const DEFAULTS: FrontendSettings = {
  requestBodyIdleTimeoutMs: DEFAULT_REQUEST_BODY_IDLE_TIMEOUT_MS,
  xffNumTrustedHops: 0,
  upgrades: new Set(DEFAULT_UPGRADES),
  path: DEFAULT_PATH_NORMALIZATION,
  sampling: null
}

export function frontendSettings (ir: FrontendIR | undefined): FrontendSettings {
  if (ir === undefined) return DEFAULTS
  return {
    requestBodyIdleTimeoutMs: ir.requestBodyIdleTimeoutMs ?? DEFAULTS.requestBodyIdleTimeoutMs,
    xffNumTrustedHops: ir.xffNumTrustedHops ?? DEFAULTS.xffNumTrustedHops,
    upgrades: ir.upgrades === undefined ? DEFAULTS.upgrades : new Set(ir.upgrades.map(u => u.toLowerCase())),
    path: pathNormalization(ir.path),
    sampling: ir.tracing ?? null
  }
}

export function requestHeadersTimeoutMs (bind: BindIR): number {
  return bind.requestHeadersTimeoutMs ?? DEFAULT_REQUEST_HEADERS_TIMEOUT_MS
}

/**
 * Whether an `Upgrade` request header asks only for protocols the listener passes on. Every
 * listed protocol must be allowed (a backend picks any one it likes, RFC 9110 §7.8); a
 * `name/version` token counts as `name`. An upgrade that is not allowed is served as a plain
 * request: a backend that switched to h2c behind the gateway would take every later request
 * on that connection past routing and policies (h2c smuggling).
 */
export function upgradeAllowed (settings: FrontendSettings, upgrade: string | string[] | undefined): boolean {
  if (upgrade === undefined) return false
  const text = Array.isArray(upgrade) ? upgrade.join(',') : upgrade
  let any = false
  for (const token of text.split(',')) {
    const name = token.trim().toLowerCase()
    if (name === '') continue
    const slash = name.indexOf('/')
    if (!settings.upgrades.has(slash === -1 ? name : name.slice(0, slash))) return false
    any = true
  }
  return any
}
