/**
 * When a session is closed for being idle. Clients often vanish without DELETE, and each
 * session holds an upstream session and GET stream per target, so those are let go early:
 *  - any session idle past the TTL (default 30 minutes);
 *  - a session whose client closed its GET stream, with no request in flight and no
 *    activity since, after the backend's sessionIdleTimeout (default 60 s);
 *  - a session holding stdio processes (tens of MB each) whose client has no GET stream
 *    open, after the backend's stdioSessionIdleTimeout (default 5 min) without a request.
 * A closed session's id answers 404, and the client initializes again.
 *
 * While the gateway drains it ends the GET streams itself, so a closed stream no longer
 * means a client gone: only the TTL applies then.
 */

import type { McpSession } from './session.ts'
import { stdioProcessCap } from './caps.ts'

export const DEFAULT_SESSION_TTL_MS = 30 * 60_000
const DEFAULT_SESSION_IDLE_TIMEOUT_MS = 60_000
/** Absent in older IR: a stdio session with no GET stream open is closed after 5 idle minutes. */
const DEFAULT_STDIO_SESSION_IDLE_TIMEOUT_MS = 5 * 60_000
/** How often sessions are checked for expiry (the idle grace is counted from the check). */
const SWEEP_MS = 1_000

/** How often the gateway sweeps: every second, or more often with a TTL under 4 s (tests). */
export function sweepInterval (ttlMs: number): number {
  return Math.min(SWEEP_MS, ttlMs / 4)
}

/** Why the session is to be closed now (the message logged), or null to keep it. */
export function expiryReason (session: McpSession, now: number, ttlMs: number, draining: boolean): string | null {
  if (session.lastActivity < now - ttlMs) return 'mcp session expired after being idle'
  if (clientGone(session, now, draining)) return 'mcp session closed: its client went away'
  if (stdioIdle(session, now, draining)) return 'mcp session closed: idle with stdio processes and no GET stream (stdioSessionIdleTimeout)'
  return null
}

/**
 * The client closed its GET stream and has had nothing in flight, nor any activity, for
 * the backend's sessionIdleTimeout. A client that never opened a GET stream is not
 * judged by this (it has nothing to close): the TTL and maxSessions bound it.
 */
function clientGone (session: McpSession, now: number, draining: boolean): boolean {
  const since = session.stream.disconnectedAt
  if (since === null || session.busy || draining) return false
  const grace = session.spec.sessionIdleTimeoutMs ?? DEFAULT_SESSION_IDLE_TIMEOUT_MS
  return now - Math.max(since, session.lastActivity) >= grace
}

/**
 * A session holding stdio processes whose client has no GET stream open and nothing in
 * flight, idle for the backend's stdioSessionIdleTimeout: most likely a client that left
 * without DELETE (one that never opened a GET stream included).
 */
function stdioIdle (session: McpSession, now: number, draining: boolean): boolean {
  if (session.busy || session.stream.connected || draining || stdioProcessCap(session.spec) === null) return false
  const limit = session.spec.stdioSessionIdleTimeoutMs ?? DEFAULT_STDIO_SESSION_IDLE_TIMEOUT_MS
  return now - Math.max(session.stream.disconnectedAt ?? 0, session.lastActivity) >= limit
}
