/**
 * `localRateLimit`: token buckets kept in this proxy process (agentgateway's and Envoy's
 * local rate limit). Each bucket starts full (`maxTokens`) and gets `tokensPerFill` more at
 * every `fillInterval` boundary, never holding more than `maxTokens`. A request needs a
 * token in every bucket of the policy; when any bucket is empty it takes none and is
 * answered `429 rate limit exceeded` with `x-ratelimit-limit`, `x-ratelimit-remaining`,
 * `x-ratelimit-reset` and `retry-after` (seconds until the empty bucket has a token again).
 *
 * `requests` buckets give one token per admitted request. `tokens` buckets count LLM
 * tokens, which are only known once the answer reports its usage (agentgateway's two
 * phases): admission needs the bucket not empty, and the answer's total tokens are taken
 * afterwards. That can drive the bucket below zero — the debt is paid by later fills before
 * the next request gets in, so a long answer costs what it used.
 *
 * Check and take happen in one synchronous step, so concurrent requests (one event loop)
 * can neither overdraw a bucket nor leave a token unused. Refills are computed lazily from
 * a monotonic clock when a request arrives: no timers. The state belongs to the compiled
 * policy: a gateway-level bucket is shared by every request on the gateway, a route-level
 * one by the route's requests; a config reload starts new, full buckets.
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { LocalRateLimitBucketIR, LocalRateLimitIR } from '../ir/policy.ts'
import { CONTINUE } from './header-modifier.ts'

export class TokenBucket {
  readonly maxTokens: number
  readonly tokensPerFill: number
  readonly fillIntervalMs: number
  tokens: number
  /** Monotonic time (ms) of the last fill boundary. */
  private lastFill: number

  constructor (ir: LocalRateLimitBucketIR, now: number) {
    this.maxTokens = ir.maxTokens
    this.tokensPerFill = ir.tokensPerFill
    this.fillIntervalMs = ir.fillIntervalMs
    this.tokens = ir.maxTokens
    this.lastFill = now
  }

  /** Adds the fills due since the last one. */
  refill (now: number): void {
    const elapsed = now - this.lastFill
    if (elapsed < this.fillIntervalMs) return
    const fills = Math.floor(elapsed / this.fillIntervalMs)
    this.lastFill += fills * this.fillIntervalMs
    this.tokens = Math.min(this.maxTokens, this.tokens + fills * this.tokensPerFill)
  }

  /** Milliseconds until the bucket holds a whole token again (several fills when in debt). */
  untilAvailable (now: number): number {
    const fills = Math.max(1, Math.ceil((1 - this.tokens) / this.tokensPerFill))
    return this.lastFill + fills * this.fillIntervalMs - now
  }
}

export function localRateLimit (ir: LocalRateLimitIR): CompiledPolicy {
  const now = performance.now()
  const buckets = ir.map(b => new TokenBucket(b, now))
  const perRequest = buckets.filter((_, i) => ir[i]!.type === 'requests')
  const perLlmToken = buckets.filter((_, i) => ir[i]!.type === 'tokens')
  /** Takes an answer's LLM tokens from the token buckets (registered per admitted request). */
  const takeLlmTokens = (tokens: number): void => {
    const t = performance.now()
    for (const b of perLlmToken) {
      b.refill(t)
      b.tokens -= tokens
    }
  }
  return {
    kind: 'localRateLimit',
    onRequest (ctx: RequestContext): PolicyOutcome {
      const t = performance.now()
      let empty: TokenBucket | null = null
      let index = -1
      for (let i = 0; i < buckets.length; i++) {
        const b = buckets[i]!
        b.refill(t)
        // The empty bucket that refills last decides when to come back.
        if (b.tokens < 1 && (empty === null || b.untilAvailable(t) > empty.untilAvailable(t))) {
          empty = b
          index = i
        }
      }
      if (empty === null) {
        let remaining = Infinity
        for (const b of perRequest) remaining = Math.min(remaining, --b.tokens)
        if (perLlmToken.length > 0) (ctx.llmTokenHooks ??= []).push(takeLlmTokens)
        if (ctx.tracer !== null) {
          const left = remaining === Infinity ? '' : `; ${remaining} token${remaining === 1 ? '' : 's'} left`
          const llm = perLlmToken.length === 0 ? '' : `; LLM tokens are taken when the answer reports them (${Math.floor(Math.min(...perLlmToken.map(b => b.tokens)))} in the bucket)`
          ctx.tracer.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'apply', details: `admitted${left}${llm}` } })
        }
        return CONTINUE
      }
      const waitMs = empty.untilAvailable(t)
      const seconds = String(Math.max(1, Math.ceil(waitMs / 1000)))
      ctx.tracer?.emit({
        type: 'policy',
        kind: 'localRateLimit',
        result: { type: 'deny', details: `bucket ${index} is empty (${Math.floor(empty.tokens)} of maxTokens ${empty.maxTokens}, ${empty.tokensPerFill} per ${empty.fillIntervalMs}ms); a token again in ${Math.ceil(waitMs)}ms` }
      }, { severity: 'warn' })
      return {
        action: 'respond',
        status: 429,
        body: 'rate limit exceeded',
        headers: {
          'x-ratelimit-limit': String(empty.maxTokens),
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': seconds,
          'retry-after': seconds
        },
        reason: 'RateLimit'
      }
    }
  }
}
