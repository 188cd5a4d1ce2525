/**
 * src/tick-maps.ts: with one tick object held, a full GC run while no other tick object is
 * alive leaves `process.nextTick`'s literal feedback monomorphic; without it, the same GC
 * turns it megamorphic (the V8 behaviour the hold works around: if the second test starts to
 * fail on a newer Node, V8 no longer loses that feedback and the hold may go). Read from V8's
 * own print of the function's feedback (`%DebugPrint`, in a child started with
 * --allow-natives-syntax): the slots of kind `DefineKeyedOwnPropertyInLiteral` are the tick
 * object literal's.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const MODULE = new URL('../src/tick-maps.ts', import.meta.url).href

/** The child: some ticks, full GCs from timers (no tick object alive), ticks again, the feedback printed. */
function literalSlots (hold: boolean): string[] {
  const script = `
    import { holdTickObjectMaps, heldTickObject } from ${JSON.stringify(MODULE)}
    if (${hold}) holdTickObjectMaps()
    const debugPrint = new Function('f', '%DebugPrint(f)')
    const noop = () => {}
    const turn = () => new Promise(resolve => setImmediate(resolve))
    for (let i = 0; i < 20; i++) { for (let j = 0; j < 100; j++) process.nextTick(noop); await turn() }
    // Six, from timers: compiled code keeps the maps it uses for two more (--retain-maps-for-n-gc).
    for (let i = 0; i < 3; i++) { await new Promise(resolve => setTimeout(resolve, 2)); gc(); gc() }
    for (let j = 0; j < 100; j++) process.nextTick(noop)
    await turn()
    const held = heldTickObject()
    // On stderr: V8 prints to C's stdout, whose end was lost once Node had written to fd 1 itself.
    process.stderr.write('HELD ' + JSON.stringify(held === undefined ? null : Object.keys(held)) + '\\n')
    debugPrint(process.nextTick)
  `
  const dir = mkdtempSync(join(tmpdir(), 'tick-maps-'))
  let r
  try {
    writeFileSync(join(dir, 'child.mjs'), script)
    r = spawnSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', join(dir, 'child.mjs')], { encoding: 'utf8' })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  assert.equal(r.status, 0, r.stderr)
  const held = r.stderr.split('\n').find(l => l.startsWith('HELD '))
  assert.equal(held, hold ? 'HELD ["callback","args"]' : 'HELD null', 'the held object is a tick object')
  const slots = [...r.stdout.matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map(m => m[1]!)
  assert.ok(slots.length >= 3, `the tick literal's feedback slots in V8's print:\n${r.stdout}`)
  return slots
}

test('with a tick object held, the tick literal\'s feedback stays monomorphic through full GCs', () => {
  assert.deepEqual(new Set(literalSlots(true)), new Set(['MONOMORPHIC']))
})

test('without it, the same GCs turn the tick literal\'s feedback megamorphic (the V8 behaviour held against)', () => {
  assert.ok(literalSlots(false).includes('MEGAMORPHIC'))
})
