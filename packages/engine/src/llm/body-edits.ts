/**
 * A model's `policies.transformations` (docs/models.md): request-body fields set from CEL
 * expressions and fields removed, in the client's format before conversion
 * (`beforeConversion`) or in the provider's after (`afterConversion`). The expressions see the
 * request's variables (request, source, jwt, apiKey, basicAuth) and `llm.request`: `model`,
 * `messageCount` and `body` — the body as it stands before the edits of that step.
 *
 * An expression that fails (a claim the token lacks, a wrong type) leaves its field as it
 * was, as an access-log field that fails is left out; the trace says which and why.
 */

import type { BodyEditIR } from '../ir/types.ts'
import type { RequestContext } from '../request/context.ts'
import { celToJson, compileCel, CEL_VARIABLES, type CelProgram } from '../cel/expression.ts'
import { celVars } from '../cel/vars.ts'
import { PorticoError } from '../util/errors.ts'

/** The variables body edits and conditional models see (config/models-to-ir.ts checks against the same). */
export const BODY_EDIT_CEL_VARIABLES = [...CEL_VARIABLES, 'llm'] as const

const PROGRAMS = new WeakMap<BodyEditIR, CelProgram[]>()

function programsOf (edit: BodyEditIR): CelProgram[] {
  let programs = PROGRAMS.get(edit)
  if (programs === undefined) {
    programs = edit.set.map(s => compileCel(s.expression, BODY_EDIT_CEL_VARIABLES))
    PROGRAMS.set(edit, programs)
  }
  return programs
}

/** How many messages a request carries, in whichever format (chat messages, Gemini contents, Responses input). */
export function messageCount (body: Record<string, unknown>): number {
  for (const field of ['messages', 'contents', 'input']) {
    const v = body[field]
    if (Array.isArray(v)) return v.length
    if (field === 'input' && typeof v === 'string') return 1
  }
  return 0
}

/**
 * `llm` of the CEL variables: what was asked, in the body's current state. messageCount is a
 * CEL int (a bigint here), so `llm.request.messageCount * 100` is int arithmetic.
 */
export function llmRequestVar (model: string, body: Record<string, unknown>): Record<string, unknown> {
  return { request: { model, messageCount: BigInt(messageCount(body)), body } }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/** Keys that would reach Object.prototype through a plain object: never written. */
const FORBIDDEN = new Set(['__proto__', 'constructor', 'prototype'])

function setPath (body: Record<string, unknown>, path: string[], value: unknown): void {
  let at = body
  for (const key of path.slice(0, -1)) {
    const next = at[key]
    if (!isObject(next)) at[key] = {}
    at = at[key] as Record<string, unknown>
  }
  at[path.at(-1)!] = value
}

function removePath (body: Record<string, unknown>, path: string[]): void {
  let at: unknown = body
  for (const key of path.slice(0, -1)) {
    if (!isObject(at)) return
    at = at[key]
  }
  if (isObject(at)) delete at[path.at(-1)!]
}

/** Applies one step's edits to `body` in place; returns the fields whose expression failed, with why. */
export function applyBodyEdit (ctx: RequestContext, edit: BodyEditIR, model: string, body: Record<string, unknown>): Array<{ field: string, error: string }> {
  const failed: Array<{ field: string, error: string }> = []
  const programs = programsOf(edit)
  // Every expression sees the body as the step found it (a copy: the edits below change it).
  const vars = { ...celVars(ctx), llm: llmRequestVar(model, structuredClone(body)) }
  const values: Array<unknown> = []
  edit.set.forEach((s, i) => {
    let v: unknown
    try {
      v = programs[i]!.evaluate(vars)
    } catch (err) {
      v = err instanceof Error ? err : new PorticoError('PORTICO_CEL_EVAL', String(err))
    }
    if (v instanceof Error) {
      failed.push({ field: s.field, error: v.message })
      values.push(undefined)
    } else values.push(celToJson(v))
  })
  edit.set.forEach((s, i) => {
    const path = s.field.split('.')
    if (values[i] === undefined || path.some(k => FORBIDDEN.has(k))) return
    setPath(body, path, values[i])
  })
  for (const field of edit.remove) {
    const path = field.split('.')
    if (!path.some(k => FORBIDDEN.has(k))) removePath(body, path)
  }
  return failed
}
