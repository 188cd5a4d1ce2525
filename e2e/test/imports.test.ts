/**
 * One way to write an e2e test: the shared helpers come from @portico/testkit, and the
 * packages from their public entries (`@portico/engine`, `@portico/engine/ir`, … each
 * package.json's "exports"). A relative import into packages/ (`../../packages/engine/src/…`,
 * `../../packages/cli/test/helpers.ts`) couples a black-box test to a file layout the package
 * may change; and the e2e/lib re-export shims of the testkit are gone, so a new test must not
 * bring one back. This reads every .ts file under e2e/ and bench/ (not node_modules) and fails
 * on either: a bench, as a test, measures the packages through what they export. A test or
 * bench that needs an internal adds it to the package's "exports" (or is a unit test and
 * belongs in that package's test folder).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { REPO_ROOT } from '@portico/testkit/portico'

const E2E = join(REPO_ROOT, 'e2e')
const BENCH = join(REPO_ROOT, 'bench')

/** The e2e/lib files that only re-exported the testkit: where each part lives now. */
const REMOVED_SHIMS: Record<string, string> = {
  'e2e/lib/portico.ts': '@portico/testkit/portico',
  'e2e/lib/backends.ts': '@portico/testkit/backends',
  'e2e/lib/client.ts': '@portico/testkit/client',
  'e2e/lib/trace.ts': '@portico/testkit/trace',
  'e2e/lib/tools.ts': '@portico/testkit/tools'
}

// Static imports and re-exports (`… from '…'`), side-effect imports (`import '…'`) and
// dynamic imports with a literal (`import('…')`). Specifiers built at run time (a template
// literal) are not imports of this checkout's files and are not matched.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"\n]+)\1/gm

/** Every import specifier of `source`, with its 1-based line. */
export function importSpecifiers (source: string): Array<{ specifier: string, line: number }> {
  const out: Array<{ specifier: string, line: number }> = []
  for (const m of source.matchAll(SPECIFIER)) {
    const at = m.index + m[0].length - m[2]!.length - 2
    out.push({ specifier: m[2]!, line: source.slice(0, at).split('\n').length })
  }
  return out
}

/** What is wrong with importing `specifier` from `file` (repo-relative), or null. */
export function importProblem (file: string, specifier: string): string | null {
  // A bare specifier (`@portico/engine/…`) can only reach what the package exports: Node
  // refuses the rest. Relative and absolute paths are resolved and checked.
  if (!specifier.startsWith('.') && !specifier.startsWith('/')) return null
  const target = relative(REPO_ROOT, resolve(REPO_ROOT, dirname(file), specifier)).split(sep).join('/')
  if (target.startsWith('packages/')) {
    const pkg = target.split('/')[1]
    return `imports ${target} by path: use @portico/testkit or @portico/${pkg}'s public entry (add to its package.json "exports" if a test needs an internal)`
  }
  const moved = REMOVED_SHIMS[target]
  if (moved !== undefined) return `imports ${target}, a removed re-export shim: import ${moved}`
  return null
}

function tsFiles (dir: string): string[] {
  const out: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules') continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...tsFiles(path))
    else if (entry.name.endsWith('.ts')) out.push(path)
  }
  return out
}

test('no e2e or bench file imports packages/*/src (or any path into packages/) or a removed e2e/lib shim', () => {
  const problems: string[] = []
  const e2e = tsFiles(E2E)
  const bench = tsFiles(BENCH)
  assert.ok(e2e.length > 100, `found ${e2e.length} .ts files under ${E2E}`)
  assert.ok(bench.length > 20, `found ${bench.length} .ts files under ${BENCH}`)
  for (const path of [...e2e, ...bench]) {
    const file = relative(REPO_ROOT, path).split(sep).join('/')
    for (const { specifier, line } of importSpecifiers(readFileSync(path, 'utf8'))) {
      const problem = importProblem(file, specifier)
      if (problem !== null) problems.push(`${file}:${line} ${problem}`)
    }
  }
  assert.deepEqual(problems, [])
})

test('the removed shims stay removed', () => {
  for (const shim of Object.keys(REMOVED_SHIMS)) assert.equal(existsSync(join(REPO_ROOT, shim)), false, `${shim} is back: import ${REMOVED_SHIMS[shim]} instead`)
})

test('the check catches each form of import it is for', () => {
  // Written in capitals and lowered here, so that this file's own scan does not see them.
  const source = [
    "IMPORT { x } FROM '../../packages/engine/src/llm/canonical.ts'",
    "IMPORT type { Y } FROM '../../packages/controller/src/index.ts'",
    "export { z } FROM '../../packages/cli/test/helpers.ts'",
    "IMPORT '../../packages/proxy/src/side-effect.ts'",
    "const m = await IMPORT('../../packages/engine/src/index.ts')",
    "IMPORT { startPortico } FROM '../lib/portico.ts'",
    "IMPORT { ok } FROM '@portico/engine/llm/canonical'",
    "IMPORT { alsoOk } FROM '../lib/ext-authz.ts'"
  ].join('\n').replaceAll('IMPORT', 'import').replaceAll('FROM', 'from')
  const found = importSpecifiers(source).map(({ specifier, line }) => [line, importProblem('e2e/test/example.test.ts', specifier) !== null])
  assert.deepEqual(found, [[1, true], [2, true], [3, true], [4, true], [5, true], [6, true], [7, false], [8, false]])
  // From bench/ (one level down), ../packages/… is the path into a package.
  assert.match(importProblem('bench/example.ts', '../packages/engine/src/index.ts') ?? '', /imports packages\/engine\/src\/index\.ts by path/)
  assert.equal(importProblem('bench/example.ts', './lib/servers.ts'), null)
  // From e2e/lib/llm-emulators (two levels down), ../backends.ts is the removed shim too.
  assert.match(importProblem('e2e/lib/llm-emulators/x.ts', '../backends.ts') ?? '', /@portico\/testkit\/backends/)
})
