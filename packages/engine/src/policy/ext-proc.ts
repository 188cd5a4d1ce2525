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
 * maxBodyBytes. On the response the backend's body is held whole (up to maxBodyBytes) and
 * sent as one chunk with end_of_stream, answered as the mode says — response chunks are not
 * forwarded to the processor as they arrive. BUFFERED_PARTIAL and trailers are not
 * supported (a trailers answer is accepted and ignored). A body replacement fixes
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
import { createExtProcClient, ExtProcStream, headerMapMessage, type ExchangeResult } from '../traffic/ext-proc-grpc.ts'
import { bodyReadFailure } from '../http/request-body.ts'
import { addResponseInterceptor, type InterceptResult, type ResponseDraft } from '../http/response-intercept.ts'
import { DuplexAnswers, applyMutation, immediateAnswer, newBody, runExtProcRequestPhase, type ExtProcModes, type RequestPhaseOptions } from '../http/ext-proc-request-phase.ts'
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
      addResponseInterceptor(ctx, responseInterceptor(ctx, ir, modes, stream, target, hooks))
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

function responseInterceptor (ctx: RequestContext, ir: ExtProcIR, mode: ExtProcModes, stream: ExtProcStream, target: string, hooks: Hooks) {
  let active = true
  let bodyReplaced = false
  /** Response headers sent in the full-duplex mode, their answer read with the body's. */
  let headersPending = false
  const send = async (message: Record<string, unknown>, expect: 'response_headers' | 'response_body'): Promise<ExchangeResult> => {
    hooks.sent?.(expect)
    const r = await stream.exchange(message, expect)
    hooks.answered?.(expect, r)
    return r
  }
  const fail = (reason: string): InterceptResult => {
    stream.close()
    active = false
    if (ir.failureMode === 'failOpen') {
      trace(ctx, 'skip', `processor ${target} failed on the response, allowed by failureMode failOpen: ${reason}`)
      return { action: 'continue' }
    }
    trace(ctx, 'deny', `processor ${target} failed on the response: ${reason}`)
    return { action: 'fail', status: 500, body: FAILED_BODY, reason: 'ExtProc', error: `external processor ${target} failed: ${reason}` }
  }
  const apply = (draft: ResponseDraft, r: ExchangeResult, toBody: boolean): InterceptResult | 'replaced' => {
    const changes: string[] = []
    switch (r.kind) {
      case 'closed':
        active = false
        stream.close()
        trace(ctx, 'skip', `processor ${target} ended the stream; the response goes on without it`)
        return { action: 'continue' }
      case 'error':
        return fail(r.reason)
      case 'immediate': {
        active = false
        stream.close()
        const answer = immediateAnswer(r.immediate, changes)
        draft.status = answer.status
        draft.headers = { 'content-type': 'text/plain; charset=utf-8', ...answer.headers }
        draft.body = answer.body
        trace(ctx, 'deny', `immediate response ${draft.status} instead of the answer`)
        return { action: 'respond' }
      }
      case 'response': {
        const c = r.response
        const statusSet = (c.header_mutation?.set_headers ?? []).find(h => (h.header?.key ?? '').toLowerCase() === ':status')
        if (statusSet !== undefined) {
          const v = Number(statusSet.header?.value !== undefined && statusSet.header.value !== '' ? statusSet.header.value : Buffer.from(statusSet.header?.raw_value ?? []).toString('utf8'))
          if (Number.isInteger(v) && v >= 200 && v <= 599) {
            draft.status = v
            changes.push(`status ${v}`)
          }
        }
        applyMutation(draft.headers, c.header_mutation, changes)
        const replace = c.status === 1
        const body = newBody(c, toBody || replace)
        if (body !== null) {
          draft.body = body
          bodyReplaced = true
          changes.push(`response body replaced (${body.length} bytes)`)
        }
        trace(ctx, 'apply', `response ${toBody ? 'body' : 'headers'} processed by ${target}${changes.length > 0 ? `: ${changes.join('; ')}` : ''}`)
        return replace ? 'replaced' : { action: 'continue' }
      }
    }
  }
  /** FULL_DUPLEX_STREAMED: the body goes out whole, then the answers are read as they come (headers first when sent). */
  const duplexBody = async (draft: ResponseDraft): Promise<InterceptResult> => {
    hooks.sent?.('response_body')
    const failed = await stream.write({ response_body: { body: draft.body ?? Buffer.alloc(0), end_of_stream: true } })
    if (failed !== null) return finish(apply(draft, failed, true))
    const duplex = new DuplexAnswers('response', headersPending, true)
    const out: Buffer[] = []
    let size = 0
    while (!duplex.done) {
      const a = duplex.take(await stream.receive())
      if (a.kind === 'end') {
        hooks.answered?.('response_body', a.r)
        return finish(apply(draft, a.r, true))
      }
      if (a.kind === 'error') return fail(a.reason)
      if (a.kind === 'ignored') continue
      const isBody = a.kind === 'body'
      hooks.answered?.(isBody ? 'response_body' : 'response_headers', a.r)
      const applied = apply(draft, a.r, false)
      if (applied !== 'replaced' && applied.action !== 'continue') return applied
      if (!active) return { action: 'continue' }
      if (isBody) {
        size += a.chunk.length
        if (size > ir.maxBodyBytes) return fail(`the processor's body is larger than maxBodyBytes (${ir.maxBodyBytes})`)
        out.push(a.chunk)
      }
    }
    draft.body = Buffer.concat(out)
    bodyReplaced = true
    stream.finish()
    return { action: 'continue' }
  }
  const finish = (out: InterceptResult | 'replaced'): InterceptResult => {
    stream.finish()
    return out === 'replaced' ? { action: 'continue' } : out
  }
  return {
    maxBodyBytes: ir.maxBodyBytes,
    async onHeaders (draft: ResponseDraft): Promise<InterceptResult> {
      if (mode.responseHeaderMode !== 'send') return { action: 'continue' }
      const message = { response_headers: { headers: headerMapMessage({ ':status': String(draft.status) }, draft.headers), end_of_stream: !draft.hasBody } }
      if (mode.responseBodyMode === 'fullDuplexStreamed' && draft.hasBody) {
        // Not waited for: a full-duplex processor may answer the headers only after the body.
        hooks.sent?.('response_headers')
        const failed = await stream.write(message)
        if (failed !== null) return finish(apply(draft, failed, false))
        headersPending = true
        return { action: 'continue' }
      }
      const r = await send(message, 'response_headers')
      const out = apply(draft, r, false)
      if (out === 'replaced') {
        active = false
        stream.finish()
        return { action: 'continue' }
      }
      if (active && !(mode.responseBodyMode !== 'none' && draft.hasBody)) stream.finish()
      return out
    },
    wantsBody (): boolean {
      return active && !bodyReplaced && mode.responseBodyMode !== 'none'
    },
    async onBody (draft: ResponseDraft): Promise<InterceptResult> {
      if (mode.responseBodyMode === 'fullDuplexStreamed') return await duplexBody(draft)
      // buffered, and streamed with the body as its one chunk: a body mutation replaces it.
      const r = await send({ response_body: { body: draft.body ?? Buffer.alloc(0), end_of_stream: true } }, 'response_body')
      return finish(apply(draft, r, true))
    },
    onBodyTooLarge (): InterceptResult {
      return fail(`response body larger than maxBodyBytes (${ir.maxBodyBytes})`)
    }
  }
}
