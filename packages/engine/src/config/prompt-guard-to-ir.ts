/**
 * `policies.promptGuard` of an ai backend → its IR (ir/types.ts PromptGuardsIR). Every user
 * pattern is compiled here on the linear-time engine the guard runs it on, so a pattern only
 * a backtracking engine could run fails the load at its file:line:col, not a request.
 */

import type { Static } from '@sinclair/typebox'
import type { PromptGuardsSchema } from './schema.ts'
import type { GuardRejectionIR, PromptGuardIR, PromptGuardsIR } from '../ir/types.ts'
import type { PolicyContext } from './policies-to-ir.ts'
import { linearRegexProblem } from '../util/linear-regex.ts'
import { parseDuration } from '../util/duration.ts'

type Path = Array<string | number>
type PromptGuardsConfig = Static<typeof PromptGuardsSchema>
type GuardConfig = NonNullable<PromptGuardsConfig['request']>[number]

export const DEFAULT_GUARD_TIMEOUT_MS = 5_000
export const DEFAULT_GUARD_PATTERN_MAX_LENGTH = 256
export const DEFAULT_WEBHOOK_MAX_RESPONSE_BYTES = 1024 * 1024
export const DEFAULT_MODERATION_BASE_URL = 'https://api.openai.com'
export const DEFAULT_MODERATION_MODEL = 'omni-moderation-latest'

export function promptGuardToIR (
  config: PromptGuardsConfig,
  at: Path,
  pc: PolicyContext,
  readKey: (key: string | { file: string }, at: Path) => string | undefined
): PromptGuardsIR {
  const side = (list: GuardConfig[] | undefined, name: 'request' | 'response'): PromptGuardIR[] =>
    (list ?? []).flatMap((g, i) => {
      const one = guardToIR(g, [...at, name, i], pc, readKey)
      return one === undefined ? [] : [one]
    })
  return { request: side(config.request, 'request'), response: side(config.response, 'response') }
}

function guardToIR (g: GuardConfig, at: Path, pc: PolicyContext, readKey: (key: string | { file: string }, at: Path) => string | undefined): PromptGuardIR | undefined {
  const given = (['regex', 'webhook', 'openAIModeration'] as const).filter(k => g[k] !== undefined)
  if (given.length !== 1) {
    pc.report(at, `needs exactly one of regex, webhook or openAIModeration${given.length > 1 ? ` (got ${given.join(', ')})` : ''}`)
    return undefined
  }
  const rejection = (r: { status?: number, message?: string } | undefined): GuardRejectionIR =>
    r?.message !== undefined ? { status: r.status ?? 403, message: r.message } : { status: r?.status ?? 403 }
  if (g.regex !== undefined) {
    const rules: Extract<PromptGuardIR, { kind: 'regex' }>['rules'] = []
    let ok = true
    g.regex.rules.forEach((rule, i) => {
      const ruleAt = [...at, 'regex', 'rules', i]
      if ((rule.builtin === undefined) === (rule.pattern === undefined)) {
        pc.report(ruleAt, 'needs exactly one of builtin or pattern')
        ok = false
        return
      }
      if (rule.builtin !== undefined) {
        if (rule.name !== undefined || rule.maxLength !== undefined) pc.report(ruleAt, 'name and maxLength apply to a pattern, not a builtin')
        rules.push({ builtin: rule.builtin })
        return
      }
      const problem = linearRegexProblem(rule.pattern!)
      if (problem !== null) {
        pc.report([...ruleAt, 'pattern'], problem)
        ok = false
        return
      }
      rules.push({ pattern: rule.pattern!, ...(rule.name !== undefined ? { name: rule.name } : {}), maxLength: rule.maxLength ?? DEFAULT_GUARD_PATTERN_MAX_LENGTH })
    })
    return ok ? { kind: 'regex', action: g.regex.action, rules, rejection: rejection(g.regex.rejection) } : undefined
  }
  if (g.webhook !== undefined) {
    const w = g.webhook
    return {
      kind: 'webhook',
      url: w.url,
      timeoutMs: w.timeout !== undefined ? parseDuration(w.timeout) : DEFAULT_GUARD_TIMEOUT_MS,
      failureMode: w.failureMode ?? 'closed',
      maxResponseBytes: w.maxResponseSize ?? DEFAULT_WEBHOOK_MAX_RESPONSE_BYTES,
      rejection: rejection(w.rejection)
    }
  }
  const m = g.openAIModeration!
  const base = (m.baseURL ?? DEFAULT_MODERATION_BASE_URL).replace(/\/+$/, '')
  let key: string | undefined
  if (m.auth !== undefined) {
    key = readKey(m.auth.key, [...at, 'openAIModeration', 'auth', 'key'])
    if (key === undefined) return undefined
  }
  return {
    kind: 'openAIModeration',
    url: `${base}/v1/moderations`,
    model: m.model ?? DEFAULT_MODERATION_MODEL,
    ...(key !== undefined ? { auth: { apiKey: key } } : {}),
    timeoutMs: m.timeout !== undefined ? parseDuration(m.timeout) : DEFAULT_GUARD_TIMEOUT_MS,
    failureMode: m.failureMode ?? 'closed',
    rejection: rejection(m.rejection)
  }
}
