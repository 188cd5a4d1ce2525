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
 * Check and take happen in one step, so concurrent requests can neither overdraw a bucket
 * nor leave a token unused: with one event loop a synchronous step is enough; with several
 * data-plane workers (config.workers) the buckets live in memory the workers share
 * (util/shared-records.ts) and the step holds the policy's lock, so the workers together
 * admit exactly the configured rate. Refills are computed lazily from the monotonic clock
 * every thread reads alike, when a request arrives: no timers. The state belongs to the
 * compiled policy: a gateway-level bucket is shared by every request on the gateway, a
 * route-level one by the route's requests; a config reload starts new, full buckets.
 */

import type { LlmTokenRefusal, RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { LocalRateLimitBucketIR, LocalRateLimitIR } from '../ir/policy.ts'
import type { PolicyServices } from './services.ts'
import { CONTINUE } from './header-modifier.ts'
import { monotonicMs, Records } from '../util/shared-records.ts'

/** Float64 slots of a bucket's record: tokens held, monotonic time (ms) of the last fill boundary. */
const TOKENS = 1
const LAST_FILL = 2

export class TokenBucket {
  readonly maxTokens: number
  readonly tokensPerFill: number
  readonly fillIntervalMs: number
  private readonly memory: () => Records
  private readonly record: number

  /** A bucket in its own memory (tests), or record `record` of `memory` (set up by `init`). */
  constructor (ir: LocalRateLimitBucketIR, now: number, memory?: () => Records, record = 0) {
    this.maxTokens = ir.maxTokens
    this.tokensPerFill = ir.tokensPerFill
    this.fillIntervalMs = ir.fillIntervalMs
    this.record = record
    if (memory !== undefined) this.memory = memory
    else {
      const own = Records.allocate(1, false)
      this.memory = () => own
      this.init(own, now)
    }
  }

  /** Full, boundaries counted from `now`. */
  init (records: Records, now: number): void {
    records.f64[Records.float(this.record, TOKENS)] = this.maxTokens
    records.f64[Records.float(this.record, LAST_FILL)] = now
  }

  get tokens (): number {
    return this.memory().f64[Records.float(this.record, TOKENS)]!
  }

  set tokens (value: number) {
    this.memory().f64[Records.float(this.record, TOKENS)] = value
  }

  /** Adds the fills due since the last one. */
  refill (now: number): void {
    const f64 = this.memory().f64
    const at = Records.float(this.record, LAST_FILL)
    const elapsed = now - f64[at]!
    if (elapsed < this.fillIntervalMs) return
    const fills = Math.floor(elapsed / this.fillIntervalMs)
    f64[at] = f64[at]! + fills * this.fillIntervalMs
    this.tokens = Math.min(this.maxTokens, this.tokens + fills * this.tokensPerFill)
  }

  /** Milliseconds until the bucket holds `need` tokens (at most maxTokens). */
  untilHolding (need: number, now: number): number {
    const fills = Math.max(1, Math.ceil((need - this.tokens) / this.tokensPerFill))
    return this.memory().f64[Records.float(this.record, LAST_FILL)]! + fills * this.fillIntervalMs - now
  }

  /** Milliseconds until the bucket holds a whole token again (several fills when in debt). */
  untilAvailable (now: number): number {
    const fills = Math.max(1, Math.ceil((1 - this.tokens) / this.tokensPerFill))
    return this.memory().f64[Records.float(this.record, LAST_FILL)]! + fills * this.fillIntervalMs - now
  }
}

export function localRateLimit (ir: LocalRateLimitIR, services?: PolicyServices): CompiledPolicy {
  // The buckets' records come from this compile's arena: memory of this thread, or the
  // memory the data-plane workers share. The first record's lock guards them all.
  const arena = services?.buckets
  let buckets: TokenBucket[] = []
  let first = 0
  if (arena === undefined) buckets = ir.map(b => new TokenBucket(b, monotonicMs()))
  else {
    const memory = (): Records => arena.records!
    first = arena.allocate(ir.length, records => {
      const now = monotonicMs()
      for (const b of buckets) b.init(records, now)
    })
    buckets = ir.map((b, i) => new TokenBucket(b, 0, memory, first + i))
  }
  const lock = (): void => { if (arena !== undefined) arena.records!.lock(first) }
  const unlock = (): void => { if (arena !== undefined) arena.records!.unlock(first) }
  const perRequest = buckets.filter((_, i) => ir[i]!.type === 'requests')
  const perLlmToken = buckets.filter((_, i) => ir[i]!.type === 'tokens')
  /** Takes an answer's LLM tokens from the token buckets (registered per admitted request). */
  const takeLlmTokens = (tokens: number): void => {
    const t = monotonicMs()
    lock()
    for (const b of perLlmToken) {
      b.refill(t)
      b.tokens -= tokens
    }
    unlock()
  }
  /** Whether `need` tokens fit in every token bucket now (the `tokenize: true` pre-call check; takes nothing). */
  const checkLlmTokens = (need: number): LlmTokenRefusal | null => {
    const t = monotonicMs()
    let refusal: LlmTokenRefusal | null = null
    lock()
    for (const b of perLlmToken) {
      b.refill(t)
      if (b.tokens >= need) continue
      const retryAfterS = need > b.maxTokens ? null : Math.max(1, Math.ceil(b.untilHolding(need, t) / 1000))
      if (refusal === null || retryAfterS === null || (refusal.retryAfterS !== null && retryAfterS > refusal.retryAfterS)) {
        refusal = { tokens: Math.floor(b.tokens), maxTokens: b.maxTokens, retryAfterS }
      }
    }
    unlock()
    return refusal
  }
  return {
    kind: 'localRateLimit',
    onRequest (ctx: RequestContext): PolicyOutcome {
      const t = monotonicMs()
      let empty: TokenBucket | null = null
      let index = -1
      let remaining = Infinity
      let waitMs = 0
      let emptyTokens = 0
      let llmLeft = Infinity
      lock()
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
        for (const b of perRequest) remaining = Math.min(remaining, --b.tokens)
        if (ctx.tracer !== null) for (const b of perLlmToken) llmLeft = Math.min(llmLeft, b.tokens)
      } else {
        waitMs = empty.untilAvailable(t)
        emptyTokens = empty.tokens
      }
      unlock()
      if (empty === null) {
        if (perLlmToken.length > 0) {
          (ctx.llmTokenHooks ??= []).push(takeLlmTokens);
          (ctx.llmTokenChecks ??= []).push(checkLlmTokens)
        }
        if (ctx.tracer !== null) {
          const left = remaining === Infinity ? '' : `; ${remaining} token${remaining === 1 ? '' : 's'} left`
          const llm = perLlmToken.length === 0 ? '' : `; LLM tokens are taken when the answer reports them (${Math.floor(llmLeft)} in the bucket)`
          ctx.tracer.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'apply', details: `admitted${left}${llm}` } })
        }
        return CONTINUE
      }
      const seconds = String(Math.max(1, Math.ceil(waitMs / 1000)))
      ctx.tracer?.emit({
        type: 'policy',
        kind: 'localRateLimit',
        result: { type: 'deny', details: `bucket ${index} is empty (${Math.floor(emptyTokens)} of maxTokens ${empty.maxTokens}, ${empty.tokensPerFill} per ${empty.fillIntervalMs}ms); a token again in ${Math.ceil(waitMs)}ms` }
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
