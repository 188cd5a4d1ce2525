/**
 * All MCP sessions of one proxy: creating them (and minting their self-describing ids),
 * finding or resuming them by id, the shared upstream sessions of stateless backends, idle
 * expiry, and closing sessions whose backend changed or left the config.
 *
 * Clients often vanish without DELETE; each session holds an upstream session and GET
 * stream per target, so those are let go early: a session whose client closed its GET
 * stream, with no request in flight and no activity since, is closed after the backend's
 * sessionIdleTimeout (default 60 s) rather than the 30-minute TTL, and a backend keeps at
 * most maxSessions live sessions (the least recently active one is closed past it). A
 * closed session's id answers 404, and the client initializes again.
 *
 * A stdio target costs a process per session (tens of MB each), so those are bounded more
 * tightly: a session holding stdio processes whose client has no GET stream open is closed
 * after the backend's stdioSessionIdleTimeout (default 5 min) without a request, and a stdio
 * target runs at most maxProcesses processes (default 8, its warm spare included). At the cap
 * a new session first closes the least recently active session that looks abandoned (no GET
 * stream open, nothing in flight); with none, it is refused (HTTP 503) rather than cutting
 * off a connected client — as Envoy's and nginx's connection limits refuse the newcomer.
 */

import type { BackendIR, McpBackendSpecIR } from '../../ir/types.ts'
import { McpSession, type SessionHooks } from './session.ts'
import { SessionIdCodec } from './session-id.ts'
import type { ClientInit } from '../upstream/target.ts'
import { LATEST_PROTOCOL_VERSION } from '../protocol/jsonrpc.ts'
import { GATEWAY_INFO } from './merge.ts'
import type { SseWriter } from '../protocol/sse-writer.ts'
import { ModernTargets } from '../upstream/stateless-forward.ts'
import { ParkedCalls } from './modern-call.ts'
import { StdioSpares } from '../upstream/stdio-spares.ts'
import type { StdioProcessTransport } from '../upstream/stdio.ts'

const DEFAULT_SESSION_IDLE_TIMEOUT_MS = 60_000
/** Absent in older IR: a stdio session with no GET stream open is closed after 5 idle minutes. */
const DEFAULT_STDIO_SESSION_IDLE_TIMEOUT_MS = 5 * 60_000
/** Absent in older IR: a stdio target runs at most this many processes (the spare included). */
const DEFAULT_STDIO_MAX_PROCESSES = 8
/** The client capabilities Portico bridges for 2026-07-28 clients (mcp/session/modern-call.ts), in key order. */
const INPUT_CAPABILITIES = ['elicitation', 'roots', 'sampling']
/** Marks the stateless-map keys of 2026-07-28 sessions: `<backend key>#2026#<capabilities>`. */
const MODERN_KEY = '#2026#'
const DEFAULT_MAX_SESSIONS = 1000
/** How often sessions are checked for expiry (the idle grace is counted from the check). */
const SWEEP_MS = 1_000

export interface McpLogger {
  debug(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
  warn(fields: Record<string, unknown>, message: string): void
}

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

export interface McpChildProcess {
  pid: number
  backend: string
  target: string
  startedAt: string
}

export const DEFAULT_SESSION_TTL_MS = 30 * 60_000

/**
 * A new session of a backend whose stdio targets run their maxProcesses processes, none of
 * them held by a session that looks abandoned: answered HTTP 503 (mcp/client/http.ts).
 */
export class StdioCapacityError extends Error {
  readonly backend: string
  readonly maxProcesses: number
  constructor (backend: string, maxProcesses: number) {
    super(`backend ${backend}: its stdio targets run their maxProcesses (${maxProcesses}) processes, each held by a session in use; try again later`)
    this.backend = backend
    this.maxProcesses = maxProcesses
  }
}

/** Most sessions of a backend that may hold its stdio processes at once (its targets' smallest maxProcesses), or null without stdio targets. */
export function stdioProcessCap (spec: McpBackendSpecIR): number | null {
  let cap: number | null = null
  for (const t of spec.targets) if (t.kind === 'stdio') cap = Math.min(cap ?? Infinity, t.maxProcesses ?? DEFAULT_STDIO_MAX_PROCESSES)
  return cap
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
  /** Stdio server processes started ahead of sessions (mcp/upstream/stdio-spares.ts); undefined when this gateway serves no sessions. */
  private readonly spares: StdioSpares | undefined
  private readonly logger: McpLogger | undefined
  private readonly sessions = new Map<string, McpSession>()
  private readonly resuming = new Map<string, Promise<McpSession | null>>()
  private readonly stateless = new Map<string, Promise<McpSession>>()
  /** Legacy HTTP+SSE connections by id: the stream, and the session once initialized. */
  readonly legacy = new Map<string, { writer: SseWriter, session: McpSession | null }>()
  /**
   * Stdio servers of sessions, by transport rather than pid: the exit of one process must not
   * remove another that was given its pid since, and an exited one is never listed.
   */
  private readonly processes = new Map<StdioProcessTransport, McpChildProcess>()
  private readonly specs = new Map<string, string>()
  /**
   * Ids ended here (DELETE, idle expiry, config change) and when to forget them: such an id
   * still decrypts, but must answer 404 rather than come back to life on this replica.
   */
  private readonly ended = new Map<string, number>()
  private readonly reaper: NodeJS.Timeout
  /** Draining: streams were ended on purpose, so a closed stream no longer means a client gone. */
  private draining = false
  /** Sessions admitted under the stdio process cap and still starting, by backend key. */
  private readonly starting = new Map<string, number>()
  /** Sessions ended whose targets are still stopping (their processes still count). */
  private readonly closing = new Set<McpSession>()
  /** Backend keys by name, for the spares' room check (a spare knows its backend by name). */
  private readonly backendSpecs = new Map<string, { key: string, spec: McpBackendSpecIR }>()

  constructor (options: McpGatewayOptions = {}) {
    this.codec = new SessionIdCodec(options.sessionKey)
    this.parked = new ParkedCalls(this.codec)
    this.ttlMs = options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS
    this.logger = options.logger
    this.spares = options.spares === false
      ? undefined
      : new StdioSpares({
        onLog: (fields, message) => this.logger?.warn(fields, message),
        // The spare counts toward its target's maxProcesses: one is kept only while there is room.
        room: backendName => {
          const b = this.backendSpecs.get(backendName)
          const cap = b === undefined ? null : stdioProcessCap(b.spec)
          return cap === null || this.holding(b!.key) + 1 <= cap
        }
      })
    this.reaper = setInterval(() => this.reapIdle(), Math.min(SWEEP_MS, this.ttlMs / 4))
    this.reaper.unref()
  }

  private hooks (backend: BackendIR): SessionHooks {
    return {
      onProcess: (target, process, running) => {
        // An exited process's transport no longer knows its pid: the one recorded at start is logged.
        const pid = running ? process.pid : this.processes.get(process)?.pid
        if (running && pid !== undefined) this.processes.set(process, { pid, backend: backend.name, target, startedAt: new Date().toISOString() })
        else {
          this.processes.delete(process)
          // A session's process is gone: below the cap again, the spare comes back.
          this.spares?.refill()
        }
        this.logger?.debug({ backend: backend.name, target, pid }, running ? 'mcp stdio server started' : 'mcp stdio server exited')
      },
      onStderr: (target, line) => this.logger?.debug({ backend: backend.name, target, line }, 'mcp stdio server stderr'),
      onTargetState: (target, state, detail) => {
        if (state === 'restarting') this.logger?.warn({ backend: backend.name, target, detail }, 'mcp target down; restarting')
      },
      onWarning: (target, detail) => this.logger?.warn({ backend: backend.name, target, detail }, 'mcp target broke the protocol')
    }
  }

  /** A new stateful session: every target started and initialized, then the id minted. */
  async createSession (backend: BackendIR, init: ClientInit): Promise<McpSession> {
    const release = await this.admit(backend)
    try {
      const session = new McpSession({ spec: backend.mcp!, backendKey: backend.key, init, hooks: this.hooks(backend), spares: this.spares })
      await session.start()
      session.id = this.codec.encode(session.state(SessionIdCodec.nonce()))
      this.sessions.set(session.id, session)
      this.specs.set(backend.key, JSON.stringify(backend.mcp))
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
    let n = this.starting.get(backendKey) ?? 0
    for (const s of this.sessions.values()) if (s.backendKey === backendKey) n++
    for (const s of this.closing) if (s.backendKey === backendKey) n++
    for (const { session } of this.legacy.values()) if (session?.backendKey === backendKey) n++
    for (const key of this.stateless.keys()) if (key === backendKey || key.startsWith(backendKey + MODERN_KEY)) n++
    return n
  }

  /**
   * Room for one more session holding the backend's stdio processes, reserved before any
   * process starts (the returned function gives the reservation back once the session is
   * live or failed). At the cap, the least recently active session that looks abandoned —
   * no GET stream open, nothing in flight — is closed first, and its processes have exited
   * before the new ones start; with none, StdioCapacityError.
   */
  private async admit (backend: BackendIR): Promise<() => void> {
    const cap = stdioProcessCap(backend.mcp!)
    if (cap === null) return () => {}
    this.backendSpecs.set(backend.name, { key: backend.key, spec: backend.mcp! })
    while (this.holding(backend.key) >= cap) {
      let victim: McpSession | undefined
      for (const s of this.sessions.values()) {
        if (s.backendKey !== backend.key || s.busy || s.stream.connected) continue
        if (victim === undefined || s.lastActivity < victim.lastActivity) victim = s
      }
      if (victim === undefined) throw new StdioCapacityError(backend.name, cap)
      this.logger?.info({ backend: backend.name, maxProcesses: cap }, 'mcp session closed: stdio process cap reached (least recently active session without a GET stream)')
      await this.endAndClose(victim)
    }
    this.starting.set(backend.key, (this.starting.get(backend.key) ?? 0) + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = (this.starting.get(backend.key) ?? 1) - 1
      if (left > 0) this.starting.set(backend.key, left)
      else this.starting.delete(backend.key)
    }
  }

  /** Past the backend's maxSessions, the least recently active sessions (not `keep`) are closed. */
  private enforceLimit (backend: BackendIR, keep: McpSession): void {
    const max = backend.mcp?.maxSessions ?? DEFAULT_MAX_SESSIONS
    const mine = [...this.sessions.values()].filter(s => s.backendKey === backend.key && s !== keep)
    if (mine.length + 1 <= max) return
    mine.sort((a, b) => a.lastActivity - b.lastActivity)
    for (const session of mine.slice(0, mine.length + 1 - max)) {
      this.logger?.info({ backend: backend.name, maxSessions: max }, 'mcp session closed: too many sessions (least recently active)')
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
        const session = new McpSession({ spec: backend.mcp!, backendKey: backend.key, init: state.init, hooks: this.hooks(backend), spares: this.spares })
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

  private end (session: McpSession): void {
    this.sessions.delete(session.id)
    this.ended.set(session.id, Date.now() + this.ttlMs)
  }

  /**
   * Ends a session and stops its targets; until its stdio processes have exited it still
   * counts toward the stdio process cap (`holding`).
   */
  private async endAndClose (session: McpSession): Promise<void> {
    this.end(session)
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

  /** Stateless backends share one upstream session per target, opened on first use. */
  statelessSession (backend: BackendIR): Promise<McpSession> {
    let s = this.stateless.get(backend.key)
    if (s === undefined) {
      const init: ClientInit = { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: GATEWAY_INFO }
      s = (async () => {
        const session = new McpSession({ spec: backend.mcp!, backendKey: backend.key, init, hooks: this.hooks(backend), spares: this.spares })
        await session.start()
        return session
      })()
      this.stateless.set(backend.key, s)
      s.catch(() => this.stateless.delete(backend.key))
      this.specs.set(backend.key, JSON.stringify(backend.mcp))
    }
    return s
  }

  /**
   * The upstream session 2026-07-28 clients share, per backend and per set of input
   * capabilities they declare (sampling, elicitation, roots: at most 8 sessions a backend).
   * Targets of that era decide what to ask from the session's capabilities, so a client
   * that cannot answer elicitation is served by a session that never declared it — the
   * target takes its other path (or says -32021), as it would with that client directly.
   * mcp/session/modern-call.ts puts each input request to the client whose call it belongs to. A
   * target's request that belongs to no call is refused: there is no one to ask.
   */
  modernSession (backend: BackendIR, clientCapabilities: Record<string, unknown>): Promise<McpSession> {
    const bridged = INPUT_CAPABILITIES.filter(c => c in clientCapabilities)
    const key = `${backend.key}${MODERN_KEY}${bridged.join(',')}`
    let s = this.stateless.get(key)
    if (s === undefined) {
      const init: ClientInit = { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: Object.fromEntries(bridged.map(c => [c, {}])), clientInfo: GATEWAY_INFO }
      s = (async () => {
        const session = new McpSession({ spec: backend.mcp!, backendKey: backend.key, init, hooks: this.hooks(backend), spares: this.spares, shared: true })
        await session.start()
        return session
      })()
      this.stateless.set(key, s)
      s.catch(() => this.stateless.delete(key))
      this.specs.set(backend.key, JSON.stringify(backend.mcp))
    }
    return s
  }

  /** A session of the legacy HTTP+SSE transport (created at `initialize`, ended with its stream). */
  async createLegacySession (backend: BackendIR, init: ClientInit, onStarted: (session: McpSession) => void): Promise<McpSession> {
    const release = await this.admit(backend)
    try {
      const session = new McpSession({ spec: backend.mcp!, backendKey: backend.key, init, hooks: this.hooks(backend), spares: this.spares, legacy: true })
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
    const current = new Map<string, McpBackendSpecIR>()
    for (const b of list) if (b.kind === 'mcp' && b.mcp !== undefined) current.set(b.key, b.mcp)
    const stale = (key: string) => {
      const spec = current.get(key)
      return spec === undefined || (this.specs.has(key) && this.specs.get(key) !== JSON.stringify(spec))
    }
    for (const session of [...this.sessions.values()]) {
      if (!stale(session.backendKey)) continue
      void this.endAndClose(session)
    }
    for (const [key, s] of this.stateless) {
      // `<backend key>#2026#<capabilities>`: a 2026-07-28 clients' session of that backend.
      if (!stale(key.includes(MODERN_KEY) ? key.slice(0, key.indexOf(MODERN_KEY)) : key)) continue
      this.stateless.delete(key)
      void s.then(session => session.close(), () => {})
    }
    for (const [id, { writer, session }] of this.legacy) {
      if (session === null || !stale(session.backendKey)) continue
      this.legacy.delete(id)
      writer.end()
      void this.stop(session)
    }
    for (const key of [...this.specs.keys()]) {
      if (!current.has(key)) this.specs.delete(key)
      else this.specs.set(key, JSON.stringify(current.get(key)))
    }
    this.backendSpecs.clear()
    for (const b of list) if (b.kind === 'mcp' && b.mcp !== undefined) this.backendSpecs.set(b.name, { key: b.key, spec: b.mcp })
    this.spares?.sync(list)
  }

  private reapIdle (): void {
    const now = Date.now()
    const cutoff = now - this.ttlMs
    for (const session of [...this.sessions.values()]) {
      const expired = session.lastActivity < cutoff
      const gone = !expired && this.clientGone(session, now)
      const stdioIdle = !expired && !gone && this.stdioIdle(session, now)
      if (!expired && !gone && !stdioIdle) continue
      this.logger?.info({ backend: session.backendKey }, expired ? 'mcp session expired after being idle' : gone ? 'mcp session closed: its client went away' : 'mcp session closed: idle with stdio processes and no GET stream (stdioSessionIdleTimeout)')
      void this.endAndClose(session)
    }
    for (const [id, until] of this.ended) if (until < now) this.ended.delete(id)
  }

  /**
   * The client closed its GET stream and has had nothing in flight, nor any activity, for
   * the backend's sessionIdleTimeout. A client that never opened a GET stream is not
   * judged by this (it has nothing to close): the TTL and maxSessions bound it.
   */
  private clientGone (session: McpSession, now: number): boolean {
    const since = session.stream.disconnectedAt
    if (since === null || session.busy || this.draining) return false
    const grace = session.spec.sessionIdleTimeoutMs ?? DEFAULT_SESSION_IDLE_TIMEOUT_MS
    return now - Math.max(since, session.lastActivity) >= grace
  }

  /**
   * A session holding stdio processes (each tens of MB) whose client has no GET stream open
   * and nothing in flight, idle for the backend's stdioSessionIdleTimeout: most likely a
   * client that left without DELETE (one that never opened a GET stream included).
   */
  private stdioIdle (session: McpSession, now: number): boolean {
    if (session.busy || session.stream.connected || this.draining || stdioProcessCap(session.spec) === null) return false
    const limit = session.spec.stdioSessionIdleTimeoutMs ?? DEFAULT_STDIO_SESSION_IDLE_TIMEOUT_MS
    return now - Math.max(session.stream.disconnectedAt ?? 0, session.lastActivity) >= limit
  }

  get sessionCount (): number {
    return this.sessions.size
  }

  /** Stdio servers: those of sessions, then the spares no session has taken yet (target `<name> (spare)`). */
  children (): McpChildProcess[] {
    // Only processes still running: an exited one's transport no longer has a pid.
    const sessions = [...this.processes].flatMap(([process, info]) => process.pid === info.pid ? [info] : [])
    return [...sessions, ...(this.spares?.children() ?? []).map(c => ({ ...c, target: `${c.target} (spare)` }))]
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
    for (const s of this.stateless.values()) all.push(s.then(x => x.close(), () => {}))
    for (const { writer, session } of this.legacy.values()) {
      writer.end()
      if (session !== null) all.push(session.close())
    }
    this.sessions.clear()
    this.stateless.clear()
    this.legacy.clear()
    all.push(this.modernTargets.close())
    if (this.spares !== undefined) all.push(this.spares.close())
    this.parked.clear()
    await Promise.allSettled(all)
  }
}
