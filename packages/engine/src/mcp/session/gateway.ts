/**
 * All MCP sessions of one proxy: creating them (and minting their self-describing ids),
 * finding or resuming them by id on any replica, and ending them — on DELETE, when idle,
 * past a cap, or when their backend changed or left the config. A closed session's id
 * answers 404, and the client initializes again.
 *
 * This class holds the sessions by id and wires the parts that decide about them:
 *   caps.ts             maxSessions and the stdio process cap (admission, eviction)
 *   expiry.ts           when an idle session is closed
 *   shared-sessions.ts  the upstream sessions of stateless backends and 2026-07-28 clients
 *   backend-specs.ts    which backends a config change makes stale
 *   target-events.ts    the targets' reports logged, the sessions' stdio processes listed
 */

import type { BackendIR } from '../../ir/types.ts'
import { McpSession, type SessionHooks } from './session.ts'
import { SessionIdCodec } from './session-id.ts'
import type { ClientInit } from '../upstream/target.ts'
import { GATEWAY_INFO } from './merge.ts'
import type { SseWriter } from '../protocol/sse-writer.ts'
import { ModernTargets } from '../upstream/stateless-forward.ts'
import { ParkedCalls } from './modern-call.ts'
import { StdioSpares } from '../upstream/stdio-spares.ts'
import { Reservations, admitUnderCap, maxSessions, overMaxSessions, stdioProcessCap } from './caps.ts'
import { DEFAULT_SESSION_TTL_MS, expiryReason, sweepInterval } from './expiry.ts'
import { SharedSessions, modernShare, statelessInit } from './shared-sessions.ts'
import { BackendSpecs, mcpSpecs } from './backend-specs.ts'
import { TargetEvents, type McpChildProcess, type McpLogger } from './target-events.ts'

// What the rest of the engine and its tests reach through this door (mcp/ is entered here and at client/http.ts).
export { StdioCapacityError } from './caps.ts'
export type { McpChildProcess, McpLogger } from './target-events.ts'

export interface McpGatewayOptions {
  /** 64 hex digits; sessions ids minted with one key can be resumed by any replica with it. */
  sessionKey?: string
  /** Idle sessions are closed after this long (default 30 minutes). */
  sessionTtlMs?: number
  /**
   * Keep warm stdio spares (mcp/upstream/stdio-spares.ts); default true. A data-plane worker hands
   * every MCP request to the primary, so it would start spares no session ever takes.
   */
  spares?: boolean
  logger?: McpLogger
}

export class McpGateway {
  readonly codec: SessionIdCodec
  readonly ttlMs: number
  /** 2026-07-28 targets: revision probes and the pools 2026-07-28 requests are forwarded on. */
  readonly modernTargets = new ModernTargets({ clientInfo: GATEWAY_INFO })
  /** 2026-07-28 calls to initialize-era targets waiting for the client's input (mcp/session/modern-call.ts). */
  readonly parked: ParkedCalls
  /** Open subscriptions/listen streams of 2026-07-28 clients: each ends gracefully on a drain. */
  readonly listenStreams = new Set<() => void>()
  /** Legacy HTTP+SSE connections by id: the stream, and the session once initialized. */
  readonly legacy = new Map<string, { writer: SseWriter, session: McpSession | null }>()
  /** Stdio server processes started ahead of sessions (mcp/upstream/stdio-spares.ts); undefined when this gateway serves no sessions. */
  private readonly spares: StdioSpares | undefined
  private readonly logger: McpLogger | undefined
  private readonly events: TargetEvents
  private readonly sessions = new Map<string, McpSession>()
  private readonly resuming = new Map<string, Promise<McpSession | null>>()
  private readonly shared = new SharedSessions()
  private readonly specs = new BackendSpecs()
  /**
   * Ids ended here (DELETE, idle expiry, config change) and when to forget them: such an id
   * still decrypts, but must answer 404 rather than come back to life on this replica.
   */
  private readonly ended = new Map<string, number>()
  private readonly reaper: NodeJS.Timeout
  /** Draining: streams were ended on purpose, so a closed stream no longer means a client gone. */
  private draining = false
  /** Sessions admitted under the stdio process cap and still starting. */
  private readonly starting = new Reservations()
  /** Sessions ended whose targets are still stopping (their processes still count). */
  private readonly closing = new Set<McpSession>()

  constructor (options: McpGatewayOptions = {}) {
    this.codec = new SessionIdCodec(options.sessionKey)
    this.parked = new ParkedCalls(this.codec)
    this.ttlMs = options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS
    this.logger = options.logger
    // A session's process is gone: below the cap again, the spare comes back.
    this.events = new TargetEvents({ logger: this.logger, onExit: () => this.spares?.refill() })
    this.spares = options.spares === false
      ? undefined
      : new StdioSpares({
        onLog: (fields, message) => this.logger?.warn(fields, message),
        // The spare counts toward its target's maxProcesses: one is kept only while there is room.
        room: backendName => {
          const b = this.specs.byBackendName(backendName)
          const cap = b === undefined ? null : stdioProcessCap(b.spec)
          return cap === null || this.holding(b!.key) + 1 <= cap
        }
      })
    this.reaper = setInterval(() => this.reapIdle(), sweepInterval(this.ttlMs))
    this.reaper.unref()
  }

  /** A session of the backend, not started yet (every kind is built alike). */
  private newSession (backend: BackendIR, init: ClientInit, kind: { legacy?: boolean, shared?: boolean } = {}): McpSession {
    return new McpSession({ spec: backend.mcp!, backendKey: backend.key, init, hooks: this.hooks(backend), spares: this.spares, ...kind })
  }

  /** What a session's targets report, to the log and the list of stdio processes (mcp-stdio-spares.test.ts drives it with fake processes). */
  private hooks (backend: BackendIR): SessionHooks {
    return this.events.hooks(backend.name)
  }

  /** A new stateful session: every target started and initialized, then the id minted. */
  async createSession (backend: BackendIR, init: ClientInit): Promise<McpSession> {
    const release = await this.admit(backend)
    try {
      const session = this.newSession(backend, init)
      await session.start()
      session.id = this.codec.encode(session.state(SessionIdCodec.nonce()))
      this.sessions.set(session.id, session)
      this.specs.sessionStarted(backend)
      this.enforceLimit(backend, session)
      return session
    } finally {
      release()
    }
  }

  /**
   * Sessions of the backend that hold its stdio processes (one per stdio target each):
   * live, starting, stopping, legacy, and the shared ones of stateless backends and
   * 2026-07-28 clients.
   */
  private holding (backendKey: string): number {
    let n = this.starting.count(backendKey)
    for (const s of this.sessions.values()) if (s.backendKey === backendKey) n++
    for (const s of this.closing) if (s.backendKey === backendKey) n++
    for (const { session } of this.legacy.values()) if (session?.backendKey === backendKey) n++
    return n + this.shared.count(backendKey)
  }

  /** Room for one more session under the backend's stdio process cap (caps.ts); the function returned gives it back. */
  private async admit (backend: BackendIR): Promise<() => void> {
    const cap = stdioProcessCap(backend.mcp!)
    if (cap === null) return () => {}
    this.specs.rememberByName(backend)
    return await admitUnderCap(backend.name, backend.key, {
      cap,
      holding: () => this.holding(backend.key),
      sessions: () => this.sessions.values(),
      evict: session => this.endAndClose(session),
      reservations: this.starting,
      onEvict: () => this.logger?.info({ backend: backend.name, maxProcesses: cap }, 'mcp session closed: stdio process cap reached (least recently active session without a GET stream)')
    })
  }

  /** Past the backend's maxSessions, the least recently active sessions (not `keep`) are closed. */
  private enforceLimit (backend: BackendIR, keep: McpSession): void {
    for (const session of overMaxSessions(this.sessions.values(), backend.mcp!, backend.key, keep)) {
      this.logger?.info({ backend: backend.name, maxSessions: maxSessions(backend.mcp!) }, 'mcp session closed: too many sessions (least recently active)')
      void this.endAndClose(session)
    }
  }

  /**
   * The session for an id: in memory, or rebuilt from the id itself (minted by another
   * replica, or before a restart). Null when the id is not ours or names another backend.
   */
  async getSession (backend: BackendIR, id: string): Promise<McpSession | null> {
    const live = this.sessions.get(id)
    if (live !== undefined) return live.backendKey === backend.key ? live : null
    if (this.ended.has(id)) return null
    const pending = this.resuming.get(id)
    if (pending !== undefined) return await pending
    const state = this.codec.decode(id)
    if (state === null || state.backend !== backend.key) return null
    const job = (async () => {
      let release = () => {}
      try {
        release = await this.admit(backend)
        const session = this.newSession(backend, state.init)
        await session.start(state)
        session.id = id
        this.sessions.set(id, session)
        this.enforceLimit(backend, session)
        this.logger?.info({ backend: backend.name }, 'mcp session resumed from its id')
        return session
      } catch (err) {
        this.logger?.warn({ backend: backend.name, err: (err as Error).message }, 'mcp session could not be resumed')
        return null
      } finally {
        release()
      }
    })()
    this.resuming.set(id, job)
    try {
      return await job
    } finally {
      this.resuming.delete(id)
    }
  }

  async deleteSession (session: McpSession): Promise<void> {
    await this.endAndClose(session)
  }

  /**
   * Ends a session and stops its targets; until its stdio processes have exited it still
   * counts toward the stdio process cap (`holding`).
   */
  private async endAndClose (session: McpSession): Promise<void> {
    this.sessions.delete(session.id)
    this.ended.set(session.id, Date.now() + this.ttlMs)
    await this.stop(session)
  }

  /** A legacy HTTP+SSE session whose stream ended (mcp/client/http.ts): stopped as above. */
  closeLegacySession (session: McpSession): Promise<void> {
    return this.stop(session)
  }

  private async stop (session: McpSession): Promise<void> {
    this.closing.add(session)
    try {
      await session.close()
    } finally {
      this.closing.delete(session)
      // Below the cap again: the spare comes back.
      this.spares?.refill()
    }
  }

  /** Stateless backends share one upstream session per target, opened on first use (shared-sessions.ts). */
  statelessSession (backend: BackendIR): Promise<McpSession> {
    return this.shared.get(backend.key, () => this.openShared(backend, statelessInit(), false))
  }

  /**
   * The upstream session 2026-07-28 clients share, per backend and per set of input
   * capabilities they declare (shared-sessions.ts says why).
   */
  modernSession (backend: BackendIR, clientCapabilities: Record<string, unknown>): Promise<McpSession> {
    const share = modernShare(backend.key, clientCapabilities)
    return this.shared.get(share.key, () => this.openShared(backend, share.init(), true))
  }

  /** A shared session, starting (settles once every target is up, or the session failed). */
  private openShared (backend: BackendIR, init: ClientInit, shared: boolean): Promise<McpSession> {
    const started = (async () => {
      const session = this.newSession(backend, init, { shared })
      await session.start()
      return session
    })()
    this.specs.sessionStarted(backend)
    return started
  }

  /** A session of the legacy HTTP+SSE transport (created at `initialize`, ended with its stream). */
  async createLegacySession (backend: BackendIR, init: ClientInit, onStarted: (session: McpSession) => void): Promise<McpSession> {
    const release = await this.admit(backend)
    try {
      const session = this.newSession(backend, init, { legacy: true })
      await session.start()
      // Counted from here on by its entry in `legacy`, which `onStarted` sets.
      onStarted(session)
      return session
    } finally {
      release()
    }
  }

  /**
   * After a config change: sessions of backends that left the config, or whose MCP settings
   * changed, are closed (their stdio servers stopped); the rest carry on.
   */
  sync (backends: Iterable<BackendIR>): void {
    const list = [...backends]
    const current = mcpSpecs(list)
    const stale = (key: string) => this.specs.stale(key, current)
    for (const session of [...this.sessions.values()]) {
      if (!stale(session.backendKey)) continue
      void this.endAndClose(session)
    }
    this.shared.closeStale(stale)
    for (const [id, { writer, session }] of this.legacy) {
      if (session === null || !stale(session.backendKey)) continue
      this.legacy.delete(id)
      writer.end()
      void this.stop(session)
    }
    this.specs.update(list, current)
    this.spares?.sync(list)
  }

  /** Every second: idle sessions closed (expiry.ts), and ended ids forgotten after the TTL. */
  private reapIdle (): void {
    const now = Date.now()
    for (const session of [...this.sessions.values()]) {
      const reason = expiryReason(session, now, this.ttlMs, this.draining)
      if (reason === null) continue
      this.logger?.info({ backend: session.backendKey }, reason)
      void this.endAndClose(session)
    }
    for (const [id, until] of this.ended) if (until < now) this.ended.delete(id)
  }

  get sessionCount (): number {
    return this.sessions.size
  }

  /** Stdio servers: those of sessions, then the spares no session has taken yet (target `<name> (spare)`). */
  children (): McpChildProcess[] {
    return [...this.events.running(), ...(this.spares?.children() ?? []).map(c => ({ ...c, target: `${c.target} (spare)` }))]
  }

  /**
   * Start of a drain: the session streams (GET, legacy SSE) end so they do not hold the
   * drain open; clients reconnect, to another replica if need be. Requests in flight finish.
   */
  endStreams (): void {
    // The upstream sessions stay for other replicas to resume (close() detaches them).
    this.draining = true
    for (const s of this.sessions.values()) s.stream.close()
    for (const { writer } of this.legacy.values()) writer.end()
    for (const end of [...this.listenStreams]) end()
    this.listenStreams.clear()
  }

  /** Shutdown: stdio servers stop; upstream HTTP sessions are left for other replicas. */
  async close (): Promise<void> {
    clearInterval(this.reaper)
    const all: Array<Promise<unknown>> = []
    for (const s of this.sessions.values()) all.push(s.detach())
    for (const { writer, session } of this.legacy.values()) {
      writer.end()
      if (session !== null) all.push(session.close())
    }
    // After the legacy streams ended: until then the shared sessions still count toward the stdio cap.
    all.push(...this.shared.close())
    this.sessions.clear()
    this.legacy.clear()
    all.push(this.modernTargets.close())
    if (this.spares !== undefined) all.push(this.spares.close())
    this.parked.clear()
    await Promise.allSettled(all)
  }
}
