/**
 * The idle trimmer (src/idle-trim.ts): after a spell of work, the first two idle intervals
 * each trim once; an idle proxy, or one that only answers now and then, trims nothing.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { BUSY_SHARE, IDLE_SHARE, TRIMS_PER_BURST, idleTrimStep, startIdleTrim, type IdleTrimState } from '../src/idle-trim.ts'
import type { MallocTrim } from '../src/malloc-trim.ts'

/** The trims a run of intervals (each a share of one core) makes. */
function trims (shares: number[]): boolean[] {
  let state: IdleTrimState = { due: 0 }
  return shares.map(share => {
    const step = idleTrimStep(state, share)
    state = step.state
    return step.trim
  })
}

test('work, then idle: the first two idle intervals trim, the rest do not', () => {
  assert.equal(TRIMS_PER_BURST, 2)
  assert.deepEqual(trims([0, 0, 0.8, 0.9, 0, 0, 0, 0]), [false, false, false, false, true, true, false, false])
})

test('an idle proxy, and one answering a scrape now and then (under the busy share), never trims', () => {
  assert.deepEqual(trims([0, 0, 0.002, 0, 0.03, 0, 0]), Array(7).fill(false))
})

test('between the two shares is neither work nor idle: it waits, and trims once the process is idle', () => {
  assert.deepEqual(trims([BUSY_SHARE, (BUSY_SHARE + IDLE_SHARE) / 2, IDLE_SHARE, 0, 0, 0]), [false, false, false, true, true, false])
})

test('work again before the trims are done starts them over', () => {
  assert.deepEqual(trims([1, 0, 1, 0, 0, 0]), [false, true, false, true, true, false])
})

test('the timer: CPU read from the process, two trims after work with their report, and none where the module is missing', async () => {
  let cpu = 0
  const reports: Array<{ mallocTrim: MallocTrim, privateMiBBefore: number | null }> = []
  // 20 ms intervals: the first busy (a core's worth of CPU), then idle.
  const stop = startIdleTrim({ intervalMs: 20, cpuMicros: () => cpu, trim: () => 'released', onTrim: r => reports.push(r) })
  cpu += 20_000
  await sleep(200)
  stop()
  assert.deepEqual(reports.map(r => r.mallocTrim), ['released', 'released'])
  assert.ok(reports.every(r => r.privateMiBBefore === null || r.privateMiBBefore > 0), JSON.stringify(reports))

  let calls = 0
  cpu = 0
  const stopMissing = startIdleTrim({ intervalMs: 20, cpuMicros: () => cpu, trim: () => { calls++; return 'unavailable' } })
  cpu += 20_000
  await sleep(200)
  cpu += 20_000
  await sleep(200)
  stopMissing()
  assert.equal(calls, 1, 'without the module the trimmer stops after its first try')
})

test('a worker\'s idle collection: once after its loop worked, at the first idle interval, and not while it stays idle', async () => {
  const { startWorkerIdleCollection } = await import('../src/idle-trim.ts')
  // The loop's share per interval, scripted: the real loop's depends on what else this process does.
  const shares = [0, 0, 0.9, 0.6, 0, 0, 0, 0.01, 0]
  let calls = 0
  const collectedAt: number[] = []
  const reports: unknown[] = []
  const stop = startWorkerIdleCollection(() => { collectedAt.push(calls); return true }, {
    intervalMs: 10,
    loopShare: () => shares[Math.min(calls++, shares.length - 1)] ?? 0,
    onCollect: r => reports.push(r)
  })
  try {
    while (calls < shares.length + 3) await sleep(5)
    // The fifth interval (shares[4]) is the first idle one after the work.
    assert.deepEqual(collectedAt, [5], 'one collection, at the first idle interval after the work')
    assert.equal(reports.length, 1)
  } finally {
    stop()
  }
})

test('a worker\'s idle collection on the real event loop: work, then idle, collects', async () => {
  const { startWorkerIdleCollection } = await import('../src/idle-trim.ts')
  let collections = 0
  const stop = startWorkerIdleCollection(() => { collections++; return true }, { intervalMs: 50 })
  try {
    await sleep(60)
    const until = Date.now() + 120
    while (Date.now() < until) { /* working */ }
    const deadline = Date.now() + 5000
    while (collections === 0 && Date.now() < deadline) await sleep(20)
    assert.ok(collections >= 1, 'a collection once the loop went idle')
  } finally {
    stop()
  }
})

test('a user\'s --no-memory-reducer (command line or NODE_OPTIONS, the last word wins) turns the workers\' idle collection off', async () => {
  const { memoryReducerTurnedOff } = await import('../src/idle-trim.ts')
  assert.equal(memoryReducerTurnedOff([], undefined), false)
  assert.equal(memoryReducerTurnedOff(['--no-memory-reducer'], undefined), true)
  assert.equal(memoryReducerTurnedOff([], '--max-semi-space-size=4 --no-memory-reducer'), true)
  assert.equal(memoryReducerTurnedOff(['--no-memory-reducer', '--memory-reducer'], undefined), false)
})
