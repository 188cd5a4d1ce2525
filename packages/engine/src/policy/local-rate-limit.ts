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
 *
 * Limits per user and per model (`key`, `type: cost`): a bucket with a `key` is a table of
 * buckets, one per value of its CEL expression (policy/bucket-keys.ts: fixed size, least
 * recently used dropped). `cost` buckets hold a budget in the pricing currency and are taken
 * by each answer's exact cost (policy/cost-bucket.ts). Keyed buckets of type tokens and all
 * cost buckets are decided once an `ai` backend has read the request (llm/request.ts calls
 * `ctx.llmAdmissions`), when the model is known — agentgateway decides its token limits at
 * the same point (`check_llm_request`) — so their key may name it (`llm.model`) and their
 * refusal is in the client format's error shape. Keyed `requests` buckets are decided with
 * the others, before the body is read.
 */

import type { LlmLimitCall, LlmPromptEstimate, LlmTokenRefusal, RequestContext } from '../request/context.ts'
import type { LlmCost } from '../request/calls.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { LocalRateLimitBucketIR, LocalRateLimitIR } from '../ir/policy.ts'
import type { PolicyServices } from './services.ts'
import { CONTINUE } from './header-modifier.ts'
import { monotonicMs, RecordArena, Records } from '../util/shared-records.ts'
import { compileCel, CEL_VARIABLES, type CelProgram } from '../cel/expression.ts'
import { celVars } from '../cel/vars.ts'
import { evaluateKey, keyHash, lookupKey, shownKey, tableRecords, type KeyHash } from './bucket-keys.ts'
import { CostBucket, microsToPicos, type CostBudget } from './cost-bucket.ts'
import { formatPicos } from '../util/picos.ts'

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

/** A bucket of the policy as compiled: where its records are and how its key is computed. */
interface BucketSpec {
  ir: LocalRateLimitBucketIR
  index: number
  /** Its record (no key), or the first of its key table. */
  first: number
  count: number
  key: CelProgram | null
  /** `llm`: decided once an ai backend has read the request (keyed tokens buckets, cost buckets). */
  stage: 'request' | 'llm'
  cost: (CostBudget & { currency: string }) | null
  /** A request-stage bucket without a key: its one TokenBucket, made once. */
  fixed?: TokenBucket
}

/** One bucket's view for one request: what it holds and how it is taken from. */
interface BucketView {
  empty: boolean
  /** Milliseconds until it is not empty. */
  untilAvailable(now: number): number
  limit: string
  remaining: string
  /** What it holds, a debt shown as negative (traces). */
  held: string
}

/** A bucket of the llm stage resolved for one request: its spec and key. */
interface Resolved {
  spec: BucketSpec
  hash: KeyHash | null
  key: string | null
}

export function localRateLimit (ir: LocalRateLimitIR, services?: PolicyServices): CompiledPolicy {
  // The buckets' records come from this compile's arena: memory of this thread, or the
  // memory the data-plane workers share. The first record's lock guards them all (keyed
  // tables included: a lookup and its update are one step under it).
  const own = services?.buckets === undefined
  const arena = services?.buckets ?? new RecordArena()
  const memory = (): Records => arena.records!
  const specs: BucketSpec[] = []
  let total = 0
  for (const [index, b] of ir.entries()) {
    const count = b.key === undefined ? 1 : tableRecords(b.maxKeys ?? 10_000)
    const stage = b.type === 'cost' || (b.key !== undefined && b.type === 'tokens') ? 'llm' : 'request'
    const key = b.key === undefined ? null : compileCel(b.key, stage === 'llm' ? [...CEL_VARIABLES, 'llm'] : CEL_VARIABLES)
    const cost = b.cost === undefined ? null : { maxPicos: microsToPicos(b.cost.maxMicros), perFillPicos: microsToPicos(b.cost.perFillMicros), fillIntervalMs: b.fillIntervalMs, currency: b.cost.currency }
    specs.push({ ir: b, index, first: total, count, key, stage, cost })
    total += count
  }
  /** A bucket made full at `now` in `record`. */
  const initBucket = (spec: BucketSpec, record: number, now: number): void => {
    if (spec.cost !== null) new CostBucket(spec.cost, memory, record).init(now)
    else new TokenBucket(spec.ir, 0, memory, record).init(memory(), now)
  }
  // The memory is made when the compile is done (on a worker: the primary's, already set up).
  const first = arena.allocate(total, records => {
    const now = monotonicMs()
    for (const spec of specs) {
      // A key table starts empty (tags 0); a bucket without a key starts full.
      if (spec.key !== null) records.f64.fill(0, Records.float(spec.first, 0), Records.float(spec.first + spec.count, 0))
      else initBucket(spec, spec.first, now)
    }
  })
  for (const spec of specs) spec.first += first
  if (own) arena.seal(false)
  const lock = (): void => arena.records!.lock(first)
  const unlock = (): void => arena.records!.unlock(first)

  /** The record of a bucket for this request (a key's own, made when new). Under the lock. */
  const recordOf = (spec: BucketSpec, hash: KeyHash | null, now: number): number => {
    if (hash === null) return spec.first
    return lookupKey(memory(), spec.first, hash, now, record => initBucket(spec, record, now)).record
  }
  const tokenBucket = (spec: BucketSpec, record: number): TokenBucket => new TokenBucket(spec.ir, 0, memory, record)
  const costBucket = (spec: BucketSpec, record: number): CostBucket => new CostBucket(spec.cost!, memory, record)
  /** The bucket refilled to `now`, as a view. Under the lock. */
  const view = (spec: BucketSpec, record: number, now: number): BucketView => {
    if (spec.cost !== null) {
      const b = costBucket(spec, record)
      b.refill(now)
      const amount = b.amount
      return { empty: amount <= 0n, untilAvailable: t => b.untilHolding(1n, t), limit: formatPicos(b.max), remaining: formatPicos(amount > 0n ? amount : 0n), held: formatPicos(amount) }
    }
    const b = tokenBucket(spec, record)
    b.refill(now)
    return { empty: b.tokens < 1, untilAvailable: t => b.untilAvailable(t), limit: String(b.maxTokens), remaining: String(Math.max(0, Math.floor(b.tokens))), held: String(Math.floor(b.tokens)) }
  }

  const requestStage = specs.filter(s => s.stage === 'request')
  const keyedRequestStage = requestStage.some(s => s.key !== null)
  for (const spec of requestStage) if (spec.key === null) spec.fixed = tokenBucket(spec, spec.first)
  const llmStage = specs.filter(s => s.stage === 'llm')
  const unkeyedTokens = requestStage.filter(s => s.ir.type === 'tokens')
  /** Requests whose answer hooks are registered: a backend policy runs again on a retry, and must not charge twice. */
  const registered = new WeakSet<RequestContext>()

  /** Takes an answer's LLM tokens from the unkeyed token buckets (registered per admitted request). */
  const takeLlmTokens = (tokens: number): void => {
    const t = monotonicMs()
    lock()
    for (const spec of unkeyedTokens) {
      const b = spec.fixed!
      b.refill(t)
      b.tokens -= tokens
    }
    unlock()
  }

  /** Whether the estimate fits in every bucket of `resolved` now (the `tokenize: true` pre-call check; takes nothing). */
  const checkEstimate = (resolved: Resolved[], estimate: LlmPromptEstimate): LlmTokenRefusal | null => {
    const t = monotonicMs()
    let refusal: LlmTokenRefusal | null = null
    let worst = -1
    lock()
    for (const { spec, hash } of resolved) {
      const record = recordOf(spec, hash, t)
      let found: { refusal: LlmTokenRefusal, waitS: number } | null = null
      if (spec.cost !== null) {
        const cost = estimate.cost
        if (cost === null || cost.currency !== spec.cost.currency) continue
        const b = costBucket(spec, record)
        b.refill(t)
        const amount = b.amount
        if (amount >= cost.picos) continue
        const never = cost.picos > b.max
        const retryAfterS = never ? null : Math.max(1, Math.ceil(b.untilHolding(cost.picos, t) / 1000))
        const left = formatPicos(amount > 0n ? amount : 0n)
        const message = never
          ? `rate limit exceeded: the prompt (about ${estimate.tokens} tokens) would cost about ${formatPicos(cost.picos)} ${cost.currency} in input alone, more than the cost budget's maxCost ${formatPicos(b.max)}`
          : `rate limit exceeded: the prompt (about ${estimate.tokens} tokens) would cost about ${formatPicos(cost.picos)} ${cost.currency} in input alone and the cost budget holds ${left}; retry in ${retryAfterS}s`
        found = { refusal: { remaining: left, limit: formatPicos(b.max), retryAfterS, message, policy }, waitS: retryAfterS ?? Infinity }
      } else {
        const b = tokenBucket(spec, record)
        b.refill(t)
        const need = estimate.tokens
        if (b.tokens >= need) continue
        const never = need > b.maxTokens
        const retryAfterS = never ? null : Math.max(1, Math.ceil(b.untilHolding(need, t) / 1000))
        const left = Math.max(0, Math.floor(b.tokens))
        const message = never
          ? `rate limit exceeded: the prompt is about ${need} tokens, more than the token budget's maxTokens ${b.maxTokens}`
          : `rate limit exceeded: the prompt is about ${need} tokens and the token budget holds ${left}; retry in ${retryAfterS}s`
        found = { refusal: { remaining: String(left), limit: String(b.maxTokens), retryAfterS, message, policy }, waitS: retryAfterS ?? Infinity }
      }
      // The bucket that can hold it last (or never) decides.
      if (found.waitS > worst) {
        worst = found.waitS
        refusal = found.refusal
      }
    }
    unlock()
    return refusal
  }

  /** After the answer: its tokens and exact cost taken from the request's llm-stage buckets. */
  const charge = (ctx: RequestContext, resolved: Resolved[], tokens: number, cost: LlmCost | null): void => {
    const t = monotonicMs()
    const notes: string[] = []
    lock()
    for (const { spec, hash, key } of resolved) {
      // Looked up again: the key's bucket may have been dropped for another meanwhile (then it starts full).
      const record = recordOf(spec, hash, t)
      const name = key === null ? `bucket ${spec.index}` : `bucket ${spec.index} of key ${shownKey(key)}`
      if (spec.cost !== null) {
        if (cost === null || cost.currency !== spec.cost.currency) {
          notes.push(`${name}: nothing taken (${cost === null ? 'the answer has no cost: no pricing for its model, or no usage' : `the answer is priced in ${cost.currency}, the budget in ${spec.cost.currency}`})`)
          continue
        }
        const b = costBucket(spec, record)
        b.refill(t)
        b.take(cost.picos)
        notes.push(`${name}: ${cost.amount} ${cost.currency} taken, ${formatPicos(b.amount)} left`)
      } else {
        const b = tokenBucket(spec, record)
        b.refill(t)
        b.tokens -= tokens
        notes.push(`${name}: ${tokens} tokens taken, ${Math.floor(b.tokens)} left`)
      }
    }
    unlock()
    if (notes.length > 0) ctx.tracer?.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'apply', details: `the answer charged: ${notes.join('; ')}` } })
  }

  /**
   * The llm stage: the request's key of each keyed tokens bucket and each cost bucket, and
   * whether every one of those buckets has something left. Admitted: the answer will be
   * charged to the same buckets, and the estimate (tokenize) checked against them.
   */
  const admitLlm = (ctx: RequestContext, call: LlmLimitCall): LlmTokenRefusal | null => {
    let vars: Record<string, unknown> | null = null
    const resolved: Resolved[] = []
    const skipped: string[] = []
    for (const spec of llmStage) {
      if (spec.key === null) {
        resolved.push({ spec, hash: null, key: null })
        continue
      }
      vars ??= { ...celVars(ctx), llm: call }
      const key = evaluateKey(spec.key, vars)
      if (typeof key !== 'string') skipped.push(`bucket ${spec.index}: ${key.skip}, not limited by it`)
      else resolved.push({ spec, hash: keyHash(key, spec.count), key })
    }
    if (skipped.length > 0) ctx.tracer?.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'skip', details: skipped.join('; ') } })
    if (resolved.length === 0) return null
    const t = monotonicMs()
    let empty: { r: Resolved, v: BucketView, waitMs: number } | null = null
    const held: string[] = []
    lock()
    for (const r of resolved) {
      const v = view(r.spec, recordOf(r.spec, r.hash, t), t)
      if (v.empty) {
        const waitMs = v.untilAvailable(t)
        if (empty === null || waitMs > empty.waitMs) empty = { r, v, waitMs }
      } else if (ctx.tracer !== null) held.push(`${r.key === null ? `bucket ${r.spec.index}` : `bucket ${r.spec.index} of key ${shownKey(r.key)}`} holds ${v.remaining}${r.spec.cost !== null ? ` ${r.spec.cost.currency}` : ''}`)
    }
    unlock()
    if (empty !== null) {
      const { r, v, waitMs } = empty
      const seconds = Math.max(1, Math.ceil(waitMs / 1000))
      const what = r.spec.cost !== null ? `the cost budget (maxCost ${v.limit} ${r.spec.cost.currency})` : `the token budget (maxTokens ${v.limit})`
      ctx.tracer?.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'deny', details: `bucket ${r.spec.index}${r.key === null ? '' : ` of key ${shownKey(r.key)}`} is spent: ${what}; something again in ${Math.ceil(waitMs)}ms` } }, { severity: 'warn' })
      return { remaining: '0', limit: v.limit, retryAfterS: seconds, message: `rate limit exceeded: ${what} is spent; retry in ${seconds}s`, policy }
    }
    (ctx.llmTokenHooks ??= []).push((tokens, cost) => charge(ctx, resolved, tokens, cost));
    (ctx.llmTokenChecks ??= []).push(estimate => checkEstimate(resolved, estimate))
    ctx.tracer?.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'apply', details: `admitted for ${call.model || call.requestModel || 'the call'}: ${held.join('; ')}; the answer's usage is taken when it reports it` } })
    return null
  }

  const policy: CompiledPolicy = {
    kind: 'localRateLimit',
    onRequest (ctx: RequestContext): PolicyOutcome {
      // Keys first, outside the lock (an expression can take a while). Without keyed buckets
      // nothing is evaluated or allocated for them: this runs on every request.
      let hashes: Array<KeyHash | null | string> | null = null
      if (keyedRequestStage) {
        let vars: Record<string, unknown> | null = null
        hashes = []
        for (const spec of requestStage) {
          if (spec.key === null) {
            hashes.push(null)
            continue
          }
          vars ??= celVars(ctx)
          const key = evaluateKey(spec.key, vars)
          hashes.push(typeof key === 'string' ? keyHash(key, spec.count) : `bucket ${spec.index}: ${key.skip}, not limited by it`)
        }
      }
      const t = monotonicMs()
      let empty: TokenBucket | null = null
      let emptySpec: BucketSpec | null = null
      let waitMs = 0
      let remaining = Infinity
      let llmLeft = Infinity
      let taken: TokenBucket[] | null = null
      lock()
      for (let i = 0; i < requestStage.length; i++) {
        const spec = requestStage[i]!
        const hash = hashes === null ? null : hashes[i]!
        if (typeof hash === 'string') continue
        // Request-stage buckets count requests or LLM tokens (cost buckets decide later).
        const b = hash === null ? spec.fixed! : tokenBucket(spec, recordOf(spec, hash, t))
        b.refill(t)
        if (b.tokens < 1) {
          // The empty bucket that refills last decides when to come back.
          const wait = b.untilAvailable(t)
          if (empty === null || wait > waitMs) {
            empty = b
            emptySpec = spec
            waitMs = wait
          }
        } else if (spec.ir.type === 'requests') (taken ??= []).push(b)
        else if (ctx.tracer !== null) llmLeft = Math.min(llmLeft, b.tokens)
      }
      if (empty === null && taken !== null) for (const b of taken) remaining = Math.min(remaining, --b.tokens)
      const emptyHeld = empty === null ? 0 : Math.floor(empty.tokens)
      unlock()
      if (ctx.tracer !== null && hashes !== null) {
        const skipped = hashes.filter(h => typeof h === 'string')
        if (skipped.length > 0) ctx.tracer.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'skip', details: skipped.join('; ') } })
      }
      if (empty === null) {
        if (!registered.has(ctx)) {
          registered.add(ctx)
          if (unkeyedTokens.length > 0) {
            (ctx.llmTokenHooks ??= []).push(takeLlmTokens);
            (ctx.llmTokenChecks ??= []).push(estimate => checkEstimate(unkeyedTokens.map(spec => ({ spec, hash: null, key: null })), estimate))
          }
          if (llmStage.length > 0) (ctx.llmAdmissions ??= []).push(call => admitLlm(ctx, call))
        }
        if (ctx.tracer !== null) {
          const left = remaining === Infinity ? '' : `; ${remaining} token${remaining === 1 ? '' : 's'} left`
          const llm = unkeyedTokens.length === 0 ? '' : `; LLM tokens are taken when the answer reports them (${Math.floor(llmLeft)} in the bucket)`
          const later = llmStage.length === 0 ? '' : `; ${llmStage.length} bucket${llmStage.length === 1 ? '' : 's'} (keyed tokens, cost) decided once the ai backend has read the request`
          ctx.tracer.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'apply', details: `admitted${left}${llm}${later}` } })
        }
        return CONTINUE
      }
      const spec = emptySpec!
      const seconds = String(Math.max(1, Math.ceil(waitMs / 1000)))
      const b = spec.ir
      ctx.tracer?.emit({
        type: 'policy',
        kind: 'localRateLimit',
        result: { type: 'deny', details: `bucket ${spec.index}${spec.key === null ? '' : ' (its key\'s)'} is empty (${emptyHeld} of maxTokens ${b.maxTokens}, ${b.tokensPerFill} per ${b.fillIntervalMs}ms); a token again in ${Math.ceil(waitMs)}ms` }
      }, { severity: 'warn' })
      return {
        action: 'respond',
        status: 429,
        body: 'rate limit exceeded',
        headers: {
          'x-ratelimit-limit': String(b.maxTokens),
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': seconds,
          'retry-after': seconds
        },
        reason: 'RateLimit'
      }
    }
  }
  return policy
}
