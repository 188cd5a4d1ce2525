/**
 * glibc's `malloc_trim(0)`, called once start-up's garbage is collected (startup-gc.ts), in
 * each serving thread.
 *
 * Why: every thread of the process has its own malloc arena (a data-plane worker's is a 64 MiB
 * reservation of its own), and start-up allocates there and frees again -- Node's compile
 * cache read, V8's compiler zones, module loading. glibc gives back only the top of an arena
 * (and of the main heap), so what start-up freed below memory still held stays in the
 * process as private pages for as long as it lives. `malloc_trim` walks every arena's free
 * chunks and returns their whole pages to the kernel (`MADV_DONTNEED`); nothing is moved,
 * nothing in use is touched. Measured (bench/worker-memory.ts, 2026-12-06, medians of 3
 * starts): a data-plane worker's arena 10.7 -> 5.3 MiB, idle private memory per extra loop
 * 19.7 -> 15.6 MiB, one event loop 23.5 -> 19.8 MiB (docs/multicore.md, Memory).
 *
 * Node neither calls nor exposes it, so it is a Node-API module of ten lines
 * (packages/proxy/native/malloc-trim.c) that scripts/setup builds with the machine's C
 * compiler (scripts/build-native.ts) into this package's node_modules cache, and the image
 * builds in its build stage. Without it (no compiler, a C library without `malloc_trim`),
 * `trimMalloc` answers 'unavailable' and the proxy runs as before, with that memory held.
 *
 * Its cost: one walk of every arena's free lists, taking each arena's lock in turn, at an
 * idle second after start-up (about a millisecond here) -- never on a request's path.
 */

import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

/** Where scripts/build-native.ts writes the module, and this file loads it from. */
export const MALLOC_TRIM_ADDON_PATH = fileURLToPath(new URL('../node_modules/.cache/portico/malloc-trim.node', import.meta.url))

/** What a trim did: memory given back, none to give, or no module to call. */
export type MallocTrim = 'released' | 'nothing' | 'unavailable'

let addon: { trim: () => boolean } | null | undefined

/** Calls `malloc_trim(0)` (see above); loads the module on first use, in this thread. */
export function trimMalloc (): MallocTrim {
  if (addon === undefined) {
    try {
      addon = createRequire(import.meta.url)(MALLOC_TRIM_ADDON_PATH) as { trim: () => boolean }
    } catch {
      addon = null
    }
  }
  if (addon === null) return 'unavailable'
  return addon.trim() ? 'released' : 'nothing'
}
