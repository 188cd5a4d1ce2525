/**
 * The client's requests a session is working on, and their ids both ways: the client's id
 * (what its answer must carry), the upstream id the target connection gave it (what the
 * target's answer, progress and cancellations carry), and its progress token.
 *
 * Ids are mapped rather than passed through because one upstream session may carry the
 * requests of several of the gateway's channels (a POST's stream, the GET stream, and for a
 * shared 2026-07-28 session several clients): client ids may collide there, the
 * connection's own ids cannot. The table is also how a message the target sends during a
 * call finds the stream the client is reading (`channelFor`).
 */

import type { OtelSpan } from '../../trace/otel.ts'
import type { JsonRpcId } from '../protocol/jsonrpc.ts'
import type { TargetConnection } from '../upstream/target.ts'
import type { Channel } from './channels.ts'

export interface ClientCall {
  clientId: JsonRpcId
  channel: Channel
  method: string
  /** The target it went to; null for a call to several (a list fan-out). */
  target: TargetConnection | null
  /** Its id upstream, once sent. */
  upstreamId: JsonRpcId | null
  progressToken: string | number | undefined
  /** The client cancelled it: a late answer is dropped. */
  cancelled: boolean
  /** The target call's OpenTelemetry span (mcp/upstream/span.ts); null when not recorded. */
  span: OtelSpan | null
}

/** The key of a client id: `1` and `"1"` are different requests. */
const idKey = (id: JsonRpcId): string => `${typeof id}:${id}`

export class ClientCalls {
  private readonly byClientId = new Map<string, ClientCall>()
  private readonly byProgressToken = new Map<string | number, ClientCall>()

  get size (): number {
    return this.byClientId.size
  }

  open (call: ClientCall): void {
    this.byClientId.set(idKey(call.clientId), call)
    if (call.progressToken !== undefined) this.byProgressToken.set(call.progressToken, call)
  }

  /** The call was answered (or is being dropped). */
  close (call: ClientCall): void {
    this.byClientId.delete(idKey(call.clientId))
    if (call.progressToken !== undefined) this.byProgressToken.delete(call.progressToken)
  }

  /**
   * The client cancelled `clientId`: the call, marked cancelled, or undefined when it is not
   * open. Its progress token stays mapped until the target's answer (or the connection's
   * error) closes it, so late progress still finds the call.
   */
  cancel (clientId: JsonRpcId): ClientCall | undefined {
    const call = this.byClientId.get(idKey(clientId))
    if (call === undefined) return undefined
    call.cancelled = true
    this.byClientId.delete(idKey(clientId))
    return call
  }

  /** The call a progress notification is about. */
  byToken (token: unknown): ClientCall | undefined {
    return this.byProgressToken.get(token as string | number)
  }

  /**
   * The stream a target's own message belongs on: the request whose answer stream carried
   * it (`related`, an upstream id), else a request of the client's that the target is
   * working on (the newest one still open), else `fallback` (the session's stream). With
   * `shared`, several clients' calls may be open on the target; a stdio target says nothing
   * of which call it is asking about, so then the message is nobody's (the fallback).
   */
  channelFor (target: TargetConnection, related: JsonRpcId | undefined, shared: boolean, fallback: Channel): Channel {
    let found: Channel | null = null
    let open = 0
    for (const call of this.byClientId.values()) {
      if (call.target !== target) continue
      if (related !== undefined && call.upstreamId === related) return call.channel
      if (call.channel.open) {
        found = call.channel
        open++
      }
    }
    if (shared && open > 1) return fallback
    return found ?? fallback
  }
}
