/**
 * trace-view runs in browsers (the web UI) and in porticoctl: it takes the event types from
 * @portico/engine/trace-events (a module that imports nothing) as types only, never a value
 * from the engine — that would pull the engine into the UI bundle and into porticoctl's start.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'

const SRC = new URL('../src/', import.meta.url)

test('trace-view imports from the engine only types, only from @portico/engine/trace-events', () => {
  const problems: string[] = []
  for (const name of readdirSync(SRC)) {
    const text = readFileSync(new URL(name, SRC), 'utf8')
    for (const m of text.matchAll(/^(import|export)\b([^\n]*)\bfrom\s+'(@portico\/[^']+)'/gm)) {
      const typeOnly = /^\s+type\b/.test(m[2]!)
      if (!typeOnly || m[3] !== '@portico/engine/trace-events') problems.push(`${name}: ${m[0]}`)
    }
  }
  assert.deepEqual(problems, [])
})
