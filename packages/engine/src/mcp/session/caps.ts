/**
 * How many sessions a backend may hold: maxSessions (the least recently active ones go past
 * it), and the stdio process cap.
 *
 * A stdio target costs a process per session (tens of MB each), so it runs at most
 * maxProcesses processes (default 8, its warm spare included). Room is reserved before any
 * process starts. At the cap a new session first closes the least recently active session
 * that looks abandoned (no GET stream open, nothing in flight); with none, it is refused
 * (HTTP 503) rather than cutting off a connected client — as Envoy's and nginx's connection
 * limits refuse the newcomer.
 */

import type { McpBackendSpecIR } from '../../ir/types.ts'
import type { McpSession } from './session.ts'

const DEFAULT_MAX_SESSIONS = 1000
/** Absent in older IR: a stdio target runs at most this many processes (the spare included). */
const DEFAULT_STDIO_MAX_PROCESSES = 8

/**
 * A new session of a backend whose stdio targets run their maxProcesses processes, none of
 * them held by a session that looks abandoned: answered HTTP 503 (mcp/client/streamable.ts).
 */
export class StdioCapacityError extends Error {
  readonly backend: string
  readonly maxProcesses: number
  constructor (backend: string, maxProcesses: number) {
    super(`backend ${backend}: its stdio targets run their maxProcesses (${maxProcesses}) processes, each held by a session in use; try again later`)
    this.backend = backend
    this.maxProcesses = maxProcesses
  }
}

/** Most sessions of a backend that may hold its stdio processes at once (its targets' smallest maxProcesses), or null without stdio targets. */
export function stdioProcessCap (spec: McpBackendSpecIR): number | null {
  let cap: number | null = null
  for (const t of spec.targets) if (t.kind === 'stdio') cap = Math.min(cap ?? Infinity, t.maxProcesses ?? DEFAULT_STDIO_MAX_PROCESSES)
  return cap
}

/** Most live sessions of the backend (default 1000). */
export function maxSessions (spec: McpBackendSpecIR): number {
  return spec.maxSessions ?? DEFAULT_MAX_SESSIONS
}

/** The sessions to close so that `keep` fits under the backend's maxSessions: the least recently active of the others. */
export function overMaxSessions (sessions: Iterable<McpSession>, spec: McpBackendSpecIR, backendKey: string, keep: McpSession): McpSession[] {
  const max = maxSessions(spec)
  const mine = [...sessions].filter(s => s.backendKey === backendKey && s !== keep)
  if (mine.length + 1 <= max) return []
  mine.sort((a, b) => a.lastActivity - b.lastActivity)
  return mine.slice(0, mine.length + 1 - max)
}

/** What admitting a session under the stdio process cap needs from the gateway. */
export interface AdmitOptions {
  cap: number
  /** Sessions of the backend holding its stdio processes now (the reservations included). */
  holding: () => number
  /** The backend's live sessions, among which one that looks abandoned may be closed. */
  sessions: () => Iterable<McpSession>
  /** Ends a session; resolves once its processes have exited (they count until then). */
  evict: (session: McpSession) => Promise<void>
  reservations: Reservations
  onEvict?: () => void
}

/**
 * Room for one more session holding the backend's stdio processes, reserved before any
 * process starts (the returned function gives the reservation back once the session is
 * live or failed). At the cap, the least recently active session that looks abandoned is
 * closed first, and its processes have exited before the new ones start; with none,
 * StdioCapacityError.
 */
export async function admitUnderCap (backendName: string, backendKey: string, o: AdmitOptions): Promise<() => void> {
  while (o.holding() >= o.cap) {
    const victim = abandonedSession(o.sessions(), backendKey)
    if (victim === undefined) throw new StdioCapacityError(backendName, o.cap)
    o.onEvict?.()
    await o.evict(victim)
  }
  return o.reservations.reserve(backendKey)
}

/**
 * The least recently active session of the backend that looks abandoned: no GET stream
 * open, nothing in flight. One with a GET stream is a connected client, never cut off.
 */
function abandonedSession (sessions: Iterable<McpSession>, backendKey: string): McpSession | undefined {
  let victim: McpSession | undefined
  for (const s of sessions) {
    if (s.backendKey !== backendKey || s.busy || s.stream.connected) continue
    if (victim === undefined || s.lastActivity < victim.lastActivity) victim = s
  }
  return victim
}

/**
 * Sessions admitted under the stdio process cap and still starting, by backend key: they
 * hold no entry in the gateway's maps yet, but their processes are starting.
 */
export class Reservations {
  private readonly byKey = new Map<string, number>()

  count (backendKey: string): number {
    return this.byKey.get(backendKey) ?? 0
  }

  /** One more for the backend; the returned function gives it back (once, however often called). */
  reserve (backendKey: string): () => void {
    this.byKey.set(backendKey, (this.byKey.get(backendKey) ?? 0) + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = (this.byKey.get(backendKey) ?? 1) - 1
      if (left > 0) this.byKey.set(backendKey, left)
      else this.byKey.delete(backendKey)
    }
  }
}
