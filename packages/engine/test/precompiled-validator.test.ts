/**
 * The precompiled config validator (scripts/gen-validator.ts, run by scripts/setup) gives
 * the same answers as compiling the schema at run time, is ignored when its key does
 * not match the schema and Ajv it was made from, and has V8 compile its validate function
 * with the module, so that Node's compile cache holds the function's bytecode.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createRequire } from 'node:module'
import vm from 'node:vm'
import { existsSync } from 'node:fs'
import { compileValidator, eagerValidateFunction, loadCurrentPrecompiledValidator, loadPrecompiledValidator, precompiledValidatorText, PRECOMPILED_HEADER, PRECOMPILED_VALIDATOR_PATH, previousValidatorKey, releaseValidator, validateAgainstSchema, validatorKey, SCHEMA_FILE } from '../src/config/validate.ts'

const DOCUMENTS: unknown[] = [
  { gateways: { default: { port: 3000 } }, routes: [{ name: 'a', backends: [{ host: '127.0.0.1:8080' }] }] },
  { gateways: { default: { port: 'x' } } },
  { gateways: { default: { port: 3000, protcol: 'HTTP' } }, routes: [] },
  { gateways: { default: { port: 3000 } }, routes: [{ name: 'a', matches: [{ path: { exact: 1 } }], policies: { cors: { allowOrigins: 5 } } }] },
  { config: { session: { key: 'short' } }, gateways: {} },
  'not an object'
]

test('the precompiled validator answers as the runtime-compiled one; a stale or missing file is ignored', t => {
  // Beside the real one, under the engine's node_modules: the generated code requires Ajv's
  // runtime helpers, which resolve from there (not from a system temp directory).
  mkdirSync(dirname(PRECOMPILED_VALIDATOR_PATH), { recursive: true })
  const dir = mkdtempSync(join(dirname(PRECOMPILED_VALIDATOR_PATH), 'test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'config-validator.cjs')
  const text = precompiledValidatorText()
  // ASCII only: one character beyond it makes V8 keep the whole source two bytes a character.
  assert.equal(/[^\x00-\x7f]/.exec(text), null)
  writeFileSync(path, text)
  const precompiled = loadPrecompiledValidator(path, validatorKey())
  assert.ok(precompiled !== null)
  const runtime = compileValidator().validate
  assert.ok(DOCUMENTS.filter(d => !runtime(d)).length >= 4, 'the invalid documents are invalid')
  for (const doc of DOCUMENTS) {
    assert.equal(precompiled(doc), runtime(doc), JSON.stringify(doc))
    const strip = (errors: typeof runtime.errors) => (errors ?? []).map(e => ({ ...e, parentSchema: JSON.stringify(e.parentSchema), schema: JSON.stringify(e.schema) }))
    assert.deepEqual(strip(precompiled.errors), strip(runtime.errors), JSON.stringify(doc))
  }
  assert.equal(loadPrecompiledValidator(path, 'another key'), null)
  assert.equal(loadPrecompiledValidator(join(dir, 'missing.cjs'), validatorKey()), null)
})

test('the key hashes the schema file\'s bytes; a validator written with the previous key (the schema\'s text as JSON) is still used, one with any other key is not', t => {
  mkdirSync(dirname(PRECOMPILED_VALIDATOR_PATH), { recursive: true })
  const dir = mkdtempSync(join(dirname(PRECOMPILED_VALIDATOR_PATH), 'test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const ajvVersion = (createRequire(import.meta.url)('ajv/package.json') as { version: string }).version
  const options = { allErrors: true, verbose: true, strict: true, allowUnionTypes: true }
  assert.equal(validatorKey(), createHash('sha256').update(JSON.stringify([ajvVersion, options]) + '\n').update(readFileSync(SCHEMA_FILE)).digest('hex'))
  assert.equal(previousValidatorKey(), createHash('sha256').update(JSON.stringify([ajvVersion, options, readFileSync(SCHEMA_FILE, 'utf8')])).digest('hex'))
  assert.notEqual(validatorKey(), previousValidatorKey())
  const text = precompiledValidatorText()
  assert.ok(text.startsWith(PRECOMPILED_HEADER + validatorKey() + '\n'), 'written with the current key')
  const body = text.slice(text.indexOf('\n'))
  const write = (key: string): string => {
    const path = join(dir, `${key.slice(0, 8)}.cjs`)
    writeFileSync(path, PRECOMPILED_HEADER + key + body)
    return path
  }
  assert.equal(typeof loadCurrentPrecompiledValidator(write(validatorKey())), 'function')
  assert.equal(typeof loadCurrentPrecompiledValidator(write(previousValidatorKey())), 'function')
  assert.equal(loadCurrentPrecompiledValidator(write(createHash('sha256').update('another schema').digest('hex'))), null)
})

test('releaseValidator lets the precompiled validator go (out of the module cache and every module\'s children, with what it required first); the next validation loads it again', { skip: !existsSync(PRECOMPILED_VALIDATOR_PATH) && 'no precompiled validator (scripts/setup makes it)' }, () => {
  const cache = createRequire(import.meta.url).cache
  const validator = createRequire(import.meta.url).resolve(PRECOMPILED_VALIDATOR_PATH)
  // The validator, and the one Ajv helper its code requires (the test above compiles Ajv: its other helpers stay).
  const cached = (): string[] => Object.keys(cache).filter(k => k === validator || k.endsWith('/ajv/dist/runtime/ucs2length.js'))
  const answers = (): unknown[] => DOCUMENTS.map(d => validateAgainstSchema(d))
  const before = answers()
  assert.ok(cached().includes(validator), 'loaded by the first validation')
  releaseValidator()
  // Nothing cached names it: its module, and Ajv's helper whose first parent it was, are gone.
  assert.deepEqual(cached(), [])
  // Nor lists them among its children (Ajv's own limitLength.js requires the same helper): a
  // module listed there, naming the validator as its first parent, would keep it alive.
  const listed = Object.values(cache).flatMap(m => m?.children ?? []).filter(c => c.id === validator || c.id.endsWith('/ajv/dist/runtime/ucs2length.js'))
  assert.deepEqual(listed.filter(c => cache[c.id] !== c).map(c => c.id), [])
  assert.deepEqual(answers(), before, 'the same answers after it is loaded again')
  releaseValidator()
})

test('the precompiled validate function is compiled with its module: a code cache made then holds its bytecode', () => {
  const text = precompiledValidatorText()
  // The shape eagerValidateFunction makes from the Ajv of the lockfile (it returns Ajv's code unchanged for any other).
  const m = /^"use strict";.*const (validate\d+) = \(function \1\(/m.exec(text)
  assert.ok(m !== null, 'the validate function is a parenthesized function expression')
  assert.match(text, new RegExp(`module\\.exports = ${m[1]};module\\.exports\\.default = ${m[1]};\\n$`))
  // Node's compile cache is V8's code cache made when the module is compiled, before it runs
  // (as here): with the function compiled lazily it held none of the function's bytecode.
  const { ajv, validate } = compileValidator({ source: true })
  const standalone = (createRequire(import.meta.url)('ajv/dist/standalone/index.js') as typeof import('ajv/dist/standalone/index.js')).default
  const lazy = standalone(ajv, validate)
  const cacheBytes = (code: string) => new vm.Script(code).createCachedData().length
  const eager = cacheBytes(text)
  assert.ok(eager > 10 * cacheBytes(lazy), `code cache ${eager} bytes, lazily compiled ${cacheBytes(lazy)}`)
  assert.ok(eager > 1_000_000, `code cache ${eager} bytes: the function's bytecode (MBs: the schema is inlined into it)`)
})

test('eagerValidateFunction leaves code of another shape as it came', () => {
  const fn = 'function validate1(data){return true;}'
  const ajv = `"use strict";module.exports = validate1;module.exports.default = validate1;const schema2 = {};${fn}`
  assert.equal(eagerValidateFunction(ajv, 'validate1', fn), '"use strict";const schema2 = {};const validate1 = (function validate1(data){return true;});module.exports = validate1;module.exports.default = validate1;')
  // A scope that names the function before its definition needs the hoisted declaration.
  const recursive = `"use strict";module.exports = validate1;module.exports.default = validate1;const wrapper0 = {validate: validate1};${fn}`
  assert.equal(eagerValidateFunction(recursive, 'validate1', fn), recursive)
  // Not Ajv's head, or the function not last: unchanged.
  assert.equal(eagerValidateFunction(`"use strict";export default validate1;${fn}`, 'validate1', fn), `"use strict";export default validate1;${fn}`)
  assert.equal(eagerValidateFunction(`${ajv}validate1.evaluated = {};`, 'validate1', fn), `${ajv}validate1.evaluated = {};`)
  assert.equal(eagerValidateFunction(ajv, 'validate1', 'function other(){}'), ajv)
})
