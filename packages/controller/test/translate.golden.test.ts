import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { translate } from '../src/translate/translate.ts'
import { clusterState } from './cluster-state.ts'
import { caseCount, goldenCases, goldenCompare, stableJSON, unpairedFiles } from '../../../scripts/lib/golden.ts'

// Cluster objects in golden/<kind>/<case>.yaml → the translation result (IR per Gateway and every
// status) in golden/<kind>/<case>.out.json, one folder per resource kind. Regenerate everything
// with `scripts/golden --update` and review the diff. A first line `# options: {...}` adds
// translate options (JSON), e.g. the chart's mesh settings.
const root = new URL('./golden/', import.meta.url).pathname
const layout = { input: '.yaml', outputs: ['.out.json'] }
const cases = goldenCases(root, layout)

test('translate golden: every input has its output and every output its input', () => {
  assert.deepEqual(unpairedFiles(root, layout), [])
  console.log(`controller golden cases: ${caseCount(cases)}`)
  assert.ok(cases.length > 0)
})

for (const c of cases) {
  test(`translate: ${c.id}`, () => {
    const text = readFileSync(c.input, 'utf8')
    const options = /^# options: (.*)$/m.exec(text)
    const result = translate(clusterState(text), { controllerName: 'portico.dev/gateway-controller', ...(options !== null ? JSON.parse(options[1]!) : {}) })
    const actual = stableJSON(result)
    const { expected } = goldenCompare(c, c.outputs[0]!, actual)
    assert.equal(actual, expected)
  })
}
