import { test } from 'node:test'
import assert from 'node:assert/strict'
import { WeightedPicker } from '../src/routing/weighted.ts'

test('picks by weight; weight 0 is never picked', () => {
  let i = 0
  const sequence = Array.from({ length: 1000 }, (_, k) => (k + 0.5) / 1000)
  const picker = new WeightedPicker([{ item: 'a', weight: 1 }, { item: 'zero', weight: 0 }, { item: 'b', weight: 3 }], () => sequence[i++ % sequence.length]!)
  const counts: Record<string, number> = { a: 0, b: 0, zero: 0 }
  for (let k = 0; k < 1000; k++) counts[picker.pick()!]!++
  assert.deepEqual(counts, { a: 250, b: 750, zero: 0 })
})

test('no backends or all weights zero picks nothing', () => {
  assert.equal(new WeightedPicker([]).pick(), null)
  assert.equal(new WeightedPicker([{ item: 'a', weight: 0 }]).pick(), null)
})

test('random weights converge to the ratio', () => {
  const picker = new WeightedPicker([{ item: 'a', weight: 20 }, { item: 'b', weight: 80 }])
  let a = 0
  for (let k = 0; k < 20000; k++) if (picker.pick() === 'a') a++
  assert.ok(a > 3600 && a < 4400, `a picked ${a} times of 20000`)
})

test('pick(avoid): another item by the remaining weights; all avoided falls back to all', () => {
  const picker = new WeightedPicker([{ item: 'a', weight: 1 }, { item: 'b', weight: 1 }, { item: 'c', weight: 2 }])
  const counts: Record<string, number> = { a: 0, b: 0, c: 0 }
  for (let i = 0; i < 3000; i++) counts[picker.pick(new Set(['a']))!]!++
  assert.equal(counts.a, 0)
  assert.ok(counts.c! > counts.b! * 1.5 && counts.c! < counts.b! * 2.5, JSON.stringify(counts))
  assert.equal(new WeightedPicker([{ item: 'a', weight: 1 }, { item: 'b', weight: 1 }], () => 0.99).pick(new Set(['b'])), 'a')
  assert.notEqual(picker.pick(new Set(['a', 'b', 'c'])), null)
})
