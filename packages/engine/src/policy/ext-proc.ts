/**
 * `extProc`: external processing, wire-compatible with Envoy's ext_proc filter
 * (`envoy.service.ext_proc.v3.ExternalProcessor/Process`). One gRPC stream per request; the
 * processor gets, as the processing mode says, the request headers, the request body, the
 * response headers and the response body, each in turn, and answers each with header
 * changes (set/remove), a body replacement, or an immediate response.
 *
 * Body modes (Envoy's BodySendMode): none, buffered, streamed and fullDuplexStreamed. The
 * request phase is http/ext-proc-request-phase.ts (shared with the InferencePool's endpoint
 * picker): in the streamed modes the client's chunks go to the processor as they come and the
 * backend call waits until the processor has answered all of them, the new body held up to
 * maxBodyBytes. The response phase is http/ext-proc-response-phase.ts (shared with the
 * endpoint picker too): a backend's body in the streamed modes goes to the
 * processor chunk by chunk as it streams (http/response-intercept.ts onChunk) and what the
 * processor answers goes on to the client at once (without content-length), then an empty
 * chunk with end_of_stream; an answer the proxy makes whole is sent as one chunk. A failure
 * after the client got the first byte cuts its response; in full duplex failOpen cannot let
 * the rest through once chunks went to the processor (it holds some of them), so that fails
 * too. BUFFERED_PARTIAL and trailers are not supported (a trailers answer is accepted and
 * ignored). A body replacement fixes
 * content-length. A failure (the processor unreachable, closing the stream with an error,
 * answering out of turn, too much, or slower than the message timeout) answers 500
 * `external processing failed` with failClosed, or stops processing for the request and lets
 * it through unchanged with failOpen. A stream the processor ends cleanly lets the request go
 * on without it.
 */

import { callTraceHeaders, endDecisionSpan, grpcClientAttributes, startChildSpan, type OtelSpan } from '../trace/otel.ts'
import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { ExtProcIR } from '../ir/traffic.ts'
import type { PolicyServices } from './services.ts'
import { createExtProcClient, ExtProcStream, type ExchangeResult } from '../traffic/ext-proc-grpc.ts'
import { bodyReadFailure } from '../http/request-body.ts'
import { addResponseInterceptor } from '../http/response-intercept.ts'
import { runExtProcRequestPhase, type RequestPhaseOptions } from '../http/ext-proc-request-phase.ts'
import { extProcResponseInterceptor } from '../http/ext-proc-response-phase.ts'
import { CONTINUE } from './header-modifier.ts'

type TraceResult = 'apply' | 'skip' | 'deny'

function trace (ctx: RequestContext, type: TraceResult, details: string): void {
  ctx.tracer?.emit({ type: 'policy', kind: 'extProc', result: { type, details } }, { severity: type === 'deny' ? 'warn' : 'info' })
}

const FAILED_BODY = 'external processing failed'

export function extProc (ir: ExtProcIR, services: PolicyServices): CompiledPolicy {
  const url = new URL(ir.host)
  const target = url.host
  const client = services.grpcClient('extproc', target, url.protocol === 'https:', createExtProcClient)
  const spanAttrs = { ...grpcClientAttributes('envoy.service.ext_proc.v3.ExternalProcessor', 'Process', target), 'portico.policy': 'extProc' }

  return {
    kind: 'extProc',
    async onRequest (ctx: RequestContext): Promise<PolicyOutcome> {
      const stream = new ExtProcStream(client, ir.messageTimeoutMs)
      ctx.res.once('close', () => stream.close())
      const hooks = messageSpans(ctx, stream, spanAttrs)
      /** A failure: failClosed answers 500, failOpen stops processing and goes on. */
      const fail = (reason: string, changes: string[]): PolicyOutcome => {
        stream.close()
        if (ir.failureMode === 'failOpen') {
          trace(ctx, 'skip', `processor ${target} failed, allowed by failureMode failOpen: ${reason}${changes.length > 0 ? ` (${changes.join('; ')})` : ''}`)
          return CONTINUE
        }
        trace(ctx, 'deny', `processor ${target} failed: ${reason}`)
        ctx.error = `external processor ${target} failed: ${reason}`
        return { action: 'respond', status: 500, body: FAILED_BODY, reason: 'ExtProc' }
      }

      const r = await runExtProcRequestPhase(ctx, {
        stream,
        modes: ir.processingMode,
        allowModeOverride: ir.processingMode.allowModeOverride,
        maxBodyBytes: ir.maxBodyBytes,
        pseudo: { ':authority': ctx.host, ':method': ctx.method, ':path': ctx.pathAndQuery, ':scheme': ctx.scheme },
        headers: ctx.headers,
        hooks
      })
      hooks.endAll()
      switch (r.kind) {
        case 'too-large':
          stream.close()
          trace(ctx, 'deny', `request body larger than maxBodyBytes (${ir.maxBodyBytes})`)
          return { action: 'respond', status: 413, body: 'payload too large', reason: 'ExtProc' }
        case 'body-error':
          stream.close()
          trace(ctx, 'deny', `reading the request body: ${r.error.message}`)
          return { action: 'respond', ...bodyReadFailure(r.error) }
        case 'closed':
          stream.close()
          trace(ctx, 'skip', `processor ${target} ended the stream; the request goes on without it${r.changes.length > 0 ? ` (${r.changes.join('; ')})` : ''}`)
          return CONTINUE
        case 'error':
          return fail(r.reason, r.changes)
        case 'immediate':
          stream.close()
          trace(ctx, 'deny', `immediate response ${r.status}${r.details !== '' ? ` (${r.details})` : ''}`)
          return { action: 'respond', status: r.status, body: r.body.toString('utf8'), headers: r.headers as Record<string, string | string[]>, reason: 'ExtProc' }
        case 'continue':
          break
      }
      trace(ctx, 'apply', `request processed by ${target}${r.changes.length > 0 ? `: ${r.changes.join('; ')}` : ''}`)
      const modes = r.modes
      const wantsResponse = modes.responseHeaderMode === 'send' || modes.responseBodyMode !== 'none'
      if (!wantsResponse || ctx.upgrade !== null) {
        stream.finish()
        return CONTINUE
      }
      addResponseInterceptor(ctx, extProcResponseInterceptor({
        stream,
        modes,
        maxBodyBytes: ir.maxBodyBytes,
        failureMode: ir.failureMode,
        target,
        failed: reason => ({ action: 'fail', status: 500, body: FAILED_BODY, reason: 'ExtProc', error: `external processor ${target} failed: ${reason}` }),
        trace: (type, details) => trace(ctx, type, details),
        hooks
      }))
      return CONTINUE
    }
  }
}

type Hooks = NonNullable<RequestPhaseOptions['hooks']> & { endAll: () => void }

/**
 * One client span per message exchanged on the stream, named for its phase (request_headers,
 * ...), ended by the answer to it; the first one's trace context opens the stream.
 */
function messageSpans (ctx: RequestContext, stream: ExtProcStream, attrs: Record<string, string | number>): Hooks {
  const open = new Map<string, Array<OtelSpan | null>>()
  let first = true
  return {
    sent (phase: string): void {
      const span = ctx.span === null ? null : startChildSpan(ctx, `envoy.service.ext_proc.v3.ExternalProcessor/Process ${phase}`, attrs)
      if (first) {
        stream.traceHeaders = callTraceHeaders(ctx, span)
        first = false
      }
      const list = open.get(phase) ?? []
      list.push(span)
      open.set(phase, list)
    },
    answered (phase: string, r: ExchangeResult): void {
      const span = open.get(phase)?.shift() ?? null
      endDecisionSpan(span, r.kind, r.kind === 'error' ? r.reason : null)
    },
    /** Messages the processor never answered one by one (full duplex): their spans end with the phase. */
    endAll (): void {
      for (const list of open.values()) for (const span of list.splice(0)) endDecisionSpan(span, 'unanswered')
    }
  }
}
