/**
 * The controller's edges: it imports the engine's IR and config converters by their subpaths
 * (`@portico/engine/ir`, `@portico/engine/config`) and its process plumbing from
 * `@portico/ops`, so neither the engine barrel (undici, gRPC, the MCP SDK…) nor the proxy is
 * loaded to translate Gateway API objects.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

function loadedBy (module: string): string[] {
  // Sync module hooks record every file the import loads.
  const script = `
    import { registerHooks } from 'node:module'
    const seen = []
    registerHooks({ load (url, context, next) { seen.push(url); return next(url, context) } })
    await import(${JSON.stringify(new URL(module, import.meta.url).href)})
    process.stdout.write(JSON.stringify(seen))
  `
  const cwd = fileURLToPath(new URL('..', import.meta.url))
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd, encoding: 'utf8' })) as string[]
}

for (const entry of ['../src/translate/translate.ts', '../src/main.ts']) {
  test(`${entry.slice(7)} loads neither the engine barrel nor @portico/proxy`, () => {
    const loaded = loadedBy(entry)
    assert.ok(loaded.some(u => u.endsWith('/packages/engine/src/config/converters.ts')))
    assert.deepEqual(loaded.filter(u => u.endsWith('/packages/engine/src/index.ts') || u.includes('/packages/proxy/')), [])
  })
}
