/**
 * Precompiles the config schema's Ajv validator (Ajv's standalone code) into node_modules'
 * cache, where config/validate.ts picks it up: the gateway then starts without compiling
 * the schema (about 300 ms). Run by scripts/setup; the output is generated, never committed,
 * and the same for the same Ajv version and schema. A stale file is ignored (its key does
 * not match), so forgetting to re-run this only costs the compile.
 * Usage: node scripts/gen-validator.ts [OUT]
 */

import { mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { precompiledValidatorText, PRECOMPILED_VALIDATOR_PATH } from '../packages/engine/src/config/validate.ts'

/** Writes the precompiled validator to `path` (atomically: a reader never sees half a file). */
export function writePrecompiledValidator (path: string): void {
  const text = precompiledValidatorText()
  mkdirSync(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, text)
  renameSync(tmp, path)
}

if (import.meta.main) {
  const out = process.argv[2] ?? PRECOMPILED_VALIDATOR_PATH
  writePrecompiledValidator(out)
  process.stdout.write(`wrote ${out}\n`)
}
