/**
 * A data-plane worker's start-up collection (src/startup-gc.ts): at the first idle second
 * after its first config, not only if the first second was idle — on a busy machine a
 * worker's first second often is not, and a worker that ran none held about 7 MiB more.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { collectWorkerStartupGarbage, type StartupCollection } from '../src/startup-gc.ts'

/** Keeps this thread's event loop busy (about 90 % of each 100 ms) for `ms`. */
function busyFor (ms: number): Promise<void> {
  const until = Date.now() + ms
  return new Promise(resolve => {
    const burn = (): void => {
      const slice = Date.now() + 90
      while (Date.now() < slice && Date.now() < until) { /* working */ }
      if (Date.now() >= until) resolve()
      else setTimeout(burn, 10)
    }
    burn()
  })
}

const collected = (seconds: number): Promise<StartupCollection> => new Promise(resolve => collectWorkerStartupGarbage(resolve, seconds))

test('a worker whose first second is busy collects at its first idle second after it', async () => {
  const report = collected(5)
  await busyFor(1500)
  assert.equal((await report).collection, 'reducing')
})

test('a worker busy through all its seconds runs no collection', async () => {
  const report = collected(1)
  await busyFor(1500)
  assert.equal((await report).collection, 'none')
})
