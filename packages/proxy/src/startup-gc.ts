/**
 * One full garbage collection once start-up is done, so that what start-up let go — the
 * config validator above all (config/validate.ts `releaseValidator`: its 3.8 MB source,
 * 3 MB of bytecode and its schema objects) — leaves the process before it serves, instead of
 * at V8's next full GC, which an idle proxy without the memory reducer (v8-flags.ts) may
 * never run. Idle private memory 52.5 → about 46.5 MiB with one event loop (docs/multicore.md,
 * Memory), for two full GCs on the main thread once (below).
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
 *   Measured under --trace-gc on the shared machine: 28 ms (34.3 → 21.0 MB of heap used),
 *   then 53 ms.
 *
 * Node offers no `gc` without `--expose-gc`, which would put it on the global object of
 * every thread: `takeGc` sets the flag for as long as it takes to create one context, which
 * gets the function, then clears it. It must run before any module is compiled (bin/portico.ts
 * calls it first): the flags are part of the key of Node's compile cache.
 */

import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

let gc: (() => void) | undefined

/** How long after the release the collection waits (see above). */
const COLLECT_AFTER_MS = 1000

/** Takes V8's gc function (Node's own `gc` when it was started with --expose-gc). */
export function takeGc (): void {
  const own = (globalThis as { gc?: () => void }).gc
  if (typeof own === 'function') {
    gc = own
    return
  }
  setFlagsFromString('--expose-gc')
  try {
    gc = runInNewContext('gc') as () => void
  } finally {
    setFlagsFromString('--no-expose-gc')
  }
}

/** The collection after start-up, a second later (unref'd: it keeps no process alive); a no-op without takeGc. */
export function collectStartupGarbage (): void {
  const collect = gc
  gc = undefined
  if (collect !== undefined) setTimeout(() => { collect(); collect() }, COLLECT_AFTER_MS).unref()
}
