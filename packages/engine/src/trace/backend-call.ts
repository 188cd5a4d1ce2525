/**
 * The backend call's two trace events, emitted here and nowhere else: `backendCallStart`
 * when a call leaves — the HTTP upstream call (each retry attempt is one), the MCP layer's
 * call to its targets — and `backendCallResult` when its answer's head arrives or it fails,
 * a span from that call's start (so retries and MCP calls show their own durations).
 */

import type { TraceRecorder } from './recorder.ts'
import type { TraceSeverity } from './events.ts'
import { severityOf } from './recorder.ts'
import type { OtelSpan, SpanContext } from './otel.ts'

/** What the two events need of a request's state (request/context.ts RequestContext has it). */
export interface CallTraceContext extends SpanContext {
  readonly tracer: TraceRecorder | null
  /** µs on the trace's clock when the call in progress started. */
  backendCallStartUs: number
}

export function traceCallStart (ctx: CallTraceContext, target: string): void {
  const tracer = ctx.tracer
  if (tracer === null) return
  ctx.backendCallStartUs = tracer.now()
  tracer.emit({ type: 'backendCallStart', target })
}

/**
 * `status` null: the call failed before a response. The severity follows the outcome
 * (an error or a 5xx is an error, a 4xx a warning) unless the caller knows better — a retry
 * drops a failed attempt as a warning.
 */
export function traceCallResult (ctx: CallTraceContext, status: number | null, error: string | null, severity?: TraceSeverity): void {
  if (ctx.callSpan !== null) callSpanResult(ctx, ctx.callSpan, status, error, severity === 'warn')
  const tracer = ctx.tracer
  if (tracer === null) return
  severity ??= error !== null || status === null ? 'error' : severityOf(status)
  tracer.emit({ type: 'backendCallResult', status, error }, { eventStart: ctx.backendCallStartUs, severity })
}

/**
 * The OpenTelemetry side of a call's result: the status on its client span, which ends
 * here when the call failed or a retry dropped it; an answer's span stays open until the
 * request ends (its body, and an LLM's token usage, come after the head).
 */
function callSpanResult (ctx: CallTraceContext, span: OtelSpan, status: number | null, error: string | null, dropped: boolean): void {
  if (status !== null) span.setAttributes({ 'http.response.status_code': status })
  if (error !== null) span.setError('UpstreamFailure', error)
  else if (status !== null && status >= 500) span.setError(String(status))
  if (error !== null || dropped) {
    span.end()
    ctx.callSpan = null
  }
}
