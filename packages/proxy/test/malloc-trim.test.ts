/**
 * glibc's malloc_trim for Node (src/malloc-trim.ts, native/malloc-trim.c): scripts/setup builds
 * it wherever there is a C compiler, it loads in the main thread and in worker threads, and a
 * call gives freed malloc pages back -- the memory start-up left in each thread's arena.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { MALLOC_TRIM_ADDON_PATH, trimMalloc } from '../src/malloc-trim.ts'

const hasCompiler = spawnSync(process.env.CC ?? 'cc', ['--version']).status === 0
const MODULE = fileURLToPath(new URL('../src/malloc-trim.ts', import.meta.url))

test('scripts/setup built the module where there is a C compiler, and it answers in this thread', { skip: !hasCompiler && 'no C compiler on this machine' }, () => {
  assert.ok(existsSync(MALLOC_TRIM_ADDON_PATH), `${MALLOC_TRIM_ADDON_PATH} (node scripts/build-native.ts)`)
  assert.notEqual(trimMalloc(), 'unavailable')
})

test('memory freed in a worker thread\'s malloc arena below memory still held goes back to the kernel', { skip: !existsSync(MALLOC_TRIM_ADDON_PATH) && 'the module is not built' }, () => {
  // In a worker thread (its own arena, as a data-plane worker): 1,600 buffers of 24 KiB from
  // malloc (under the 128 KiB mmap threshold), every other one freed again, so no freed block
  // is at the arena's top and glibc returns none of it by itself. Private memory is read
  // from /proc before and after one trim.
  const script = `
    const { Worker } = require('node:worker_threads')
    const { readFileSync } = require('node:fs')
    const privateKiB = () => { const t = readFileSync('/proc/self/smaps_rollup', 'utf8'); return ['Private_Clean', 'Private_Dirty'].reduce((a, f) => a + Number(new RegExp('^' + f + ':\\\\s+(\\\\d+)', 'm').exec(t)[1]), 0) }
    const w = new Worker(\`
      const { parentPort } = require('node:worker_threads')
      const kept = []
      let dropped = []
      for (let i = 0; i < 1600; i++) { const b = Buffer.allocUnsafeSlow(24 * 1024); b.fill(i & 255); (i % 2 === 0 ? kept : dropped).push(b) }
      dropped = null
      globalThis.gc(); globalThis.gc()
      parentPort.postMessage('freed')
      parentPort.once('message', () => parentPort.postMessage(kept.length))
    \`, { eval: true })
    w.once('message', async () => {
      const { trimMalloc } = await import(${JSON.stringify(MODULE)})
      const before = privateKiB()
      const result = trimMalloc()
      const after = privateKiB()
      w.postMessage('done')
      w.once('message', () => { console.log(JSON.stringify({ result, before, after })); process.exit(0) })
    })
  `
  const run = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', env: { ...process.env, GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=131072' } })
  assert.equal(run.status, 0, run.stderr)
  const { result, before, after } = JSON.parse(run.stdout.trim().split('\n').pop()!) as { result: string, before: number, after: number }
  assert.equal(result, 'released')
  // 800 freed buffers of 24 KiB: 18.75 MiB, of which the whole pages inside each free chunk
  // go back (20 KiB of each 24).
  assert.ok(before - after > 10 * 1024, `private memory ${before} -> ${after} KiB`)
})
