/**
 * glibc's malloc_trim (malloc-trim.ts) when the process goes idle after work, the native
 * side's counterpart of V8's memory reducer.
 *
 * Why: under load every thread's malloc arena grows -- socket reads, Buffers, TLS records,
 * V8's compiler zones -- and what is freed when the load ends stays in the arena below blocks
 * still in use, as private memory, for as long as the process lives. V8's memory reducer
 * gives its own heap back some seconds into an idle spell; nothing gives back malloc's.
 * Measured (2026-12-06, WORKERS=1, plain routes, 10 s of wrk -c50, then 15 s idle, V8's
 * reducer included): private memory 37.0 MiB, and 22.2 MiB after one `malloc_trim(0)`.
 *
 * How: the primary looks at the process's CPU time (every thread's: `process.cpuUsage`) every
 * IDLE_TRIM_INTERVAL_MS. An interval that used BUSY_SHARE of a core or more is work; the
 * first TRIMS_PER_BURST intervals under IDLE_SHARE after work each trim once -- the first
 * gives back what the load freed, the second what V8's memory reducer frees a few seconds
 * later (the Buffers it collects free their malloc'd memory). A proxy that stays idle, or
 * only answers a scrape now and then, trims nothing. Only when every thread is idle: a trim
 * takes each arena's lock in turn and gives back pages a busy thread would fault in again.
 * Never on a request's path; unref'd, it keeps no process alive.
 */

import { readFileSync } from 'node:fs'
import { getHeapStatistics } from 'node:v8'
import { trimMalloc, type MallocTrim } from './malloc-trim.ts'

export const IDLE_TRIM_INTERVAL_MS = 10_000
/** An interval whose process CPU reached this share of one core counts as work. */
export const BUSY_SHARE = 0.05
/** An interval under this share of one core counts as idle. */
export const IDLE_SHARE = 0.01
/** Trims after a spell of work (see above). */
export const TRIMS_PER_BURST = 2

/** Trims still due since the last work. */
export interface IdleTrimState { due: number }

/**
 * One interval's decision: the state after it, and whether to act now (`perBurst` times after
 * each spell of work: trims here, a worker's collection in startWorkerIdleCollection).
 */
export function idleTrimStep (state: IdleTrimState, share: number, perBurst = TRIMS_PER_BURST): { state: IdleTrimState, trim: boolean } {
  if (share >= BUSY_SHARE) return { state: { due: perBurst }, trim: false }
  if (share < IDLE_SHARE && state.due > 0) return { state: { due: state.due - 1 }, trim: true }
  return { state, trim: false }
}

export interface IdleTrimOptions {
  intervalMs?: number
  /** The process's CPU time so far, microseconds (default: process.cpuUsage(), every thread). */
  cpuMicros?: () => number
  trim?: () => MallocTrim
  /** After each trim: what it did and the process's private memory before and after (MiB, Linux). */
  onTrim?: (report: { mallocTrim: MallocTrim, privateMiBBefore: number | null, privateMiBAfter: number | null }) => void
}

/** Starts the idle trimmer (see above); returns its stop. Stops by itself where there is no malloc_trim. */
export function startIdleTrim (options: IdleTrimOptions = {}): () => void {
  const intervalMs = options.intervalMs ?? IDLE_TRIM_INTERVAL_MS
  const cpuMicros = options.cpuMicros ?? (() => { const u = process.cpuUsage(); return u.user + u.system })
  const trim = options.trim ?? trimMalloc
  let state: IdleTrimState = { due: 0 }
  let lastCpu = cpuMicros()
  let lastAt = performance.now()
  const timer = setInterval(() => {
    const cpu = cpuMicros()
    const now = performance.now()
    const share = (cpu - lastCpu) / 1000 / Math.max(1, now - lastAt)
    lastCpu = cpu
    lastAt = now
    const step = idleTrimStep(state, share)
    state = step.state
    if (!step.trim) return
    const before = privateMiB()
    const mallocTrim = trim()
    if (mallocTrim === 'unavailable') clearInterval(timer)
    options.onTrim?.({ mallocTrim, privateMiBBefore: before, privateMiBAfter: privateMiB() })
    // The trim's own CPU is not work.
    lastCpu = cpuMicros()
  }, intervalMs)
  timer.unref()
  return () => clearInterval(timer)
}

/** The process's private memory (smaps_rollup), MiB; null where there is no /proc. */
function privateMiB (): number | null {
  try {
    const text = readFileSync('/proc/self/smaps_rollup', 'latin1')
    let kib = 0
    for (const m of text.matchAll(/^Private_(?:Clean|Dirty):\s+(\d+) kB/gm)) kib += Number(m[1])
    return Math.round(kib / 1024 * 10) / 10
  } catch {
    return null
  }
}

/**
 * A data-plane worker's memory-reducing collection when its loop goes idle after work: V8's
 * memory reducer, which does this in the primary some seconds into an idle spell, never ran
 * in a worker thread's isolate here (--trace-gc, WORKERS=2, 10 s of wrk -c50 then 25 s idle:
 * `Mark-Compact (reduce)` in the primary's isolate only; the worker's heap stayed at 30 MB
 * committed, its Buffers' malloc'd memory with it). Once per spell of work, at the first
 * interval of IDLE_TRIM_INTERVAL_MS its event loop was idle over (the thread's own
 * utilization: the shares above), `collect` runs (startup-gc.ts `reduceWorkerHeap`); the
 * primary's idle trim then gives back the malloc pages it freed.
 */
export function startWorkerIdleCollection (collect: () => boolean, options: WorkerIdleCollectionOptions = {}): () => void {
  let state: IdleTrimState = { due: 0 }
  const loopShare = options.loopShare ?? eventLoopShare()
  const timer = setInterval(() => {
    const step = idleTrimStep(state, loopShare(), 1)
    state = step.state
    if (step.trim) {
      const before = committedMiB()
      const collected = collect()
      options.onCollect?.({ collected, heapCommittedMiBBefore: before, heapCommittedMiBAfter: committedMiB() })
      // From now: the collection's own time is not work.
      loopShare()
    }
  }, options.intervalMs ?? IDLE_TRIM_INTERVAL_MS)
  timer.unref()
  return () => clearInterval(timer)
}

export interface WorkerIdleCollectionOptions {
  intervalMs?: number
  /** The share of the time since its last call the thread's event loop was busy (default: its utilization). */
  loopShare?: () => number
  onCollect?: (report: { collected: boolean, heapCommittedMiBBefore: number, heapCommittedMiBAfter: number }) => void
}

/** Each call: the event loop's utilization since the call before (the first: since this was made). */
function eventLoopShare (): () => number {
  let last = performance.eventLoopUtilization()
  return () => {
    const now = performance.eventLoopUtilization()
    const share = performance.eventLoopUtilization(now, last).utilization
    last = now
    return share
  }
}

/**
 * Whether Node was given `--no-memory-reducer` (on its command line, which worker threads
 * inherit, or in NODE_OPTIONS): then a worker runs no idle collection either, as the primary's
 * V8 runs no reducing GC (v8-flags.ts: Portico leaves the reducer on; a user's setting wins).
 * Here rather than beside v8-flags.ts's `...Given` checks: workers do not load that module.
 */
export function memoryReducerTurnedOff (execArgv: string[], nodeOptions: string | undefined): boolean {
  const flags = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].filter(a => /^--(no-)?memory[-_]reducer$/.test(a))
  return flags.at(-1) === '--no-memory-reducer' || flags.at(-1) === '--no-memory_reducer'
}

function committedMiB (): number {
  return Math.round(getHeapStatistics().total_heap_size / 1024 / 1024 * 10) / 10
}
