/**
 * Schema validation with Ajv, turning Ajv's errors into diagnostics people can act on:
 * one line per problem, unknown keys with a did-you-mean, union failures collapsed into
 * one sentence instead of one per branch.
 */

import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { ConfigFileSchema } from './schema.ts'
import type { ConfigDiagnostic } from './diagnostics.ts'
import { didYouMean } from '../util/did-you-mean.ts'

let compiled: ValidateFunction | undefined

function validator (): ValidateFunction {
  if (compiled === undefined) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true })
    compiled = ajv.compile(ConfigFileSchema)
  }
  return compiled
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
