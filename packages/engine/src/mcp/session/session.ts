/**
 * One client's MCP session through the gateway: an upstream session per target, and the
 * routing between them. Requests are sent to the target that owns the named tool, prompt
 * or resource (prefix stripped), list calls fan out and merge, and everything the targets
 * send back — responses, progress, logging, list changes, and their own requests (sampling,
 * elicitation, roots) — reaches the client on the right stream with ids mapped both ways.
 *
 * This class holds the session's state and wires its parts together:
 *   routing.ts         where a client request goes (and its description for traces)
 *   fan-out.ts         lists merged across targets, logging/setLevel to all
 *   client-calls.ts    the client's requests in flight, ids and progress tokens both ways
 *   server-requests.ts the targets' requests to the client, ids both ways
 *   target-messages.ts which stream each message of a target's belongs on
 *   lifecycle.ts       starting (or resuming) and ending the targets, the session id's state
 */

import type { McpBackendSpecIR } from '../../ir/types.ts'
import { TargetNaming } from './names.ts'
import { TargetConnection, type ClientInit, type TargetHooks } from '../upstream/target.ts'
import type { StdioSpares } from '../upstream/stdio-spares.ts'
import type { StdioProcessTransport } from '../upstream/stdio.ts'
import { EventLog, SessionStream, type Channel } from './channels.ts'
import { mergeInitialize } from './merge.ts'
import { SubscriptionHub } from './listen.ts'
import {
  isNotification, isRequest, resultResponse, targetUnavailable,
  type JsonRpcMessage, type JsonRpcNotification, type JsonRpcRequest, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import type { SessionState } from './session-id.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import type { McpCallInfo } from '../../request/calls.ts'
import { endTargetSpan, startTargetSpan, withTraceContext } from '../upstream/span.ts'
import { ClientCalls, type ClientCall } from './client-calls.ts'
import { ServerRequests } from './server-requests.ts'
import { broadcastRequest, fanOutList } from './fan-out.ts'
import { describeRequest, routeRequest, type Transform } from './routing.ts'
import { routeTargetMessage, type TargetMessageContext } from './target-messages.ts'
import { endTargets, sessionState, startTargets } from './lifecycle.ts'

export interface SessionHooks {
  onProcess?(target: string, process: StdioProcessTransport, running: boolean): void
  onStderr?(target: string, line: string): void
  onTargetState?(target: string, state: string, detail: string | null): void
  onWarning?(target: string, message: string): void
}

export type { ItemFilter } from '../protocol/item-filter.ts'

/** Where the answers of the session's own requests go (subscribe/unsubscribe for listen streams). */
const DISCARD: Channel = { open: true, deliver: () => true }

export class McpSession {
  readonly spec: McpBackendSpecIR
  readonly backendKey: string
  readonly naming: TargetNaming
  readonly targets = new Map<string, TargetConnection>()
  readonly events = new EventLog()
  readonly stream: SessionStream
  readonly init: ClientInit
  id = ''
  lastActivity = Date.now()
  closed = false
  private readonly calls = new ClientCalls()
  private readonly serverRequests = new ServerRequests()

  /** Whether a client request is still being worked on (the gateway does not reap a busy session). */
  get busy (): boolean {
    return this.calls.size > 0
  }

  /**
   * Shared by many clients (2026-07-28): a target's request that belongs to no call is
   * refused, and its change notifications go to the clients' subscriptions/listen streams.
   */
  private readonly shared: boolean
  readonly hub = new SubscriptionHub()
  private nextSubscription = 1
  /** What routing a target's message needs (target-messages.ts); built once, used per message. */
  private readonly messageContext: TargetMessageContext

  constructor (options: { spec: McpBackendSpecIR, backendKey: string, init: ClientInit, hooks?: SessionHooks, legacy?: boolean, shared?: boolean, spares?: StdioSpares }) {
    this.spec = options.spec
    this.shared = options.shared === true
    this.backendKey = options.backendKey
    this.init = options.init
    this.naming = new TargetNaming(options.spec)
    this.stream = new SessionStream(this.events, options.legacy === true)
    this.messageContext = { calls: this.calls, serverRequests: this.serverRequests, stream: this.stream, shared: this.shared, hub: this.hub, naming: this.naming }
    const hooks = options.hooks ?? {}
    const targetHooks: TargetHooks = {
      onMessage: (target, message, related) => {
        this.lastActivity = Date.now()
        routeTargetMessage(this.messageContext, target, message, related)
      },
      onProcess: (target, process, running) => hooks.onProcess?.(target.name, process, running),
      onStderr: (target, line) => hooks.onStderr?.(target.name, line),
      onStateChange: (target, state, detail) => hooks.onTargetState?.(target.name, state, detail),
      onWarning: (target, message) => hooks.onWarning?.(target.name, message)
    }
    for (const t of options.spec.targets) this.targets.set(t.name, new TargetConnection(t, targetHooks, options.spares))
  }

  /**
   * Starts every target (resuming upstream sessions named in `resume`). With failClosed a
   * target that cannot start fails the session; with failOpen the session goes on without
   * it while it restarts in the background, as long as one target is up.
   */
  async start (resume?: SessionState): Promise<void> {
    await startTargets(this.targets, this.init, this.spec.failureMode, resume, () => this.close())
  }

  /** The merged initialize result for the client. */
  initializeResult (requestedVersion: unknown): Record<string, unknown> {
    const ready = [...this.targets.values()].filter(t => t.initResult !== null).map(t => ({ name: t.name, result: t.initResult! }))
    return mergeInitialize(ready, requestedVersion)
  }

  /** What goes into the session id. */
  state (nonce: string): SessionState {
    return sessionState(nonce, this.backendKey, this.targets, this.init)
  }

  /** Describes a client request for traces, logs and metrics. */
  describe (message: JsonRpcMessage): McpCallInfo | null {
    if (!('method' in message)) return null
    const info = describeRequest(message.method, (message.params ?? {}) as Record<string, unknown>, this.naming, this.targets)
    // A shared session's own init is not its clients': their revision is set by the caller.
    if (!this.shared) info.protocolVersion = this.init.protocolVersion
    const revisions = [...new Set((info.target === '' ? [] : info.target.split(',')).map(n => this.targets.get(n)?.revision).filter(v => v !== undefined))]
    if (revisions.length > 0) info.targetProtocolVersion = revisions.join(',')
    return info
  }

  /**
   * Handles one message from the client; responses go to `channel`. `filter` hides the
   * items this caller may not use (left out of lists; calling one is "unknown").
   */
  handle (message: JsonRpcMessage, channel: Channel, filter?: ItemFilter): void {
    this.lastActivity = Date.now()
    if (isRequest(message)) this.onClientRequest(message, channel, filter)
    else if (isNotification(message)) this.onClientNotification(message)
    else this.onClientResponse(message as JsonRpcResponse)
  }

  private onClientRequest (req: JsonRpcRequest, channel: Channel, filter?: ItemFilter): void {
    const route = routeRequest(req, this.naming, this.targets, filter)
    switch (route.kind) {
      case 'reply': channel.deliver(route.message); return
      case 'list': void fanOutList(req, route.spec, channel, { targets: this.targets, naming: this.naming, failureMode: this.spec.failureMode, calls: this.calls }, filter); return
      case 'broadcast': void broadcastRequest(req, channel, { targets: this.targets, failureMode: this.spec.failureMode }); return
      case 'forward': this.forward(req, channel, route.target, route.params, route.transform)
    }
  }

  /** Sends a client request to one target and its response back to the client. */
  private forward (req: JsonRpcRequest, channel: Channel, targetName: string, params: Record<string, unknown> | undefined, transform?: Transform): void {
    const conn = this.targets.get(targetName)!
    const meta = (params?._meta ?? undefined) as Record<string, unknown> | undefined
    const call: ClientCall = { clientId: req.id, channel, method: req.method, target: conn, upstreamId: null, progressToken: meta?.progressToken as string | number | undefined, cancelled: false, span: startTargetSpan(channel.span, req.method, conn, params, conn.revision) }
    this.calls.open(call)
    channel.calling?.(targetName)
    const send = () => {
      if (call.cancelled) return
      const message: { method: string, params?: Record<string, unknown> } = { method: req.method }
      if (params !== undefined) message.params = params
      if (channel.span != null) message.params = withTraceContext(message.params, channel.span, call.span)
      call.upstreamId = conn.request(message, response => this.complete(call, response, transform))
    }
    // A target restarting is waited for (bounded by TargetConnection.ready) rather than failed at once.
    if (conn.state === 'ready') send()
    else conn.ready().then(send, (err: Error) => this.complete(call, targetUnavailable(req.id, err.message)))
  }

  /** The target answered a forwarded request: the client gets it under its own id. */
  private complete (call: ClientCall, response: JsonRpcResponse, transform?: Transform): void {
    this.calls.close(call)
    endTargetSpan(call.span, response, call.upstreamId)
    if (call.cancelled) return
    this.lastActivity = Date.now()
    let out: JsonRpcResponse
    if ('result' in response) out = resultResponse(call.clientId, transform !== undefined ? transform(response.result) : response.result)
    else out = { jsonrpc: '2.0', id: call.clientId, error: response.error }
    call.channel.deliver(out)
  }

  private onClientNotification (n: JsonRpcNotification): void {
    const params = (n.params ?? {}) as Record<string, unknown>
    switch (n.method) {
      case 'notifications/initialized':
        return
      case 'notifications/cancelled': {
        const call = params.requestId === undefined ? undefined : this.calls.cancel(params.requestId as JsonRpcRequest['id'])
        // The target is told under its own id, and its late answer is not waited for.
        if (call?.target != null && call.upstreamId !== null) {
          call.target.forget(call.upstreamId)
          call.target.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { ...params, requestId: call.upstreamId } })
        }
        return
      }
      default:
        // roots/list_changed, progress for server-initiated requests, and anything newer.
        for (const t of this.targets.values()) if (t.state === 'ready') t.send(n)
    }
  }

  /** The client answered a request a target made (sampling, elicitation, roots). */
  private onClientResponse (r: JsonRpcResponse): void {
    const answer = this.serverRequests.answer(r)
    answer?.target.send(answer.response)
  }

  /** Subscribes a URI (the clients' namespace) at its target, for subscriptions/listen streams. */
  subscribe (uri: string): void {
    this.handle({ jsonrpc: '2.0', id: `portico-listen-${this.nextSubscription++}`, method: 'resources/subscribe', params: { uri } }, DISCARD)
  }

  unsubscribe (uri: string): void {
    this.handle({ jsonrpc: '2.0', id: `portico-listen-${this.nextSubscription++}`, method: 'resources/unsubscribe', params: { uri } }, DISCARD)
  }

  /** Ends the session: upstream sessions are closed and stdio servers stopped. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.stream.close()
    await endTargets(this.targets, 'close')
  }

  /** Process shutdown: stdio servers stop, upstream HTTP sessions stay for other replicas. */
  async detach (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.stream.close()
    await endTargets(this.targets, 'detach')
  }
}
