/**
 * Warm spares for stdio targets: one server process per target command, started ahead of
 * time, so a new session's `initialize` does not wait for a process to start (a Node server
 * such as server-everything takes 300 ms or more to load; initialize itself, a few ms).
 *
 * Session isolation is unchanged: a spare is a fresh process that has received nothing — no
 * message, no other session's state — and a session that takes it owns it alone, as one it
 * had launched itself (its stderr and any message it wrote before being taken are handed
 * over, in order). Only the launch happened earlier. Same command, arguments, environment,
 * working directory and message limit, or it is not the same spare.
 *
 * Spares are kept for the stdio targets of stateful MCP backends (a stateless backend's
 * shared session starts its processes once). A spare is replaced when taken, not when it
 * dies on its own: a server that exits at once costs one launch per session, never a loop.
 * A config change stops the spares of commands no longer in it; shutdown stops them all.
 * A spare counts toward its target's maxProcesses: none is started while the sessions hold
 * them all, and one comes back (`refill`) when a session's process exits.
 */

import type { BackendIR, McpTargetIR } from '../../ir/types.ts'
import { StdioProcessTransport, type StdioTargetOptions } from './stdio.ts'

type StdioTarget = Extract<McpTargetIR, { kind: 'stdio' }>

export interface SpareProcess {
  pid: number
  backend: string
  target: string
  startedAt: string
}

export interface StdioSparesOptions {
  /** A spare's stderr before a session takes it, and why one could not start. */
  onLog?: (fields: Record<string, unknown>, message: string) => void
  /**
   * Whether the backend's stdio targets have room for a spare under their maxProcesses
   * (the gateway counts the sessions holding them); without it, always.
   */
  room?: (backend: string) => boolean
}

interface Entry {
  transport: StdioProcessTransport
  backend: string
  target: string
  startedAt: string
  /** A session has it: its failures are the session's to report. */
  taken: boolean
}

/** The launch options of a stdio target: what makes two launches the same process. */
export function stdioLaunchOptions (spec: StdioTarget): StdioTargetOptions {
  const options: StdioTargetOptions = { cmd: spec.cmd, args: spec.args, env: spec.env, maxLineBytes: spec.maxMessageBytes }
  if (spec.cwd !== undefined) options.cwd = spec.cwd
  return options
}

function keyOf (spec: StdioTarget): string {
  const { cmd, args, env, cwd, maxLineBytes } = stdioLaunchOptions(spec)
  return JSON.stringify([cmd, args, Object.entries(env).sort(), cwd ?? null, maxLineBytes])
}

export class StdioSpares {
  private readonly idle = new Map<string, Entry>()
  /** The commands spares are kept for, and where they come from (for /debug/tasks). */
  private wanted = new Map<string, { spec: StdioTarget, backend: string }>()
  private readonly options: StdioSparesOptions
  private closed = false

  constructor (options: StdioSparesOptions = {}) {
    this.options = options
  }

  /** After a config change: spares for the stdio targets of stateful backends, and no others. */
  sync (backends: Iterable<BackendIR>): void {
    const wanted = new Map<string, { spec: StdioTarget, backend: string }>()
    for (const b of backends) {
      if (b.kind !== 'mcp' || b.mcp === undefined || b.mcp.statefulMode === 'stateless') continue
      for (const t of b.mcp.targets) if (t.kind === 'stdio' && !wanted.has(keyOf(t))) wanted.set(keyOf(t), { spec: t, backend: b.name })
    }
    this.wanted = wanted
    for (const [key, entry] of [...this.idle]) {
      if (wanted.has(key)) continue
      this.idle.delete(key)
      void entry.transport.close().catch(() => {})
    }
    for (const key of wanted.keys()) this.prepare(key)
  }

  /**
   * A started process for this target that no one has used, or undefined (then the caller
   * launches its own). Taking one starts its replacement.
   */
  take (spec: StdioTarget): StdioProcessTransport | undefined {
    const key = keyOf(spec)
    const entry = this.idle.get(key)
    this.idle.delete(key)
    this.prepare(key)
    if (entry === undefined) return undefined
    entry.taken = true
    entry.transport.onclose = undefined
    if (entry.transport.usable) return entry.transport
    void entry.transport.close().catch(() => {})
    return undefined
  }

  /** Starts the spares that are missing and have room (a session's process exited). */
  refill (): void {
    for (const key of this.wanted.keys()) this.prepare(key)
  }

  private prepare (key: string): void {
    const want = this.wanted.get(key)
    if (this.closed || want === undefined || this.idle.has(key)) return
    const { spec, backend } = want
    if (this.options.room?.(backend) === false) return
    const transport = new StdioProcessTransport(stdioLaunchOptions(spec))
    const entry: Entry = { transport, backend, target: spec.name, startedAt: new Date().toISOString(), taken: false }
    this.idle.set(key, entry)
    // Until taken: a spare that exits or breaks the protocol is dropped, not replaced.
    const drop = () => {
      if (this.idle.get(key) === entry) this.idle.delete(key)
    }
    transport.onclose = drop
    transport.start().catch((err: Error) => {
      drop()
      if (!entry.taken) this.options.onLog?.({ backend, target: spec.name, err: err.message }, 'mcp stdio spare could not start; sessions launch their own')
    })
  }

  children (): SpareProcess[] {
    return [...this.idle.values()].flatMap(e => e.transport.pid === undefined ? [] : [{ pid: e.transport.pid, backend: e.backend, target: e.target, startedAt: e.startedAt }])
  }

  async close (): Promise<void> {
    this.closed = true
    const all = [...this.idle.values()]
    this.idle.clear()
    await Promise.allSettled(all.map(e => e.transport.close()))
  }
}
