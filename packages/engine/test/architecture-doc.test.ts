/**
 * docs/architecture.md's table of the engine's rooms says what import-graph.test.ts enforces:
 * the same rooms in the same layers, as test/lib/layers.ts lists them. A room added to the
 * code (import-graph.test.ts fails until it has a layer) must be added to the doc too.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { LAYERS } from './lib/layers.ts'

const DOC = new URL('../../../docs/architecture.md', import.meta.url)

/** The rows of the first table under the "The engine's rooms" heading: [layer, rooms]. */
function docLayers (text: string): Array<[number, string[]]> {
  const section = text.split(/^## /m).find(s => s.startsWith('The engine\'s rooms'))
  assert.ok(section !== undefined, 'docs/architecture.md has no "## The engine\'s rooms" section')
  const rows: Array<[number, string[]]> = []
  for (const line of section.split('\n')) {
    const cells = /^\|\s*(\d+)\s*\|([^|]*)\|/.exec(line)
    if (cells === null) continue
    rows.push([Number(cells[1]), cells[2]!.split(',').map(r => r.trim().replace(/^`(.*)`$/, '$1')).filter(r => r !== '')])
  }
  return rows
}

test('the layer table of docs/architecture.md lists the rooms and layers import-graph.test.ts enforces', () => {
  const rows = docLayers(readFileSync(DOC, 'utf8'))
  assert.deepEqual(rows.map(([n]) => n), LAYERS.map((_, i) => i), 'one row per layer, numbered from 0')
  assert.deepEqual(rows.map(([, rooms]) => [...rooms].sort()), LAYERS.map(rooms => [...rooms].sort()),
    'docs/architecture.md ("The engine\'s rooms") and test/lib/layers.ts disagree: change both together')
})
