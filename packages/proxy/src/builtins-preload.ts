/**
 * Node's builtin modules a running gateway loads anyway, loaded before bin/portico.ts sets its
 * V8 flags (issue 54, start-up). Node compiles a builtin from the code cache built into its
 * binary only while V8's flags hash as they did when that cache was made. The inlining,
 * heap-growing and compilation-cache flags (src/v8-flags.ts) change the hash (the young
 * generation's size, given on the command line, does not; nor does --no-memory-reducer), so every
 * builtin loaded after them was parsed and compiled from its source: ~90 modules by ready
 * (node:tls, node:http, node:http2, node:crypto and their internal modules), 58 ms of CPU
 * loaded after the flags against 27 ms before them (8 interleaved runs of this list). The
 * flags still apply to all that runs after them -- they steer optimization, the heap's growth
 * and V8's in-isolate cache of scripts -- a builtin's compile from the code cache is none of it.
 *
 * Only what every gateway loads by the time it is ready, whatever its config: the servers
 * (node:http, node:https and node:http2 -- listeners.ts makes HTTPS and h2c servers), node:tls
 * and node:crypto (TLS listeners and backends, session keys, the validator's key), what
 * node:net's listen requires (node:cluster, and with it node:child_process and node:dgram),
 * node:assert (pino's streams), node:dns and node:inspector/promises (the admin
 * server's heap sampler, on by default). startup-loads.test.ts fails when a running proxy holds
 * a builtin loaded after the flags: add it here. Data-plane workers are not helped: the flags
 * are the process's, set before any worker starts, so each worker compiles the builtins it
 * loads from their source (docs/multicore.md, Start-up).
 */

import { createRequire } from 'node:module'

/**
 * Required: an ES module import would read lazy exports nothing here uses -- node:http's
 * WebSocket loads Node's bundled undici (engine util/node-http.ts), node:dns's promises and
 * node:process's report internal modules of their own.
 */
export const REQUIRED_BUILTINS = [
  'node:http', 'node:tls', 'node:https', 'node:http2', 'node:cluster', 'node:assert', 'node:dns',
  'node:inspector/promises', 'node:process'
] as const

/**
 * Imported, as Portico's modules import them: an ES module import of a builtin reads every
 * export, lazy ones included (node:crypto's webcrypto, node:net's BlockList and
 * SocketAddress, node:util's parseArgs and diff), which loads internal modules a require()
 * does not.
 */
export const IMPORTED_BUILTINS = ['node:crypto', 'node:net', 'node:util'] as const

export async function preloadBuiltins (): Promise<void> {
  const require = createRequire(import.meta.url)
  // A builtin this Node lacks (node:inspector in a build without it) is left to fail where it
  // is used, as before: loading it early is only an optimization.
  for (const id of IMPORTED_BUILTINS) await import(id).catch(() => {})
  for (const id of REQUIRED_BUILTINS) {
    try {
      require(id)
    } catch {}
  }
}

/** Whether `argv` (the arguments after the script) asks for a gateway, not only for output. */
export function servesGateway (argv: readonly string[]): boolean {
  return !argv.some(a => a === '--version' || a === '-V' || a === '--help' || a === '-h' || a === '--validate')
}
