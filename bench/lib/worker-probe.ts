/**
 * Preloaded with `node --import bench/lib/worker-probe.ts …/portico.mjs` by
 * bench/worker-memory.ts (execArgv is inherited, so it runs in every thread): in each
 * data-plane worker thread it records V8's heap spaces just before and just after the
 * worker's start-up collection (startup-gc.ts runs it through `v8.queryObjects`, which this
 * wraps), then writes them and a heap snapshot of the idle worker to WORKER_PROBE_DIR.
 * A probe for a bench run only: the wrapper and the snapshot change what they measure
 * after the fact (a snapshot is taken once the figures are read).
 */

import { syncBuiltinESMExports } from 'node:module'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isMainThread, threadId, workerData } from 'node:worker_threads'
import { createRequire, registerHooks } from 'node:module'

const dir = process.env.WORKER_PROBE_DIR
const require = createRequire(import.meta.url)
const v8 = require('node:v8') as Omit<typeof import('node:v8'), 'queryObjects'> & { queryObjects?: (...args: unknown[]) => unknown }

export interface SpaceFigures { [space: string]: { committed: number, used: number } }
export interface ProbeReport {
  threadId: number
  /** V8's spaces just before and after the start-up collection; null when the worker ran none (its loop was busy over that second). */
  before: SpaceFigures | null
  after: SpaceFigures | null
  /** Every module the worker loaded, with its source size as loaded (bytes). */
  modules: Array<{ url: string, bytes: number }>
  heap: { total: number, used: number, malloced: number, external: number, code: number, bytecode: number }
  snapshot: string | null
}

function spaces (): SpaceFigures {
  const out: SpaceFigures = {}
  for (const s of v8.getHeapSpaceStatistics()) out[s.space_name] = { committed: s.physical_space_size, used: s.space_used_size }
  return out
}

const isDataPlaneWorker = !isMainThread && typeof (workerData as { handoff?: unknown } | undefined)?.handoff === 'object'

if (dir !== undefined && dir !== '' && isDataPlaneWorker) {
  const modules: Array<{ url: string, bytes: number }> = []
  registerHooks({
    load (url, context, next) {
      const result = next(url, context)
      modules.push({ url, bytes: typeof result.source === 'string' ? result.source.length : result.source?.byteLength ?? 0 })
      return result
    }
  })
  const query = v8.queryObjects
  let before: SpaceFigures | null = null
  let after: SpaceFigures | null = null
  let written = false
  // The idle worker, a moment after its collection (or, when its loop was busy over that
  // seconds and it ran none, after WORKER_PROBE_AFTER_MS, past startup-gc.ts's WORKER_IDLE_SECONDS): its figures, then its heap snapshot.
  const write = (): void => {
    if (written) return
    written = true
    const h = v8.getHeapStatistics()
    const code = v8.getHeapCodeStatistics()
    const report: ProbeReport = {
      threadId,
      before,
      after,
      modules,
      heap: { total: h.total_heap_size, used: h.used_heap_size, malloced: h.malloced_memory, external: h.external_memory, code: code.code_and_metadata_size, bytecode: code.bytecode_and_metadata_size },
      snapshot: null
    }
    writeFileSync(join(dir, `worker-${threadId}.json`), JSON.stringify(report))
    if (process.env.WORKER_PROBE_SNAPSHOT !== '0') {
      report.snapshot = v8.writeHeapSnapshot(join(dir, `worker-${threadId}.heapsnapshot`))
      writeFileSync(join(dir, `worker-${threadId}.json`), JSON.stringify(report))
    }
  }
  setTimeout(write, Number(process.env.WORKER_PROBE_AFTER_MS ?? 12000)).unref()
  if (typeof query === 'function') {
    v8.queryObjects = (...args: unknown[]) => {
      before = spaces()
      try {
        return query.apply(v8, args)
      } finally {
        after = spaces()
        setTimeout(write, 200).unref()
      }
    }
    syncBuiltinESMExports()
  }
}
