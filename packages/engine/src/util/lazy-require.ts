/**
 * A dependency loaded at its first use instead of when the engine is imported: gRPC,
 * CEL, JOSE, the MCP SDK's transports... cost hundreds of modules and tens of MiB that a
 * config which does not use them should not pay (bench/footprint.ts).
 *
 * Synchronous `require`, not `import()`: the first use is in the config compile step, which
 * Engine.apply runs synchronously (a reload swaps configs in one step), and a cached getter
 * adds no await to a request. Node's require() loads ES modules too, as long as they have
 * no top-level await.
 */

import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

/** A getter of a module, and whether it was loaded (what the module holds, if not, is empty). */
export interface LazyModule<T> {
  (): T
  loaded (): boolean
}

/** A getter that requires `specifier` (resolved from the engine package) once, when first called. */
export function lazyRequire<T> (specifier: string): LazyModule<T> {
  let loaded: T | undefined
  return Object.assign(() => (loaded ??= require(specifier) as T), { loaded: () => loaded !== undefined })
}
