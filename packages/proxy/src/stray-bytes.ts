/**
 * A warning when a backend sends bytes nobody asked for: the HTTP/1.1 client publishes
 * `portico:upstream:stray` (http/h1-pool.ts) when a pool first sees them and stops reusing
 * that backend's connections for a while, which costs a new connection per request -- the
 * operator should know why. Published once per hold: at most a line per endpoint a minute.
 */

import dc from 'node:diagnostics_channel'

export type StrayObserver = (origin: string, holdMs: number) => void

/** Subscribes; returns the function that unsubscribes. */
export function watchStrayBytes (observe: StrayObserver): () => void {
  const onStray = (message: unknown): void => {
    const { origin, holdMs } = message as { origin: string, holdMs: number }
    observe(origin, holdMs)
  }
  dc.subscribe('portico:upstream:stray', onStray)
  return () => dc.unsubscribe('portico:upstream:stray', onStray)
}
