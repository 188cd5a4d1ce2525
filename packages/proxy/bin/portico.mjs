#!/usr/bin/env node
/**
 * The `portico` binary's entry, in plain JavaScript: it turns Node's compile cache on before
 * any TypeScript is read, so that bin/portico.ts and the start settings it imports come
 * stripped and compiled from the cache, and Node's TypeScript compiler (amaro, ~50 ms of CPU
 * to load) stays out of this first start too — the start that, without the V8 flags given,
 * starts Node again with them (bin/portico.ts). Everything else is bin/portico.ts's: the same
 * cache directory (NODE_COMPILE_CACHE, when set, wins; NODE_DISABLE_COMPILE_CACHE=1 turns it
 * off — enableCompileCache then does nothing). docs/multicore.md, Start-up, has the figures.
 */
import { enableCompileCache } from 'node:module'
import { fileURLToPath } from 'node:url'

enableCompileCache(fileURLToPath(new URL('../node_modules/.cache/node-compile-cache', import.meta.url)))
await import('./portico.ts')
