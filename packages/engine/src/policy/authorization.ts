/**
 * `authorization.rules`: CEL rules over the caller (jwt claims, API key, basic auth user),
 * the request, the source and, on MCP routes, the MCP item. Forms: a bare string or
 * `{allow}`, `{deny}`, `{require}`. Deny wins; a failed require denies; when allow rules
 * exist one must match. A rule that fails to evaluate (a missing claim) does not match.
 *
 * On MCP routes the decision is made twice. For the HTTP request, only rules that do not
 * mention `mcp` apply, and their allow rules only when no rule about `mcp` allows anything
 * (those are left to the items). Then, per tool/prompt/resource, every rule applies with
 * `mcp` bound: items the caller may not use are left out of list results and calling them
 * is an error. So `"read" in jwt.permissions` guards the whole route, and
 * `mcp.tool.name == "echo"` picks tools.
 */

import type { McpItem, McpItemAuthorizer, RequestContext } from '../request/context.ts'
import type { AuthorizationIR } from '../ir/policy.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import { compileCel, evalBool, type CelProgram } from '../cel/expression.ts'
import { celVars } from '../cel/vars.ts'
import { CONTINUE } from './header-modifier.ts'

type Mode = 'allow' | 'deny' | 'require'

interface Rule {
  mode: Mode
  program: CelProgram
  mentionsMcp: boolean
}

interface RuleResult {
  rule: string
  mode: Mode
  matched: boolean
  error?: string
}

export function ruleOf (raw: AuthorizationIR['rules'][number]): { mode: Mode, expression: string } {
  if ('deny' in raw) return { mode: 'deny', expression: raw.deny }
  if ('require' in raw) return { mode: 'require', expression: raw.require }
  return { mode: 'allow', expression: raw.allow }
}

function decide (rules: readonly Rule[], vars: Record<string, unknown>, enforceAllows: boolean): { allowed: boolean, results: RuleResult[] } {
  const results: RuleResult[] = []
  let denied = false
  let sawAllow = false
  let allowed = false
  for (const r of rules) {
    const { value, error } = evalBool(r.program, vars)
    const result: RuleResult = { rule: r.program.source, mode: r.mode, matched: value }
    if (error !== null) result.error = error
    results.push(result)
    if (r.mode === 'deny' && value) denied = true
    if (r.mode === 'require' && !value) denied = true
    if (r.mode === 'allow') {
      sawAllow = true
      if (value) allowed = true
    }
  }
  return { allowed: !denied && (!enforceAllows || !sawAllow || allowed), results }
}

function traceDecision (ctx: RequestContext, scope: string, decision: { allowed: boolean, results: RuleResult[] }): void {
  ctx.tracer?.emit({ type: 'authorizationResult', scope, rules: decision.results, result: decision.allowed ? 'allow' : 'deny' }, { severity: decision.allowed ? 'info' : 'warn' })
}

export function authorization (ir: AuthorizationIR): CompiledPolicy {
  const rules: Rule[] = ir.rules.map(raw => {
    const { mode, expression } = ruleOf(raw)
    return { mode, program: compileCel(expression), mentionsMcp: /\bmcp\b/.test(expression) }
  })
  const requestRules = rules.filter(r => !r.mentionsMcp)
  const itemRules = rules.filter(r => r.mentionsMcp)
  const itemsDecideAllows = itemRules.some(r => r.mode === 'allow')
  const items: McpItemAuthorizer = {
    allows (ctx: RequestContext, item: McpItem): boolean {
      const decision = decide(rules, celVars(ctx, item), true)
      traceDecision(ctx, `mcp ${item.method}${item.name !== undefined ? ` ${item.kind ?? ''} ${item.target ?? ''}/${item.name}` : ''}`, decision)
      return decision.allowed
    }
  }
  const denied: PolicyOutcome = { action: 'respond', status: 403, body: 'authorization failed', reason: 'Authorization' }

  return {
    kind: 'authorization',
    onRequest (ctx: RequestContext): PolicyOutcome {
      if (ctx.route?.isMcp === true) {
        const decision = decide(requestRules, celVars(ctx), !itemsDecideAllows)
        traceDecision(ctx, 'request', decision)
        if (!decision.allowed) return { ...denied, body: JSON.stringify({ error: 'forbidden', error_description: 'authorization failed' }), headers: { 'content-type': 'application/json' } }
        if (itemRules.length > 0) ctx.mcpAuthorization.push(items)
        return CONTINUE
      }
      const decision = decide(rules, celVars(ctx), true)
      traceDecision(ctx, 'request', decision)
      return decision.allowed ? CONTINUE : denied
    }
  }
}
