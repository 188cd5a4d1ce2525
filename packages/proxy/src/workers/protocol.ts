/**
 * What the primary (main thread) and the data-plane workers (worker threads) say to each
 * other. Requests carry an `id` the answer repeats; the IR travels as JSON text (parsing it
 * is several times faster than structured-clone deserialization, config-loader.ts).
 */

import type { Settings } from '../settings.ts'
import type { TraceQuery } from '../admin/trace-stream.ts'
import type { MeshPem } from '../mesh-identity.ts'

/** Int32 slots of the control buffer. */
export const CONTROL = {
  /** The config generation in force: a worker's staged config of this generation or less goes live. */
  generation: 0,
  /** Worker N's heartbeat is slot heartbeat + N: its event loop adds 1 every HEARTBEAT_MS. */
  heartbeat: 1
} as const
export const CONTROL_INTS = 1 + 1 + 256
export const HEARTBEAT_MS = 500
/** A worker whose heartbeat has not moved for this long is stalled (readiness says so). */
export const STALLED_AFTER_MS = 5_000

/** Claim slots for armed traces (a slot holds the arm id until a thread takes it). */
export const TRACE_SLOTS = 256

export interface WorkerInit {
  /** 1-based worker number (logs, /debug/workers, metrics). */
  index: number
  settings: Settings
  /** The log filter in force (it may have changed since start). */
  logLevel: string
  /** The process session key: every thread mints and reads the same cookies and ids. */
  sessionKey: string
  env: Record<string, string>
  control: SharedArrayBuffer
  traceSlots: SharedArrayBuffer
  backends: SharedArrayBuffer
  /** Where MCP requests go: the primary's internal socket, and the token it wants. */
  handoff: { socketPath: string, token: string }
  /** WORKER_ACCEPT=primary: where this worker takes the connections the primary hands over (intake.ts). */
  intake: { path: string, token: string } | null
}

export type ToWorker =
  | { type: 'prepare', id: number, generation: number, ir: string, buckets: SharedArrayBuffer | null, slots: Record<string, number> }
  | { type: 'commit', id: number, generation: number }
  | { type: 'abort', id: number, generation: number }
  | { type: 'trace-arm', id: number, arm: number, slot: number, query: TraceQuery }
  | { type: 'trace-disarm', arm: number }
  | { type: 'metrics', id: number }
  | { type: 'tasks', id: number }
  | { type: 'profile', id: number, seconds: number }
  | { type: 'log-level', level: string }
  | { type: 'drain', id: number, deadlineMs: number }
  /** The mesh CA's certificate in force (the primary asks the CA for the process: mesh-identity.ts). */
  | { type: 'mesh-certificate', pem: MeshPem }

export type FromWorker =
  | { type: 'ready' }
  | { type: 'reply', id: number, ok: true, value: unknown }
  | { type: 'reply', id: number, ok: false, error: string }
  | { type: 'trace-event', arm: number, event: unknown }
  /**
   * Records the worker's requests left, for the primary to export (one export thread for the
   * process, started by a thread that serves no requests): ended spans, OTLP access-log records.
   */
  | { type: 'records', kind: 'spans' | 'logs', records: unknown[] }

export interface ListenerAddress {
  key: string
  protocol: string
  address: string
  port: number
}
