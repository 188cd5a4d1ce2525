/**
 * What a listener accepts from its clients, defaults filled in: how long a request head, an
 * idle or trickling request body, a backend's response head and an idle response stream may
 * take (docs/configuration.md#timeouts), whether X-Forwarded-* headers from the client are
 * believed, which HTTP/1.1 upgrades reach a backend, and how request paths are normalised.
 * The IR leaves defaults out (an absent field is the default), so a config that does not
 * mention these settings dumps unchanged.
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

/**
 * A request body's minimum rate until the response begins: 240 bytes/s, ASP.NET Core
 * Kestrel's MinRequestBodyDataRate. An idle timeout alone never ends a body that trickles a
 * byte every few seconds, and such a body holds a backend connection (Envoy streams it too;
 * nginx buffers it first). 240 bytes/s is below any real link, and costs a client holding
 * 10,000 connections about 19 Mbit/s.
 */
export const DEFAULT_REQUEST_BODY_MIN_RATE = 240

/**
 * Time to a backend's response headers, for routes that set no timeout: 5 min, what undici
 * (and this gateway's pools before) used. Envoy's route timeout is 15 s, but it covers the
 * whole response and has to be turned off for streams; LLM calls without streaming often
 * take minutes before the first byte. agentgateway sets none.
 */
export const DEFAULT_BACKEND_REQUEST_TIMEOUT_MS = 300_000

/**
 * A response stream with no progress: 5 min, Envoy's stream_idle_timeout. SSE keep-alive
 * comments (15-30 s in most servers), LLM tokens and Anthropic's `ping` events all come far
 * more often; a stream quiet for 5 min is most likely dead.
 */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 300_000

/** WebSocket only, as Envoy Gateway and the Gateway API implementations allow by default. */
export const DEFAULT_UPGRADES: readonly string[] = ['websocket']

export interface FrontendSettings {
  requestBodyIdleTimeoutMs: number
  requestBodyMinRate: number
  backendRequestTimeoutMs: number
  streamIdleTimeoutMs: number
  xffNumTrustedHops: number
  upgrades: ReadonlySet<string>
  path: PathNormalization
  /** This listener's tracing sampling over config.tracing's; null: the global one. */
  sampling: SamplingIR | null
}

const DEFAULTS: FrontendSettings = {
  requestBodyIdleTimeoutMs: DEFAULT_REQUEST_BODY_IDLE_TIMEOUT_MS,
  requestBodyMinRate: DEFAULT_REQUEST_BODY_MIN_RATE,
  backendRequestTimeoutMs: DEFAULT_BACKEND_REQUEST_TIMEOUT_MS,
  streamIdleTimeoutMs: DEFAULT_STREAM_IDLE_TIMEOUT_MS,
  xffNumTrustedHops: 0,
  upgrades: new Set(DEFAULT_UPGRADES),
  path: DEFAULT_PATH_NORMALIZATION,
  sampling: null
}

export function frontendSettings (ir: FrontendIR | undefined): FrontendSettings {
  if (ir === undefined) return DEFAULTS
  return {
    requestBodyIdleTimeoutMs: ir.requestBodyIdleTimeoutMs ?? DEFAULTS.requestBodyIdleTimeoutMs,
    requestBodyMinRate: ir.requestBodyMinRate ?? DEFAULTS.requestBodyMinRate,
    backendRequestTimeoutMs: ir.backendRequestTimeoutMs ?? DEFAULTS.backendRequestTimeoutMs,
    streamIdleTimeoutMs: ir.streamIdleTimeoutMs ?? DEFAULTS.streamIdleTimeoutMs,
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
