/**
 * The one interface every way of reaching a target implements — stdio (stdio.ts), legacy
 * SSE (sse.ts), streamable HTTP (streamable.ts) and stateless 2026-07-28 (stateless.ts) —
 * so TargetConnection (target.ts) runs the handshake, request ids, deadlines and restarts
 * the same way over each. It is the SDK's Transport (start, send, close, onmessage,
 * onerror, onclose) plus what the gateway needs to keep a target's faults its own: which
 * request a message belongs to, giving a request up, and why a transport closed itself.
 * Members only some transports have are optional; a new transport implements what it can.
 */

import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JsonRpcId } from '../protocol/jsonrpc.ts'

/** How a target is reached: its config kind, or 'stateless' once a streamable target turned out to speak 2026-07-28. */
export type UpstreamKind = 'stdio' | 'sse' | 'streamable' | 'stateless'

export interface UpstreamTransport extends Transport {
  readonly kind: UpstreamKind
  /** The revision the transport speaks whatever initialize negotiates (2026-07-28 for 'stateless'). */
  readonly revision?: string
  /** Why the transport closed itself for a fault of the target's (an oversized message), or null. */
  readonly fault?: string | null
  /**
   * A request whose answer will not come: its stream broke, or the answer was too large
   * (streamable HTTP). The caller answers with TARGET_UNAVAILABLE.
   */
  onrequestfailed?: (id: JsonRpcId, error: Error) => void
  /** Gives up on a request nobody waits for any more (its deadline): its POST is aborted, its connection given back. */
  abandon?(id: JsonRpcId): void
  /** Resolves once server-initiated messages have somewhere to arrive (the GET stream answered), or after `timeoutMs`. */
  streamReady?(timeoutMs: number): Promise<void>
  /** Ends the upstream session (DELETE) before close; a replica that detaches skips it. */
  terminateSession?(): Promise<void>
}

/** What onmessage's `extra` says of a message that came on a request's own stream. */
export interface RelatedInfo {
  relatedRequestId: JsonRpcId
}
