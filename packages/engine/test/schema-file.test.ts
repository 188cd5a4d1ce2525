import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { renderSchema, SCHEMA_PATH } from '../../../scripts/gen-schema.ts'

test('schema/config.schema.json is generated from the TypeBox schema and current', () => {
  assert.equal(readFileSync(SCHEMA_PATH, 'utf8'), renderSchema(), 'run: node scripts/gen-schema.ts')
})
