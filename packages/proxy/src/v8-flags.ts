/**
 * The V8 settings the data plane runs with: the young generation's size, TurboFan's inlining
 * budget and the old generation's growing factor (and why the memory reducer stays on).
 *
 * The young generation. Node's default lets it grow to 64 MB
 * (two 32 MB semi-spaces): under load every request's short-lived objects fill it before a
 * scavenge, so the process holds ~130 MB more than it needs, and scavenges walk more memory.
 * With 4 MB semi-spaces (bench, 2026-11-24, 50 connections, one event loop): RSS loaded
 * 334 -> 202-206 MB (RssAnon 256 -> 123-128), CPU per 64 KiB response 87-100 -> 63-68 µs,
 * per small one 30-33 -> 35-39 µs.
 *
 * The main thread's size is fixed when Node starts (v8.setFlagsFromString cannot change it),
 * so bin/portico.ts starts Node again with the flag when it was started without it;
 * data-plane worker threads get it as a resource limit (a young generation of three
 * semi-spaces: two, and the large-object space).
 */

import { setFlagsFromString } from 'node:v8'

export const SEMI_SPACE_MB = 4
export const SEMI_SPACE_FLAG = `--max-semi-space-size=${SEMI_SPACE_MB}`
export const WORKER_YOUNG_GENERATION_MB = 3 * SEMI_SPACE_MB

/** Whether Node was started with a semi-space size of its own (the flag, or NODE_OPTIONS). */
export function semiSpaceGiven (execArgv: string[], nodeOptions: string | undefined): boolean {
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some(a => /^--max[-_]semi[-_]space[-_]size(=|$)/.test(a))
}

/**
 * The memory reducer stays on (V8's default): when a process's allocation stops for a while,
 * V8 runs full GCs that shrink its heap (`Mark-Compact (reduce)` under --trace-gc, a few
 * seconds into the idle). Portico ran with `--no-memory-reducer` from 2026-11-29: a proxy that
 * served load, then sat idle, came back from those GCs slower and stayed so (bench/idle.ts,
 * after 240 s idle: ×0.81 of its requests/s before). That was the tick literal's feedback
 * turning megamorphic in a full GC run while no tick object was alive (src/tick-maps.ts),
 * which the tick object held since 2026-12-06 prevents. Re-measured with the hold
 * (bench/memory-reducer.ts, 2026-12-06, WORKERS=1, the reducer on and off side by side):
 * after wrk -c50 for 30 s and 25,000 GETs the reducer ran two reducing GCs 8-9 s into the
 * idle and private memory went 80.2 -> 52.7 MiB (89.0 -> 59.6 in a second run), while the
 * process without it stayed at 86.2 (83.5); the tick literal monomorphic in both after
 * 25,000 GETs more. Counted under callgrind (the
 * reducer's GCs after start, then GETs before and after 240 s idle), two runs: 150,763 /
 * 139,193 and 118,145 / 126,737 instructions per GET on the event loop with it, 148,105 /
 * 141,898 and 140,861 / 136,596 without -- all the fast mode, not the slow one's ~200k
 * (bench/README.md, "The memory reducer again").
 *
 * So nothing is given for it. A setting of the user's own (`node --no-memory-reducer
 * .../portico.ts`) is kept: bin/portico.ts passes Node's own flags on when it starts Node again.
 * Benchmarks that start the binary under valgrind give `--memory-reducer` explicitly: a
 * checkout from before this change would otherwise start Node again to add its
 * `--no-memory-reducer`, out from under valgrind.
 */
export const MEMORY_REDUCER_FLAG = '--memory-reducer'

/** What bin/portico.ts starts Node with when it was not given (and the image's entrypoint passes). */
export const START_FLAGS = [SEMI_SPACE_FLAG] as const

/**
 * TurboFan's inlining budget for the data plane. V8 stops inlining into an optimized
 * function once the bytecode already inlined into it reaches
 * `--max-inlined-bytecode-size-cumulative` (920 bytes by default). A proxied request runs
 * through a deep chain of small functions (the listener's handler, the pipeline, the policy
 * phases, the backend pool and connection, the response parser), and with the default budget
 * the first ones inlined use it up: the rest stay calls, and any branch added to an early
 * one (tracing's, say) pushes more of the later ones out of line.
 *
 * Measured (2 cores, wrk -c50 through one event loop, interleaved rounds): an untraced
 * proxied GET 1-1.5 µs of CPU cheaper (~5 %) with twice the default; 3000 and 6000 measured
 * no cheaper, and 3000 held ~5 MB more optimized code under load than 1840 (which holds
 * ~2 MB more than the default). Set at start with v8.setFlagsFromString (TurboFan reads it
 * when it optimizes, so it covers every function optimized after), unless Node was given it.
 */

export const INLINING_FLAG = '--max-inlined-bytecode-size-cumulative=1840'

/** Whether Node was started with an inlining budget of its own (the flag, or NODE_OPTIONS). */
export function inliningGiven (execArgv: string[], nodeOptions: string | undefined): boolean {
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some(a => /^--max[-_]inlined[-_]bytecode[-_]size[-_]cumulative(=|$)/.test(a))
}

/**
 * No in-isolate compilation cache: V8's cache of compiled scripts held the released config
 * validator until its bytecode was flushed (startup-gc.ts says why it is off, and what it
 * served). Set by bin/portico.ts with v8.setFlagsFromString before any module loads, unless
 * Node was given a setting of its own.
 */
export const COMPILATION_CACHE_FLAG = '--no-compilation-cache'

/** Whether Node was started with a compilation-cache setting of its own, either way (the flag, or NODE_OPTIONS). */
export function compilationCacheGiven (execArgv: string[], nodeOptions: string | undefined): boolean {
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some(a => /^--(no[-_])?compilation[-_]cache(=|$)/.test(a))
}

/**
 * No allocation-site pretenuring. V8 counts, per place in the code that allocates objects,
 * how many of them survive a young-generation GC; past 85 % it allocates that site's objects
 * straight in the old generation from then on. A full GC under load promotes everything in
 * flight, which pushes the sites of per-connection objects (a socket's stream states, its
 * events table) over that line; from then on each new connection's objects start in the old
 * generation, die there, and until the next full GC their pointers into the young generation
 * keep what they point at alive -- so that survives, the sites stay tenured, and a full GC
 * comes every fraction of a second. Measured (2026-12-06, one event loop, wrk -c50 with
 * `Connection: close`, a full GC forced under the load; bench/young-gc.ts --close 1): ~260 KB
 * promoted per scavenge and 18 full GCs in 6 s with it, ~6 KB and none without; a bare
 * `net.createServer` the same. A proxy's objects live for a request or a connection:
 * nothing it allocates per request gains from starting old. Set at start with
 * v8.setFlagsFromString (V8 reads it at each young-generation GC, for every thread), unless
 * Node was given a setting of its own.
 */
export const PRETENURING_FLAG = '--no-allocation-site-pretenuring'

/** Whether Node was started with a pretenuring setting of its own, either way (the flag, or NODE_OPTIONS). */
export function pretenuringGiven (execArgv: string[], nodeOptions: string | undefined): boolean {
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some(a => /^--(no[-_])?allocation[-_]site[-_]pretenuring$/.test(a))
}

/**
 * A fixed growing factor for the old generation, 2. After each mark-compact V8 lets the old
 * generation grow to a multiple of what it left before the next; on a host with memory to
 * spare (Node's default heap limit) that multiple is up to 4, which a proxy under load
 * reaches: with one event loop under 50 connections, mark-compacts at about 80 MB of heap
 * that left 19 MB, and V8 keeping the freed pages pooled (`pooled: 44 MB` under --trace-gc),
 * so the private memory under load stayed about 110 MiB (bench/heap-growing.ts: 101-114 MiB
 * median in 5 runs of 12 s). With a factor of 2 it was 60-63 MiB in 3 runs (62-92 in 2 more),
 * CPU per request no higher (37.7-40.5 µs against 40.9-45.3) and no more mark-compacts than
 * the default (8-17 against 13-18 in 12 s: what the load promotes varies run to run more than
 * the factor moves it). Smaller factors cost: 1.5 held 65-71 MiB for 51-57 mark-compacts and
 * a quarter more CPU per request; 1.2 the same. docs/multicore.md, Memory. Set at start with
 * v8.setFlagsFromString (V8 reads it each time it sets the next limit; it covers every
 * thread), unless Node was given a setting of its own (Node refuses it in NODE_OPTIONS).
 */
export const HEAP_GROWING_FLAG = '--heap-growing-percent=100'

/** Whether Node was started with a heap growing setting of its own (on its command line). */
export function heapGrowingGiven (execArgv: string[]): boolean {
  return execArgv.some(a => /^--heap[-_]growing[-_]percent(=|$)/.test(a))
}

/**
 * The flags bin/portico.ts sets once Node runs (each above says why), each unless Node was
 * given a setting of its own: the inlining budget, the old generation's growing factor, no
 * pretenuring, no in-isolate compilation cache. Process-wide: worker threads started after
 * run with them.
 */
export function setRuntimeFlags (execArgv: string[], nodeOptions: string | undefined): void {
  if (!inliningGiven(execArgv, nodeOptions)) setFlagsFromString(INLINING_FLAG)
  if (!heapGrowingGiven(execArgv)) setFlagsFromString(HEAP_GROWING_FLAG)
  if (!pretenuringGiven(execArgv, nodeOptions)) setFlagsFromString(PRETENURING_FLAG)
  if (!compilationCacheGiven(execArgv, nodeOptions)) setFlagsFromString(COMPILATION_CACHE_FLAG)
}
