/**
 * What the admin server sees of the running proxy: the reads its pages and the web UI's API
 * make, and the few actions it performs, named below. The Portico (portico.ts) implements it;
 * admin modules import this module, never portico.ts — so the admin server cannot reach into
 * config sources, reloads or shutdown, and portico.ts and admin/ do not import each other.
 */

import type { Engine } from '@portico/engine'
import type { Logs } from '@portico/ops'
import type { ChildProcessInfo } from '../data-plane.ts'
import type { ListenerSnapshot } from '../listeners.ts'
import type { Settings } from '../settings.ts'
import type { WorkerPool } from '../workers/pool.ts'
import type { ListenerAddress } from '../workers/protocol.ts'

/** One config load or reload, for /config_dump and the UI's overview. */
export interface ReloadRecord {
  at: string
  ok: boolean
  version?: string
  errors?: string[]
}

/**
 * `/debug/tasks` of one event loop (admin/tasks.ts): a data-plane worker's DataPlane answers it
 * for its thread as the Portico does for the primary.
 */
export interface TasksView {
  readonly engine: Pick<Engine, 'inFlight'> & { readonly pools: Pick<Engine['pools'], 'stats'>, readonly hub: Pick<Engine['hub'], 'watcherCount'> }
  readonly listeners: { snapshot(): ListenerSnapshot[] }
  children(): ChildProcessInfo[]
}

/**
 * The data-plane workers as admin sees them. Reads: `info`, `heaps`, `tasks`. Actions:
 * `terminate` (/debug/workers/terminate), `profile` (a CPU profile of one worker) and
 * `armTrace` (/debug/trace: a one-shot tap on every worker).
 */
export type AdminWorkers = Pick<WorkerPool, 'info' | 'heaps' | 'tasks' | 'terminate' | 'profile' | 'armTrace'>

export interface AdminView extends TasksView {
  readonly settings: Settings
  readonly startedAt: Date
  /** Ports the admin, metrics and readiness servers actually listen on (0 = off). */
  readonly ports: Readonly<{ admin: number, stats: number, readiness: number }>
  /** Most recent first. */
  readonly reloads: readonly ReloadRecord[]
  /**
   * The engine's installed config, backend stats and env (/config_dump, the UI), its requests
   * in flight and pools (/debug/tasks), and its trace hub, where /debug/trace arms a tap (an action).
   */
  readonly engine: TasksView['engine'] & Pick<Engine, 'config' | 'backendStats' | 'env' | 'hub'>
  /** The log filter: `current` to show it; `set` (an action: POST /logging, the UI) changes it for every thread. */
  readonly logs: Pick<Logs, 'current' | 'set'>
  /** The data-plane workers when there are (settings.workers > 1), else null. */
  readonly pool: AdminWorkers | null
  /** What readiness still waits for; empty when ready. */
  pending(): string[]
  /** Where the data plane listens (the UI's "send" and MCP playground go only there). */
  addresses(): ListenerAddress[]
  /** The mesh identity's state: never the key or the token. */
  meshStatus(): Record<string, unknown>
}
