/**
 * Writes the chart's generated CRDs (charts/portico/templates/crd-portico{policies,backends}.yaml) from
 * the config file's JSON
 * Schema (packages/controller/src/crds). `--check` fails when a file is out of date (the test
 * suite runs it), so the CRDs and the standalone schema never drift.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { renderCrds } from '../packages/controller/src/crds/render.ts'

if (import.meta.main) {
  const check = process.argv.includes('--check')
  let stale = false
  for (const [path, text] of renderCrds()) {
    if (check) {
      if (readFileSync(path, 'utf8') !== text) {
        process.stderr.write(`${path} is out of date: run node scripts/gen-crds.ts\n`)
        stale = true
      }
    } else {
      writeFileSync(path, text)
      process.stdout.write(`wrote ${path}\n`)
    }
  }
  if (stale) process.exit(1)
}
