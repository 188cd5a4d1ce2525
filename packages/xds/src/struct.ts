/**
 * google.protobuf.Struct ⇄ plain JSON values, in protobufjs's object form
 * (`{fields: {k: {stringValue}}}` and so on). Numbers travel as doubles, as in JSON.
 */

export interface ProtoValue {
  nullValue?: number
  numberValue?: number
  stringValue?: string
  boolValue?: boolean
  structValue?: ProtoStruct
  listValue?: { values: ProtoValue[] }
}

export interface ProtoStruct {
  fields: Record<string, ProtoValue>
}

export function toValue (v: unknown): ProtoValue {
  if (v === null || v === undefined) return { nullValue: 0 }
  if (typeof v === 'number') return { numberValue: v }
  if (typeof v === 'string') return { stringValue: v }
  if (typeof v === 'boolean') return { boolValue: v }
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } }
  if (typeof v === 'object') return { structValue: toStruct(v as Record<string, unknown>) }
  throw new TypeError(`cannot encode ${typeof v} in a Struct`)
}

export function toStruct (o: Record<string, unknown>): ProtoStruct {
  const fields: Record<string, ProtoValue> = {}
  for (const [k, v] of Object.entries(o)) if (v !== undefined) fields[k] = toValue(v)
  return { fields }
}

export function fromValue (v: ProtoValue): unknown {
  if (v.structValue != null) return fromStruct(v.structValue)
  if (v.listValue != null) return (v.listValue.values ?? []).map(fromValue)
  if (v.stringValue != null) return v.stringValue
  if (v.numberValue != null) return v.numberValue
  if (v.boolValue != null) return v.boolValue
  return null
}

export function fromStruct (s: ProtoStruct): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = fromValue(v)
  return out
}
