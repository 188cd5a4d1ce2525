/**
 * Writes the values reference table of charts/portico/README.md from the `# --` comments of
 * charts/portico/values.yaml (helm-docs style; see e2e/lib/chart-docs.ts for the syntax).
 * `--check` fails, printing what differs, when the README is out of date or a key is not
 * documented; the chart tests run it, so CI catches a stale table.
 *
 *   node scripts/chart-docs.ts            # rewrite the table
 *   node scripts/chart-docs.ts --check    # exit 1 when it is stale
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseValuesDocs, renderValuesTable, undocumentedKeys, withValuesTable } from '../e2e/lib/chart-docs.ts'

export const CHART_DIR = fileURLToPath(new URL('../charts/portico/', import.meta.url))
export const VALUES_PATH = `${CHART_DIR}values.yaml`
export const README_PATH = `${CHART_DIR}README.md`

/** The README as it should be, and the keys that lack a `# --` comment. */
export function renderReadme (): { text: string, undocumented: string[] } {
  const values = readFileSync(VALUES_PATH, 'utf8')
  const docs = parseValuesDocs(values)
  return {
    text: withValuesTable(readFileSync(README_PATH, 'utf8'), renderValuesTable(docs)),
    undocumented: undocumentedKeys(values, docs)
  }
}

/** Why `current` is not `generated` (the first differing line), or null when they are equal. */
export function staleness (current: string, generated: string): string | null {
  if (current === generated) return null
  const a = current.split('\n')
  const b = generated.split('\n')
  let i = 0
  while (i < a.length && a[i] === b[i]) i++
  return `charts/portico/README.md is out of date (first difference at line ${i + 1}):\n  README:    ${a[i] ?? '(end)'}\n  generated: ${b[i] ?? '(end)'}\nrun: node scripts/chart-docs.ts`
}

if (import.meta.main) {
  const { text, undocumented } = renderReadme()
  if (undocumented.length > 0) {
    process.stderr.write(`charts/portico/values.yaml: keys without a "# --" comment: ${undocumented.join(', ')}\n`)
    process.exit(1)
  }
  if (process.argv.includes('--check')) {
    const stale = staleness(readFileSync(README_PATH, 'utf8'), text)
    if (stale !== null) {
      process.stderr.write(stale + '\n')
      process.exit(1)
    }
  } else {
    writeFileSync(README_PATH, text)
    process.stdout.write(`wrote ${README_PATH}\n`)
  }
}
