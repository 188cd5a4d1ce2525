/**
 * Mesh connections in the metrics: the engine publishes `portico:upstream:hbone`
 * (mesh/hbone-pool.ts) for each HBONE connection (mTLS HTTP/2 to a mesh peer: opened or
 * failed) and each CONNECT tunnel on one (ok, refused by the peer, failed). Plain backend
 * connections are the ones portico_upstream_connect_duration_seconds counts.
 */

import dc from 'node:diagnostics_channel'

export interface HboneEvent {
  peer: string
  address: string
  /** true: a CONNECT stream; absent: the HTTP/2 connection. */
  tunnel?: boolean
  result: string
}

/** Subscribes; returns the function that unsubscribes. */
export function watchHbone (observe: (e: HboneEvent) => void): () => void {
  const on = (message: unknown): void => observe(message as HboneEvent)
  dc.subscribe('portico:upstream:hbone', on)
  return () => dc.unsubscribe('portico:upstream:hbone', on)
}
