/**
 * node:http, required rather than imported. An ESM import of a builtin builds its namespace
 * from every export, and node:http's `WebSocket`, `CloseEvent` and `MessageEvent` are lazy
 * getters over Node's bundled undici: `import ... from 'node:http'` loads that whole bundle
 * (~750 KB of source) into a process that never uses it -- ~12 MB of RSS and ~2.5 MB of heap
 * (a bare Node: 47.5 MB required, 59.7 MB imported). Portico's modules take node:http from
 * here; `import type` from node:http is free.
 */

import { createRequire } from 'node:module'
import type * as Http from 'node:http'

const http = createRequire(import.meta.url)('node:http') as typeof Http

export default http
