import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { goldenCases, stableJSON, unpairedFiles } from '../../../scripts/lib/golden.ts'

// The golden-case layout both golden tests share (scripts/lib/golden.ts): what it pairs and what
// it reports, on a tree made for the test.
const layout = { input: '.yaml', outputs: ['.ir.json', '.refused.json'] }

function tree (files: string[]): string {
  const root = mkdtempSync(join(tmpdir(), 'golden-'))
  for (const f of files) {
    mkdirSync(join(root, f, '..'), { recursive: true })
    writeFileSync(join(root, f), '')
  }
  return root
}

test('golden cases: one per input, by folder, sorted; files/ folders are not cases', (t) => {
  const root = tree(['routes/b.yaml', 'routes/b.ir.json', 'routes/a.yaml', 'routes/a.refused.json', 'tls/x.yaml', 'tls/x.ir.json', 'tls/files/cert.pem'])
  t.after(() => rmSync(root, { recursive: true, force: true }))
  assert.deepEqual(goldenCases(root, layout).map(c => c.id), ['routes/a', 'routes/b', 'tls/x'])
  assert.deepEqual(unpairedFiles(root, layout), [])
})

test('golden cases: an input without output, an output without input and a stray file are reported', (t) => {
  const root = tree(['routes/new.yaml', 'routes/gone.ir.json', 'routes/notes.txt', 'loose.yaml'])
  t.after(() => rmSync(root, { recursive: true, force: true }))
  assert.deepEqual(unpairedFiles(root, layout), ['loose.yaml', 'routes/gone.ir.json (no input)', 'routes/new.yaml (no output)', 'routes/notes.txt (not a case file)'])
})

test('golden cases: stableJSON sorts object keys at every depth and keeps array order', () => {
  assert.equal(stableJSON({ b: 1, a: [{ d: 1, c: 2 }, 0] }), '{\n  "a": [\n    {\n      "c": 2,\n      "d": 1\n    },\n    0\n  ],\n  "b": 1\n}\n')
})
