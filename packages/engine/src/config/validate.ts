/**
 * Schema validation with Ajv, turning Ajv's errors into diagnostics people can act on:
 * one line per problem, unknown keys with a did-you-mean, union failures collapsed into
 * one sentence instead of one per branch.
 *
 * Compiling the schema takes Ajv about 300 ms (and its garbage collection more), the
 * largest single cost of starting a gateway. scripts/setup therefore precompiles it
 * (scripts/gen-validator.ts: Ajv's standalone code, never committed) into node_modules'
 * cache; a precompiled validator is used only when its key -- the Ajv version, the options
 * and the schema file -- matches, so an edited schema is never validated by a stale one.
 * Without one, the schema compiles at the first validation, as before.
 */

import { createHash } from 'node:crypto'
import { closeSync, openSync, readFileSync, readSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { Ajv, ErrorObject, Options, ValidateFunction } from 'ajv'
import type { ConfigDiagnostic } from './diagnostics.ts'
import { didYouMean } from '../util/did-you-mean.ts'

const require = createRequire(import.meta.url)

/** Ajv's options for the config schema: the runtime compile and the precompiled code share them. */
export const AJV_OPTIONS: Options = { allErrors: true, verbose: true, strict: true, allowUnionTypes: true }

/** Where scripts/gen-validator.ts writes the precompiled validator (under node_modules: never committed). */
export const PRECOMPILED_VALIDATOR_PATH = fileURLToPath(new URL('../../node_modules/.cache/portico/config-validator.cjs', import.meta.url))

/** The first line of a precompiled validator: this prefix, then its key. */
export const PRECOMPILED_HEADER = '// portico config validator '

/**
 * The schema as the JSON file scripts/gen-schema.ts writes from schema.ts (a test keeps them
 * equal): validating needs only this text, not TypeBox's 200 modules that build it.
 */
export const SCHEMA_FILE = fileURLToPath(new URL('../../schema/config.schema.json', import.meta.url))

let compiled: ValidateFunction | undefined

/** Read when needed, not kept: ~470 KB a running proxy has no use for once validation is set up. */
function schemaFileText (): string {
  return readFileSync(SCHEMA_FILE, 'utf8')
}

/**
 * The config file's JSON Schema as an object (a fresh copy): what the controller derives its
 * CRD schemas and secret references from.
 */
export function configJsonSchema (): Record<string, unknown> {
  return JSON.parse(schemaFileText()) as Record<string, unknown>
}

function ajvVersion (): string {
  return (require('ajv/package.json') as { version: string }).version
}

/**
 * What a precompiled validator must have been made from: Ajv's version, the options, the
 * schema file. A SHA-256 of the file's bytes as read, after the version and options as JSON
 * (which hold no newline: the first one ends them). The key before it hashed the schema's
 * text as JSON (`previousValidatorKey`): decoding and escaping the ~470 KB file took ~7 of its
 * ~9 ms of CPU, at every start and reload (docs/multicore.md, Start-up).
 */
export function validatorKey (): string {
  return createHash('sha256').update(JSON.stringify([ajvVersion(), AJV_OPTIONS])).update('\n').update(readFileSync(SCHEMA_FILE)).digest('hex')
}

/**
 * The key validators were written with before (issue 54), made from the same three things:
 * still accepted, so that a checkout's validator written by an earlier scripts/setup serves
 * until setup runs again, rather than Ajv compiling the schema at every start (~300 ms).
 * Computed only when a validator's key is not the current one.
 */
export function previousValidatorKey (): string {
  return createHash('sha256').update(JSON.stringify([ajvVersion(), AJV_OPTIONS, schemaFileText()])).digest('hex')
}

/** Compiles the schema with Ajv (`source` keeps the generated code for standalone output). */
export function compileValidator (options: { source?: boolean } = {}): { ajv: Ajv, validate: ValidateFunction } {
  const { Ajv: AjvClass } = require('ajv') as typeof import('ajv')
  const ajv = new AjvClass({ ...AJV_OPTIONS, ...(options.source === true ? { code: { source: true } } : {}) })
  return { ajv, validate: ajv.compile(JSON.parse(schemaFileText()) as object) }
}

/** The precompiled validator's file text: its key line, then Ajv's standalone code (CommonJS), its validate function compiled eagerly. */
export function precompiledValidatorText (): string {
  const { ajv, validate } = compileValidator({ source: true })
  const standalone = (require('ajv/dist/standalone/index.js') as typeof import('ajv/dist/standalone/index.js')).default
  const source = validate.source
  const code = eagerValidateFunction(standalone(ajv, validate), source?.validateName.str ?? '', source?.validateCode ?? '')
  // Only ASCII, characters beyond it escaped (they are in the schema's descriptions, in
  // string literals): one such character made V8 hold the whole ~1.4 MB source two bytes a
  // character for as long as the process runs.
  return `${PRECOMPILED_HEADER}${validatorKey()}\n${code.replace(/[^\x00-\x7f]/g, c => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`
}

/**
 * Ajv's standalone module with its validate function compiled when the module is, not at its
 * first call. Ajv declares it (`function validate10(...) {...}`, the whole schema inlined: 3.4 MB
 * of source in one function), which V8 compiles lazily -- so Node's compile cache, made when
 * the module is compiled, held none of its bytecode, and every start parsed and compiled the
 * function again at the first validation: about 43 MB of V8 compiler memory (zone segments,
 * from glibc's main heap) at once, freed again, but kept by glibc in the process's `[heap]`
 * for as long as it runs (about 30 MiB of idle private memory; docs/multicore.md, Memory).
 * Declared as a parenthesized function expression instead, V8 compiles it with the module
 * (its eager-compile heuristic for `(function ...)`), the compile cache keeps its bytecode, and
 * a start with a warm cache deserializes it without parsing.
 *
 * `code` is Ajv's output: `"use strict";module.exports = NAME;module.exports.default =
 * NAME;`, its scope (the schema and helpers it references), then `validateCode`. Anything
 * else -- another Ajv's shape, a scope that names the function before its definition -- is
 * returned as it came: correct, only lazily compiled (a test pins the shape to the Ajv in
 * the lockfile).
 */
export function eagerValidateFunction (code: string, name: string, validateCode: string): string {
  const head = `"use strict";module.exports = ${name};module.exports.default = ${name};`
  if (!/^[A-Za-z_$][\w$]*$/.test(name) || !validateCode.startsWith(`function ${name}(`) || !code.startsWith(head) || !code.endsWith(validateCode)) return code
  const scope = code.slice(head.length, code.length - validateCode.length)
  // A scope that names the function (a recursive $ref's wrapper, say) needs it hoisted: the declaration stays.
  if (new RegExp(`(?<![\\w$])${name.replace(/\$/g, '\\$')}(?![\\w$])`).test(scope)) return code
  return `"use strict";${scope}const ${name} = (${validateCode});module.exports = ${name};module.exports.default = ${name};`
}

/** The precompiled validator at `path` if it exists and its key is `key`; otherwise null. */
export function loadPrecompiledValidator (path: string, key: string): ValidateFunction | null {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return null
  }
  try {
    const head = Buffer.alloc(PRECOMPILED_HEADER.length + 64)
    const n = readSync(fd, head, 0, head.length, 0)
    if (head.toString('utf8', 0, n) !== PRECOMPILED_HEADER + key) return null
  } finally {
    closeSync(fd)
  }
  // Required through a require of its own, and out of Node's module cache again at
  // releaseValidator: nothing else then holds the ~1.4 MB module (its source, its code).
  return createRequire(path)(path) as ValidateFunction
}

/** The precompiled validator at `path` if its key is the current one or the previous one (above); otherwise null. */
export function loadCurrentPrecompiledValidator (path: string = PRECOMPILED_VALIDATOR_PATH): ValidateFunction | null {
  return loadPrecompiledValidator(path, validatorKey()) ?? loadPrecompiledValidator(path, previousValidatorKey())
}

function validator (): ValidateFunction {
  compiled ??= loadCurrentPrecompiledValidator() ?? compileValidator().validate
  return compiled
}

/**
 * Lets the validator go (the proxy calls it once a config is loaded: it validates nothing
 * else until the next reload, which loads the validator again -- from the compile cache, a
 * few ms). A precompiled validator is about 3.6 MB of V8 heap and code a running proxy has
 * no use for between reloads (docs/multicore.md, Memory).
 */
export function releaseValidator (): void {
  compiled = undefined
  let key: string
  try {
    key = require.resolve(PRECOMPILED_VALIDATOR_PATH)
  } catch {
    return // no precompiled validator: nothing cached
  }
  const module = require.cache[key]
  delete require.cache[key]
  if (module === undefined) return
  // The modules it required first (Ajv's ucs2length) name it as their parent, so they would
  // hold it as long as they are cached: they go too (a few KB, required again with it)...
  const gone = new Set<NodeJS.Module>([module, ...module.children])
  for (const child of module.children) delete require.cache[child.id]
  // ...and out of the children of any module that required them after it: Fastify's Ajv
  // requires the same ucs2length, and its limitLength.js listing that module held the
  // validator's 3.8 MB source and 3 MB of bytecode for as long as the proxy ran.
  for (const cached of Object.values(require.cache)) {
    if (cached !== undefined && cached.children.some(c => gone.has(c))) cached.children = cached.children.filter(c => !gone.has(c))
  }
}

/** Validates a parsed document against the config schema. Positions are filled in later. */
export function validateAgainstSchema (value: unknown): ConfigDiagnostic[] {
  const validate = validator()
  if (validate(value)) return []
  return toDiagnostics(validate.errors ?? [])
}

function decodePointer (pointer: string): Array<string | number> {
  if (pointer === '') return []
  return pointer.slice(1).split('/').map(seg => {
    const text = seg.replace(/~1/g, '/').replace(/~0/g, '~')
    return /^\d+$/.test(text) ? Number(text) : text
  })
}

function toDiagnostics (errors: ErrorObject[]): ConfigDiagnostic[] {
  // A failed anyOf reports its own error plus one per branch; keep only the anyOf's. A set of
  // distinct union schema paths (not one per error: a file with thousands of bad routes would
  // make this quadratic).
  const unionPrefixes = [...new Set(errors.filter(e => e.keyword === 'anyOf').map(e => e.schemaPath.slice(0, -'/anyOf'.length) + '/anyOf/'))]
  const out: ConfigDiagnostic[] = []
  const seen = new Set<string>()
  for (const err of errors) {
    if (err.keyword !== 'anyOf' && unionPrefixes.some(p => err.schemaPath.startsWith(p))) continue
    // A bad map key fails the propertyNames subschema (reported with no key) and then
    // propertyNames itself (which names the key): keep the latter.
    if (err.schemaPath.includes('/propertyNames/')) continue
    const d = toDiagnostic(err)
    const id = `${d.path.join('\0')}\0${d.message}`
    if (seen.has(id)) continue
    seen.add(id)
    out.push(d)
  }
  return out
}

function toDiagnostic (err: ErrorObject): ConfigDiagnostic {
  const path = decodePointer(err.instancePath)
  const parentSchema = err.parentSchema as { description?: string, properties?: Record<string, unknown> } | undefined
  switch (err.keyword) {
    case 'additionalProperties': {
      const key = String((err.params as { additionalProperty: string }).additionalProperty)
      const known = Object.keys(parentSchema?.properties ?? {})
      const hint = didYouMean(key, known)
      const tail = hint !== undefined ? `; did you mean "${hint}"?` : known.length > 0 ? ` (known fields: ${known.join(', ')})` : ''
      return { path: [...path, key], message: `unknown field "${key}"${tail}` }
    }
    case 'propertyNames': {
      const key = String((err.params as { propertyName: string }).propertyName)
      const rule = (parentSchema as { propertyNames?: { description?: string } } | undefined)?.propertyNames?.description
      return { path: [...path, key], message: `invalid name ${JSON.stringify(key)}${rule !== undefined ? `: must be ${lowerFirst(rule).replace(/\.$/, '')}` : ''}` }
    }
    case 'required':
      return { path, message: `missing required field "${(err.params as { missingProperty: string }).missingProperty}"` }
    case 'enum':
      return { path, message: `must be one of: ${((err.params as { allowedValues: unknown[] }).allowedValues).join(', ')}` }
    case 'anyOf':
      return { path, message: parentSchema?.description !== undefined ? `invalid value: ${parentSchema.description}` : 'does not match any allowed form' }
    case 'pattern':
      return { path, message: parentSchema?.description !== undefined ? `invalid value ${JSON.stringify(err.data)}: ${parentSchema.description}` : `invalid value ${JSON.stringify(err.data)} (must match ${(err.params as { pattern: string }).pattern})` }
    case 'type':
      return { path, message: `must be ${article((err.params as { type: string }).type)}, got ${describe(err.data)}` }
    default:
      return { path, message: err.message ?? 'is invalid' }
  }
}

function lowerFirst (text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1)
}

function article (type: string): string {
  const t = type.replace(/,/g, ' or ')
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`
}

function describe (value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a map'
  return `${typeof value} ${JSON.stringify(value)}`
}
