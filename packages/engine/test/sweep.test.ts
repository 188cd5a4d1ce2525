/**
 * http/sweep.ts: items of one period are checked together by one unref'd interval, a check
 * sees every item with one clock reading, an item can leave during a round, and the interval
 * stops once a round finds nothing (so an idle gateway keeps no timer running). Its items sit
 * in a SlotSet (util/slot-set.ts), not a Set: a Set's rebuilt tables kept every backend call
 * they ever held alive once a full GC had promoted one of them (the last test).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { Sweeps } from '../src/http/sweep.ts'
import { SlotSet } from '../src/util/slot-set.ts'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitUntil } from '../../testkit/src/wait.ts'
import { runOldSpaceScript } from '../../testkit/src/old-space.ts'

interface Item { name: string, slot: number }
const item = (name: string): Item => ({ name, slot: -1 })
const SLOT = { get: (i: Item) => i.slot, set: (i: Item, slot: number) => { i.slot = slot } }

test('a sweep checks its items each period until they leave, then stops its interval', async () => {
  const seen: Array<{ item: string, now: number }> = []
  const once = item('once')
  const stays = item('stays')
  const again = item('again')
  const sweeps = new Sweeps<Item>((it, now) => {
    seen.push({ item: it.name, now })
    if (it === once) sweeps.get(10).delete(it)
  }, SLOT)
  const sweep = sweeps.get(10)
  assert.equal(sweeps.get(10), sweep, 'one sweep per period')
  assert.notEqual(sweeps.get(20), sweep)
  sweep.add(once)
  sweep.add(stays)
  await waitUntil(() => seen.filter(s => s.item === 'stays').length >= 2, 5_000, () => `two rounds (${JSON.stringify(seen)})`)
  assert.equal(seen.filter(s => s.item === 'once').length, 1, 'an item that left during its check is not checked again')
  assert.ok(seen.filter(s => s.item === 'stays').length >= 2, JSON.stringify(seen))
  // One round, one clock reading: the first round saw both items at the same time.
  assert.equal(seen[0]!.now, seen[1]!.now)
  sweep.delete(stays)
  // Then nothing more: a fixed time (five periods, after five to settle), as what is
  // checked is that nothing comes.
  await sleep(50)
  const count = seen.length
  await sleep(50)
  assert.equal(seen.length, count, 'nothing is checked once the sweep is empty')
  assert.equal(sweep.size, 0)
  // The interval stopped; adding again starts it again.
  sweep.add(again)
  await waitUntil(() => seen.some(s => s.item === 'again'), 5_000, 'a round after adding again')
  sweep.delete(again)
})

test('a SlotSet: add and delete keep each member\'s slot, a walk may delete as it goes', () => {
  const set = new SlotSet<Item>(SLOT)
  const items = ['a', 'b', 'c', 'd', 'e'].map(item)
  for (const it of items) set.add(it)
  set.add(items[0]!)
  assert.equal(set.size, 5, 'adding a member again changes nothing')
  assert.equal(set.delete(items[1]!), true)
  assert.equal(set.delete(items[1]!), false, 'not a member any more')
  assert.equal(items[1]!.slot, -1)
  assert.deepEqual(set.toArray().map(i => i.name).sort(), ['a', 'c', 'd', 'e'])
  for (const it of set.toArray()) assert.equal(set.toArray()[it.slot], it, `${it.name} knows its slot`)
  assert.equal(set.has(item('a')), false, 'an object with the same name is not a member')
  // A walk that deletes the member it is on, and one it has not reached (which it then does
  // not see): every other member is seen.
  const visited: string[] = []
  set.forEach(it => {
    visited.push(it.name)
    if (it.name === 'e') set.delete(it)
    if (it.name === 'd') set.delete(items[0]!)
  })
  for (const name of ['c', 'd', 'e']) assert.ok(visited.includes(name), `${name} visited (${visited.join()})`)
  assert.equal(visited.includes('a'), false, `a left before the walk reached it (${visited.join()})`)
  assert.deepEqual(set.toArray().map(i => i.name).sort(), ['c', 'd'])
  // Members added during a walk wait for the next one.
  const added: string[] = []
  set.forEach(it => { added.push(it.name); if (it.name === 'c') set.add(item('f')) })
  assert.equal(added.includes('f'), false)
  assert.equal(set.size, 3)
})

test('a sweep under steady traffic does not keep its past items alive after a full GC', async () => {
  const script = fileURLToPath(new URL('./lib/sweep-churn.ts', import.meta.url))
  const grewMb = await runOldSpaceScript(script)
  // A Set grew the old space by ~20 MB here (every item of 200,000 calls promoted).
  assert.ok(grewMb < 4, `old space grew by ${grewMb} MB over 200,000 calls`)
})
