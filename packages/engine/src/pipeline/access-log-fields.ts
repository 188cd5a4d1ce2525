/**
 * The access log's configurable part (`config.accessLog`, agentgateway's `fields.add` /
 * `fields.remove` and `filter`): CEL expressions compiled once at start and evaluated when a
 * request ends, over the request variables every policy sees plus `response` (code,
 * headers), `mcp` (the MCP call) and `llm` (the LLM call and its token usage). A field whose
 * expression fails to evaluate (a missing claim, say) is left out of the line; a filter
 * that fails drops nothing.
 */

import type { RequestContext } from '../request/context.ts'
import { celResponseVars } from '../cel/vars.ts'
import type { CelProgram } from '../cel/expression.ts'
import { RESPONSE_CEL_VARIABLES } from '../cel/variables.ts'
import { lazyRequire } from '../util/lazy-require.ts'

/** The CEL compiler loads with the first access log or span fields that have an expression (a data-plane worker's settings have none by default). */
const cel = lazyRequire<typeof import('../cel/expression.ts')>('../cel/expression.ts')

/** Variables of access-log expressions. */
export const ACCESS_LOG_CEL_VARIABLES = [...RESPONSE_CEL_VARIABLES, 'llm'] as const

export interface AccessLogConfig {
  filter?: string
  fields?: { add?: Record<string, string>, remove?: string[] }
}

/** Names added with CEL and built-in names removed: an access-log line's, or a server span's (`config.tracing.fields`). */
export interface CelFields {
  readonly add: ReadonlyArray<readonly [string, CelProgram]>
  readonly remove: readonly string[]
}

export interface AccessLogFields extends CelFields {
  /** Only requests for which this is true are logged; null = all. */
  readonly filter: CelProgram | null
}

/** Compiles `fields.add` (over the access log's variables); throws PORTICO_BAD_CEL naming the bad one. */
export function compileCelFields (fields: AccessLogConfig['fields']): CelFields {
  return {
    add: Object.entries(fields?.add ?? {}).map(([name, source]) => [name, cel().compileCel(source, ACCESS_LOG_CEL_VARIABLES)] as const),
    remove: fields?.remove ?? []
  }
}

/** Compiles the expressions; throws PORTICO_BAD_CEL naming the bad one. */
export function compileAccessLogFields (config: AccessLogConfig | undefined): AccessLogFields | null {
  if (config === undefined) return null
  const { add, remove } = compileCelFields(config.fields)
  const filter = config.filter !== undefined ? cel().compileCel(config.filter, ACCESS_LOG_CEL_VARIABLES) : null
  if (add.length === 0 && remove.length === 0 && filter === null) return null
  return { filter, add, remove }
}

/**
 * Applies the configured fields to a request's line (built by the proxy): returns false when
 * the filter leaves the request out of the log.
 */
export function applyAccessLogFields (compiled: AccessLogFields, ctx: RequestContext, fields: Record<string, unknown>): boolean {
  const vars = compiled.filter !== null || compiled.add.length > 0 ? accessLogVars(ctx) : null
  if (compiled.filter !== null) {
    const keep = safeEvaluate(compiled.filter, vars!)
    if (keep === false) return false
  }
  for (const name of compiled.remove) delete fields[name]
  if (compiled.add.length > 0) for (const [name, value] of evaluateAdded(compiled, vars!)) fields[name] = value
  return true
}

/** The added names' values for one request (`vars`: accessLogVars), those whose expression failed left out. */
export function evaluateAdded (compiled: CelFields, vars: Record<string, unknown>): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = []
  for (const [name, program] of compiled.add) {
    const value = safeEvaluate(program, vars)
    if (value !== undefined && !(value instanceof Error)) out.push([name, cel().celToJson(value)])
  }
  return out
}

function safeEvaluate (program: CelProgram, vars: Record<string, unknown>): unknown {
  try {
    return program.evaluate(vars)
  } catch (err) {
    return err as Error
  }
}

/** The request's variables, with `mcp` and `llm` as the request recorded them. */
export function accessLogVars (ctx: RequestContext): Record<string, unknown> {
  const vars = celResponseVars(ctx)
  const m = ctx.mcp
  if (m !== null) {
    const mcp: Record<string, unknown> = { method: m.method, target: m.target }
    if (m.kind !== undefined) mcp[m.kind] = { name: m.name ?? '', target: m.target }
    vars.mcp = mcp
  }
  const l = ctx.llm
  vars.llm = l === null
    ? null
    : {
        requestModel: l.requestModel,
        model: l.model,
        streaming: l.streaming,
        responseModel: l.usage?.responseModel ?? null,
        inputTokens: l.usage?.inputTokens ?? null,
        outputTokens: l.usage?.outputTokens ?? null,
        totalTokens: l.usage?.totalTokens ?? null,
        cost: l.cost !== undefined ? Number(l.cost.amount) : null
      }
  return vars
}
