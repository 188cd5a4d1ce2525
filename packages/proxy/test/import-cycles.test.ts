/**
 * packages/proxy/src imports without a cycle (issue 54): portico.ts and admin/ imported each
 * other (a 7-file cycle, type-only on admin's side) until admin read the proxy through
 * AdminView (admin/view.ts) and workers ran data-plane.ts instead of a whole Portico.
 * Type-only and dynamic imports count: reading a module means reading the types it names.
 * The graph and the cycle finder are the engine's import-graph test's (testkit import-graph.ts).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { cyclePath, cycles, importGraph } from '../../testkit/src/import-graph.ts'

const SRC = fileURLToPath(new URL('../src/', import.meta.url))

test('import cycles: none between the files of packages/proxy/src', () => {
  const graph = importGraph(SRC)
  const found = cycles(graph)
  assert.deepEqual(found.map(c => cyclePath(graph, c)), [], `import cycles in packages/proxy/src (cut each at one import: a narrow interface in its own module, as admin/view.ts):\n${found.map(c => `  ${cyclePath(graph, c)}\n    (all of: ${c.join(', ')})`).join('\n')}`)
})

test('import cycles: only the process entry (start.ts, index.ts) imports portico.ts; admin/ and workers/ never do', () => {
  const graph = importGraph(SRC)
  const importers = [...graph].filter(([, to]) => to.has('portico.ts')).map(([from]) => from).sort()
  assert.deepEqual(importers, ['index.ts', 'start.ts'])
})

test('import cycles: the checker finds a cycle made of a type-only and a dynamic import', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'import-cycles-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'admin'))
  writeFileSync(join(dir, 'main.ts'), "export async function start (): Promise<void> {\n  await import('./admin/server.ts')\n}\n")
  writeFileSync(join(dir, 'admin/server.ts'), "import type { Main } from '../main.ts'\n/**\n * Quoted in a doc comment, not an import:\n * import { x } from './leaf.ts'\n */\nexport type M = Main\n")
  writeFileSync(join(dir, 'admin/leaf.ts'), "import { start } from '../main.ts'\nexport const x = start\n")
  writeFileSync(join(dir, 'self.ts'), "export {\n  a\n} from './self.ts'\n")
  const graph = importGraph(dir)
  assert.deepEqual(cycles(graph), [['admin/server.ts', 'main.ts'], ['self.ts']])
  assert.equal(cyclePath(graph, ['admin/server.ts', 'main.ts']), 'admin/server.ts → main.ts → admin/server.ts')
})
