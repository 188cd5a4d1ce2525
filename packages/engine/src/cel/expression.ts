/**
 * CEL expressions (@bufbuild/cel), compiled when a config loads so a syntax error or an
 * unknown variable is a config error naming the expression, and evaluated per request over
 * the variables below. An expression that fails at run time (a missing claim, a type
 * mismatch) evaluates to false and reports why.
 *
 * Variables: `request` (method, path, pathAndQuery, host, scheme, headers), `source`
 * (address, port), `jwt` (validated claims; `{}` without a token), `apiKey` (key name and
 * metadata), `basicAuth` (username), `mcp` (method, and tool/prompt/resource {name, target}
 * on MCP routes; null elsewhere). Expressions that run on the response
 * (`transformation.response`) also see `response` (code, headers).
 *
 * An expression that can never evaluate (`request.path + 1`, a field `request` does not have)
 * is refused when it compiles, by the conservative checker in cel/check.ts.
 *
 * `matches()` runs on the same linear-time RE2 engine as route regexes
 * (util/linear-regex.ts); a constant pattern is compiled with the expression, so one the
 * engine refuses is a config error, and patterns are compiled once, not per evaluation.
 */

import type * as Cel from '@bufbuild/cel'
import { PorticoError } from '../util/errors.ts'
import { LinearRegexCache, linearRegexProblem } from '../util/linear-regex.ts'
import { lazyRequire } from '../util/lazy-require.ts'
import { celTypeProblem } from './check.ts'

/** @bufbuild/cel (and @bufbuild/protobuf under it), loaded when a config first has an expression. */
export const celLib = lazyRequire<typeof Cel>('@bufbuild/cel')

import { CEL_VARIABLES } from './variables.ts'

export { CEL_VARIABLES, RESPONSE_CEL_VARIABLES } from './variables.ts'

/** Patterns of `matches()`, each compiled once; bounded, so patterns computed per request cannot grow it without limit. */
const patterns = new LinearRegexCache(1024)

// CEL's `matches()` finds the pattern anywhere in the string (RE2 semantics), so `find`.
let env: ReturnType<typeof Cel.celEnv> | undefined
function celEnvironment (): ReturnType<typeof Cel.celEnv> {
  return env ??= celLib().celEnv({ re2: { compile: pattern => ({ test: text => patterns.get(pattern).find(text) }) } })
}

export interface CelProgram {
  readonly source: string
  /** The value, or an Error explaining why evaluation failed. */
  evaluate(vars: Record<string, unknown>): unknown
}

/**
 * Compiles an expression; throws PORTICO_BAD_CEL with the parser's message, or the checker's
 * when the expression can never evaluate (cel/check.ts). `expectBool`: the expression decides
 * something (an authorization rule, a log filter), so a result that cannot be a bool is refused.
 */
export function compileCel (source: string, variables: readonly string[] = CEL_VARIABLES, options: { expectBool?: boolean } = {}): CelProgram {
  const { isCelError, parse, plan } = celLib()
  let ast
  try {
    ast = parse(source)
  } catch (err) {
    throw new PorticoError('PORTICO_BAD_CEL', `invalid CEL expression ${JSON.stringify(source)}: ${(err as Error).message}`)
  }
  const unknown = [...identifiers(ast)].filter(name => !variables.includes(name))
  if (unknown.length > 0) {
    throw new PorticoError('PORTICO_BAD_CEL', `invalid CEL expression ${JSON.stringify(source)}: unknown variable ${unknown.map(n => `"${n}"`).join(', ')} (known: ${variables.join(', ')})`)
  }
  for (const pattern of constantMatchPatterns(ast)) {
    const problem = linearRegexProblem(pattern)
    if (problem !== null) throw new PorticoError('PORTICO_BAD_CEL', `invalid CEL expression ${JSON.stringify(source)}: matches(${JSON.stringify(pattern)}): ${problem}`)
  }
  const typeProblem = celTypeProblem(ast, variables, options.expectBool === true)
  if (typeProblem !== null) throw new PorticoError('PORTICO_BAD_CEL', `invalid CEL expression ${JSON.stringify(source)}: ${typeProblem}`)
  const program = plan(celEnvironment(), ast)
  return {
    source,
    evaluate (vars) {
      const value = program(vars as never)
      return isCelError(value) ? new PorticoError('PORTICO_CEL_EVAL', String((value as { message?: string }).message ?? value)) : value
    }
  }
}

/** A CEL value as plain JSON data: ints as numbers, bytes as base64, lists and maps as arrays and objects. */
export function celToJson (v: unknown): unknown {
  const { isCelList, isCelMap, isCelUint } = celLib()
  if (typeof v === 'bigint') return Number(v)
  if (isCelUint(v)) return Number(v.value)
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64')
  if (isCelList(v)) return [...v].map(celToJson)
  if (isCelMap(v)) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of v) out[String(isCelUint(k) ? k.value : k)] = celToJson(x)
    return out
  }
  if (Array.isArray(v)) return v.map(celToJson)
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, celToJson(x)]))
  return v
}

/** True only when the expression evaluates to boolean true. */
export function evalBool (program: CelProgram, vars: Record<string, unknown>): { value: boolean, error: string | null } {
  let v: unknown
  try {
    v = program.evaluate(vars)
  } catch (err) {
    return { value: false, error: (err as Error).message }
  }
  if (v instanceof Error) return { value: false, error: v.message }
  return { value: v === true, error: typeof v === 'boolean' ? null : `expected a bool, got ${typeof v}` }
}

/** The `exprKind` of one parsed CEL node, as far as the walkers below read it. */
interface ExprKind {
  case?: string
  value?: Record<string, unknown> & { name?: unknown, function?: string, args?: unknown[] }
}

/** Calls `visit` with the `exprKind` of every node of a parsed expression, depth first. */
function walkExpr (node: unknown, visit: (kind: ExprKind) => void): void {
  if (node === null || typeof node !== 'object') return
  if (Array.isArray(node)) {
    for (const x of node) walkExpr(x, visit)
    return
  }
  const o = node as Record<string, unknown>
  const kind = o.exprKind as ExprKind | undefined
  if (kind !== undefined) visit(kind)
  for (const [k, v] of Object.entries(o)) if (k !== '$typeName' && typeof v === 'object') walkExpr(v, visit)
}

/** Free identifiers of a parsed expression (comprehension variables excluded). */
function identifiers (node: unknown): Set<string> {
  const names = new Set<string>()
  const bound = new Set<string>()
  walkExpr(node, kind => {
    if (kind.case === 'identExpr') names.add(String(kind.value?.name))
    if (kind.case === 'comprehensionExpr') {
      for (const key of ['iterVar', 'iterVar2', 'accuVar']) {
        const v = kind.value?.[key]
        if (typeof v === 'string' && v !== '') bound.add(v)
      }
    }
  })
  for (const b of bound) names.delete(b)
  return names
}

/** String literals passed as the pattern of `matches()` (`s.matches('re')` or `matches(s, 're')`). */
function constantMatchPatterns (node: unknown): string[] {
  const out: string[] = []
  walkExpr(node, kind => {
    if (kind.case !== 'callExpr' || kind.value?.function !== 'matches') return
    const args = kind.value.args
    const pattern = stringConstant(args?.[(args?.length ?? 0) - 1])
    if (pattern !== undefined) out.push(pattern)
  })
  return out
}

function stringConstant (expr: unknown): string | undefined {
  const kind = (expr as { exprKind?: { case?: string, value?: { constantKind?: { case?: string, value?: unknown } } } } | undefined)?.exprKind
  const constant = kind?.case === 'constExpr' ? kind.value?.constantKind : undefined
  return constant?.case === 'stringValue' && typeof constant.value === 'string' ? constant.value : undefined
}
