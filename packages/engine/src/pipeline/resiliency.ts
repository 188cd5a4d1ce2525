/**
 * Route resiliency around the backend call, as Gateway API users expect of an HTTPRoute:
 *
 * - Mirrors (RequestMirror): a copy of the request -- headers as sent upstream and the body --
 *   goes to each mirror backend (or to `percentage` % of requests), fire and forget; the
 *   answer is read and dropped and never delays the client. A body larger than 1 MiB is not
 *   mirrored (the copy is skipped, the trace says so).
 * - Retries (HTTPRouteRetry): a backend answer whose status is in `codes`, or a connection
 *   failure (refused, reset, closed, TLS), or a try that hit the backend request timeout
 *   (`backendRequestTimeout`), is dropped before the client sees anything and the request
 *   is tried again after `backoff`, up to `attempts` more times. Each retry picks a backend
 *   by weight again (one not tried yet first) and runs that backend's policies again on the
 *   request as it was before the backend phase. Only replayable requests are retried: no
 *   body, or a body that fits 1 MiB (read whole first). The whole-request timeout is never
 *   retried (it bounds every try together: the client's deadline).
 *
 * - Failover (an `ai` backend's `groups`, pipeline/failover.ts): the same try loop, its
 *   next backend the next provider by priority not ejected and not tried yet, on a 429, a
 *   5xx, a connection failure or the backend timeout; each provider is tried at most once, no
 *   backoff, and the route's `retry` does not apply on top. The body is already buffered
 *   (llm/request.ts, bounded by its limit) and re-encoded for each provider.
 *
 * Nothing is dropped once the answer's head went on to the client: an error after that ends
 * the answer as it would without retries.
 *
 * Each retry and mirror is a trace event (`retry`, with `failover` and the provider for a
 * failover; `mirror`); dropped attempts and mirror copies count in the backend stats of the
 * backend they went to.
 */

import type { Dispatcher } from 'undici'
import type { RequestContext } from '../request/context.ts'
import type { PipelineRuntime } from './run.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import type { BackendIR } from '../ir/types.ts'
import type { RetryIR } from '../ir/traffic.ts'
import type { CallWrapper } from '../http/upstream-call.ts'
import type { UpstreamCaller } from '../http/dispatcher.ts'
import { classifyFailure } from '../http/call-failure.ts'
import { callBackend } from './backend-call.ts'
import { traceCallResult } from '../trace/backend-call.ts'
import { bodyReadFailure, readRequestBody } from '../http/request-body.ts'
import { respondLocal } from './respond.ts'
import { PorticoError, isPorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'
import { chooseProvider, providerCount, type ProviderGroups } from './failover.ts'

/** Largest body buffered so a request can be retried or mirrored. */
const REPLAY_BODY_LIMIT = 1024 * 1024

/** How long a mirror copy may take before it is abandoned. */
const MIRROR_TIMEOUT_MS = 30_000

/** Called before the first backend phase of a route with retries: each retry starts from this request. */
export function saveBeforeBackend (ctx: RequestContext): void {
  ctx.beforeBackend = { headers: { ...ctx.headers }, path: ctx.path, body: ctx.requestBody }
}

export type RunBackendPhase = (ctx: RequestContext) => Promise<{ status: number, body: string, headers?: HeaderMap, reason: string } | null>

/**
 * The backend call of a route with mirrors or retries (plain `callUpstream` otherwise).
 * `backendPhase` runs the backend policies of `ctx.backendRef` (for retries).
 */
export async function callWithResiliency (rt: PipelineRuntime, ctx: RequestContext, backendPhase: RunBackendPhase): Promise<void> {
  const route = ctx.route!
  const failover = ctx.upgrade === null ? ctx.failover : null
  const retry = ctx.upgrade === null ? route.ir.retry : undefined
  const mirrors = ctx.upgrade === null ? route.mirrors.filter(m => Math.random() * 100 < m.ir.percentage) : []
  if (retry === undefined && mirrors.length === 0 && failover === null) return callBackend(rt, ctx)

  // Too large: streamed to the backend once, unmirrored and unretried.
  const read = await readRequestBody(ctx, { maxBytes: REPLAY_BODY_LIMIT, whenTooLarge: 'keep' })
  if (read instanceof Error) {
    const failure = bodyReadFailure(read)
    respondLocal(rt, ctx, failure.status, failure.body, failure.reason, `reading the request body: ${read.message}`, failure.headers)
    return
  }
  if (ctx.res.destroyed) return
  const replayable = read !== 'too-large'
  for (const m of mirrors) {
    if (!replayable) {
      ctx.tracer?.emit({ type: 'mirror', backend: m.backend?.target ?? m.ir.backend, sent: false, reason: `request body larger than ${REPLAY_BODY_LIMIT} bytes` }, { severity: 'warn' })
      continue
    }
    mirror(rt, ctx, m.backend, m.ir.backend)
  }
  // An ai request's body is in memory already (llm/request.ts, bounded by its own limit).
  if (failover !== null && (replayable || ctx.requestBody !== null)) return attempt(rt, ctx, failoverPlan(rt, failover), 1, backendPhase, new Set())
  if (retry === undefined || !replayable || retry.attempts === 0) {
    if (retry !== undefined && !replayable) ctx.tracer?.emit({ type: 'retry', enabled: false, reason: `request body larger than ${REPLAY_BODY_LIMIT} bytes: not retried` })
    return callBackend(rt, ctx)
  }
  attempt(rt, ctx, retryPlan(route, retry), 1, backendPhase, new Set())
}

/** A route's backend choice (what its weighted picker yields). */
type BackendChoice = NonNullable<RequestContext['backendRef']>

/** How a request is tried again: the route's retry policy, or failover across providers. */
interface TryPlan {
  /** Tries after the first, at most. */
  attempts: number
  backoffMs: number
  /** An answer of this status is dropped and the request tried again. */
  retries (status: number): boolean
  /** The backend of the next try, avoiding `tried` as long as it can; null: none. */
  pick (tried: ReadonlySet<BackendChoice>): BackendChoice | null
  /** Failover: a try is dropped only when another provider is left to take the request. */
  failover: ProviderGroups | null
}

function retryPlan (route: NonNullable<RequestContext['route']>, retry: RetryIR): TryPlan {
  return { attempts: retry.attempts, backoffMs: retry.backoffMs, retries: status => retry.codes.includes(status), pick: tried => route.backends.pick(tried), failover: null }
}

/** 429 (rate limited) and 5xx: another provider may well answer. */
const failoverStatus = (status: number): boolean => status === 429 || status >= 500

function failoverPlan (rt: PipelineRuntime, groups: ProviderGroups): TryPlan {
  const healthy = (b: BackendIR): boolean => rt.pools.hasHealthyEndpoint(b)
  return {
    attempts: providerCount(groups) - 1,
    backoffMs: 0,
    retries: failoverStatus,
    // A provider ejected since the try was dropped still takes it (its call answers 503).
    pick: tried => chooseProvider(groups, tried, healthy) ?? groups.flat().find(r => !tried.has(r)) ?? null,
    failover: groups
  }
}

/** `tried`: the backend choices that failed so far; a retry picks among the others first. */
function attempt (rt: PipelineRuntime, ctx: RequestContext, plan: TryPlan, n: number, backendPhase: RunBackendPhase, tried: Set<BackendChoice>): void {
  const wrap: CallWrapper = (inner, release) => {
    let dropped = false
    // The answer's head went on to the client: whatever happens next is the client's.
    let passed = false
    const started = performance.now()
    const backend = ctx.backend!
    const current = ctx.backendRef
    const groups = plan.failover
    const canRetry = (): boolean => {
      if (passed || n > plan.attempts || ctx.done || ctx.res.destroyed) return false
      if (groups === null) return true
      const after = new Set(tried)
      if (current !== undefined && current !== null) after.add(current)
      return chooseProvider(groups, after, b => rt.pools.hasHealthyEndpoint(b), true) !== null
    }
    const drop = (why: string, status: number | null, error: string | null, timedOut = false): void => {
      dropped = true
      if (groups !== null) (ctx.failedOver ??= []).push({ backend: backend.name, reason: status !== null ? String(status) : timedOut ? 'timeout' : 'connection' })
      if (current !== undefined && current !== null) tried.add(current)
      release()
      rt.backendStats?.recordCall(backend.key, true, status === null ? null : performance.now() - started)
      traceCallResult(ctx, status, error, 'warn')
      const event = groups === null
        ? { type: 'retry' as const, attempt: n + 1, attempts: plan.attempts + 1, backend: backend.target, reason: why, backoffMs: plan.backoffMs }
        : { type: 'retry' as const, failover: true as const, provider: backend.name, attempt: n + 1, attempts: plan.attempts + 1, backend: backend.target, reason: why, backoffMs: 0 }
      ctx.tracer?.emit(event, { severity: 'warn' })
      setTimeout(() => { next(rt, ctx, plan, n + 1, backendPhase, tried).catch(err => fail(rt, ctx, err)) }, plan.backoffMs)
    }
    const who = groups === null ? `backend ${backend.target}` : `provider ${backend.name} (${backend.ai?.provider ?? 'ai'})`
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: (c, context) => inner.onRequestStart?.(c, context),
      onRequestUpgrade: (c, status, headers, socket) => inner.onRequestUpgrade?.(c, status, headers, socket),
      onResponseStart: (c, status, headers, message) => {
        if (plan.retries(status) && canRetry()) {
          drop(`${who} answered ${status}`, status, null)
          c.abort(new PorticoError('PORTICO_RETRY', `status ${status}: retried`))
          return
        }
        passed = true
        inner.onResponseStart?.(c, status, headers, message)
      },
      onResponseData: (c, chunk) => { if (!dropped) inner.onResponseData?.(c, chunk) },
      onResponseEnd: (c, trailers) => { if (!dropped) inner.onResponseEnd?.(c, trailers) },
      onResponseError: (c, err) => {
        if (dropped) return
        if (canRetry() && retriable(err)) {
          const failure = classifyFailure(err, null)
          drop(`${who} failed: ${failure.detail}`, null, failure.detail, isPorticoError(err, 'PORTICO_BACKEND_TIMEOUT'))
          return
        }
        inner.onResponseError?.(c, err)
      }
    }
    return handler
  }
  callBackend(rt, ctx, wrap)
}

/**
 * Connection-level failures and the per-try backend timeout are retried (the Gateway API's
 * HTTPRouteRetryConnectionError and HTTPRouteRetryBackendTimeout); the request timeout, a
 * client that left and bad request bodies are not.
 */
export function retriable (err: Error): boolean {
  const code = (err as PorticoError).code ?? ''
  if (code === 'PORTICO_BACKEND_TIMEOUT') return true
  if (code === 'PORTICO_REQUEST_TIMEOUT' || code === 'PORTICO_DOWNSTREAM_CLOSED' || code === 'PORTICO_RESPONSE_REPLACED') return false
  return classifyFailure(err, null).reason === 'UpstreamFailure'
}

/**
 * The next try: a backend by weight again (one not tried yet, while any is left), its
 * policies on the request as before the backend phase, then the call.
 */
async function next (rt: PipelineRuntime, ctx: RequestContext, plan: TryPlan, n: number, backendPhase: RunBackendPhase, tried: Set<BackendChoice>): Promise<void> {
  if (ctx.done || ctx.res.destroyed) return
  const ref = plan.pick(tried)
  if (ref === null || ref.backend === undefined || ref.backend.kind === 'invalid' || ref.backend.kind === 'mcp') {
    const why = ref?.backend?.invalidReason ?? `no usable backend for retry ${n}`
    respondLocal(rt, ctx, 500, 'no valid backends', 'NoValidBackends', why)
    return
  }
  const saved = ctx.beforeBackend
  if (saved !== null) {
    ctx.headers = { ...saved.headers }
    ctx.path = saved.path
    if (saved.body !== null) ctx.requestBody = saved.body
  }
  for (let i = ctx.phases.length - 1; i >= 0; i--) if (ctx.phases[i]!.phase === 'backend') ctx.phases.splice(i, 1)
  ctx.backendRef = ref
  ctx.backend = ref.backend
  const outcome = await backendPhase(ctx)
  if (outcome !== null) {
    respondLocal(rt, ctx, outcome.status, outcome.body, outcome.reason, null, outcome.headers)
    return
  }
  if (ctx.done || ctx.res.destroyed) return
  attempt(rt, ctx, plan, n, backendPhase, tried)
}

function fail (rt: PipelineRuntime, ctx: RequestContext, err: unknown): void {
  if (!ctx.res.headersSent) respondLocal(rt, ctx, 500, 'internal error', 'Internal', String((err as Error)?.message ?? err))
}

/** Sends a copy of the request to a mirror backend; the answer is read and dropped. */
function mirror (rt: PipelineRuntime, ctx: RequestContext, backend: BackendIR | undefined, key: string): void {
  if (backend === undefined || backend.kind === 'invalid' || backend.kind === 'mcp' || backend.endpoints.length === 0) {
    ctx.tracer?.emit({ type: 'mirror', backend: backend?.target ?? key, sent: false, reason: backend === undefined ? `backend ${key} does not exist` : `backend ${backend.target} cannot be called` }, { severity: 'warn' })
    return
  }
  let dispatcher: UpstreamCaller
  try {
    dispatcher = rt.pools.get(backend, ctx.grpc !== null)
  } catch (err) {
    ctx.tracer?.emit({ type: 'mirror', backend: backend.target, sent: false, reason: (err as Error).message }, { severity: 'warn' })
    return
  }
  const started = performance.now()
  let controller: Dispatcher.DispatchController | null = null
  let recorded = false
  const record = (failed: boolean, withLatency: boolean): void => {
    if (recorded) return
    recorded = true
    clearTimeout(timer)
    rt.backendStats?.recordCall(backend.key, failed, withLatency ? performance.now() - started : null)
  }
  const timer = setTimeout(() => controller?.abort(new PorticoError('PORTICO_BACKEND_TIMEOUT', 'mirror timeout')), MIRROR_TIMEOUT_MS)
  timer.unref()
  ctx.tracer?.emit({ type: 'mirror', backend: backend.target, sent: true })
  const headers = { ...ctx.headers } as Record<string, string | string[]>
  if (ctx.requestBody !== null) headers['content-length'] = String(ctx.requestBody.length)
  // The copy belongs to the request's trace: its parent is the request's span.
  ctx.span?.inject(headers)
  try {
    dispatcher.dispatch({
      path: ctx.pathAndQuery,
      method: ctx.method as Dispatcher.HttpMethod,
      headers,
      body: ctx.requestBody
    }, {
      onRequestStart: c => { controller = c },
      onResponseStart: (_c, status) => record(status >= 500, true),
      onResponseData: () => {},
      onResponseEnd: () => {},
      onResponseError: () => record(true, false)
    })
  } catch {
    record(true, false)
  }
}
