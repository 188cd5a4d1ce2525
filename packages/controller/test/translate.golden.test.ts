import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { translate } from '../src/translate/translate.ts'
import { clusterState } from './cluster-state.ts'

// Cluster objects in golden/*.yaml → translation result in golden/*.out.json.
// Regenerate with UPDATE_GOLDEN=1 and review the diff. A first line `# options: {...}` adds
// translate options (JSON), e.g. the chart's mesh settings.
const dir = new URL('./golden/', import.meta.url).pathname

for (const file of readdirSync(dir).filter(f => f.endsWith('.yaml'))) {
  test(`translate: ${file}`, () => {
    const text = readFileSync(join(dir, file), 'utf8')
    const options = /^# options: (.*)$/m.exec(text)
    const result = translate(clusterState(text), { controllerName: 'portico.dev/gateway-controller', ...(options !== null ? JSON.parse(options[1]!) : {}) })
    const actual = JSON.stringify(result, null, 2) + '\n'
    const golden = join(dir, file.replace(/\.yaml$/, '.out.json'))
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(golden)) writeFileSync(golden, actual)
    assert.equal(actual, readFileSync(golden, 'utf8'))
  })
}
