/**
 * Whether objects that come and go keep being promoted to V8's old generation after a full
 * GC (util/slot-set.ts and the proxy's v8-flags.ts say how they were): a churn script runs in
 * a Node of its own with `--expose-gc` and 1 MB semi-spaces, calls `oldSpaceGrowthMb`, and
 * prints the figure; the test reads it with `runOldSpaceScript`.
 */

import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { getHeapSpaceStatistics } from 'node:v8'

const oldSpaceBytes = (): number => getHeapSpaceStatistics().find(s => s.space_name === 'old_space')!.space_used_size

/**
 * `step` run `warm` times, one full GC (as one comes under load), `step` run `count` times
 * more with only the young generation's GC: how much the old space grew, in MB. A step that
 * returns a promise is awaited (a turn of the event loop between batches).
 */
export async function oldSpaceGrowthMb (step: () => void | Promise<void>, warm: number, count: number): Promise<number> {
  for (let i = 0; i < warm; i++) await step()
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error('oldSpaceGrowthMb: run Node with --expose-gc')
  gc()
  const before = oldSpaceBytes()
  for (let i = 0; i < count; i++) await step()
  return (oldSpaceBytes() - before) / 1048576
}

/** Runs `script` (which prints oldSpaceGrowthMb's figure) in a Node of its own; the figure. */
export async function runOldSpaceScript (script: string, args: string[] = []): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--max-semi-space-size=1', '--min-semi-space-size=1', script, ...args], { timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '' } })
  return Number(stdout.trim())
}
