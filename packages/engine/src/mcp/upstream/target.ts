/**
 * One upstream MCP session with one target, on behalf of one gateway session: the transport
 * (one UpstreamTransport, transport.ts: stdio process, legacy SSE, streamable HTTP, or a
 * stateless 2026-07-28 target), the initialize handshake, request ids of
 * its own, and recovery — a stdio server that dies is restarted with backoff and
 * re-initialized with the client's parameters while the other targets keep working.
 *
 * A target's faults stay with it: every request it is sent has a deadline (requestTimeout;
 * progress restarts it), after which the caller gets TARGET_TIMEOUT and the target a
 * cancellation; a message past maxMessageSize gets a stdio server killed (then restarted,
 * as a crash) and an HTTP answer dropped, its callers answered with TARGET_UNAVAILABLE.
 */

import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import type { RelatedInfo, UpstreamTransport } from './transport.ts'
import { StreamableHttpClientTransport } from './streamable.ts'
import { openSseTransport } from './sse.ts'
import type { McpTargetIR } from '../../ir/types.ts'
import { StdioProcessTransport } from './stdio.ts'
import { stdioLaunchOptions, type StdioSpares } from './stdio-spares.ts'
import { ModernClientTransport, speaksModern } from './stateless.ts'
import {
  isRequest, isResponse, targetTimeout, targetUnavailable,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcNotification, type JsonRpcRequest, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import { MESSAGE_TOO_LARGE } from '../protocol/message-limits.ts'
import { PorticoError, isPorticoError } from '../../util/errors.ts'

export interface ClientInit {
  protocolVersion: string
  capabilities: Record<string, unknown>
  clientInfo: Record<string, unknown>
}

export interface TargetInitResult {
  protocolVersion: string
  capabilities: Record<string, unknown>
  serverInfo: Record<string, unknown>
  instructions?: string
}

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

interface Pending {
  respond: (response: JsonRpcResponse) => void
  method: string
  /** The requestTimeout deadline (requests from clients; the gateway's own calls time themselves). */
  timer: NodeJS.Timeout | undefined
}

export type TargetState = 'idle' | 'starting' | 'ready' | 'restarting' | 'closed'

const READY_WAIT_MS = 15_000
/** Longest a target's readiness waits for its GET stream to be answered. */
const STREAM_WAIT_MS = 10_000
const BACKOFF_START_MS = 250
const BACKOFF_MAX_MS = 30_000

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
  private nextId = 1
  private readonly pending = new Map<JsonRpcId, Pending>()
  private readonly hooks: TargetHooks
  private clientInit: ClientInit | null = null
  private readyPromise: Promise<void> | null = null
  private backoffMs = BACKOFF_START_MS
  private restartTimer: NodeJS.Timeout | undefined
  private readonly waiters = new Set<() => void>()

  private readonly spares: StdioSpares | undefined

  /** `spares`: where a stdio target takes a server process started ahead of time, if one is ready. */
  constructor (spec: McpTargetIR, hooks: TargetHooks, spares?: StdioSpares) {
    this.name = spec.name
    this.spec = spec
    this.hooks = hooks
    this.spares = spares
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
    if (state === 'ready' || state === 'closed') for (const w of [...this.waiters]) w()
  }

  /** The transport of the target's kind: one UpstreamTransport (transport.ts) each. */
  private createTransport (resumeSession?: string): UpstreamTransport {
    const spec = this.spec
    if (spec.kind === 'stdio') {
      const onStderr = (line: string) => this.hooks.onStderr?.(this, line)
      const spare = this.spares?.take(spec)
      if (spare !== undefined) {
        spare.onstderr = onStderr
        return spare
      }
      return new StdioProcessTransport({ ...stdioLaunchOptions(spec), onStderr })
    }
    if (spec.kind === 'sse') return openSseTransport(new URL(spec.url), spec.maxMessageBytes)
    const options: ConstructorParameters<typeof StreamableHttpClientTransport>[1] = { maxMessageBytes: spec.maxMessageBytes, requestTimeoutMs: spec.requestTimeoutMs }
    if (resumeSession !== undefined) options.sessionId = resumeSession
    return new StreamableHttpClientTransport(new URL(spec.url), options)
  }

  /** Makes `transport` this connection's, its events routed here. */
  private wire<T extends UpstreamTransport> (transport: T): T {
    this.transport = transport
    transport.onmessage = (message: JSONRPCMessage, extra?: unknown) => this.onTransportMessage(message as JsonRpcMessage, (extra as Partial<RelatedInfo> | undefined)?.relatedRequestId)
    transport.onclose = () => this.onTransportClose(transport)
    transport.onerror = err => {
      this.lastError = err.message
      // A stdio server's errors are its own doing (HTTP ones are mostly the network's).
      if (transport.kind === 'stdio' || isPorticoError(err, MESSAGE_TOO_LARGE)) this.hooks.onWarning?.(this, err.message)
    }
    transport.onrequestfailed = (id, err) => this.sendFailed(id, err)
    return transport
  }

  /**
   * A streamable HTTP target that refused initialize may speak only 2026-07-28: asked with
   * server/discover, and if so served through ModernClientTransport from then on (the
   * session's clients keep their initialize-era revision). Null when it is not one.
   */
  private async modernFallback (refused: UpstreamTransport): Promise<ModernClientTransport | null> {
    if (refused.kind !== 'streamable' || this.spec.kind !== 'mcp') return null
    const url = new URL(this.spec.url)
    if (!await speaksModern(url, Math.min(this.spec.requestTimeoutMs, 5_000), this.spec.maxMessageBytes)) return null
    this.transport = null
    void refused.close().catch(() => {})
    const init = this.clientInit!
    const modern = this.wire(new ModernClientTransport(url, { client: { capabilities: init.capabilities, clientInfo: init.clientInfo }, maxMessageBytes: this.spec.maxMessageBytes, requestTimeoutMs: this.spec.requestTimeoutMs }))
    await modern.start()
    return modern
  }

  private async connect (resume?: { session: string, result: TargetInitResult | null }): Promise<void> {
    this.setState('starting')
    let transport: UpstreamTransport = this.wire(this.createTransport(resume?.session))
    try {
      // A resumed upstream session: the protocol version must be known before start() opens
      // its GET stream (a server may refuse a request without MCP-Protocol-Version).
      if (resume !== undefined && transport instanceof StreamableHttpClientTransport) transport.setProtocolVersion(resume.result?.protocolVersion ?? this.clientInit!.protocolVersion)
      await transport.start()
      if (transport instanceof StdioProcessTransport) this.hooks.onProcess?.(this, transport, true)
      if (resume !== undefined && transport instanceof StreamableHttpClientTransport) {
        // The upstream session lives on; nothing else to negotiate.
        this.initResult = resume.result
        this.upstreamSession = resume.session
        if (this.initResult === null) await this.initialize(transport)
      } else {
        try {
          await this.initialize(transport)
        } catch (err) {
          const modern = await this.modernFallback(transport)
          if (modern === null) throw err
          transport = modern
          await this.initialize(transport)
        }
      }
      // Not ready before the stream for server-initiated messages is answered: a request
      // the target sends meanwhile (sampling, elicitation) would have nowhere to go and be
      // dropped. A target that holds it unanswered (headers only with a first event) delays
      // readiness by its requestTimeout at most, and never by more than STREAM_WAIT_MS.
      await (transport as UpstreamTransport).streamReady?.(Math.min(this.spec.requestTimeoutMs, STREAM_WAIT_MS))
      if (this.transport !== transport) return
      this.backoffMs = BACKOFF_START_MS
      this.setState('ready')
    } catch (err) {
      const reason = `target "${this.name}" failed to start: ${(err as Error).message}`
      this.failPending(reason)
      if (this.transport === transport) {
        this.transport = null
        void transport.close().catch(() => {})
        this.scheduleRestart(reason)
      }
      throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', reason)
    }
  }

  private async initialize (transport: UpstreamTransport): Promise<void> {
    const init = this.clientInit!
    const response = await this.call({ method: 'initialize', params: { protocolVersion: init.protocolVersion, capabilities: init.capabilities, clientInfo: init.clientInfo } }, this.spec.requestTimeoutMs, transport)
    if ('error' in response) throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `initialize failed: ${response.error.message}`)
    const result = response.result as unknown as TargetInitResult
    this.initResult = result
    if (transport instanceof StreamableHttpClientTransport) {
      transport.setProtocolVersion(result.protocolVersion)
      this.upstreamSession = transport.sessionId ?? null
    }
    await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
  }

  /** Resolves once the target is ready (waiting through a restart), or rejects naming it. */
  async ready (): Promise<void> {
    if (this.state === 'ready') return
    if (this.state === 'closed') throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `target "${this.name}" is closed`)
    if (this.state === 'starting' && this.readyPromise !== null) {
      await this.readyPromise
      return
    }
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(done)
        reject(new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `target "${this.name}" is unavailable${this.lastError !== null ? `: ${this.lastError}` : ''}`))
      }, READY_WAIT_MS)
      const done = () => {
        clearTimeout(timer)
        this.waiters.delete(done)
        if (this.state === 'ready') resolve()
        else reject(new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `target "${this.name}" is closed`))
      }
      this.waiters.add(done)
    })
  }

  /**
   * Sends a request with an id of this connection's own; `onResponse` gets the response
   * (or a gateway error naming the target if it goes away first). Returns the upstream id
   * (for cancellation).
   */
  request (message: { method: string, params?: Record<string, unknown> }, onResponse: (r: JsonRpcResponse) => void): JsonRpcId {
    const id = this.nextId++
    const transport = this.transport
    if (transport === null || this.state !== 'ready') {
      queueMicrotask(() => onResponse(targetUnavailable(id, `target "${this.name}" is unavailable${this.lastError !== null ? `: ${this.lastError}` : ''}`)))
      return id
    }
    const entry: Pending = { respond: onResponse, method: message.method, timer: undefined }
    this.pending.set(id, entry)
    this.arm(id, entry)
    const request: JsonRpcRequest = { jsonrpc: '2.0', id, method: message.method }
    if (message.params !== undefined) request.params = message.params
    transport.send(request as JSONRPCMessage).catch((err: Error) => this.sendFailed(id, err))
    return id
  }

  /** A request that cannot be answered: not sent, its stream broke, or its answer was too large. */
  private sendFailed (id: JsonRpcId, err: Error): void {
    const entry = this.pending.get(id)
    if (entry === undefined) return
    if (isPorticoError(err, MESSAGE_TOO_LARGE)) this.hooks.onWarning?.(this, `answer to ${entry.method} dropped: ${err.message}`)
    this.failRequest(id, targetUnavailable, `target "${this.name}" failed: ${err.message}`)
  }

  /** (Re)starts the requestTimeout of a pending request. */
  private arm (id: JsonRpcId, entry: Pending): void {
    clearTimeout(entry.timer)
    const ms = this.spec.requestTimeoutMs
    entry.timer = setTimeout(() => this.timeOut(id, ms), ms)
    entry.timer.unref()
  }

  /** The target showed it is still at work on a request (progress): its clock restarts. */
  touch (id: JsonRpcId): void {
    const entry = this.pending.get(id)
    if (entry?.timer !== undefined) this.arm(id, entry)
  }

  /**
   * No answer in time: the caller is released, the target told to stop (as the SDK's client
   * does on its own timeout) and, over HTTP, the request's connection given back. A slow
   * server is not a broken one: it is not restarted.
   */
  private timeOut (id: JsonRpcId, ms: number): void {
    const entry = this.pending.get(id)
    if (entry === undefined) return
    this.failRequest(id, targetTimeout, `target "${this.name}" did not answer ${entry.method} within ${ms} ms (requestTimeout)`)
    this.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: `no answer within ${ms} ms` } })
    this.transport?.abandon?.(id)
  }

  /** Answers a pending request with an error of the gateway's (no-op once it is answered). */
  private failRequest (id: JsonRpcId, error: (id: JsonRpcId, message: string) => JsonRpcMessage, message: string): void {
    const entry = this.pending.get(id)
    if (entry === undefined) return
    this.pending.delete(id)
    clearTimeout(entry.timer)
    entry.respond(error(id, message) as never)
  }

  /** A request the gateway itself makes (initialize, fan-out), as a promise with a timeout. */
  call (message: { method: string, params?: Record<string, unknown> }, timeoutMs: number, via?: UpstreamTransport): Promise<JsonRpcResponse> {
    return new Promise(resolve => {
      const id = this.nextId++
      const transport = via ?? this.transport
      const timer = setTimeout(() => {
        this.pending.delete(id)
        transport?.abandon?.(id)
        resolve(targetTimeout(id, `target "${this.name}" did not answer ${message.method} within ${timeoutMs} ms`))
      }, timeoutMs)
      this.pending.set(id, {
        respond: r => {
          clearTimeout(timer)
          resolve(r)
        },
        method: message.method,
        timer: undefined
      })
      if (transport === null) {
        clearTimeout(timer)
        this.pending.delete(id)
        resolve(targetUnavailable(id, `target "${this.name}" is unavailable${this.lastError !== null ? `: ${this.lastError}` : ''}`))
        return
      }
      const request: JsonRpcRequest = { jsonrpc: '2.0', id, method: message.method }
      if (message.params !== undefined) request.params = message.params
      transport.send(request as JSONRPCMessage).catch((err: Error) => {
        clearTimeout(timer)
        this.pending.delete(id)
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
    clearTimeout(this.pending.get(id)?.timer)
    this.pending.delete(id)
  }

  private onTransportMessage (message: JsonRpcMessage, related?: JsonRpcId): void {
    if (isResponse(message)) {
      const entry = message.id === null ? undefined : this.pending.get(message.id)
      if (entry === undefined) return
      this.pending.delete(message.id!)
      clearTimeout(entry.timer)
      entry.respond(message)
      return
    }
    if (isRequest(message) && message.method === 'ping') {
      this.send({ jsonrpc: '2.0', id: message.id, result: {} })
      return
    }
    this.hooks.onMessage(this, message, related)
  }

  private onTransportClose (transport: UpstreamTransport): void {
    if (transport instanceof StdioProcessTransport) {
      this.hooks.onProcess?.(this, transport, false)
    }
    if (this.transport !== transport || this.state === 'closed') return
    this.transport = null
    const exit = transport instanceof StdioProcessTransport && transport.exitInfo !== null
      ? ` (exit code ${transport.exitInfo.code ?? 'none'}${transport.exitInfo.signal !== null ? `, signal ${transport.exitInfo.signal}` : ''})`
      : ''
    const fault = transport.fault ?? null
    const reason = fault !== null
      ? `target "${this.name}" was ${this.spec.kind === 'stdio' ? 'killed' : 'disconnected'}: ${fault}; it is restarted`
      : `target "${this.name}" ${this.spec.kind === 'stdio' ? 'exited' : 'closed the connection'}${exit}`
    this.failPending(reason)
    this.scheduleRestart(reason)
  }

  private failPending (reason: string): void {
    for (const [id, entry] of [...this.pending]) {
      this.pending.delete(id)
      clearTimeout(entry.timer)
      entry.respond(targetUnavailable(id, reason))
    }
  }

  /** Restarts with exponential backoff (0.25 s doubling to 30 s) while the session lives. */
  private scheduleRestart (reason: string): void {
    if (this.state === 'closed' || this.clientInit === null) return
    this.setState('restarting', reason)
    const delay = this.backoffMs
    this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS)
    clearTimeout(this.restartTimer)
    this.restartTimer = setTimeout(() => {
      if (this.state === 'closed') return
      this.restarts++
      this.readyPromise = this.connect()
      this.readyPromise.catch(() => {})
    }, delay)
    this.restartTimer.unref()
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
    clearTimeout(this.restartTimer)
    const transport = this.transport
    this.transport = null
    this.failPending(`target "${this.name}" closed`)
    return transport
  }
}
