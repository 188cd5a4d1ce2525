/**
 * Upstream sessions many clients share, opened on first use: one per stateless backend, and
 * for 2026-07-28 clients (who have no session of their own) one per backend and per set of
 * input capabilities they declare — sampling, elicitation, roots: at most 8 a backend.
 *
 * Initialize-era targets decide what to ask from the session's capabilities, so a client
 * that cannot answer elicitation is served by a session that never declared it: the target
 * takes its other path (or says -32021), as it would with that client directly.
 * mcp/session/modern-call.ts puts each input request to the client whose call it belongs
 * to; a target's request that belongs to no call is refused, as there is no one to ask.
 */

import type { McpSession } from './session.ts'
import type { ClientInit } from '../upstream/target.ts'
import { LATEST_PROTOCOL_VERSION } from '../protocol/jsonrpc.ts'
import { GATEWAY_INFO } from './merge.ts'

/** The client capabilities Portico bridges for 2026-07-28 clients (mcp/session/modern-call.ts), in key order. */
const INPUT_CAPABILITIES = ['elicitation', 'roots', 'sampling']
/** Marks the keys of 2026-07-28 clients' sessions: `<backend key>#2026#<capabilities>`. */
const MODERN_KEY = '#2026#'

/** The initialize params of a stateless backend's shared session (its key is the backend's). */
export function statelessInit (): ClientInit {
  return { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: GATEWAY_INFO }
}

/**
 * The key of the session 2026-07-28 clients with these capabilities share, and its
 * initialize params (built only when the session is opened).
 */
export function modernShare (backendKey: string, clientCapabilities: Record<string, unknown>): { key: string, init: () => ClientInit } {
  const bridged = INPUT_CAPABILITIES.filter(c => c in clientCapabilities)
  return {
    key: `${backendKey}${MODERN_KEY}${bridged.join(',')}`,
    init: () => ({ protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: Object.fromEntries(bridged.map(c => [c, {}])), clientInfo: GATEWAY_INFO })
  }
}

/** The backend a shared session's key belongs to. */
function backendOf (key: string): string {
  return key.includes(MODERN_KEY) ? key.slice(0, key.indexOf(MODERN_KEY)) : key
}

export class SharedSessions {
  private readonly byKey = new Map<string, Promise<McpSession>>()

  /**
   * The session under `key`, opened with `open` on first use. One that fails to start is
   * forgotten, so the next client tries again.
   */
  get (key: string, open: () => Promise<McpSession>): Promise<McpSession> {
    let s = this.byKey.get(key)
    if (s === undefined) {
      s = open()
      this.byKey.set(key, s)
      s.catch(() => this.byKey.delete(key))
    }
    return s
  }

  /** Shared sessions of the backend, opened or opening (each holds the backend's stdio processes). */
  count (backendKey: string): number {
    let n = 0
    for (const key of this.byKey.keys()) if (key === backendKey || key.startsWith(backendKey + MODERN_KEY)) n++
    return n
  }

  /** After a config change: the sessions of stale backends are forgotten and closed. */
  closeStale (stale: (backendKey: string) => boolean): void {
    for (const [key, s] of this.byKey) {
      if (!stale(backendOf(key))) continue
      this.byKey.delete(key)
      void s.then(session => session.close(), () => {})
    }
  }

  /** Shutdown: every shared session forgotten and closed; the promises settle once each has (a failed one at once). */
  close (): Array<Promise<unknown>> {
    const all = [...this.byKey.values()].map(s => s.then(x => x.close(), () => {}))
    this.byKey.clear()
    return all
  }
}
