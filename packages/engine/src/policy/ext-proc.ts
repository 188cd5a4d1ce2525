/**
 * `extProc`: external processing, wire-compatible with Envoy's ext_proc filter
 * (`envoy.service.ext_proc.v3.ExternalProcessor/Process`). One gRPC stream per request; the
 * processor gets, as the processing mode says, the request headers, the request body, the
 * response headers and the response body, each in turn, and answers each with header
 * changes (set/remove), a body replacement, or an immediate response.
 *
 * Bodies are sent BUFFERED only (whole, up to `maxBodyBytes`); Envoy's STREAMED,
 * BUFFERED_PARTIAL and FULL_DUPLEX_STREAMED modes and trailers are not supported. A body
 * replacement fixes content-length. A failure (the processor unreachable, closing the stream
 * with an error, answering out of turn, or slower than the message timeout) answers
 * 500 `external processing failed` with failClosed, or stops processing for the request and
 * lets it through unchanged with failOpen. A stream the processor ends cleanly lets the
 * request go on without it.
 */

import { callTraceHeaders, endDecisionSpan, grpcClientAttributes, startChildSpan } from '../trace/otel.ts'
import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { ExtProcIR } from '../ir/traffic.ts'
import type { PolicyServices } from './services.ts'
import { applyHeaderMutations, removeHeaders, type HeaderMutation } from '../auth/ext-authz-check.ts'
import { headerMutations } from '../auth/ext-authz-grpc.ts'
import { createExtProcClient, ExtProcStream, headerMapMessage, type CommonResponseMessage, type ExchangeResult, type HeaderMutationMessage } from '../traffic/ext-proc-grpc.ts'
import { bodyReadFailure, readRequestBody, requestHasBody } from '../http/request-body.ts'
import { addResponseInterceptor, type InterceptResult, type ResponseDraft } from '../http/response-intercept.ts'
import { CONTINUE } from './header-modifier.ts'
import type { HeaderMap } from '../ir/header-map.ts'

type TraceResult = 'apply' | 'skip' | 'deny'

function trace (ctx: RequestContext, type: TraceResult, details: string): void {
  ctx.tracer?.emit({ type: 'policy', kind: 'extProc', result: { type, details } }, { severity: type === 'deny' ? 'warn' : 'info' })
}

/** BodySendMode values of ProtocolConfiguration. */
const BODY_MODE = { none: 0, buffered: 2 } as const

const FAILED_BODY = 'external processing failed'

export function extProc (ir: ExtProcIR, services: PolicyServices): CompiledPolicy {
  const url = new URL(ir.host)
  const target = url.host
  const client = services.grpcClient('extproc', target, url.protocol === 'https:', createExtProcClient)
  const mode = ir.processingMode
  const protocolConfig = { request_body_mode: BODY_MODE[mode.requestBodyMode], response_body_mode: BODY_MODE[mode.responseBodyMode] }
  const wantsResponse = mode.responseHeaderMode === 'send' || mode.responseBodyMode === 'buffered'
  const spanAttrs = { ...grpcClientAttributes('envoy.service.ext_proc.v3.ExternalProcessor', 'Process', target), 'portico.policy': 'extProc' }

  return {
    kind: 'extProc',
    async onRequest (ctx: RequestContext): Promise<PolicyOutcome> {
      const stream = new ExtProcStream(client, ir.messageTimeoutMs)
      ctx.res.once('close', () => stream.close())
      let first = true
      const send = async (message: Record<string, unknown>, expect: Parameters<ExtProcStream['exchange']>[1]): Promise<ExchangeResult> => {
        // One span per message exchanged on the stream, named for the phase (request_headers, ...).
        const span = ctx.span === null ? null : startChildSpan(ctx, `envoy.service.ext_proc.v3.ExternalProcessor/Process ${expect}`, spanAttrs)
        if (first) {
          message.protocol_config = protocolConfig
          // The stream opens with this first exchange: its trace context goes with it.
          stream.traceHeaders = callTraceHeaders(ctx, span)
          first = false
        }
        const result = await stream.exchange(message, expect)
        endDecisionSpan(span, result.kind, result.kind === 'error' ? result.reason : null)
        return result
      }
      /** A failure: failClosed answers 500, failOpen stops processing and goes on. */
      const fail = (reason: string): PolicyOutcome => {
        stream.close()
        if (ir.failureMode === 'failOpen') {
          trace(ctx, 'skip', `processor ${target} failed, allowed by failureMode failOpen: ${reason}`)
          return CONTINUE
        }
        trace(ctx, 'deny', `processor ${target} failed: ${reason}`)
        ctx.error = `external processor ${target} failed: ${reason}`
        return { action: 'respond', status: 500, body: FAILED_BODY, reason: 'ExtProc' }
      }
      const bodyLike = ctx.upgrade === null && (ctx.requestBody !== null ? ctx.requestBody.length > 0 : requestHasBody(ctx.req.headers))
      let replaced = false
      const changes: string[] = []

      if (mode.requestHeaderMode === 'send') {
        const pseudo = { ':authority': ctx.host, ':method': ctx.method, ':path': ctx.pathAndQuery, ':scheme': ctx.scheme }
        const r = await send({ request_headers: { headers: headerMapMessage(pseudo, ctx.headers), end_of_stream: !bodyLike } }, 'request_headers')
        const handled = handleRequestAnswer(ctx, r, false, changes)
        if (handled === 'closed') return closedEarly(ctx, stream, target, changes)
        if (typeof handled === 'object') return 'fail' in handled ? fail(handled.fail) : handled.outcome
        replaced = handled === 'replaced'
      }

      if (mode.requestBodyMode === 'buffered' && bodyLike && !replaced) {
        const read = await readRequestBody(ctx, { maxBytes: ir.maxBodyBytes, whenTooLarge: 'drain' })
        if (read === 'too-large') {
          stream.close()
          trace(ctx, 'deny', `request body larger than maxBodyBytes (${ir.maxBodyBytes})`)
          return { action: 'respond', status: 413, body: 'payload too large', reason: 'ExtProc' }
        }
        if (read instanceof Error) {
          stream.close()
          trace(ctx, 'deny', `reading the request body: ${read.message}`)
          return { action: 'respond', ...bodyReadFailure(read) }
        }
        const r = await send({ request_body: { body: ctx.requestBody ?? Buffer.alloc(0), end_of_stream: true } }, 'request_body')
        const handled = handleRequestAnswer(ctx, r, true, changes)
        if (handled === 'closed') return closedEarly(ctx, stream, target, changes)
        if (typeof handled === 'object') return 'fail' in handled ? fail(handled.fail) : handled.outcome
      }

      trace(ctx, 'apply', `request processed by ${target}${changes.length > 0 ? `: ${changes.join('; ')}` : ''}`)
      if (!wantsResponse || ctx.upgrade !== null) {
        stream.finish()
        return CONTINUE
      }
      addResponseInterceptor(ctx, responseInterceptor(ctx, ir, stream, target, send))
      return CONTINUE
    }
  }
}

function closedEarly (ctx: RequestContext, stream: ExtProcStream, target: string, changes: string[]): PolicyOutcome {
  stream.close()
  trace(ctx, 'skip', `processor ${target} ended the stream; the request goes on without it${changes.length > 0 ? ` (${changes.join('; ')})` : ''}`)
  return CONTINUE
}

type Handled = 'ok' | 'replaced' | 'closed' | { fail: string } | { outcome: PolicyOutcome }

/** Applies an answer to the request (headers in place; a body replacement into ctx.requestBody). */
function handleRequestAnswer (ctx: RequestContext, r: ExchangeResult, toBody: boolean, changes: string[]): Handled {
  switch (r.kind) {
    case 'closed':
      return 'closed'
    case 'error':
      return { fail: r.reason }
    case 'immediate': {
      const status = r.immediate.status?.code ?? 0
      const headers: HeaderMap = {}
      applyMutation(headers, r.immediate.headers, changes)
      changes.push(`immediate response ${status}`)
      trace(ctx, 'deny', `immediate response ${status}${r.immediate.details ? ` (${r.immediate.details})` : ''}`)
      return {
        outcome: {
          action: 'respond',
          status: status >= 200 && status <= 599 ? status : 500,
          body: r.immediate.body !== undefined ? Buffer.from(r.immediate.body).toString('utf8') : '',
          headers: headers as Record<string, string | string[]>,
          reason: 'ExtProc'
        }
      }
    }
    case 'response': {
      const c = r.response
      applyMutation(ctx.headers, c.header_mutation, changes)
      const replace = c.status === 1
      const body = newBody(c, toBody || replace)
      if (body !== null) {
        const hadBody = ctx.requestBody === null && requestHasBody(ctx.req.headers)
        ctx.requestBody = body
        ctx.headers['content-length'] = String(body.length)
        delete ctx.headers['transfer-encoding']
        // A body replaced at the headers: the client's own body is not needed any more.
        if (hadBody) ctx.req.resume()
        changes.push(`request body replaced (${body.length} bytes)`)
      }
      return replace ? 'replaced' : 'ok'
    }
  }
}

function newBody (c: CommonResponseMessage, allowed: boolean): Buffer | null {
  const m = c.body_mutation
  if (!allowed || m === undefined || m === null) return null
  if (m.body !== undefined && m.body !== null) return Buffer.from(m.body)
  if (m.clear_body === true) return Buffer.alloc(0)
  return null
}

function applyMutation (headers: HeaderMap, m: HeaderMutationMessage | undefined, changes: string[]): void {
  if (m === undefined || m === null) return
  // Pseudo-headers and host cannot be changed (Envoy ignores them too); :status is handled by the response side.
  const set: HeaderMutation[] = headerMutations(m.set_headers as never).filter(x => !x.name.startsWith(':') && x.name !== 'host')
  applyHeaderMutations(headers, set)
  const remove = (m.remove_headers ?? []).map(h => h.toLowerCase()).filter(h => !h.startsWith(':') && h !== 'host')
  removeHeaders(headers, remove)
  if (set.length > 0) changes.push(`set ${set.map(s => s.name).join(', ')}`)
  if (remove.length > 0) changes.push(`removed ${remove.join(', ')}`)
}

function responseInterceptor (
  ctx: RequestContext,
  ir: ExtProcIR,
  stream: ExtProcStream,
  target: string,
  send: (message: Record<string, unknown>, expect: 'response_headers' | 'response_body') => Promise<ExchangeResult>
) {
  const mode = ir.processingMode
  let active = true
  let bodyReplaced = false
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
        const status = r.immediate.status?.code ?? 0
        draft.status = status >= 200 && status <= 599 ? status : 500
        draft.headers = { 'content-type': 'text/plain; charset=utf-8' }
        applyMutation(draft.headers, r.immediate.headers, changes)
        draft.body = r.immediate.body !== undefined ? Buffer.from(r.immediate.body) : Buffer.alloc(0)
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
  return {
    maxBodyBytes: ir.maxBodyBytes,
    async onHeaders (draft: ResponseDraft): Promise<InterceptResult> {
      if (mode.responseHeaderMode !== 'send') return { action: 'continue' }
      const r = await send({ response_headers: { headers: headerMapMessage({ ':status': String(draft.status) }, draft.headers), end_of_stream: !draft.hasBody } }, 'response_headers')
      const out = apply(draft, r, false)
      if (out === 'replaced') {
        active = false
        stream.finish()
        return { action: 'continue' }
      }
      if (active && !(mode.responseBodyMode === 'buffered' && draft.hasBody)) stream.finish()
      return out
    },
    wantsBody (): boolean {
      return active && !bodyReplaced && mode.responseBodyMode === 'buffered'
    },
    async onBody (draft: ResponseDraft): Promise<InterceptResult> {
      const r = await send({ response_body: { body: draft.body ?? Buffer.alloc(0), end_of_stream: true } }, 'response_body')
      const out = apply(draft, r, true)
      stream.finish()
      return out === 'replaced' ? { action: 'continue' } : out
    },
    onBodyTooLarge (): InterceptResult {
      return fail(`response body larger than maxBodyBytes (${ir.maxBodyBytes})`)
    }
  }
}
