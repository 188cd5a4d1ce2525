/**
 * The requests a target connection has sent and not yet had answered: the ids it gives them
 * (its own counter, so the ids of several clients multiplexed on one upstream session never
 * collide) and their deadlines.
 *
 * Two kinds of request share the id space and the table. A client's request (`deadline:
 * true`) has the target's requestTimeout, restarted by progress, and its expiry is the
 * owner's to act on (`onDeadline`: answer the caller, cancel upstream). A request the
 * gateway makes itself (initialize, list fan-out) is timed by its caller instead, so it has
 * no deadline here — but it still sits in the table, so a response, a failed send or the
 * transport closing answers it like any other.
 */

import type { JsonRpcId, JsonRpcMessage, JsonRpcResponse } from '../protocol/jsonrpc.ts'

interface Pending {
  respond: (response: JsonRpcResponse) => void
  method: string
  timer: NodeJS.Timeout | undefined
}

export interface PendingOptions {
  /** The target's requestTimeout, in ms. */
  timeoutMs: number
  /** A client request's deadline passed; it is still in the table (the owner fails it). */
  onDeadline(id: JsonRpcId, method: string, ms: number): void
}

export class PendingRequests {
  private nextId = 1
  private readonly entries = new Map<JsonRpcId, Pending>()
  private readonly options: PendingOptions

  constructor (options: PendingOptions) {
    this.options = options
  }

  /** A fresh upstream id (also for a request that is never sent: its error answer needs one). */
  newId (): number {
    return this.nextId++
  }

  /** Waits for the answer to `id`; `deadline` arms the requestTimeout (client requests). */
  add (id: JsonRpcId, method: string, respond: (response: JsonRpcResponse) => void, deadline: boolean): void {
    const entry: Pending = { respond, method, timer: undefined }
    this.entries.set(id, entry)
    if (deadline) this.arm(id, entry)
  }

  /** The method of a pending request (for messages about it), or undefined once answered. */
  methodOf (id: JsonRpcId): string | undefined {
    return this.entries.get(id)?.method
  }

  /** The target showed it is still at work on a request (progress): its clock restarts. */
  touch (id: JsonRpcId): void {
    const entry = this.entries.get(id)
    if (entry?.timer !== undefined) this.arm(id, entry)
  }

  /** A response from the target: its waiter gets it. False when nobody waits (late, forgotten, or not ours). */
  settle (response: JsonRpcResponse): boolean {
    if (response.id === null) return false
    const entry = this.take(response.id)
    if (entry === undefined) return false
    entry.respond(response)
    return true
  }

  /** Answers a pending request with an error of the gateway's (no-op once it is answered). */
  fail (id: JsonRpcId, error: (id: JsonRpcId, message: string) => JsonRpcMessage, message: string): void {
    this.take(id)?.respond(error(id, message) as JsonRpcResponse)
  }

  /** Answers every pending request with `error` (the transport is gone). */
  failAll (error: (id: JsonRpcId, message: string) => JsonRpcMessage, message: string): void {
    for (const id of [...this.entries.keys()]) this.fail(id, error, message)
  }

  /** Drops a request without answering it (the client cancelled it, or its caller timed it out); a late response is ignored. */
  forget (id: JsonRpcId): void {
    this.take(id)
  }

  private take (id: JsonRpcId): Pending | undefined {
    const entry = this.entries.get(id)
    if (entry === undefined) return undefined
    this.entries.delete(id)
    clearTimeout(entry.timer)
    return entry
  }

  private arm (id: JsonRpcId, entry: Pending): void {
    clearTimeout(entry.timer)
    const ms = this.options.timeoutMs
    entry.timer = setTimeout(() => this.options.onDeadline(id, entry.method, ms), ms)
    // A pending request must not keep the process alive on shutdown.
    entry.timer.unref()
  }
}
