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

/**
 * The engine throws PorticoErrors, so callers branch on a code and logs carry one. A plain
 * `new Error(` is allowed only where the line says why (a comment containing "plain Error on
 * purpose" right above it) and the file is in this list: assertions no input can reach, and
 * errors that carry Node's own code so they classify as Node's do.
 */
const PLAIN_ERRORS_ALLOWED: Record<string, number> = {
  'trace/span-export.ts': 1, // the recorder's own attribute layouts
  'traffic/ext-proc-codec.ts': 1, // the encoder's own size arithmetic
  'http/h1-connection.ts': 1, // ERR_STREAM_PREMATURE_CLOSE, as Node's streams raise it
  'http/upstream-pools.ts': 1 // ERR_TLS_CERT_ALTNAME_INVALID, as tls.checkServerIdentity raises it
}

test('no plain new Error( in packages/engine/src outside the allow-list, and each allowed one says why', () => {
  const src = join(PACKAGES, 'engine/src')
  const found: Record<string, number> = {}
  const unexplained: string[] = []
  for (const file of sources(src)) {
    const lines = readFileSync(file, 'utf8').split('\n')
    lines.forEach((line, i) => {
      if (!/\bnew Error\(/.test(line)) return
      const rel = file.slice(src.length + 1)
      found[rel] = (found[rel] ?? 0) + 1
      if (!/plain Error on purpose/.test(lines[i - 1] ?? '')) unexplained.push(`${rel}:${i + 1}`)
    })
  }
  assert.deepEqual(found, PLAIN_ERRORS_ALLOWED, 'throw a PorticoError with a code from PORTICO_ERRORS (src/util/errors.ts) instead')
  assert.deepEqual(unexplained, [], 'say why this one stays plain, in a comment with "plain Error on purpose" on the line above')
})
