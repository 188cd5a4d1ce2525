/**
 * Preloaded with `node --import bench/lib/module-probe.ts ...` by footprint.ts: counts every
 * module the process loads (ESM imports and CommonJS requires both pass the load hook),
 * grouped by package, and writes the tally as JSON to FOOTPRINT_MODULES_OUT when the process
 * gets SIGUSR2 or exits. A separate run from the timed ones: the hook itself costs time.
 */

import { registerHooks } from 'node:module'
import { writeFileSync } from 'node:fs'

export interface ModuleTally {
  modules: number
  /** Source bytes as loaded (TypeScript before type stripping). */
  bytes: number
  /** Per package (`node_modules` name), `portico:<package>/<folder>` for the workspace, or `node:`. */
  groups: Record<string, { modules: number, bytes: number }>
}

const out = process.env.FOOTPRINT_MODULES_OUT
const tally: ModuleTally = { modules: 0, bytes: 0, groups: {} }

function group (url: string): string {
  const pkg = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg !== null) return pkg[1]!
  if (url.startsWith('node:')) return 'node:'
  const ws = /\/packages\/([^/]+)\/(?:src\/)?([^/]+)/.exec(url)
  if (ws !== null) return `portico:${ws[1]}/${ws[2]!.endsWith('.ts') ? '' : ws[2]}`
  return url
}

if (out !== undefined && out !== '') {
  registerHooks({
    load (url, context, next) {
      const result = next(url, context)
      const bytes = typeof result.source === 'string' ? result.source.length : result.source?.byteLength ?? 0
      const key = group(url)
      const g = tally.groups[key] ??= { modules: 0, bytes: 0 }
      g.modules++
      g.bytes += bytes
      tally.modules++
      tally.bytes += bytes
      return result
    }
  })
  const write = () => writeFileSync(out, JSON.stringify(tally))
  process.on('SIGUSR2', write)
  process.on('exit', write)
}
