/**
 * Route resiliency around the backend call, as Gateway API users expect of an HTTPRoute:
 *
 * - Mirrors (RequestMirror): a copy of the request — headers as sent upstream and the body —
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
 * Each retry and mirror is a trace event (`retry`, `mirror`); dropped attempts and mirror
 * copies count in the backend stats of the backend they went to.
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
import { BACKEND_TIMEOUT } from '../http/call-timers.ts'
import { callBackend } from './backend-call.ts'
import { traceCallResult } from '../trace/backend-call.ts'
import { bodyReadFailure, readRequestBody } from '../http/request-body.ts'
import { respondLocal } from './respond.ts'
import { PorticoError } from '../util/errors.ts'
import { performance } from '../util/clock.ts'

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
  const retry = ctx.upgrade === null ? route.ir.retry : undefined
  const mirrors = ctx.upgrade === null ? route.mirrors.filter(m => Math.random() * 100 < m.ir.percentage) : []
  if (retry === undefined && mirrors.length === 0) return callBackend(rt, ctx)

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
  if (retry === undefined || !replayable || retry.attempts === 0) {
    if (retry !== undefined && !replayable) ctx.tracer?.emit({ type: 'retry', enabled: false, reason: `request body larger than ${REPLAY_BODY_LIMIT} bytes: not retried` })
    return callBackend(rt, ctx)
  }
  attempt(rt, ctx, retry, 1, backendPhase, new Set())
}

/** A route's backend choice (what its weighted picker yields). */
type BackendChoice = NonNullable<RequestContext['backendRef']>

/** `tried`: the backend choices that failed so far; a retry picks among the others first. */
function attempt (rt: PipelineRuntime, ctx: RequestContext, retry: RetryIR, n: number, backendPhase: RunBackendPhase, tried: Set<BackendChoice>): void {
  const wrap: CallWrapper = (inner, release) => {
    let dropped = false
    const started = performance.now()
    const backend = ctx.backend!
    const canRetry = () => n <= retry.attempts && !ctx.done && !ctx.res.destroyed
    const drop = (why: string, status: number | null, error: string | null): void => {
      dropped = true
      if (ctx.backendRef !== undefined && ctx.backendRef !== null) tried.add(ctx.backendRef)
      release()
      rt.backendStats?.recordCall(backend.key, true, status === null ? null : performance.now() - started)
      traceCallResult(ctx, status, error, 'warn')
      ctx.tracer?.emit({ type: 'retry', attempt: n + 1, attempts: retry.attempts + 1, backend: backend.target, reason: why, backoffMs: retry.backoffMs }, { severity: 'warn' })
      setTimeout(() => { next(rt, ctx, retry, n + 1, backendPhase, tried).catch(err => fail(rt, ctx, err)) }, retry.backoffMs)
    }
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: (c, context) => inner.onRequestStart?.(c, context),
      onRequestUpgrade: (c, status, headers, socket) => inner.onRequestUpgrade?.(c, status, headers, socket),
      onResponseStart: (c, status, headers, message) => {
        if (retry.codes.includes(status) && canRetry()) {
          drop(`backend ${backend.target} answered ${status}`, status, null)
          c.abort(new PorticoError('PORTICO_RETRY', `status ${status}: retried`))
          return
        }
        inner.onResponseStart?.(c, status, headers, message)
      },
      onResponseData: (c, chunk) => { if (!dropped) inner.onResponseData?.(c, chunk) },
      onResponseEnd: (c, trailers) => { if (!dropped) inner.onResponseEnd?.(c, trailers) },
      onResponseError: (c, err) => {
        if (dropped) return
        if (canRetry() && retriable(err)) {
          const failure = classifyFailure(err, null)
          drop(`backend ${backend.target} failed: ${failure.detail}`, null, failure.detail)
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
function retriable (err: Error): boolean {
  const code = (err as PorticoError).code ?? ''
  if (code === 'PORTICO_TIMEOUT') return err.message === BACKEND_TIMEOUT
  if (code === 'PORTICO_DOWNSTREAM_CLOSED' || code === 'PORTICO_RESPONSE_REPLACED') return false
  return classifyFailure(err, null).reason === 'UpstreamFailure'
}

/**
 * The next try: a backend by weight again (one not tried yet, while any is left), its
 * policies on the request as before the backend phase, then the call.
 */
async function next (rt: PipelineRuntime, ctx: RequestContext, retry: RetryIR, n: number, backendPhase: RunBackendPhase, tried: Set<BackendChoice>): Promise<void> {
  if (ctx.done || ctx.res.destroyed) return
  const route = ctx.route!
  const ref = route.backends.pick(tried)
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
  attempt(rt, ctx, retry, n, backendPhase, tried)
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
  const timer = setTimeout(() => controller?.abort(new PorticoError('PORTICO_TIMEOUT', 'mirror timeout')), MIRROR_TIMEOUT_MS)
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
