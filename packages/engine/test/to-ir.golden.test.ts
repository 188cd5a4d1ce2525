import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfigText } from '../src/index.ts'

// Pure translation pinned by golden files: testdata in golden/*.yaml, expected IR in
// golden/*.ir.json. Regenerate with UPDATE_GOLDEN=1 and review the diff.
const dir = new URL('./golden/', import.meta.url).pathname

for (const file of readdirSync(dir).filter(f => f.endsWith('.yaml'))) {
  test(`config → IR: ${file}`, () => {
    const result = loadConfigText(readFileSync(join(dir, file), 'utf8'), { baseDir: dir })
    assert.ok(result.ok, result.ok ? '' : JSON.stringify(result.diagnostics))
    const actual = JSON.stringify(result.config.ir, null, 2) + '\n'
    const goldenPath = join(dir, file.replace(/\.yaml$/, '.ir.json'))
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(goldenPath)) writeFileSync(goldenPath, actual)
    assert.equal(actual, readFileSync(goldenPath, 'utf8'))
  })
}
