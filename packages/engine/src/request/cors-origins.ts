/**
 * Origins a cors policy allows, and the cors policy that decides for a request: the cors
 * policy (policy/cors.ts) and the MCP Origin check (mcp/client/http.ts) read the same answer, so
 * one `allowOrigins` list serves the browser and the DNS-rebinding check alike.
 */

import type { RequestContext } from './context.ts'
import type { CorsIR } from '../ir/policy.ts'
import { compileLinearRegex, type LinearRegex } from '../util/linear-regex.ts'
import { canonicalOrigin } from '../ir/origin.ts'

function escapeRegExp (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

type OriginTest = (canonical: string) => boolean

/** allowOrigins -> a test of a canonical origin (exported for the tests). */
export function compileOrigins (patterns: readonly string[]): { any: boolean, test: OriginTest } {
  if (patterns.includes('*')) return { any: true, test: () => true }
  const exact = new Set<string>()
  const wildcards: LinearRegex[] = []
  for (const p of patterns) {
    const canonical = canonicalOrigin(p)
    if (canonical === null) continue
    // Linear time: with several `*` a backtracking engine is polynomial in the Origin's length.
    if (canonical.includes('*')) wildcards.push(compileLinearRegex(escapeRegExp(canonical).replaceAll('\\*', '[^/:]+')))
    else exact.add(canonical)
  }
  return { any: false, test: c => exact.has(c) || wildcards.some(re => re.matchesWhole(c)) }
}

/**
 * The cors IR of the innermost phase the request entered that has one: that policy alone
 * decides. (Each phase's cors runs first in its phase, so entering a phase means its cors
 * has seen the request.)
 */
export function decidingIr (ctx: RequestContext): unknown {
  for (let i = ctx.phases.length - 1; i >= 0; i--) {
    const ir = ctx.phases[i]!.set.ir.cors
    if (ir !== undefined) return ir
  }
  return undefined
}

/** Compiled allowOrigins per cors IR, for readers outside the policy (the MCP Origin check). */
const compiledByIr = new WeakMap<object, { any: boolean, test: OriginTest }>()

/**
 * Does the cors policy deciding for this request (the innermost phase's) allow `origin`?
 * null when no phase has a cors policy. MCP routes accept the origins their cors allows
 * (mcp/client/http.ts), so one list serves both the browser and the DNS rebinding check.
 */
export function corsAllowsOrigin (ctx: RequestContext, origin: string): boolean | null {
  const ir = decidingIr(ctx) as CorsIR | undefined
  if (ir === undefined) return null
  let compiled = compiledByIr.get(ir)
  if (compiled === undefined) compiledByIr.set(ir, compiled = compileOrigins(ir.allowOrigins))
  const canonical = canonicalOrigin(origin)
  return compiled.any || (canonical !== null && compiled.test(canonical))
}

