/**
 * `remoteRateLimit`: each request asks a rate limit service — Envoy's
 * `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, so Envoy's own `ratelimit`
 * service (Redis-backed) and servers written for Envoy's ratelimit filter work unchanged —
 * whether it is over a limit. The descriptors sent are built per request from CEL
 * expressions (compiled when the config loads); a descriptor any of whose values does not
 * evaluate to a non-empty string, number or bool is left out, and with no descriptor left
 * the service is not called (as Envoy skips a descriptor whose header is absent).
 *
 * Descriptors of `type: tokens` count LLM tokens (agentgateway's two phases): with the
 * request they are sent with hits_addend 0 (a check that takes nothing), and once an `ai`
 * backend's answer reports its usage they are sent again, fire and forget, with the total
 * tokens as hits_addend. With `tokenize: true` on the `ai` backend the prompt's estimate is
 * sent as hits before the call (llm/request.ts; OVER_LIMIT refuses it with 429 in the
 * client's format), and the answer then sends only the usage the estimate did not cover —
 * agentgateway's `check_llm` and `amend_tokens`; nothing is counted twice, and an estimate
 * above the real usage is not given back (the protocol has no negative hits).
 *
 * OVER_LIMIT answers 429 `rate limit exceeded` (or the service's raw_body) with the
 * service's response headers; OK lets the request through, adds its request headers
 * upstream and its response headers to the response. A service that fails or is too slow
 * answers 500 `rate limit failed` (failClosed, the default) or lets the request through
 * (failOpen).
 */

import { callTraceHeaders, endDecisionSpan, grpcClientAttributes, startChildSpan } from '../trace/otel.ts'
import type { LlmLimitCall, LlmTokenRefusal, LlmTokenReservation, RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { RemoteRateLimitIR } from '../ir/traffic.ts'
import type { PolicyServices } from './services.ts'
import { celToJson, compileCel, CEL_VARIABLES, type CelProgram } from '../cel/expression.ts'
import { celVars } from '../cel/vars.ts'
import { applyHeaderMutations } from '../auth/ext-authz-check.ts'
import { createRateLimitClient, shouldRateLimit, type DescriptorToSend } from '../traffic/rls-grpc.ts'
import { CONTINUE } from './header-modifier.ts'
import type { PolicyEvent } from '../trace/events.ts'
import { performance } from '../util/clock.ts'

type TraceResult = 'apply' | 'skip' | 'deny'

function trace (ctx: RequestContext, type: TraceResult, details: string, extra: Pick<PolicyEvent, 'request'> = {}): void {
  ctx.tracer?.emit({ type: 'policy', kind: 'remoteRateLimit', result: { type, details }, ...extra }, { severity: type === 'deny' ? 'warn' : 'info' })
}

export function remoteRateLimit (ir: RemoteRateLimitIR, services: PolicyServices): CompiledPolicy {
  const url = new URL(ir.host)
  const target = url.host
  const client = services.grpcClient('ratelimit', target, url.protocol === 'https:', createRateLimitClient)
  // A token descriptor whose values name `llm` (the model) is built once an ai backend has
  // read the request (agentgateway builds its token descriptors at that point, `check_llm`).
  const descriptors = ir.descriptors.map(d => {
    const entries = d.entries.map(e => ({ key: e.key, value: compileLimitValue(e.value, d.type) }))
    const limit = d.limitOverride === undefined ? null : compileLimitValue(d.limitOverride, d.type)
    return { type: d.type, entries: entries.map(e => ({ key: e.key, value: e.value.program })), limit: limit?.program ?? null, llm: entries.some(e => e.value.llm) || limit?.llm === true }
  })
  const llmDescriptors = descriptors.filter(d => d.llm)
  /** Per request: the token descriptors whose answer hooks are registered (the llm stage adds to the same list). */
  const tokenLists = new WeakMap<RequestContext, DescriptorToSend[]>()
  /** The answer's tokens, and the tokenize estimate, for `forTokens` (registered once per request). */
  const registerTokenHooks = (ctx: RequestContext, forTokens: DescriptorToSend[]): void => {
    tokenLists.set(ctx, forTokens)
    // One per request: a retry's second estimate reuses what the first took.
    const state = { reserved: 0, reservation: null as Promise<LlmTokenReservation> | null }
    ctx.llmTokenHooks ??= []
    ctx.llmTokenHooks.push(tokens => sendLlmTokens(ctx, forTokens, tokens, state.reserved))
    ctx.llmTokenReservations ??= []
    ctx.llmTokenReservations.push(tokens => (state.reservation ??= reserveLlmTokens(ctx, forTokens, tokens, state)))
  }
  const admitted = new WeakSet<RequestContext>()

  /**
   * The llm stage: the token descriptors that name `llm`, built now and checked without a
   * hit (as the request's own check does for the others); under the limit, they join the
   * request's token descriptors (usage after the answer, the tokenize estimate before).
   */
  const admitLlm = async (ctx: RequestContext, call: LlmLimitCall): Promise<LlmTokenRefusal | null> => {
    const vars = { ...celVars(ctx), llm: call }
    const built: DescriptorToSend[] = []
    const skipped: string[] = []
    for (const d of llmDescriptors) {
      const values = descriptorValues(d, vars, skipped)
      if (typeof values === 'string') skipped.push(values)
      else built.push(values)
    }
    if (built.length === 0) {
      trace(ctx, 'skip', `no token descriptor naming llm to send${skipped.length > 0 ? ` (${skipped.join('; ')})` : ''}`)
      return null
    }
    const sent = { domain: ir.domain, descriptors: built.map(e => Object.fromEntries(e.entries)), hitsAddend: 0 }
    const span = startChildSpan(ctx, 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', spanAttrs)
    const result = await shouldRateLimit(client, { domain: ir.domain, descriptors: built.map(e => ({ ...e, hitsAddend: 0 })) }, ir.timeoutMs, callTraceHeaders(ctx, span))
    endDecisionSpan(span, result.decision, result.decision === 'error' ? result.reason : null)
    const join = (): void => {
      const list = tokenLists.get(ctx)
      if (list !== undefined) list.push(...built)
      else registerTokenHooks(ctx, built)
    }
    const headersOf = (pairs: Array<[string, string]>): Record<string, string> => {
      const out: Record<string, string> = {}
      for (const [name, value] of pairs) {
        const key = name.toLowerCase()
        out[key] = out[key] === undefined ? value : `${out[key]}, ${value}`
      }
      return out
    }
    switch (result.decision) {
      case 'ok':
        if (result.responseHeaders.length > 0) responseHeaders.set(ctx, [...(responseHeaders.get(ctx) ?? []), ...result.responseHeaders])
        trace(ctx, 'apply', `under the limit at ${target} for ${call.model || call.requestModel || 'the call'}: ${built.length} token descriptor${built.length === 1 ? '' : 's'} naming llm checked without a hit, LLM tokens sent after the answer`, { request: sent })
        join()
        return null
      case 'overLimit':
        trace(ctx, 'deny', `over the limit at ${target} for ${call.model || call.requestModel || 'the call'}`, { request: sent })
        return { status: 429, headers: headersOf(result.responseHeaders), remaining: '0', limit: '', retryAfterS: null, message: result.body?.toString('utf8') || 'rate limit exceeded', policy }
      case 'error':
        if (ir.failureMode === 'failOpen') {
          trace(ctx, 'skip', `rate limit service failed, allowed by failureMode failOpen: ${result.reason}`, { request: sent })
          join()
          return null
        }
        trace(ctx, 'deny', `rate limit service failed: ${result.reason}`, { request: sent })
        ctx.error = `rate limit service ${target} failed: ${result.reason}`
        return { status: 500, headers: {}, remaining: '0', limit: '', retryAfterS: null, message: 'rate limit failed', policy }
    }
  }
  /** Response headers the service asked for, per request, added on the way back. */
  const responseHeaders = new WeakMap<RequestContext, Array<[string, string]>>()
  const spanAttrs = { ...grpcClientAttributes('envoy.service.ratelimit.v3.RateLimitService', 'ShouldRateLimit', target), 'portico.policy': 'remoteRateLimit' }

  /**
   * After an ai backend's answer: its LLM tokens, as hits, for the request's token
   * descriptors — less what the pre-call estimate already took (`reserved`).
   */
  const sendLlmTokens = (ctx: RequestContext, entries: DescriptorToSend[], used: number, reserved: number): void => {
    const tokens = used - reserved
    if (tokens <= 0) {
      if (reserved > 0) trace(ctx, 'skip', `the answer's ${used} LLM tokens were covered by the ${reserved} estimated and taken before the call: nothing more sent to ${target}`)
      return
    }
    const note = reserved > 0 ? ` (${used} used, ${reserved} taken before the call)` : ''
    trace(ctx, 'apply', `sent ${tokens} LLM tokens as hits to ${target}${note}`, { request: { domain: ir.domain, descriptors: entries.map(e => Object.fromEntries(e.entries)), hitsAddend: tokens } })
    // Nothing is left to decide for this request: the answer is delivered either way.
    void shouldRateLimit(client, { domain: ir.domain, descriptors: entries.map(e => ({ ...e, hitsAddend: tokens })) }, ir.timeoutMs)
  }

  /**
   * `tokenize: true`: the prompt's estimated tokens sent as hits before the call. Taken when
   * under the limit; a service that fails lets the request go on with nothing taken
   * (failOpen) or refuses it (failClosed), as the request's own check does.
   */
  const reserveLlmTokens = async (ctx: RequestContext, entries: DescriptorToSend[], tokens: number, state: { reserved: number }): Promise<LlmTokenReservation> => {
    const sent = { domain: ir.domain, descriptors: entries.map(e => Object.fromEntries(e.entries)), hitsAddend: tokens }
    const span = startChildSpan(ctx, 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', spanAttrs)
    const result = await shouldRateLimit(client, { domain: ir.domain, descriptors: entries.map(e => ({ ...e, hitsAddend: tokens })) }, ir.timeoutMs, callTraceHeaders(ctx, span))
    endDecisionSpan(span, result.decision, result.decision === 'error' ? result.reason : null)
    // The service's headers (RateLimit-*) now tell what is left after the estimate: they
    // replace those of the request's own check (a refusal carries them itself).
    if (result.decision === 'ok' && result.responseHeaders.length > 0) responseHeaders.set(ctx, result.responseHeaders)
    else if (result.decision === 'overLimit') responseHeaders.delete(ctx)
    switch (result.decision) {
      case 'ok':
        state.reserved = tokens
        trace(ctx, 'apply', `tokenize: the prompt's estimated ${tokens} tokens taken at ${target} before the call`, { request: sent })
        return { outcome: 'ok', headers: result.responseHeaders, policy }
      case 'overLimit':
        trace(ctx, 'deny', `tokenize: the prompt's estimated ${tokens} tokens are over the limit at ${target}`, { request: sent })
        return { outcome: 'overLimit', headers: result.responseHeaders, policy }
      case 'error':
        if (ir.failureMode === 'failOpen') {
          trace(ctx, 'skip', `tokenize: rate limit service failed, allowed by failureMode failOpen (the answer's usage is sent whole): ${result.reason}`, { request: sent })
          return { outcome: 'ok', headers: [], policy }
        }
        trace(ctx, 'deny', `tokenize: rate limit service failed: ${result.reason}`, { request: sent })
        ctx.error = `rate limit service ${target} failed: ${result.reason}`
        return { outcome: 'failed', headers: [], policy }
    }
  }

  const policy: CompiledPolicy = {
    kind: 'remoteRateLimit',
    async onRequest (ctx: RequestContext): Promise<PolicyOutcome> {
      const vars = celVars(ctx)
      const built: DescriptorToSend[] = []
      const forTokens: DescriptorToSend[] = []
      const skipped: string[] = []
      for (const d of descriptors) {
        if (d.llm) continue
        const values = descriptorValues(d, vars, skipped)
        if (typeof values === 'string') skipped.push(values)
        else if (d.type === 'requests') built.push(values)
        else {
          built.push({ ...values, hitsAddend: 0 })
          forTokens.push(values)
        }
      }
      const later = llmDescriptors.length > 0 && !admitted.has(ctx)
      if (later) {
        admitted.add(ctx)
        ;(ctx.llmAdmissions ??= []).push(call => admitLlm(ctx, call))
      }
      if (built.length === 0) {
        trace(ctx, 'skip', `no descriptor to send${skipped.length > 0 ? ` (${skipped.join('; ')})` : ''}${later ? `; ${llmDescriptors.length} token descriptor${llmDescriptors.length === 1 ? '' : 's'} naming llm sent once the ai backend has read the request` : ''}`)
        return CONTINUE
      }
      const started = performance.now()
      const span = startChildSpan(ctx, 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', spanAttrs)
      const result = await shouldRateLimit(client, { domain: ir.domain, descriptors: built }, ir.timeoutMs, callTraceHeaders(ctx, span))
      endDecisionSpan(span, result.decision, result.decision === 'error' ? result.reason : null)
      const took = `${Math.round(performance.now() - started)}ms`
      const sent = { domain: ir.domain, descriptors: built.map(d => Object.fromEntries(d.entries)) }
      const tokenNote = forTokens.length === 0 ? '' : `; ${forTokens.length} token descriptor${forTokens.length === 1 ? '' : 's'} checked without a hit, LLM tokens sent after the answer`
      if (forTokens.length > 0 && (result.decision === 'ok' || (result.decision === 'error' && ir.failureMode === 'failOpen'))) registerTokenHooks(ctx, forTokens)
      switch (result.decision) {
        case 'ok':
          for (const [name, value] of result.requestHeaders) applyHeaderMutations(ctx.headers, [{ name, value, action: 'append' }])
          if (result.responseHeaders.length > 0) responseHeaders.set(ctx, result.responseHeaders)
          trace(ctx, 'apply', `under the limit at ${target} (${took})${tokenNote}${skipped.length > 0 ? `; ${skipped.join('; ')}` : ''}`, { request: sent })
          return CONTINUE
        case 'overLimit': {
          trace(ctx, 'deny', `over the limit at ${target} (${took})`, { request: sent })
          const headers: Record<string, string | string[]> = {}
          for (const [name, value] of result.responseHeaders) applyHeaderMutations(headers, [{ name, value, action: 'append' }])
          return { action: 'respond', status: 429, body: result.body?.toString('utf8') ?? 'rate limit exceeded', headers, reason: 'RateLimit' }
        }
        case 'error':
          if (ir.failureMode === 'failOpen') {
            trace(ctx, 'skip', `rate limit service failed, allowed by failureMode failOpen: ${result.reason}`, { request: sent })
            return CONTINUE
          }
          trace(ctx, 'deny', `rate limit service failed: ${result.reason}`, { request: sent })
          ctx.error = `rate limit service ${target} failed: ${result.reason}`
          return { action: 'respond', status: 500, body: 'rate limit failed', reason: 'RateLimit' }
      }
    },
    onResponse (ctx: RequestContext): void {
      const headers = responseHeaders.get(ctx)
      if (headers !== undefined) for (const [name, value] of headers) applyHeaderMutations(ctx.responseHeaders, [{ name, value, action: 'append' }])
    }
  }
  return policy
}

/** Envoy's RateLimitUnit (envoy.type.v3) by name. */
const UNITS: Record<string, number> = { second: 1, minute: 2, hour: 3, day: 4, month: 5, year: 6 }

/**
 * The descriptor to send — its entries and, with `limitOverride`, the limit the service is
 * to apply instead of its configured one — or why it is left out. An override that does not
 * evaluate to `{requestsPerUnit, unit}` is left off (the service's own limit applies) and
 * noted in `notes`, as agentgateway drops it.
 */
function descriptorValues (d: { entries: Array<{ key: string, value: CelProgram }>, limit: CelProgram | null }, vars: Record<string, unknown>, notes: string[]): DescriptorToSend | string {
  const out: Array<[string, string]> = []
  for (const { key, value } of d.entries) {
    let v: unknown
    try {
      v = value.evaluate(vars)
    } catch (err) {
      v = err
    }
    if (v instanceof Error) return `${key}: ${v.message}`
    const text = typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean' ? String(v) : null
    if (text === null) return `${key}: ${value.source} is ${v === null || v === undefined ? 'null' : `a ${typeof v}`}, not a string`
    if (text === '') return `${key}: ${value.source} is empty`
    out.push([key, text])
  }
  if (d.limit === null) return { entries: out }
  const limit = limitOverride(d.limit, vars)
  if (typeof limit === 'string') {
    notes.push(`limitOverride ${d.limit.source}: ${limit}; the service's own limit applies`)
    return { entries: out }
  }
  return { entries: out, limit }
}

/** `limitOverride`'s value as Envoy's RateLimitOverride, or why it is not one. */
export function limitOverride (program: CelProgram, vars: Record<string, unknown>): { requestsPerUnit: number, unit: number } | string {
  let v: unknown
  try {
    v = program.evaluate(vars)
  } catch (err) {
    v = err
  }
  if (v instanceof Error) return v.message
  const value = celToJson(v)
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not a map of requestsPerUnit and unit'
  const map = value as Record<string, unknown>
  const n = map.requestsPerUnit ?? map.requests_per_unit
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 4_294_967_295) return 'requestsPerUnit is not a whole number from 0 to 4294967295'
  const unit = typeof map.unit === 'string' ? UNITS[map.unit.toLowerCase()] : undefined
  if (unit === undefined) return 'unit is not one of second, minute, hour, day, month, year'
  return { requestsPerUnit: n, unit }
}

/** A descriptor value compiled; whether it names `llm` (token descriptors only: the model is known once the body is read). */
function compileLimitValue (source: string, type: 'requests' | 'tokens'): { program: CelProgram, llm: boolean } {
  try {
    return { program: compileCel(source), llm: false }
  } catch (err) {
    if (type === 'requests') throw err
    return { program: compileCel(source, [...CEL_VARIABLES, 'llm']), llm: true }
  }
}
