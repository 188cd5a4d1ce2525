/**
 * A form generated from a tool's input JSON Schema: a field per top-level property (text,
 * number, checkbox, a select for enums, JSON for arrays and objects), required ones marked.
 * `formArguments` turns the field texts into the `arguments` object, leaving out empty
 * optional fields, or says which field is wrong.
 */

import type { JsonSchema } from './api.ts'

export type FieldValues = Record<string, string | boolean>

function typeOf (s: JsonSchema): string {
  if (Array.isArray(s.type)) return s.type.find(t => t !== 'null') ?? 'string'
  if (s.type !== undefined) return s.type
  if (s.enum !== undefined) return 'string'
  const alt = s.anyOf ?? s.oneOf
  if (alt !== undefined) return typeOf(alt.find(a => a.type !== 'null') ?? {})
  return 'json'
}

/** Initial values: each property's default, else empty. */
export function initialValues (schema: JsonSchema): FieldValues {
  const out: FieldValues = {}
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const t = typeOf(prop)
    if (t === 'boolean') out[name] = prop.default === true
    else if (prop.default !== undefined) out[name] = t === 'string' ? String(prop.default) : JSON.stringify(prop.default)
    else out[name] = ''
  }
  return out
}

export function formArguments (schema: JsonSchema, values: FieldValues): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const required = new Set(schema.required ?? [])
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const v = values[name]
    const t = typeOf(prop)
    if (t === 'boolean') {
      if (v === true || required.has(name) || prop.default !== undefined) out[name] = v === true
      continue
    }
    const text = typeof v === 'string' ? v : ''
    if (text === '') {
      if (required.has(name)) throw new Error(`"${name}" is required`)
      continue
    }
    if (t === 'string') out[name] = text
    else if (t === 'number' || t === 'integer') {
      const n = Number(text)
      if (!Number.isFinite(n) || (t === 'integer' && !Number.isInteger(n))) throw new Error(`"${name}" must be ${t === 'integer' ? 'an integer' : 'a number'}`)
      out[name] = n
    } else {
      try {
        out[name] = JSON.parse(text)
      } catch {
        throw new Error(`"${name}" must be JSON (${t})`)
      }
    }
  }
  return out
}

export function SchemaForm (props: { schema: JsonSchema, values: FieldValues, onChange: (v: FieldValues) => void, idPrefix: string }) {
  const { schema, values, onChange } = props
  const props_ = Object.entries(schema.properties ?? {})
  const required = new Set(schema.required ?? [])
  if (props_.length === 0) return <p className='muted small'>This tool takes no arguments.</p>
  return (
    <div className='form-grid schema-form'>
      {props_.map(([name, prop]) => {
        const t = typeOf(prop)
        const id = `${props.idPrefix}-${name}`
        const label = <span>{name}{required.has(name) ? <span className='req' title='required'>*</span> : null} <span className='muted small'>{t}</span></span>
        const set = (v: string | boolean) => onChange({ ...values, [name]: v })
        let input
        if (t === 'boolean') {
          input = <input id={id} type='checkbox' checked={values[name] === true} onChange={e => set(e.target.checked)} data-testid={`arg-${name}`} />
        } else if (prop.enum !== undefined) {
          input = (
            <select id={id} value={String(values[name] ?? '')} onChange={e => set(e.target.value)} data-testid={`arg-${name}`}>
              {required.has(name) ? null : <option value=''>(none)</option>}
              {prop.enum.map(v => <option key={String(v)} value={typeof v === 'string' ? v : JSON.stringify(v)}>{String(v)}</option>)}
            </select>
          )
        } else if (t === 'string') {
          input = <input id={id} value={String(values[name] ?? '')} onChange={e => set(e.target.value)} data-testid={`arg-${name}`} />
        } else if (t === 'number' || t === 'integer') {
          input = <input id={id} type='number' step={t === 'integer' ? 1 : 'any'} min={prop.minimum} max={prop.maximum} value={String(values[name] ?? '')} onChange={e => set(e.target.value)} data-testid={`arg-${name}`} />
        } else {
          input = <textarea id={id} rows={3} className='mono' placeholder={t === 'array' ? '[ … ]' : '{ … }'} value={String(values[name] ?? '')} onChange={e => set(e.target.value)} data-testid={`arg-${name}`} />
        }
        return (
          <label key={name} htmlFor={id} className={t === 'boolean' ? 'check' : 'row'}>
            {label}
            {input}
            {prop.description !== undefined ? <small className='muted'>{prop.description}</small> : null}
          </label>
        )
      })}
    </div>
  )
}
