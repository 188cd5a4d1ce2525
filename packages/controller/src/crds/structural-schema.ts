/**
 * The config file's JSON Schema (packages/engine/schema/config.schema.json, generated from the
 * engine's TypeBox source) → the structural OpenAPI v3 schema a CustomResourceDefinition
 * carries, so a PorticoPolicy's `policies` or a PorticoBackend's `mcp` is the same schema as
 * the standalone block and the two cannot drift.
 *
 * What Kubernetes cannot say is said differently or left to the controller, which validates
 * every object against the full engine schema anyway (and reports a failure in the status):
 *   - a secret-bearing field (marked SECRET_FILE / SECRET_VALUE) becomes `{secretRef: {name,
 *     key}}`, and a secret `file` property becomes `secretRef` itself (`jwks: {secretRef}`):
 *     a resource never carries credentials in clear;
 *   - `additionalProperties: false` is dropped (the API server prunes unknown fields instead);
 *   - `patternProperties` (keyed maps) become `additionalProperties`;
 *   - a union of string literals becomes an enum; any other union, and untyped values
 *     (`Type.Unknown`), keep what is sent (`x-kubernetes-preserve-unknown-fields`);
 *   - `const` becomes a one-value enum; `$id`, `$comment`, `title` and `propertyNames` go.
 */

import { SECRET_FILE, SECRET_VALUE } from '@portico/engine/config'

export type JsonSchema = Record<string, unknown>

/** `{secretRef: {name, key}}`: a key of a Secret in the resource's namespace. */
export function secretRefSchema (description: string): JsonSchema {
  return {
    description,
    type: 'object',
    required: ['secretRef'],
    properties: {
      secretRef: {
        description: 'A key of a Secret in the same namespace as this resource.',
        type: 'object',
        required: ['name', 'key'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 253 },
          key: { type: 'string', minLength: 1, maxLength: 253, pattern: '^[-._a-zA-Z0-9]+$' }
        }
      }
    }
  }
}

/** Whether a schema node marks a secret-bearing field (and which kind). */
export function secretMark (schema: JsonSchema): typeof SECRET_FILE | typeof SECRET_VALUE | null {
  return schema.$comment === SECRET_FILE || schema.$comment === SECRET_VALUE ? schema.$comment : null
}

const KEPT = ['description', 'type', 'format', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems', 'uniqueItems', 'enum', 'required', 'default']

/** The structural form of `schema` (see the module comment). */
export function toStructural (schema: JsonSchema): JsonSchema {
  const mark = secretMark(schema)
  if (mark !== null) return secretRefSchema(String(schema.description ?? 'A secret.'))
  const union = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined
  if (union !== undefined) {
    if (union.every(b => b.const !== undefined && b.type === 'string')) {
      return withDescription({ type: 'string', enum: union.map(b => b.const) }, schema)
    }
    return withDescription({ 'x-kubernetes-preserve-unknown-fields': true }, schema)
  }
  if (schema.type === undefined && schema.const === undefined && schema.enum === undefined) {
    return withDescription({ 'x-kubernetes-preserve-unknown-fields': true }, schema)
  }
  const out: JsonSchema = {}
  for (const key of KEPT) if (schema[key] !== undefined) out[key] = schema[key]
  if (schema.const !== undefined) {
    out.enum = [schema.const]
    out.type ??= typeof schema.const
  }
  if (schema.type === 'array' && schema.items !== undefined) out.items = toStructural(schema.items as JsonSchema)
  if (schema.type === 'object') {
    const properties = schema.properties as Record<string, JsonSchema> | undefined
    if (properties !== undefined) {
      out.properties = Object.fromEntries(Object.entries(properties).map(([k, v]) => {
        // `{file: path}` of a secret (a JWKS file) reads as `{secretRef: {name, key}}`.
        if (k === 'file' && secretMark(v) === SECRET_FILE) return ['secretRef', (secretRefSchema(String(v.description ?? '')).properties as JsonSchema).secretRef]
        return [k, toStructural(v)]
      }))
      if (Array.isArray(out.required)) out.required = (out.required as string[]).map(r => r === 'file' && secretMark(properties.file!) === SECRET_FILE ? 'secretRef' : r)
    }
    const keyed = schema.patternProperties as Record<string, JsonSchema> | undefined
    const values = keyed !== undefined ? Object.values(keyed)[0] : typeof schema.additionalProperties === 'object' ? schema.additionalProperties as JsonSchema : undefined
    if (values !== undefined) {
      const structural = toStructural(values)
      if (structural['x-kubernetes-preserve-unknown-fields'] === true && Object.keys(structural).every(k => k === 'x-kubernetes-preserve-unknown-fields' || k === 'description')) {
        out['x-kubernetes-preserve-unknown-fields'] = true
      } else out.additionalProperties = structural
    }
    if (properties === undefined && values === undefined) out['x-kubernetes-preserve-unknown-fields'] = true
  }
  return out
}

function withDescription (out: JsonSchema, from: JsonSchema): JsonSchema {
  return from.description !== undefined ? { description: from.description, ...out } : out
}
