/**
 * What an external authorization check sends and gets back, independent of the transport
 * (Envoy's gRPC Authorization service or a plain HTTP service), and how the answer's header
 * mutations apply to a header map. Mutations follow Envoy's HeaderValueOption semantics.
 */

import type { HeaderMap } from '../ir/header-map.ts'

export interface Peer {
  address: string
  port: number
}

/** The request as the authorization service sees it. */
export interface CheckInput {
  /** `x-request-id` when the client sent one, else a fresh id. */
  id: string
  method: string
  /** Path and query as sent upstream. */
  path: string
  host: string
  scheme: string
  /** `HTTP/1.1`, `HTTP/2`, ... */
  protocol: string
  /** Body size in bytes from content-length; -1 when unknown. */
  size: number
  /** Lower-case names; repeated headers joined with `,`. */
  headers: Record<string, string>
  /** The buffered body when the policy includes it. */
  body: Buffer | null
  /**
   * The W3C trace context of the check's span (trace/otel.ts callTraceHeaders): gRPC
   * metadata, or headers of the HTTP check replacing the request's own; null: tracing off.
   */
  traceHeaders: Readonly<Record<string, string>> | null
  source: Peer
  destination: Peer
  contextExtensions: Record<string, string>
  /** ms since the epoch when the request arrived. */
  time: number
}

/**
 * Envoy's HeaderValueOption.HeaderAppendAction: append (comma-joined) or add when absent,
 * add only when absent, overwrite or add, overwrite only when present.
 */
export type HeaderAction = 'append' | 'addIfAbsent' | 'overwrite' | 'overwriteIfExists'

export interface HeaderMutation {
  name: string
  value: string
  action: HeaderAction
}

export type CheckResult =
  | {
    decision: 'allow'
    /** Applied to the request sent upstream. */
    requestHeaders: HeaderMutation[]
    removeHeaders: string[]
    /** Applied to the response sent to the client. */
    responseHeaders: HeaderMutation[]
  }
  | { decision: 'deny', status: number, headers: HeaderMutation[], body: string }
  /** The service could not decide (unreachable, timed out, an error status). */
  | { decision: 'error', reason: string, status?: number, headers?: HeaderMutation[], body?: string }

/** Headers that can never be removed or replaced by the service. */
const PROTECTED = new Set(['host', ':authority', ':method', ':path', ':scheme'])

export function applyHeaderMutations (headers: HeaderMap, mutations: readonly HeaderMutation[]): void {
  for (const { name, value, action } of mutations) {
    if (PROTECTED.has(name)) continue
    const existing = headers[name]
    switch (action) {
      case 'append':
        if (existing === undefined) headers[name] = value
        else if (name === 'set-cookie') headers[name] = [...(Array.isArray(existing) ? existing : [existing]), value]
        else headers[name] = `${Array.isArray(existing) ? existing.join(',') : existing},${value}`
        break
      case 'addIfAbsent':
        if (existing === undefined) headers[name] = value
        break
      case 'overwrite':
        headers[name] = value
        break
      case 'overwriteIfExists':
        if (existing !== undefined) headers[name] = value
        break
    }
  }
}

export function removeHeaders (headers: HeaderMap, names: readonly string[]): void {
  for (const name of names) {
    const n = name.toLowerCase()
    if (!PROTECTED.has(n) && !n.startsWith(':')) delete headers[n]
  }
}
