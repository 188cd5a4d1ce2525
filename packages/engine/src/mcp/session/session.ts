/**
 * One client's MCP session through the gateway: an upstream session per target, and the
 * routing between them. Requests are sent to the target that owns the named tool, prompt
 * or resource (prefix stripped), list calls fan out and merge, and everything the targets
 * send back — responses, progress, logging, list changes, and their own requests (sampling,
 * elicitation, roots) — reaches the client on the right stream with ids mapped both ways.
 */

import type { McpBackendSpecIR } from '../../ir/types.ts'
import { TargetNaming, wrapPromptResult, wrapToolResult } from './names.ts'
import { TargetConnection, type ClientInit, type TargetHooks, type TargetInitResult } from '../upstream/target.ts'
import type { StdioSpares } from '../upstream/stdio-spares.ts'
import type { StdioProcessTransport } from '../upstream/stdio.ts'
import { EventLog, SessionStream, type Channel } from './channels.ts'
import { decodeCursor, encodeCursor, mergeInitialize } from './merge.ts'
import { SubscriptionHub } from './listen.ts'
import {
  errorResponse, INVALID_PARAMS, INVALID_REQUEST, isNotification, isRequest, METHOD_NOT_FOUND,
  resultResponse, targetUnavailable,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcNotification, type JsonRpcRequest, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import type { SessionState } from './session-id.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import type { McpCallInfo } from '../../request/calls.ts'
import type { OtelSpan } from '../../trace/otel.ts'
import { endTargetSpan, startTargetSpan, withTraceContext } from '../upstream/span.ts'
import { PorticoError } from '../../util/errors.ts'

export interface SessionHooks {
  onProcess?(target: string, process: StdioProcessTransport, running: boolean): void
  onStderr?(target: string, line: string): void
  onTargetState?(target: string, state: string, detail: string | null): void
  onWarning?(target: string, message: string): void
}

export type { ItemFilter } from '../protocol/item-filter.ts'

interface Inflight {
  clientId: JsonRpcId
  channel: Channel
  method: string
  target: TargetConnection | null
  upstreamId: JsonRpcId | null
  progressToken: string | number | undefined
  cancelled: boolean
  /** The target call's OpenTelemetry span (mcp/upstream/span.ts); null when not recorded. */
  span: OtelSpan | null
}

const idKey = (id: JsonRpcId) => `${typeof id}:${id}`

/** Where the answers of the session's own requests go (subscribe/unsubscribe for listen streams). */
const DISCARD: Channel = { open: true, deliver: () => true }

interface ListSpec {
  capability: string
  kind: 'tool' | 'prompt' | 'resource'
  /** The item's upstream name (or URI) for authorization. */
  nameOf: (item: Record<string, unknown>) => string
  key: string
  rewrite: (naming: TargetNaming, target: string, item: Record<string, unknown>) => Record<string, unknown>
}

const LISTS: Record<string, ListSpec> = {
  'tools/list': { capability: 'tools', kind: 'tool', nameOf: i => String(i.name), key: 'tools', rewrite: (n, t, i) => ({ ...i, name: n.wrapName(t, String(i.name)) }) },
  'prompts/list': { capability: 'prompts', kind: 'prompt', nameOf: i => String(i.name), key: 'prompts', rewrite: (n, t, i) => ({ ...i, name: n.wrapName(t, String(i.name)) }) },
  'resources/list': { capability: 'resources', kind: 'resource', nameOf: i => String(i.uri), key: 'resources', rewrite: (n, t, i) => ({ ...i, uri: n.wrapUri(t, String(i.uri)) }) },
  'resources/templates/list': { capability: 'resources', kind: 'resource', nameOf: i => String(i.uriTemplate), key: 'resourceTemplates', rewrite: (n, t, i) => ({ ...i, uriTemplate: n.wrapUri(t, String(i.uriTemplate)) }) }
}

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
  private readonly inflight = new Map<string, Inflight>()
  private readonly byProgressToken = new Map<string | number, Inflight>()
  private readonly serverRequests = new Map<string, { target: TargetConnection, id: JsonRpcId }>()
  private nextServerRequest = 1

  /** Whether a client request is still being worked on (the gateway does not reap a busy session). */
  get busy (): boolean {
    return this.inflight.size > 0
  }

  /**
   * Shared by many clients (2026-07-28): a target's request that belongs to no call is
   * refused, and its change notifications go to the clients' subscriptions/listen streams.
   */
  private readonly shared: boolean
  readonly hub = new SubscriptionHub()
  private nextSubscription = 1

  constructor (options: { spec: McpBackendSpecIR, backendKey: string, init: ClientInit, hooks?: SessionHooks, legacy?: boolean, shared?: boolean, spares?: StdioSpares }) {
    this.spec = options.spec
    this.shared = options.shared === true
    this.backendKey = options.backendKey
    this.init = options.init
    this.naming = new TargetNaming(options.spec)
    this.stream = new SessionStream(this.events, options.legacy === true)
    const hooks = options.hooks ?? {}
    const targetHooks: TargetHooks = {
      onMessage: (target, message, related) => this.onTargetMessage(target, message, related),
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
    const resumeOf = new Map(resume?.targets.map(t => [t.name, t]) ?? [])
    const results = await Promise.allSettled([...this.targets.values()].map(conn => {
      const r = resumeOf.get(conn.name)
      if (r?.session != null && conn.spec.kind === 'mcp') {
        const result: TargetInitResult | null = r.version !== undefined
          ? { protocolVersion: r.version, capabilities: Object.fromEntries((r.caps ?? []).map(c => [c, {}])), serverInfo: {} }
          : null
        return conn.start(this.init, { session: r.session, result })
      }
      return conn.start(this.init)
    }))
    const failed = results.flatMap(r => r.status === 'rejected' ? [(r.reason as Error).message ?? String(r.reason)] : [])
    if (failed.length > 0 && (this.spec.failureMode === 'failClosed' || failed.length === this.targets.size)) {
      await this.close()
      throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', failed.join('; '))
    }
  }

  /** The merged initialize result for the client. */
  initializeResult (requestedVersion: unknown): Record<string, unknown> {
    const ready = [...this.targets.values()].filter(t => t.initResult !== null).map(t => ({ name: t.name, result: t.initResult! }))
    return mergeInitialize(ready, requestedVersion)
  }

  /** What goes into the session id. */
  state (nonce: string): SessionState {
    return {
      nonce,
      backend: this.backendKey,
      targets: [...this.targets.values()].map(t => {
        const entry: SessionState['targets'][number] = { name: t.name, session: t.upstreamSession }
        if (t.initResult !== null) {
          entry.version = t.initResult.protocolVersion
          entry.caps = Object.keys(t.initResult.capabilities ?? {})
        }
        return entry
      }),
      init: this.init
    }
  }

  /** Describes a client request for traces, logs and metrics. */
  describe (message: JsonRpcMessage): McpCallInfo | null {
    if (!('method' in message)) return null
    const params = (message.params ?? {}) as Record<string, unknown>
    const info: McpCallInfo = { method: message.method, target: '' }
    const byName = (kind: 'tool' | 'prompt') => {
      const name = String(params.name ?? '')
      info.name = name
      info.kind = kind
      info.target = this.naming.unwrapName(name)?.target ?? ''
    }
    switch (message.method) {
      case 'tools/call': byName('tool'); break
      case 'prompts/get': byName('prompt'); break
      case 'resources/read':
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        const uri = String(params.uri ?? '')
        info.name = uri
        info.kind = 'resource'
        info.target = this.naming.unwrapUri(uri)?.target ?? ''
        break
      }
      default:
        if (message.method in LISTS || message.method === 'initialize' || message.method === 'logging/setLevel') info.target = [...this.targets.keys()].join(',')
        else if (this.targets.size === 1) info.target = [...this.targets.keys()][0]!
    }
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
    const params = (req.params ?? {}) as Record<string, unknown>
    const hidden = (kind: 'tool' | 'prompt' | 'resource', target: string, name: string) =>
      filter !== undefined && !filter({ method: req.method, kind, name, target })
    switch (req.method) {
      case 'ping':
        channel.deliver(resultResponse(req.id, {}))
        return
      case 'initialize':
        channel.deliver(errorResponse(req.id, INVALID_REQUEST, 'session already initialized'))
        return
      case 'tools/list':
      case 'prompts/list':
      case 'resources/list':
      case 'resources/templates/list':
        void this.fanOutList(req, LISTS[req.method]!, channel, filter)
        return
      case 'tools/call':
      case 'prompts/get': {
        const kind = req.method === 'tools/call' ? 'tool' : 'prompt'
        const owner = this.naming.unwrapName(String(params.name ?? ''))
        // A forbidden item answers exactly like a missing one: its existence is not revealed.
        if (owner === null || hidden(kind, owner.target, owner.name)) {
          channel.deliver(errorResponse(req.id, INVALID_PARAMS, `Unknown ${kind}: ${String(params.name ?? '')}`))
          return
        }
        // Resource links and embedded resources in the answer get the target's prefix too.
        this.forward(req, channel, owner.target, { ...params, name: owner.name }, kind === 'tool'
          ? result => wrapToolResult(this.naming, owner.target, result)
          : result => wrapPromptResult(this.naming, owner.target, result))
        return
      }
      case 'resources/read':
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        const owner = this.naming.unwrapUri(String(params.uri ?? ''))
        if (owner === null || hidden('resource', owner.target, owner.uri)) {
          channel.deliver(errorResponse(req.id, INVALID_PARAMS, `Unknown resource: ${String(params.uri ?? '')}`))
          return
        }
        this.forward(req, channel, owner.target, { ...params, uri: owner.uri }, result => this.wrapContents(owner.target, result))
        return
      }
      case 'completion/complete': {
        const ref = (params.ref ?? {}) as Record<string, unknown>
        const owner = ref.type === 'ref/prompt' ? this.naming.unwrapName(String(ref.name ?? '')) : this.naming.unwrapUri(String(ref.uri ?? ''))
        if (owner === null) {
          channel.deliver(errorResponse(req.id, INVALID_PARAMS, 'Unknown completion reference'))
          return
        }
        const upstreamRef = ref.type === 'ref/prompt' ? { ...ref, name: (owner as { name: string }).name } : { ...ref, uri: (owner as { uri: string }).uri }
        this.forward(req, channel, owner.target, { ...params, ref: upstreamRef })
        return
      }
      case 'logging/setLevel':
        void this.broadcastRequest(req, channel)
        return
      default:
        if (this.targets.size === 1) {
          this.forward(req, channel, [...this.targets.keys()][0]!, req.params)
          return
        }
        channel.deliver(errorResponse(req.id, METHOD_NOT_FOUND, `Method not found: ${req.method} (not supported across several targets)`))
    }
  }

  /** Sends a client request to one target and its response back to the client. */
  private forward (req: JsonRpcRequest, channel: Channel, targetName: string, params: Record<string, unknown> | undefined, transform?: (result: Record<string, unknown>) => Record<string, unknown>): void {
    const conn = this.targets.get(targetName)!
    const meta = (params?._meta ?? undefined) as Record<string, unknown> | undefined
    const token = meta?.progressToken as string | number | undefined
    const entry: Inflight = { clientId: req.id, channel, method: req.method, target: conn, upstreamId: null, progressToken: token, cancelled: false, span: startTargetSpan(channel.span, req.method, conn, params, conn.revision) }
    this.inflight.set(idKey(req.id), entry)
    if (token !== undefined) this.byProgressToken.set(token, entry)
    channel.calling?.(targetName)
    const send = () => {
      if (entry.cancelled) return
      const message: { method: string, params?: Record<string, unknown> } = { method: req.method }
      if (params !== undefined) message.params = params
      if (channel.span != null) message.params = withTraceContext(message.params, channel.span, entry.span)
      entry.upstreamId = conn.request(message, response => this.complete(entry, response, transform))
    }
    if (conn.state === 'ready') send()
    else conn.ready().then(send, (err: Error) => this.complete(entry, targetUnavailable(req.id, err.message)))
  }

  private complete (entry: Inflight, response: JsonRpcResponse, transform?: (result: Record<string, unknown>) => Record<string, unknown>): void {
    this.inflight.delete(idKey(entry.clientId))
    endTargetSpan(entry.span, response, entry.upstreamId)
    if (entry.progressToken !== undefined) this.byProgressToken.delete(entry.progressToken)
    if (entry.cancelled) return
    this.lastActivity = Date.now()
    let out: JsonRpcResponse
    if ('result' in response) out = resultResponse(entry.clientId, transform !== undefined ? transform(response.result) : response.result)
    else out = { jsonrpc: '2.0', id: entry.clientId, error: response.error }
    entry.channel.deliver(out)
  }

  private wrapContents (target: string, result: Record<string, unknown>): Record<string, unknown> {
    if (!this.naming.prefixed || !Array.isArray(result.contents)) return result
    return { ...result, contents: (result.contents as Array<Record<string, unknown>>).map(c => typeof c.uri === 'string' ? { ...c, uri: this.naming.wrapUri(target, c.uri) } : c) }
  }

  /** List calls: every target with the capability, merged, with one composite cursor. */
  private async fanOutList (req: JsonRpcRequest, spec: ListSpec, channel: Channel, filter?: ItemFilter): Promise<void> {
    const params = { ...(req.params ?? {}) } as Record<string, unknown>
    let cursors: Record<string, string> | null = null
    if (typeof params.cursor === 'string') {
      cursors = decodeCursor(params.cursor)
      if (cursors === null) {
        channel.deliver(errorResponse(req.id, INVALID_PARAMS, 'Invalid cursor'))
        return
      }
    }
    delete params.cursor
    const entry: Inflight = { clientId: req.id, channel, method: req.method, target: null, upstreamId: null, progressToken: undefined, cancelled: false, span: null }
    this.inflight.set(idKey(req.id), entry)
    const targets = [...this.targets.values()].filter(t => (cursors === null || t.name in cursors) && (t.initResult === null || spec.capability in (t.initResult.capabilities ?? {})))
    if (targets.length > 0) channel.calling?.(targets.map(t => t.name).join(','))
    const answers = await Promise.all(targets.map(async t => {
      try {
        await t.ready()
      } catch (err) {
        return { t, response: targetUnavailable(req.id, (err as Error).message) }
      }
      if (!(spec.capability in (t.initResult?.capabilities ?? {}))) return null
      const p = cursors !== null ? { ...params, cursor: cursors[t.name] } : params
      const span = startTargetSpan(channel.span, req.method, t, p, t.revision)
      const response = await t.call({ method: req.method, params: channel.span != null ? withTraceContext(p, channel.span, span) : p }, t.spec.requestTimeoutMs)
      endTargetSpan(span, response)
      return { t, response }
    }))
    this.inflight.delete(idKey(req.id))
    if (entry.cancelled) return
    const items: Array<Record<string, unknown>> = []
    const next: Record<string, string> = {}
    for (const answer of answers) {
      if (answer === null) continue
      const { t, response } = answer
      if ('error' in response) {
        // A target that has the capability but not this list (templates, typically) has none.
        if (response.error.code === METHOD_NOT_FOUND || this.spec.failureMode === 'failOpen') continue
        const message = response.error.message.includes(`"${t.name}"`) ? response.error.message : `target "${t.name}": ${response.error.message}`
        channel.deliver(errorResponse(req.id, response.error.code, message, response.error.data))
        return
      }
      for (const item of (response.result[spec.key] ?? []) as Array<Record<string, unknown>>) {
        if (filter !== undefined && !filter({ method: req.method, kind: spec.kind, name: spec.nameOf(item), target: t.name })) continue
        items.push(spec.rewrite(this.naming, t.name, item))
      }
      if (typeof response.result.nextCursor === 'string') next[t.name] = response.result.nextCursor
    }
    const result: Record<string, unknown> = { [spec.key]: items }
    if (Object.keys(next).length > 0) result.nextCursor = encodeCursor(next)
    channel.deliver(resultResponse(req.id, result))
  }

  /** A request every target gets (logging/setLevel); one empty result for the client. */
  private async broadcastRequest (req: JsonRpcRequest, channel: Channel): Promise<void> {
    channel.calling?.([...this.targets.keys()].join(','))
    const answers = await Promise.all([...this.targets.values()].map(async t => {
      try {
        await t.ready()
      } catch (err) {
        return targetUnavailable(req.id, (err as Error).message)
      }
      const message: { method: string, params?: Record<string, unknown> } = { method: req.method }
      if (req.params !== undefined) message.params = req.params
      return await t.call(message, t.spec.requestTimeoutMs)
    }))
    const failed = answers.find(a => 'error' in a)
    if (failed !== undefined && 'error' in failed && this.spec.failureMode === 'failClosed') {
      channel.deliver(errorResponse(req.id, failed.error.code, failed.error.message))
      return
    }
    channel.deliver(resultResponse(req.id, {}))
  }

  private onClientNotification (n: JsonRpcNotification): void {
    const params = (n.params ?? {}) as Record<string, unknown>
    switch (n.method) {
      case 'notifications/initialized':
        return
      case 'notifications/cancelled': {
        const requestId = params.requestId as JsonRpcId | undefined
        const entry = requestId === undefined ? undefined : this.inflight.get(idKey(requestId))
        if (entry === undefined) return
        entry.cancelled = true
        this.inflight.delete(idKey(entry.clientId))
        if (entry.target !== null && entry.upstreamId !== null) {
          entry.target.forget(entry.upstreamId)
          entry.target.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { ...params, requestId: entry.upstreamId } })
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
    if (r.id === null) return
    const origin = this.serverRequests.get(String(r.id))
    if (origin === undefined) return
    this.serverRequests.delete(String(r.id))
    origin.target.send({ ...r, id: origin.id } as JsonRpcResponse)
  }

  /** A target sent a request or notification meant for the client. */
  private onTargetMessage (target: TargetConnection, message: JsonRpcRequest | JsonRpcNotification, related?: JsonRpcId): void {
    this.lastActivity = Date.now()
    if (isRequest(message)) {
      const channel = this.relatedChannel(target, related)
      if (channel === this.stream && this.shared) {
        target.send(errorResponse(message.id, METHOD_NOT_FOUND, `Method not found: ${message.method} (asked outside any call of a client: Portico has no one to ask)`))
        return
      }
      const id = `portico-${this.nextServerRequest++}`
      this.serverRequests.set(id, { target, id: message.id })
      channel.deliver({ ...message, id })
      return
    }
    const params = (message.params ?? {}) as Record<string, unknown>
    switch (message.method) {
      case 'notifications/progress': {
        const entry = this.byProgressToken.get(params.progressToken as string | number)
        // A target reporting progress is at work, not stuck: its requestTimeout restarts.
        if (entry?.target === target && entry.upstreamId !== null) target.touch(entry.upstreamId)
        ;(entry?.channel.open === true ? entry.channel : this.stream).deliver(message)
        return
      }
      case 'notifications/cancelled': {
        for (const [gid, origin] of this.serverRequests) {
          if (origin.target !== target || origin.id !== params.requestId) continue
          this.serverRequests.delete(gid)
          this.relatedChannel(target, related).deliver({ ...message, params: { ...params, requestId: gid } })
        }
        return
      }
      case 'notifications/resources/updated': {
        const updated = { ...message, params: { ...params, uri: this.naming.wrapUri(target.name, String(params.uri)) } }
        if (this.shared) this.hub.publish(updated)
        else this.stream.deliver(updated)
        return
      }
      case 'notifications/message':
        this.relatedChannel(target, related).deliver(message)
        return
      default:
        if (this.shared) this.hub.publish(message)
        else this.stream.deliver(message)
    }
  }

  /** Subscribes a URI (the clients' namespace) at its target, for subscriptions/listen streams. */
  subscribe (uri: string): void {
    this.handle({ jsonrpc: '2.0', id: `portico-listen-${this.nextSubscription++}`, method: 'resources/subscribe', params: { uri } }, DISCARD)
  }

  unsubscribe (uri: string): void {
    this.handle({ jsonrpc: '2.0', id: `portico-listen-${this.nextSubscription++}`, method: 'resources/unsubscribe', params: { uri } }, DISCARD)
  }

  /**
   * The stream a target's own message belongs on: the request whose answer stream carried
   * it (`related`, an upstream id), else a request of the client's that the target is
   * working on (the newest one still open), else the session's stream.
   */
  private relatedChannel (target: TargetConnection, related?: JsonRpcId): Channel {
    let found: Channel | null = null
    let open = 0
    for (const entry of this.inflight.values()) {
      if (entry.target !== target) continue
      if (related !== undefined && entry.upstreamId === related) return entry.channel
      if (entry.channel.open) {
        found = entry.channel
        open++
      }
    }
    // A shared session guesses for no one: with several clients' calls open on the target
    // (a stdio target says nothing of which call it is asking about), the message is nobody's.
    if (this.shared && open > 1) return this.stream
    return found ?? this.stream
  }

  /** Ends the session: upstream sessions are closed and stdio servers stopped. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.stream.close()
    await Promise.allSettled([...this.targets.values()].map(t => t.close()))
  }

  /** Process shutdown: stdio servers stop, upstream HTTP sessions stay for other replicas. */
  async detach (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.stream.close()
    await Promise.allSettled([...this.targets.values()].map(t => t.detach()))
  }
}
