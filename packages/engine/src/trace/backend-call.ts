/**
 * The backend call's two trace events, emitted here and nowhere else: `backendCallStart`
 * when a call leaves -- the HTTP upstream call (each retry attempt is one), the MCP layer's
 * call to its targets -- and `backendCallResult` when its answer's head arrives or it fails,
 * a span from that call's start (so retries and MCP calls show their own durations).
 */

import type { TraceRecorder } from './recorder.ts'
import type { TraceSeverity } from './events.ts'
import { severityOf } from './recorder.ts'
import type { OtelSpan, SpanContext } from './otel.ts'
import type { EndpointIR } from '../ir/types.ts'

/** What the two events need of a request's state (request/context.ts RequestContext has it). */
export interface CallTraceContext extends SpanContext {
  readonly tracer: TraceRecorder | null
  /** µs on the trace's clock when the call in progress started. */
  backendCallStartUs: number
  /** The mesh peer identity of the call in progress (HBONE), or null. */
  backendCallMesh?: string | null
}

/** `endpoints`: the backend's, when the call goes to them (mesh endpoints make it an HBONE call). */
export function traceCallStart (ctx: CallTraceContext, target: string, endpoints?: readonly EndpointIR[]): void {
  const tracer = ctx.tracer
  if (tracer === null) return
  ctx.backendCallStartUs = tracer.now()
  const mesh = endpoints === undefined ? null : meshPeers(endpoints)
  if (ctx.backendCallMesh !== undefined) ctx.backendCallMesh = mesh
  tracer.emit(mesh === null ? { type: 'backendCallStart', target } : { type: 'backendCallStart', target, mesh: 'hbone', peerIdentity: mesh })
}

/** The distinct peer identities of a backend's mesh endpoints, comma-separated; null when none is mesh. */
function meshPeers (endpoints: readonly EndpointIR[]): string | null {
  let out: string | null = null
  for (const e of endpoints) {
    if (e.mesh === undefined) continue
    if (out === null) out = e.mesh.identity
    else if (!out.split(',').includes(e.mesh.identity)) out += ',' + e.mesh.identity
  }
  return out
}

/**
 * `status` null: the call failed before a response. The severity follows the outcome
 * (an error or a 5xx is an error, a 4xx a warning) unless the caller knows better -- a retry
 * drops a failed attempt as a warning.
 */
export function traceCallResult (ctx: CallTraceContext, status: number | null, error: string | null, severity?: TraceSeverity): void {
  if (ctx.callSpan !== null) callSpanResult(ctx, ctx.callSpan, status, error, severity === 'warn')
  const tracer = ctx.tracer
  if (tracer === null) return
  severity ??= error !== null || status === null ? 'error' : severityOf(status)
  const mesh = ctx.backendCallMesh ?? null
  tracer.emit(mesh === null ? { type: 'backendCallResult', status, error } : status !== null ? { type: 'backendCallResult', status, error, mesh: 'hbone', peerIdentity: mesh } : { type: 'backendCallResult', status, error, mesh: 'hbone' }, { eventStart: ctx.backendCallStartUs, severity })
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
