#!/usr/bin/env node
/**
 * The `portico` binary. Node's compile cache keeps each module's stripped TypeScript and V8
 * code between starts (bench/footprint.ts: about 40 % off exec -> ready, and the
 * type-stripping compiler's memory). It lives in this package's node_modules -- the trust of
 * the code it caches, not a shared temporary directory -- and a place it cannot be written
 * (a read-only image) only means no cache. NODE_COMPILE_CACHE, when set, wins;
 * NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
import { enableCompileCache, flushCompileCache } from 'node:module'
import { fileURLToPath } from 'node:url'
import { SEMI_SPACE_FLAG, semiSpaceGiven, setRuntimeFlags } from '../src/v8-flags.ts'
import { takeGc } from '../src/startup-gc.ts'
import { withMallocTunables } from '../src/malloc-tunables.ts'
import { holdTickObjectMaps } from '../src/tick-maps.ts'
import { preloadBuiltins, servesGateway } from '../src/builtins-preload.ts'

const CACHE_DIR = fileURLToPath(new URL('../node_modules/.cache/node-compile-cache', import.meta.url))

// The young generation's size is fixed at start (src/v8-flags.ts says why it is set): without
// a setting of the user's own, Node starts again in this process (same pid, signals and
// descriptors) with Portico's, and with Node's own flags as given (a `--no-memory-reducer` of
// the user's, say: Portico leaves V8's memory reducer on, v8-flags.ts). The image passes the
// flag itself; this covers `pnpm exec portico`, tests and benchmarks. The new process gets the
// compile cache from its first module (NODE_COMPILE_CACHE): enabled only below, this file and
// v8-flags.ts would be stripped by Node's TypeScript compiler, which then stays loaded --
// ~13 MB of the running proxy's RSS (bench/footprint.ts). bin/portico.mjs, the package's
// `portico`, turns the cache on before this file is read, which keeps that compiler out of
// the first start as well (~50 ms of CPU); started as `node bin/portico.ts`, the first start
// strips these four files and the second still comes from the cache. The second start costs about 30 ms
// of CPU (issue 54: `--version` 120 ms bare, 90 ms with the flag given); docs/multicore.md
// says why it cannot be set without it.
const startFlags = semiSpaceGiven(process.execArgv, process.env.NODE_OPTIONS) ? [] : [SEMI_SPACE_FLAG]
// glibc's malloc settings ride along (src/malloc-tunables.ts): read only when a process
// starts, they need no start of their own -- a Node given the flag (the image, which sets
// them in its environment) is not started again for them.
if (startFlags.length > 0 && typeof process.execve === 'function') {
  // What this start compiled (started through bin/portico.mjs, which turned the cache on:
  // this file and the three it imports) is written now: execve runs no exit handler.
  flushCompileCache()
  const env = withMallocTunables(process.env.NODE_COMPILE_CACHE === undefined && process.env.NODE_DISABLE_COMPILE_CACHE !== '1' ? { ...process.env, NODE_COMPILE_CACHE: CACHE_DIR } : process.env)
  process.execve(process.execPath, [process.execPath, ...startFlags, ...process.execArgv, ...process.argv.slice(1)], env)
}

// Before any full GC can find no tick object alive (src/tick-maps.ts says why): first, as the
// builtins' load below is the first work of this start.
holdTickObjectMaps()
// Before the flags below, which would have every builtin loaded after them compiled from its
// source rather than from the code cache in Node's binary (src/builtins-preload.ts).
if (servesGateway(process.argv.slice(2))) await preloadBuiltins()
// Before anything hot is optimized and before any module is compiled (the flags key Node's
// compile cache): the inlining budget, the old generation's growth, no pretenuring, no
// in-isolate compilation cache (src/v8-flags.ts says why, each).
setRuntimeFlags(process.execArgv, process.env.NODE_OPTIONS)
takeGc()

enableCompileCache(CACHE_DIR)
// Imported after the cache is on (a static import would load cli.ts before this line runs).
const { main } = await import('../src/cli.ts')
await main(process.argv.slice(2))
// Written now, once the gateway is up, rather than when the process exits (which a long-running
// gateway may never do cleanly).
flushCompileCache()
