/**
 * The error-code table (src/util/errors.ts): every code in it is used somewhere in the
 * packages' sources, and every `'PORTICO_…'` code literal in them is in the table. TypeScript
 * already refuses `new PorticoError('PORTICO_TYPO')`; this also catches a code compared as a
 * plain string (`err.code === 'PORTICO_…'` on an `ErrnoException`) and codes nobody throws.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PORTICO_ERRORS, PorticoError, isPorticoError, type PorticoErrorCode } from '../src/util/errors.ts'

const PACKAGES = fileURLToPath(new URL('../../', import.meta.url))
const TABLE = join(PACKAGES, 'engine/src/util/errors.ts')

function sources (dir: string): string[] {
  const out: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules') continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...sources(path))
    else if (/\.tsx?$/.test(entry.name) && path !== TABLE) out.push(path)
  }
  return out
}

function codeLiterals (): Map<string, string[]> {
  const found = new Map<string, string[]>()
  for (const pkg of readdirSync(PACKAGES)) {
    let files: string[]
    try {
      files = sources(join(PACKAGES, pkg, 'src'))
    } catch {
      continue
    }
    for (const file of files) {
      for (const m of readFileSync(file, 'utf8').matchAll(/['"`](PORTICO_[A-Z0-9_]+)['"`]/g)) {
        const at = found.get(m[1]!) ?? []
        at.push(file.slice(PACKAGES.length))
        found.set(m[1]!, at)
      }
    }
  }
  return found
}

test('every code in the table is used in some package source', () => {
  const used = codeLiterals()
  const unused = Object.keys(PORTICO_ERRORS).filter(code => !used.has(code))
  assert.deepEqual(unused, [], 'codes nobody throws or checks: remove them from PORTICO_ERRORS')
})

test('every PORTICO_ code literal in the sources is in the table', () => {
  const unknown = [...codeLiterals()].filter(([code]) => !(code in PORTICO_ERRORS)).map(([code, files]) => `${code} (${files.join(', ')})`)
  assert.deepEqual(unknown, [], 'add these codes to PORTICO_ERRORS or fix their spelling')
})

test('a PorticoError without a message takes the table\'s; status comes from the table', () => {
  const busy = new PorticoError('PORTICO_PROFILE_BUSY')
  assert.equal(busy.message, PORTICO_ERRORS.PORTICO_PROFILE_BUSY.message)
  assert.equal(busy.status, 409)
  assert.equal(busy.name, 'PorticoError')
  assert.equal(new PorticoError('PORTICO_RETRY', 'status 503: retried').status, undefined)
  assert.equal(new PorticoError('PORTICO_RETRY', 'status 503: retried').message, 'status 503: retried')
})

test('isPorticoError narrows by code', () => {
  const err: unknown = new PorticoError('PORTICO_REQUEST_TIMEOUT')
  assert.equal(isPorticoError(err), true)
  assert.equal(isPorticoError(err, 'PORTICO_REQUEST_TIMEOUT'), true)
  assert.equal(isPorticoError(err, 'PORTICO_RETRY'), false)
  assert.equal(isPorticoError(Object.assign(new Error('x'), { code: 'PORTICO_REQUEST_TIMEOUT' })), false)
  if (isPorticoError(err, 'PORTICO_REQUEST_TIMEOUT')) {
    const code: 'PORTICO_REQUEST_TIMEOUT' = err.code
    assert.equal(code, 'PORTICO_REQUEST_TIMEOUT')
  }
  const codes: PorticoErrorCode[] = Object.keys(PORTICO_ERRORS) as PorticoErrorCode[]
  for (const code of codes) assert.match(code, /^PORTICO_[A-Z0-9_]+$/)
})
