/**
 * http/sweep.ts: items of one period are checked together by one unref'd interval, a check
 * sees every item with one clock reading, an item can leave during a round, and the interval
 * stops once a round finds nothing (so an idle gateway keeps no timer running).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sweeps } from '../src/http/sweep.ts'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitUntil } from '../../testkit/src/wait.ts'

test('a sweep checks its items each period until they leave, then stops its interval', async () => {
  const seen: Array<{ item: string, now: number }> = []
  const sweeps = new Sweeps<string>((item, now) => {
    seen.push({ item, now })
    if (item === 'once') sweeps.get(10).delete(item)
  })
  const sweep = sweeps.get(10)
  assert.equal(sweeps.get(10), sweep, 'one sweep per period')
  assert.notEqual(sweeps.get(20), sweep)
  sweep.add('once')
  sweep.add('stays')
  await waitUntil(() => seen.filter(s => s.item === 'stays').length >= 2, 5_000, () => `two rounds (${JSON.stringify(seen)})`)
  assert.equal(seen.filter(s => s.item === 'once').length, 1, 'an item that left during its check is not checked again')
  assert.ok(seen.filter(s => s.item === 'stays').length >= 2, JSON.stringify(seen))
  // One round, one clock reading: the first round saw both items at the same time.
  assert.equal(seen[0]!.now, seen[1]!.now)
  sweep.delete('stays')
  // Then nothing more: a fixed time (five periods, after five to settle), as what is
  // checked is that nothing comes.
  await sleep(50)
  const count = seen.length
  await sleep(50)
  assert.equal(seen.length, count, 'nothing is checked once the sweep is empty')
  assert.equal(sweep.size, 0)
  // The interval stopped; adding again starts it again.
  sweep.add('again')
  await waitUntil(() => seen.some(s => s.item === 'again'), 5_000, 'a round after adding again')
  sweep.delete('again')
})
