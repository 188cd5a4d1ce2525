/**
 * undici, loaded on its first use. HTTP/1.1 backends go through Portico's own client
 * (http/h1-pool.ts); undici serves HTTP/2 and gRPC backends, MCP's HTTP targets, ext_authz
 * over HTTP, JWKS fetches and the admin's loopback calls. Loading it costs about 30 MB of
 * RSS and 90 ms of startup (measured 2026-11-25), which a gateway that needs none of those
 * should not pay.
 */

import { createRequire } from 'node:module'
import type * as Undici from 'undici'

let loaded: typeof Undici | undefined

export function undici (): typeof Undici {
  return loaded ??= createRequire(import.meta.url)('undici') as typeof Undici
}
