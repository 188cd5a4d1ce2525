/**
 * Writes packages/engine/schema/config.schema.json from the TypeBox schema in
 * packages/engine/src/config/schema.ts. `--check` fails when the file is out of date
 * (run by the test suite), so editors and the validator never disagree.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ConfigFileSchema } from '../packages/engine/src/config/schema.ts'

export const SCHEMA_PATH = fileURLToPath(new URL('../packages/engine/schema/config.schema.json', import.meta.url))

export function renderSchema (): string {
  return JSON.stringify({ $schema: 'http://json-schema.org/draft-07/schema#', ...ConfigFileSchema }, null, 2) + '\n'
}

if (import.meta.main) {
  const text = renderSchema()
  if (process.argv.includes('--check')) {
    const current = readFileSync(SCHEMA_PATH, 'utf8')
    if (current !== text) {
      process.stderr.write(`${SCHEMA_PATH} is out of date: run node scripts/gen-schema.ts\n`)
      process.exit(1)
    }
  } else {
    writeFileSync(SCHEMA_PATH, text)
    process.stdout.write(`wrote ${SCHEMA_PATH}\n`)
  }
}
