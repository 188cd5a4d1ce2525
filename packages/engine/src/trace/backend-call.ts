/**
 * The backend call's two trace events, emitted here and nowhere else: `backendCallStart`
 * when a call leaves — the HTTP upstream call (each retry attempt is one), the MCP layer's
 * call to its targets — and `backendCallResult` when its answer's head arrives or it fails,
 * a span from that call's start (so retries and MCP calls show their own durations).
 */

import type { TraceRecorder } from './recorder.ts'
import type { TraceSeverity } from './events.ts'
import { severityOf } from './recorder.ts'

/** What the two events need of a request's state (request/context.ts RequestContext has it). */
export interface CallTraceContext {
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
  const tracer = ctx.tracer
  if (tracer === null) return
  severity ??= error !== null || status === null ? 'error' : severityOf(status)
  tracer.emit({ type: 'backendCallResult', status, error }, { eventStart: ctx.backendCallStartUs, severity })
}
