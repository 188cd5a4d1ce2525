/**
 * A gateway's client-connection settings (`timeout.http`, `clientIPDetection`, `upgrades`, `path`, `tracing`)
 * to IR. Only what the file sets is written: an absent field means the default
 * (http/frontend.ts), so configs that do not use these settings keep their IR and version.
 */

import type { GatewayConfig } from './schema.ts'
import type { FrontendIR, PathNormalizationIR } from '../ir/types.ts'
import { parseDuration } from '../util/duration.ts'

export interface FrontendTranslation {
  frontend?: FrontendIR
  /** The bind's request-head timeout, when the gateway sets one (0 = off). */
  requestHeadersTimeoutMs?: number
}

export function frontendToIR (gw: GatewayConfig): FrontendTranslation {
  const out: FrontendTranslation = {}
  const http = gw.timeout?.http
  if (http?.requestHeadersTimeout !== undefined) out.requestHeadersTimeoutMs = durationOrOff(http.requestHeadersTimeout)
  const frontend: FrontendIR = {}
  if (http?.requestBodyIdleTimeout !== undefined) frontend.requestBodyIdleTimeoutMs = durationOrOff(http.requestBodyIdleTimeout)
  if (http?.requestBodyMinRate !== undefined) frontend.requestBodyMinRate = http.requestBodyMinRate
  if (http?.backendRequestTimeout !== undefined) frontend.backendRequestTimeoutMs = durationOrOff(http.backendRequestTimeout)
  if (http?.streamIdleTimeout !== undefined) frontend.streamIdleTimeoutMs = durationOrOff(http.streamIdleTimeout)
  const hops = gw.clientIPDetection?.xForwardedFor?.numTrustedHops
  if (hops !== undefined) frontend.xffNumTrustedHops = hops
  if (gw.upgrades !== undefined) frontend.upgrades = [...new Set(gw.upgrades.map(u => u.toLowerCase()))]
  if (gw.path !== undefined) {
    const path: PathNormalizationIR = {}
    if (gw.path.escapedSlashesAction !== undefined) path.escapedSlashesAction = gw.path.escapedSlashesAction
    if (gw.path.disableMergeSlashes === true) path.mergeSlashes = false
    if (Object.keys(path).length > 0) frontend.path = path
  }
  const t = gw.tracing
  if (t !== undefined && (t.randomSampling !== undefined || t.clientSampling !== undefined)) {
    frontend.tracing = {
      ...(t.randomSampling !== undefined ? { randomSampling: t.randomSampling } : {}),
      ...(t.clientSampling !== undefined ? { clientSampling: t.clientSampling } : {})
    }
  }
  if (Object.keys(frontend).length > 0) out.frontend = frontend
  return out
}

/** Schema-validated: a duration or "off" (0). A zero duration is "off" too. */
export function durationOrOff (text: string): number {
  return text === 'off' ? 0 : Math.round(parseDuration(text))
}
