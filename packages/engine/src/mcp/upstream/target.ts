/**
 * One upstream MCP session with one target, on behalf of one gateway session: the transport
 * (one UpstreamTransport, transport.ts: stdio process, legacy SSE, streamable HTTP, or a
 * stateless 2026-07-28 target), the initialize handshake (handshake.ts), request ids of its
 * own and their deadlines (pending.ts), and recovery — a target that dies or disconnects is
 * restarted with backoff (restart.ts) and re-initialized with the client's parameters while
 * the other targets keep working.
 *
 * This class holds the target's state and decides what happens on each event; the pieces
 * above do the work. A target's faults stay with it (faults.ts): every request it is sent
 * has a deadline (requestTimeout; progress restarts it), after which the caller gets
 * TARGET_TIMEOUT and the target a cancellation; a message past maxMessageSize gets a stdio
 * server killed (then restarted, as a crash) and an HTTP answer dropped, its callers
 * answered with TARGET_UNAVAILABLE.
 */

import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import type { RelatedInfo, UpstreamTransport } from './transport.ts'
import { StreamableHttpClientTransport } from './streamable.ts'
import type { McpTargetIR } from '../../ir/types.ts'
import { StdioProcessTransport } from './stdio.ts'
import type { StdioSpares } from './stdio-spares.ts'
import { initialize, modernFallback, openTransport, type ClientInit, type TargetInitResult } from './handshake.ts'
import { PendingRequests } from './pending.ts'
import { ReadyWaiters, RestartBackoff } from './restart.ts'
import { closeReason, droppedAnswerWarning, isTargetFault, unavailableMessage } from './faults.ts'
import {
  isRequest, isResponse, targetTimeout, targetUnavailable,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcNotification, type JsonRpcRequest, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import { PorticoError } from '../../util/errors.ts'

export type { ClientInit, TargetInitResult } from './handshake.ts'

export interface TargetHooks {
  /**
   * A request or notification the target sent to the client side; `related` is the
   * upstream id of the request whose answer stream carried it (streamable HTTP), if known.
   */
  onMessage(target: TargetConnection, message: JsonRpcRequest | JsonRpcNotification, related?: JsonRpcId): void
  /** A stdio child started or exited (for /debug/tasks); the transport is the process's identity (a pid can be reused). */
  onProcess?(target: TargetConnection, process: StdioProcessTransport, running: boolean): void
  onStderr?(target: TargetConnection, line: string): void
  onStateChange?(target: TargetConnection, state: TargetState, detail: string | null): void
  /** The target broke the protocol (a line that is not JSON-RPC, an oversized message). */
  onWarning?(target: TargetConnection, message: string): void
}

export type TargetState = 'idle' | 'starting' | 'ready' | 'restarting' | 'closed'

/** Longest a request waits for a restarting target to be ready again. */
const READY_WAIT_MS = 15_000
/** Longest a target's readiness waits for its GET stream to be answered. */
const STREAM_WAIT_MS = 10_000

export class TargetConnection {
  readonly name: string
  readonly spec: McpTargetIR
  state: TargetState = 'idle'
  /** Why the target is not ready (last failure), for error messages. */
  lastError: string | null = null
  initResult: TargetInitResult | null = null
  /** The upstream's Mcp-Session-Id (streamable HTTP targets). */
  upstreamSession: string | null = null
  restarts = 0

  private transport: UpstreamTransport | null = null
  private readonly pending: PendingRequests
  private readonly hooks: TargetHooks
  private clientInit: ClientInit | null = null
  private readyPromise: Promise<void> | null = null
  private readonly backoff = new RestartBackoff()
  private readonly waiters = new ReadyWaiters()
  private readonly spares: StdioSpares | undefined

  /** `spares`: where a stdio target takes a server process started ahead of time, if one is ready. */
  constructor (spec: McpTargetIR, hooks: TargetHooks, spares?: StdioSpares) {
    this.name = spec.name
    this.spec = spec
    this.hooks = hooks
    this.spares = spares
    this.pending = new PendingRequests({ timeoutMs: spec.requestTimeoutMs, onDeadline: (id, method, ms) => this.timeOut(id, method, ms) })
  }

  /** The revision spoken to the target: the transport's own (2026-07-28 through ModernClientTransport), else what initialize negotiated. */
  get revision (): string | undefined {
    return this.transport?.revision ?? this.initResult?.protocolVersion
  }

  get pid (): number | undefined {
    return this.transport instanceof StdioProcessTransport ? this.transport.pid : undefined
  }

  /**
   * Connects and initializes with the client's parameters. With `resumeSession` (a
   * streamable HTTP target's upstream session id from a session id minted elsewhere) the
   * upstream session is reused without a new handshake.
   */
  start (init: ClientInit, resume?: { session: string, result: TargetInitResult | null }): Promise<void> {
    this.clientInit = init
    this.readyPromise = this.connect(resume)
    return this.readyPromise
  }

  private setState (state: TargetState, detail: string | null = null): void {
    this.state = state
    if (state === 'ready') this.lastError = null
    else if (detail !== null) this.lastError = detail
    this.hooks.onStateChange?.(this, state, detail)
    if (state === 'ready' || state === 'closed') this.waiters.wake()
  }

  /** Makes `transport` this connection's, its events routed here. */
  private wire<T extends UpstreamTransport> (transport: T): T {
    this.transport = transport
    transport.onmessage = (message: JSONRPCMessage, extra?: unknown) => this.onTransportMessage(message as JsonRpcMessage, (extra as Partial<RelatedInfo> | undefined)?.relatedRequestId)
    transport.onclose = () => this.onTransportClose(transport)
    transport.onerror = err => {
      this.lastError = err.message
      if (isTargetFault(transport, err)) this.hooks.onWarning?.(this, err.message)
    }
    transport.onrequestfailed = (id, err) => this.sendFailed(id, err)
    return transport
  }

  private async connect (resume?: { session: string, result: TargetInitResult | null }): Promise<void> {
    this.setState('starting')
    const init = this.clientInit!
    let transport: UpstreamTransport = this.wire(openTransport(this.spec, {
      onStderr: line => this.hooks.onStderr?.(this, line),
      ...(this.spares !== undefined ? { spares: this.spares } : {}),
      ...(resume !== undefined ? { resumeSession: resume.session } : {})
    }))
    const handshake = (via: UpstreamTransport) => initialize(via, init, (m, ms, t) => this.call(m, ms, t), this.spec.requestTimeoutMs, (result, session) => {
      this.initResult = result
      if (session !== undefined) this.upstreamSession = session
    })
    try {
      // A resumed upstream session: the protocol version must be known before start() opens
      // its GET stream (a server may refuse a request without MCP-Protocol-Version).
      if (resume !== undefined && transport instanceof StreamableHttpClientTransport) transport.setProtocolVersion(resume.result?.protocolVersion ?? init.protocolVersion)
      await transport.start()
      if (transport instanceof StdioProcessTransport) this.hooks.onProcess?.(this, transport, true)
      if (resume !== undefined && transport instanceof StreamableHttpClientTransport) {
        // The upstream session lives on; nothing else to negotiate.
        this.initResult = resume.result
        this.upstreamSession = resume.session
        if (this.initResult === null) await handshake(transport)
      } else {
        try {
          await handshake(transport)
        } catch (err) {
          const modern = await modernFallback(transport, this.spec, init)
          if (modern === null) throw err
          this.transport = null
          void transport.close().catch(() => {})
          transport = this.wire(modern)
          await modern.start()
          await handshake(transport)
        }
      }
      // Not ready before the stream for server-initiated messages is answered: a request
      // the target sends meanwhile (sampling, elicitation) would have nowhere to go and be
      // dropped. A target that holds it unanswered (headers only with a first event) delays
      // readiness by its requestTimeout at most, and never by more than STREAM_WAIT_MS.
      await (transport as UpstreamTransport).streamReady?.(Math.min(this.spec.requestTimeoutMs, STREAM_WAIT_MS))
      if (this.transport !== transport) return
      this.backoff.reset()
      this.setState('ready')
    } catch (err) {
      const reason = `target "${this.name}" failed to start: ${(err as Error).message}`
      this.pending.failAll(targetUnavailable, reason)
      if (this.transport === transport) {
        this.transport = null
        void transport.close().catch(() => {})
        this.scheduleRestart(reason)
      }
      throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', reason)
    }
  }

  /** Resolves once the target is ready (waiting through a restart), or rejects naming it. */
  async ready (): Promise<void> {
    if (this.state === 'ready') return
    if (this.state === 'closed') throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `target "${this.name}" is closed`)
    if (this.state === 'starting' && this.readyPromise !== null) {
      await this.readyPromise
      return
    }
    await this.waiters.wait(READY_WAIT_MS, () => this.state === 'ready',
      () => new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `target "${this.name}" is closed`),
      () => new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', unavailableMessage(this.name, this.lastError)))
  }

  /**
   * Sends a request with an id of this connection's own; `onResponse` gets the response
   * (or a gateway error naming the target if it goes away first). Returns the upstream id
   * (for cancellation).
   */
  request (message: { method: string, params?: Record<string, unknown> }, onResponse: (r: JsonRpcResponse) => void): JsonRpcId {
    const id = this.pending.newId()
    const transport = this.transport
    if (transport === null || this.state !== 'ready') {
      queueMicrotask(() => onResponse(targetUnavailable(id, unavailableMessage(this.name, this.lastError))))
      return id
    }
    this.pending.add(id, message.method, onResponse, true)
    const request: JsonRpcRequest = { jsonrpc: '2.0', id, method: message.method }
    if (message.params !== undefined) request.params = message.params
    transport.send(request as JSONRPCMessage).catch((err: Error) => this.sendFailed(id, err))
    return id
  }

  /** A request that cannot be answered: not sent, its stream broke, or its answer was too large. */
  private sendFailed (id: JsonRpcId, err: Error): void {
    const method = this.pending.methodOf(id)
    if (method === undefined) return
    const warning = droppedAnswerWarning(method, err)
    if (warning !== null) this.hooks.onWarning?.(this, warning)
    this.pending.fail(id, targetUnavailable, `target "${this.name}" failed: ${err.message}`)
  }

  /** The target showed it is still at work on a request (progress): its clock restarts. */
  touch (id: JsonRpcId): void {
    this.pending.touch(id)
  }

  /**
   * No answer in time: the caller is released, the target told to stop (as the SDK's client
   * does on its own timeout) and, over HTTP, the request's connection given back. A slow
   * server is not a broken one: it is not restarted.
   */
  private timeOut (id: JsonRpcId, method: string, ms: number): void {
    this.pending.fail(id, targetTimeout, `target "${this.name}" did not answer ${method} within ${ms} ms (requestTimeout)`)
    this.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: `no answer within ${ms} ms` } })
    this.transport?.abandon?.(id)
  }

  /** A request the gateway itself makes (initialize, fan-out), as a promise with a timeout. */
  call (message: { method: string, params?: Record<string, unknown> }, timeoutMs: number, via?: UpstreamTransport): Promise<JsonRpcResponse> {
    return new Promise(resolve => {
      const id = this.pending.newId()
      const transport = via ?? this.transport
      if (transport === null) {
        resolve(targetUnavailable(id, unavailableMessage(this.name, this.lastError)))
        return
      }
      const timer = setTimeout(() => {
        this.pending.forget(id)
        transport.abandon?.(id)
        resolve(targetTimeout(id, `target "${this.name}" did not answer ${message.method} within ${timeoutMs} ms`))
      }, timeoutMs)
      this.pending.add(id, message.method, r => {
        clearTimeout(timer)
        resolve(r)
      }, false)
      const request: JsonRpcRequest = { jsonrpc: '2.0', id, method: message.method }
      if (message.params !== undefined) request.params = message.params
      transport.send(request as JSONRPCMessage).catch((err: Error) => {
        clearTimeout(timer)
        this.pending.forget(id)
        resolve(targetUnavailable(id, `target "${this.name}" failed: ${err.message}`))
      })
    })
  }

  /** Sends a notification or a response (to a request the target made). */
  send (message: JsonRpcNotification | JsonRpcResponse): void {
    this.transport?.send(message as JSONRPCMessage).catch(() => {})
  }

  /** Forgets a pending request (the client cancelled it); a late response is dropped. */
  forget (id: JsonRpcId): void {
    this.pending.forget(id)
  }

  private onTransportMessage (message: JsonRpcMessage, related?: JsonRpcId): void {
    if (isResponse(message)) {
      this.pending.settle(message)
      return
    }
    // The SDK's client answers pings itself; so does the gateway (the client never sees them).
    if (isRequest(message) && message.method === 'ping') {
      this.send({ jsonrpc: '2.0', id: message.id, result: {} })
      return
    }
    this.hooks.onMessage(this, message, related)
  }

  private onTransportClose (transport: UpstreamTransport): void {
    if (transport instanceof StdioProcessTransport) this.hooks.onProcess?.(this, transport, false)
    if (this.transport !== transport || this.state === 'closed') return
    this.transport = null
    const reason = closeReason(this.name, this.spec.kind, transport)
    this.pending.failAll(targetUnavailable, reason)
    this.scheduleRestart(reason)
  }

  /** Restarts with backoff while the session lives (restart.ts). */
  private scheduleRestart (reason: string): void {
    if (this.state === 'closed' || this.clientInit === null) return
    this.setState('restarting', reason)
    this.backoff.schedule(() => {
      if (this.state === 'closed') return
      this.restarts++
      this.readyPromise = this.connect()
      this.readyPromise.catch(() => {})
    })
  }

  async close (): Promise<void> {
    const transport = this.shutDown()
    if (transport === null) return
    await transport.terminateSession?.().catch(() => {})
    await transport.close().catch(() => {})
  }

  /**
   * Lets the session go without ending it upstream (process shutdown of a replica: HTTP
   * upstream sessions stay usable from another replica). Stdio processes still end.
   */
  async detach (): Promise<void> {
    await this.shutDown()?.close().catch(() => {})
  }

  /** Marks the target closed, fails what waits on it, and hands over its transport (null if none, or already closed). */
  private shutDown (): UpstreamTransport | null {
    if (this.state === 'closed') return null
    this.setState('closed')
    this.backoff.cancel()
    const transport = this.transport
    this.transport = null
    this.pending.failAll(targetUnavailable, `target "${this.name}" closed`)
    return transport
  }
}
