/**
 * `subscriptions/listen` (2026-07-28) for clients in front of initialize-era targets: the
 * change notifications those targets send on their session (list_changed, and
 * resources/updated for subscribed URIs) reach every open listen stream whose filter asks
 * for them, each stamped with its subscription id.
 *
 * The targets' session is shared by all 2026-07-28 clients of a backend, so a URI is
 * subscribed at its target once, however many streams ask for it (resources/subscribe on
 * the first, resources/unsubscribe after the last stream that wanted it closed).
 */

import type { JsonRpcNotification } from '../protocol/jsonrpc.ts'
import { wants, type ListenFilter } from '../revisions/revision-2026-listen.ts'

interface Listener {
  filter: ListenFilter
  send: (message: JsonRpcNotification) => void
}

/** What the hub asks of the session: subscribing a URI (client namespace) at its target, and letting it go. */
export interface ResourceSubscriber {
  subscribe(uri: string): void
  unsubscribe(uri: string): void
}

/** The open listen streams of one shared session, and the URIs they keep subscribed. */
export class SubscriptionHub {
  private readonly listeners = new Set<Listener>()
  private readonly uriCounts = new Map<string, number>()

  get size (): number {
    return this.listeners.size
  }

  /** Adds a stream; returns its removal. URIs it is the first to want are subscribed. */
  add (filter: ListenFilter, send: (message: JsonRpcNotification) => void, subscriber: ResourceSubscriber): () => void {
    const listener: Listener = { filter, send }
    this.listeners.add(listener)
    for (const uri of filter.resourceSubscriptions ?? []) {
      const n = this.uriCounts.get(uri) ?? 0
      this.uriCounts.set(uri, n + 1)
      if (n === 0) subscriber.subscribe(uri)
    }
    let removed = false
    return () => {
      if (removed) return
      removed = true
      this.listeners.delete(listener)
      for (const uri of filter.resourceSubscriptions ?? []) {
        const n = (this.uriCounts.get(uri) ?? 1) - 1
        if (n > 0) {
          this.uriCounts.set(uri, n)
        } else {
          this.uriCounts.delete(uri)
          subscriber.unsubscribe(uri)
        }
      }
    }
  }

  /** A change notification of the targets (URIs already in the clients' namespace). */
  publish (message: JsonRpcNotification): void {
    for (const l of this.listeners) if (wants(l.filter, message)) l.send(message)
  }
}
