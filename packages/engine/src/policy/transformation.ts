/**
 * `transformation`: headers and bodies computed with CEL. On each side (request, response):
 * `set` overwrites headers, `add` appends to them (comma-joined; `set-cookie` gets another
 * line), `remove` deletes them, and `body` replaces the body — in that order. The
 * expressions are compiled when the config loads; request-side ones see the request
 * variables (request, source, jwt, apiKey, basicAuth, mcp), response-side ones also
 * `response` (code, headers).
 *
 * Values: a string is used as is; an int, uint, double or bool as its decimal text; bytes as
 * they are; a list or map as JSON; null leaves the header (or body) untouched. An expression
 * that fails (a missing field, a wrong type) or gives a value a header cannot carry (CR, LF,
 * other control characters) changes nothing, and the trace says why.
 *
 * A replaced body goes out whole with a matching `content-length` (no chunking): on the
 * request side it is sent instead of the client's body (which is discarded unread); on the
 * response side the backend's body is discarded and `content-encoding` dropped.
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { TransformationIR, TransformIR } from '../ir/policy.ts'
import { celLib, celToJson, compileCel, CEL_VARIABLES, RESPONSE_CEL_VARIABLES, type CelProgram } from '../cel/expression.ts'
import { celResponseVars, celVars } from '../cel/vars.ts'
import { CONTINUE } from './header-modifier.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { PorticoError } from '../util/errors.ts'

interface CompiledTransform {
  set: Array<[string, CelProgram]>
  add: Array<[string, CelProgram]>
  remove: string[]
  body: CelProgram | null
}

function compileTransform (ir: TransformIR, variables: readonly string[]): CompiledTransform {
  return {
    set: Object.entries(ir.set ?? {}).map(([k, v]) => [k.toLowerCase(), compileCel(v, variables)]),
    add: Object.entries(ir.add ?? {}).map(([k, v]) => [k.toLowerCase(), compileCel(v, variables)]),
    remove: (ir.remove ?? []).map(k => k.toLowerCase()),
    body: ir.body !== undefined ? compileCel(ir.body, variables) : null
  }
}

/** Evaluates to bytes: the value, null (leave untouched), or an Error saying why not. */
export function evalToBuffer (program: CelProgram, vars: Record<string, unknown>): Buffer | null | Error {
  let v: unknown
  try {
    v = program.evaluate(vars)
  } catch (err) {
    return err as Error
  }
  if (v instanceof Error) return v
  if (v === null || v === undefined) return null
  if (typeof v === 'string') return Buffer.from(v)
  if (v instanceof Uint8Array) return Buffer.from(v)
  if (typeof v === 'bigint' || typeof v === 'number' || typeof v === 'boolean') return Buffer.from(String(v))
  if (celLib().isCelUint(v)) return Buffer.from(String(v.value))
  try {
    return Buffer.from(JSON.stringify(celToJson(v)))
  } catch (err) {
    return new PorticoError('PORTICO_TRANSFORMATION_VALUE', `cannot turn the value into text: ${(err as Error).message}`)
  }
}

// Header values may hold tabs, visible ASCII and obs-text; nothing else (RFC 9110 §5.5).
const INVALID_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/

function headerValue (program: CelProgram, vars: Record<string, unknown>): string | null | Error {
  const v = evalToBuffer(program, vars)
  if (v === null || v instanceof Error) return v
  const text = v.toString('latin1')
  // Round-trip through latin1 keeps bytes as they are; UTF-8 text is sent as its bytes.
  if (INVALID_HEADER_VALUE.test(text)) return new PorticoError('PORTICO_TRANSFORMATION_VALUE', 'the value has characters a header cannot carry (control characters or line breaks)')
  return text
}

/** Applies one side's header changes and returns the new body (or null); notes go to `notes`. */
function apply (t: CompiledTransform, headers: HeaderMap, vars: Record<string, unknown>, notes: string[]): Buffer | null {
  for (const [name, program] of t.set) {
    const v = headerValue(program, vars)
    if (v instanceof Error) notes.push(`set ${name} failed: ${v.message}`)
    else if (v !== null) {
      headers[name] = v
      notes.push(`set ${name}`)
    }
  }
  for (const [name, program] of t.add) {
    const v = headerValue(program, vars)
    if (v instanceof Error) {
      notes.push(`add ${name} failed: ${v.message}`)
      continue
    }
    if (v === null) continue
    const existing = headers[name]
    if (existing === undefined) headers[name] = v
    else if (name === 'set-cookie') headers[name] = [...(Array.isArray(existing) ? existing : [existing]), v]
    else headers[name] = `${Array.isArray(existing) ? existing.join(',') : existing},${v}`
    notes.push(`add ${name}`)
  }
  for (const name of t.remove) {
    if (headers[name] === undefined) continue
    delete headers[name]
    notes.push(`removed ${name}`)
  }
  if (t.body === null) return null
  const body = evalToBuffer(t.body, vars)
  if (body instanceof Error) {
    notes.push(`body failed: ${body.message}`)
    return null
  }
  if (body === null) return null
  headers['content-length'] = String(body.length)
  delete headers['transfer-encoding']
  notes.push(`body replaced (${body.length} bytes)`)
  return body
}

export function transformation (ir: TransformationIR): CompiledPolicy {
  const request = ir.request !== undefined ? compileTransform(ir.request, CEL_VARIABLES) : null
  const response = ir.response !== undefined ? compileTransform(ir.response, RESPONSE_CEL_VARIABLES) : null

  const trace = (ctx: RequestContext, side: string, notes: string[]) => {
    if (notes.length === 0) return
    const failed = notes.some(n => n.includes(' failed: '))
    ctx.tracer?.emit({ type: 'policy', kind: 'transformation', result: { type: 'apply', details: `${side}: ${notes.join('; ')}` } }, { severity: failed ? 'warn' : 'info' })
  }

  const policy: CompiledPolicy = { kind: 'transformation' }
  if (request !== null) {
    policy.onRequest = (ctx: RequestContext): PolicyOutcome => {
      const notes: string[] = []
      const body = apply(request, ctx.headers, celVars(ctx), notes)
      if (body !== null) {
        if (ctx.upgrade !== null) {
          notes.push('body not replaced on an upgrade request')
          delete ctx.headers['content-length']
        } else {
          if (ctx.requestBody === null) ctx.req.resume() // the client's body is not sent: discard it
          ctx.requestBody = body
        }
      }
      trace(ctx, 'request', notes)
      return CONTINUE
    }
  }
  if (response !== null) {
    policy.onResponse = (ctx: RequestContext): void => {
      const notes: string[] = []
      const body = apply(response, ctx.responseHeaders, celResponseVars(ctx), notes)
      if (body !== null) {
        delete ctx.responseHeaders['content-encoding']
        ctx.responseBody = body
      }
      trace(ctx, 'response', notes)
    }
  }
  return policy
}
