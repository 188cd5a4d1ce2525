import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { loadConfigText } from '../src/index.ts'
import { caseCount, goldenCases, goldenCompare, stableJSON, unpairedFiles } from '../../../scripts/lib/golden.ts'

// Config → IR pinned by golden files, one folder per kind of config: golden/config/<kind>/<case>.yaml
// → the IR in <case>.ir.json, or, for a config that is refused, its diagnostics (path, message,
// line) in <case>.refused.json. Regenerate everything with `scripts/golden --update` and review
// the diff.
const root = new URL('./golden/config/', import.meta.url).pathname
const layout = { input: '.yaml', outputs: ['.ir.json', '.refused.json'] }
const cases = goldenCases(root, layout)

test('config → IR golden: every input has its output and every output its input', () => {
  assert.deepEqual(unpairedFiles(root, layout), [])
  console.log(`engine config → IR golden cases: ${caseCount(cases)}`)
  assert.ok(cases.length > 0)
})

for (const c of cases) {
  test(`config → IR: ${c.id}`, () => {
    const result = loadConfigText(readFileSync(c.input, 'utf8'), { baseDir: dirname(c.input) })
    // Files are read relative to the case's folder; its absolute path (in a diagnostic or the
    // IR) is written as ./ so the output is the same on every machine.
    const actual = stableJSON(result.ok ? result.config.ir : result.diagnostics).replaceAll(dirname(c.input) + '/', './')
    const { expected } = goldenCompare(c, result.ok ? c.outputs[0]! : c.outputs[1]!, actual)
    assert.equal(actual, expected)
  })
}
