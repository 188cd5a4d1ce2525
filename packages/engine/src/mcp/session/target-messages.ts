/**
 * What the targets send that is not an answer — their own requests (sampling, elicitation,
 * roots), progress, logging, cancellations and change notifications — and the stream of the
 * client's each belongs on.
 *
 * A message about a call goes where the client reads that call's answer (the POST's SSE
 * stream), so a client that asked for progress sees it and a sampling request reaches the
 * client that is waiting; the rest go on the session's own stream (the GET stream). A
 * session shared by several 2026-07-28 clients has no session stream anyone reads: there a
 * request that belongs to no call is refused to the target (no one to ask), and change
 * notifications go to the clients' subscriptions/listen streams.
 */

import {
  errorResponse, isRequest, METHOD_NOT_FOUND,
  type JsonRpcId, type JsonRpcNotification, type JsonRpcRequest
} from '../protocol/jsonrpc.ts'
import type { TargetConnection } from '../upstream/target.ts'
import type { Channel } from './channels.ts'
import type { ClientCalls } from './client-calls.ts'
import type { SubscriptionHub } from './listen.ts'
import type { TargetNaming } from './names.ts'
import type { ServerRequests } from './server-requests.ts'

export interface TargetMessageContext {
  calls: ClientCalls
  serverRequests: ServerRequests
  /** The session's own stream. */
  stream: Channel
  /** Shared by many 2026-07-28 clients (see above). */
  shared: boolean
  hub: SubscriptionHub
  naming: TargetNaming
}

/** Routes one message `target` sent toward the client; `related` is the upstream id of the request whose answer stream carried it, if known. */
export function routeTargetMessage (ctx: TargetMessageContext, target: TargetConnection, message: JsonRpcRequest | JsonRpcNotification, related?: JsonRpcId): void {
  const channelOf = () => ctx.calls.channelFor(target, related, ctx.shared, ctx.stream)
  if (isRequest(message)) {
    const channel = channelOf()
    if (channel === ctx.stream && ctx.shared) {
      target.send(errorResponse(message.id, METHOD_NOT_FOUND, `Method not found: ${message.method} (asked outside any call of a client: Portico has no one to ask)`))
      return
    }
    channel.deliver({ ...message, id: ctx.serverRequests.issue(target, message.id) })
    return
  }
  const params = (message.params ?? {}) as Record<string, unknown>
  switch (message.method) {
    case 'notifications/progress': {
      const call = ctx.calls.byToken(params.progressToken)
      // A target reporting progress is at work, not stuck: its requestTimeout restarts.
      if (call?.target === target && call.upstreamId !== null) target.touch(call.upstreamId)
      ;(call?.channel.open === true ? call.channel : ctx.stream).deliver(message)
      return
    }
    case 'notifications/cancelled':
      // The target withdrew a request of its own: the client is told under the id it knows.
      for (const id of ctx.serverRequests.withdraw(target, params.requestId)) channelOf().deliver({ ...message, params: { ...params, requestId: id } })
      return
    case 'notifications/resources/updated': {
      const updated = { ...message, params: { ...params, uri: ctx.naming.wrapUri(target.name, String(params.uri)) } }
      if (ctx.shared) ctx.hub.publish(updated)
      else ctx.stream.deliver(updated)
      return
    }
    case 'notifications/message':
      channelOf().deliver(message)
      return
    default:
      if (ctx.shared) ctx.hub.publish(message)
      else ctx.stream.deliver(message)
  }
}
