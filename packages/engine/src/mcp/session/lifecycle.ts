/**
 * A session's targets from start to end, across replicas: starting them (or resuming the
 * upstream sessions a session id names), what of them goes into the session id, and ending
 * them. Idle expiry and the caps are the gateway's (expiry.ts and caps.ts, by `lastActivity`).
 *
 * A session id carries its own state (session-id.ts) so any replica can serve it: for each
 * target its upstream session and, since the handshake is not repeated on resume, the
 * revision and capability names it negotiated.
 */

import type { McpBackendSpecIR } from '../../ir/types.ts'
import { PorticoError } from '../../util/errors.ts'
import type { ClientInit, TargetConnection, TargetInitResult } from '../upstream/target.ts'
import type { SessionState } from './session-id.ts'

/**
 * Starts every target (resuming upstream sessions named in `resume`). With failClosed a
 * target that cannot start fails the session; with failOpen the session goes on without
 * it while it restarts in the background, as long as one target is up. Throws
 * TARGET_UNAVAILABLE (after `onFail`, which ends the session) when the session cannot go on.
 */
export async function startTargets (targets: ReadonlyMap<string, TargetConnection>, init: ClientInit, failureMode: McpBackendSpecIR['failureMode'], resume: SessionState | undefined, onFail: () => Promise<void>): Promise<void> {
  const resumeOf = new Map(resume?.targets.map(t => [t.name, t]) ?? [])
  const results = await Promise.allSettled([...targets.values()].map(conn => {
    const r = resumeOf.get(conn.name)
    // Only a streamable HTTP target has an upstream session to carry on; the others start afresh.
    if (r?.session != null && conn.spec.kind === 'mcp') return conn.start(init, { session: r.session, result: resumedResult(r) })
    return conn.start(init)
  }))
  const failed = results.flatMap(r => r.status === 'rejected' ? [(r.reason as Error).message ?? String(r.reason)] : [])
  if (failed.length > 0 && (failureMode === 'failClosed' || failed.length === targets.size)) {
    await onFail()
    throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', failed.join('; '))
  }
}

/** The initialize result a session id recorded (capability names only), or null when it recorded none: the target is then initialized again. */
function resumedResult (r: SessionState['targets'][number]): TargetInitResult | null {
  if (r.version === undefined) return null
  return { protocolVersion: r.version, capabilities: Object.fromEntries((r.caps ?? []).map(c => [c, {}])), serverInfo: {} }
}

/** What goes into the session id. */
export function sessionState (nonce: string, backend: string, targets: ReadonlyMap<string, TargetConnection>, init: ClientInit): SessionState {
  return {
    nonce,
    backend,
    targets: [...targets.values()].map(t => {
      const entry: SessionState['targets'][number] = { name: t.name, session: t.upstreamSession }
      if (t.initResult !== null) {
        entry.version = t.initResult.protocolVersion
        entry.caps = Object.keys(t.initResult.capabilities ?? {})
      }
      return entry
    }),
    init
  }
}

/**
 * Ends every target: `close` ends the upstream sessions and stops stdio servers; `detach`
 * (process shutdown) stops stdio servers but leaves upstream HTTP sessions for other replicas.
 */
export async function endTargets (targets: ReadonlyMap<string, TargetConnection>, how: 'close' | 'detach'): Promise<void> {
  await Promise.allSettled([...targets.values()].map(t => how === 'close' ? t.close() : t.detach()))
}
