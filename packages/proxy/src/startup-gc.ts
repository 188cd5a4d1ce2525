/**
 * One full garbage collection once start-up is done, so that what start-up let go -- the
 * config validator above all (config/validate.ts `releaseValidator`: its 3.8 MB source,
 * 3 MB of bytecode and its schema objects) -- leaves the process before it serves, instead of
 * at V8's next full GC, which an idle proxy runs late if at all (V8's memory reducer, on by
 * default and in Portico since 2026-12-06, v8-flags.ts, reduces some 10 s into an idle; with
 * a user's --no-memory-reducer, never). Idle private memory 52.5 -> about 46.5 MiB with one
 * event loop (docs/multicore.md, Memory), for two full GCs on the main thread once (below). The second is V8's
 * memory-reducing collection when the loop is idle (REDUCING_GC, reducingWhenIdle): the young
 * generation shrunk from 8 MiB to 1 and the old generation compacted, 44.8 -> 33.8 MiB idle
 * (bench/footprint.ts, one run); data-plane workers get it too (collectWorkerStartupGarbage).
 * After the reducing collection, glibc's malloc_trim gives back the malloc pages start-up
 * freed in every thread's arena (malloc-trim.ts): 10.7 -> 5.3 MiB a worker's arena.
 *
 * Two settings make that GC find the validator dead:
 * - `--no-compilation-cache` (COMPILATION_CACHE_FLAG, set by bin/portico.ts before any module
 *   loads): V8's in-isolate cache of compiled scripts held the validator's script until its
 *   bytecode was flushed, several full GCs later. It only serves code compiled twice in one
 *   isolate from the same source (eval, `new Function`, the same module loaded again), which
 *   no request does here; a reload's validator comes from Node's compile cache.
 * - two collections, a second after the release: a GC from start-up's own turn found the
 *   validator still reachable in two starts of three, and two in the next turn of the event
 *   loop in two test runs of four (start-up's suspended async frames, which keep their
 *   temporaries, and its last I/O are the likely holders; not traced); and a `gc()` while
 *   V8's incremental marking is under way finishes that cycle, whose marks predate the
 *   release (one collection missed it in about half the starts). A second later, two
 *   collections missed it in none of 12 starts (e2e/test/heap.test.ts, bench runs).
 *   Measured under --trace-gc on the shared machine: 28 ms (34.3 -> 21.0 MB of heap used),
 *   then 53 ms.
 *
 * Node offers no `gc` without `--expose-gc`, which would put it on the global object of
 * every thread: `takeGc` sets the flag for as long as it takes to create one context, which
 * gets the function, then clears it. It must run before any module is compiled (bin/portico.ts
 * calls it first): the flags are part of the key of Node's compile cache.
 */

import { performance } from 'node:perf_hooks'
import * as v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { trimMalloc, type MallocTrim } from './malloc-trim.ts'

/**
 * V8's gc function (its gc extension, as `--expose-gc` installs it): no argument is one full
 * GC; the options ask for another kind.
 */
export type Gc = (options?: GcOptions) => void
/** The gc extension's options (V8 13.6, src/extensions/gc-extension.cc), the ones used here. */
export interface GcOptions {
  type: 'major'
  /** 'sync': done before gc() returns (the default, 'async', returns a promise). */
  execution: 'sync'
  /**
   * 'last-resort': V8's CollectAllAvailableGarbage, the collection it runs before giving up
   * on an allocation -- marked to reduce memory (the young generation shrunk to its smallest,
   * pages compacted) and repeated while weak callbacks free more; 'regular': one full GC.
   */
  flavor: 'regular' | 'last-resort'
}

/** The memory-reducing collection (see above). */
export const REDUCING_GC: GcOptions = { type: 'major', execution: 'sync', flavor: 'last-resort' }

let gc: Gc | undefined

/** How long after the release the collection waits (see above). */
const COLLECT_AFTER_MS = 1000

/** Takes V8's gc function (Node's own `gc` when it was started with --expose-gc). */
export function takeGc (): void {
  const own = (globalThis as { gc?: Gc }).gc
  if (typeof own === 'function') {
    gc = own
    return
  }
  v8.setFlagsFromString('--expose-gc')
  try {
    gc = runInNewContext('gc') as Gc
  } finally {
    v8.setFlagsFromString('--no-expose-gc')
  }
}

/**
 * The share of the second before the collection that the thread's event loop may have spent
 * working for the collection still to reduce memory (see reducingWhenIdle).
 */
export const IDLE_UTILIZATION = 0.05

/**
 * Runs `collect` a second from now (unref'd: it keeps no process alive), telling it whether
 * the thread was idle over that second. The memory-reducing collection is for an idle
 * thread only. Under load it costs GC work after it: it compacts the old generation and
 * leaves V8 a low limit for the next mark-compact, so the old generation's growth under load
 * meets it soon (bench/startup-gc-instructions.ts, under callgrind, load from the moment the
 * proxy answers: two more mark-compacts in the next 30 s of load than after the regular
 * collection, all threads 438,332 against 380,904 instructions per request over the 1,000
 * counted; the collection run idle, then the same load: 307,662 against 308,867, no
 * mark-compact in the load). Idle is judged by the loop's utilization over that second
 * (`performance.eventLoopUtilization`, below IDLE_UTILIZATION), which covers every protocol
 * the loop serves: an idle start measured 0.002-0.014 (primary and workers, plain routes and
 * the quick start), 10 keep-alive connections from the moment it answered 0.40 (about 2,600
 * requests/s through one loop); 0.05 is a few hundred requests a second.
 */
function reducingWhenIdle (collect: (idle: boolean) => void, seconds = 1): void {
  const from = performance.eventLoopUtilization()
  setTimeout(() => {
    const idle = performance.eventLoopUtilization(from).utilization < IDLE_UTILIZATION
    if (idle || seconds <= 1) collect(idle)
    else reducingWhenIdle(collect, seconds - 1)
  }, COLLECT_AFTER_MS).unref()
}

/**
 * How many seconds after its first config a data-plane worker looks for an idle one to
 * collect in. One was enough on a quiet machine; on a busy one (2 cores, load average 13-15,
 * bench/worker-memory.ts) 3 workers of 6 found their first second busy -- the thread starved
 * of CPU counts as working -- ran no collection and held about 7 MiB more each (the young
 * generation at 8 MiB instead of 1, the old one uncompacted) for as long as they idled. A
 * worker under load from its first answer still gets none while the load lasts; one whose
 * load ends within these seconds collects then, idle, which measured no cost after it (the
 * primary's collection, above: an idle reducing collection, then load, counted the same).
 */
export const WORKER_IDLE_SECONDS = 10

/**
 * The collection after start-up, a second later: one full GC, then the memory-reducing one
 * if the loop was idle, else a second full GC (see above); a no-op without takeGc.
 */
export function collectStartupGarbage (onCollected?: (report: StartupCollection) => void): void {
  const collect = gc
  gc = undefined
  if (collect !== undefined) {
    reducingWhenIdle(idle => {
      collect()
      collect(idle ? REDUCING_GC : undefined)
      onCollected?.(heapAfter(idle ? 'reducing' : 'regular', idle ? trimMalloc() : 'none'))
    })
  }
}

/**
 * What start-up's collection did in a thread, and its V8 heap after it (MiB), for the debug
 * log line `start-up collection` -- an operator's view of what start-up left, and what the
 * heap test reads (asking the admin server would itself load the admin app in that second,
 * and a busy second gets no reducing collection).
 */
export interface StartupCollection {
  collection: 'reducing' | 'regular' | 'none'
  heapCommittedMiB: number
  heapUsedMiB: number
  youngGenerationMiB: number
  /**
   * glibc's malloc_trim after the collection (malloc-trim.ts), when it was the reducing one:
   * the process's free malloc pages given back ('released'), none found, the module not
   * built ('unavailable'), or not called ('none': the loop was busy, and the next requests
   * would take those pages again).
   */
  mallocTrim: MallocTrim | 'none'
}

function heapAfter (collection: StartupCollection['collection'], mallocTrim: StartupCollection['mallocTrim']): StartupCollection {
  const MiB = 1024 * 1024
  const heap = v8.getHeapStatistics()
  const young = v8.getHeapSpaceStatistics().find(s => s.space_name === 'new_space')?.space_size ?? 0
  const round = (n: number) => Math.round(n / MiB * 10) / 10
  return { collection, heapCommittedMiB: round(heap.total_heap_size), heapUsedMiB: round(heap.used_heap_size), youngGenerationMiB: round(young), mallocTrim }
}

/**
 * A data-plane worker thread's collection, at the end of the first second its loop was idle
 * over, of the WORKER_IDLE_SECONDS after its first config is installed (worker-main.ts): the
 * same memory-reducing collection (V8's CollectAllAvailableGarbage, two full GCs or more) in the worker's own
 * isolate, which has no `gc`. takeGc's way is not safe there: V8's flags are the process's,
 * and the workers start at once (workers/pool.ts), so `--expose-gc` set by one would be seen
 * by the others while they create their contexts (`gc` on their global objects) and compile
 * their modules (a changed flag hash rejects Node's compile cache). Node's
 * `v8.queryObjects` runs that collection before it counts a prototype's live instances
 * (V8's HeapProfiler::QueryObjects), in the calling thread's isolate and touching no flag;
 * it is asked about a class of its own, which has none. It then walks the heap once more,
 * which the GCs dwarf. It is marked experimental (Node 24): its warning -- its only output --
 * is not printed (the one synchronous call made with process.emitWarning stubbed), as the
 * proxy does not use it as an API. A worker under load gets no collection.
 */
export function collectWorkerStartupGarbage (onCollected?: (report: StartupCollection) => void, seconds = WORKER_IDLE_SECONDS): void {
  reducingWhenIdle(idle => {
    const collected = idle && reduceWorkerHeap()
    onCollected?.(heapAfter(collected ? 'reducing' : 'none', collected ? trimMalloc() : 'none'))
  }, seconds)
}

/**
 * The memory-reducing collection in the calling worker thread's isolate, through
 * `v8.queryObjects` (above); false where Node has no such function or it failed (the worker
 * serves as it would without it). Also what a worker runs when it goes idle after work
 * (idle-trim.ts `startWorkerIdleCollection`).
 */
export function reduceWorkerHeap (): boolean {
  // Looked up, not imported by name: an experimental API that a later Node may change or
  // drop costs this collection (memory only), never the worker's start.
  const query = (v8 as { queryObjects?: (ctor: unknown, options: { format: 'count' }) => unknown }).queryObjects
  if (typeof query !== 'function') return false
  const emitWarning = process.emitWarning
  process.emitWarning = () => {}
  try {
    query(class NoInstances {}, { format: 'count' })
    return true
  } catch {
    return false
  } finally {
    process.emitWarning = emitWarning
  }
}
