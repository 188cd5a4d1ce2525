/**
 * The backend call of an InferencePool (Gateway API Inference Extension): the pool's
 * endpoint picker (EPP) is asked which model server serves the request (inference/pick.ts,
 * over Envoy's ext_proc), and the request goes to exactly that endpoint:
 *
 * - the picker's list (`x-gateway-destination-endpoint`, header or `envoy.lb` metadata) is an
 *   ordered fallback list: a connection failure to one endpoint sends the request to the next
 *   (the body is read whole for the picker, so it can be sent again); nothing is retried once
 *   an endpoint answered;
 * - an entry that is not `ip:port` or not an endpoint of the pool is refused (traced, never
 *   connected to); a list with no endpoint of the pool, a huge or malformed header mutation,
 *   an error, a closed stream or no answer within the timeout are the picker failing;
 * - a failing picker: FailClose answers 503 `endpoint picker unavailable`; FailOpen sends the
 *   request to the pool's endpoints round robin (the same fallback down the rotation);
 * - an immediate response of the picker (503 no endpoint, 429 shed) is the client's answer;
 * - when the endpoint's answer comes, its headers go to the picker with the served endpoint
 *   in metadata_context["envoy.lb"]["x-gateway-destination-endpoint-served"], and the
 *   picker's header changes apply to the response; the response body goes to it only when
 *   it asked (mode_override), in the mode it asked for — the same response phase as the
 *   extProc policy's (responsePhase below).
 *
 * The route's retry and mirrors do not apply to a pool: its retry is the fallback list.
 */

import type { Dispatcher } from 'undici'
import type { RequestContext } from '../request/context.ts'
import type { PipelineRuntime } from './run.ts'
import type { BackendIR, InferencePoolIR } from '../ir/types.ts'
import type { CallWrapper } from '../http/upstream-call.ts'
import { addResponseInterceptor, type ResponseInterceptor } from '../http/response-intercept.ts'
import { extProcResponseInterceptor } from '../http/ext-proc-response-phase.ts'
import { bodyReadFailure, readRequestBody, requestHasBody } from '../http/request-body.ts'
import { ExtProcStream, type BodyMode } from '../traffic/ext-proc-grpc.ts'
import { classifyFailure } from '../http/call-failure.ts'
import { traceCallResult } from '../trace/backend-call.ts'
import { callTraceHeaders, endDecisionSpan, grpcClientAttributes, startChildSpan, type SpanAttributes } from '../trace/otel.ts'
import { callBackend } from './backend-call.ts'
import { respondLocal } from './respond.ts'
import { performance } from '../util/clock.ts'
import { endpointLabel, endpointList, rotation } from '../inference/endpoints.ts'
import { pickerClient } from '../inference/picker-client.ts'
import { askPicker, checkMutation, DESTINATION_ENDPOINT, DESTINATION_NAMESPACE, keptFromPicker, SERVED_KEY } from '../inference/pick.ts'
import type { InferencePickEvent } from '../trace/events.ts'

const UNAVAILABLE = 'endpoint picker unavailable'
/** The answer when the picker fails holding part of a response body (full duplex). */
const PICKER_FAILED = 'endpoint picker failed'

interface PoolState {
  /** The pool's endpoints, canonical `ip:port`, in config order. */
  labels: string[]
  set: Set<string>
  /** One single-endpoint backend per endpoint: its own connection pool in UpstreamPools. */
  backends: Map<string, BackendIR>
  /** FailOpen round robin. */
  next: number
  /** The pick span's attributes (copied into each span): built once, not per request. */
  spanAttrs: SpanAttributes | null
}

/** Per pool backend of a config version (the IR object lives as long as the version). */
const POOLS = new WeakMap<BackendIR, PoolState>()

function poolState (pool: BackendIR): PoolState {
  let s = POOLS.get(pool)
  if (s === undefined) {
    const labels = pool.endpoints.map(endpointLabel)
    s = { labels, set: new Set(labels), backends: new Map(), next: 0, spanAttrs: null }
    POOLS.set(pool, s)
  }
  return s
}

/** The backend of one endpoint of the pool: the pool's settings, that endpoint only. */
function endpointBackend (pool: BackendIR, state: PoolState, label: string): BackendIR {
  let b = state.backends.get(label)
  if (b === undefined) {
    const e = pool.endpoints[state.labels.indexOf(label)]!
    b = {
      key: `${pool.key}#${label}`,
      kind: 'static',
      name: pool.name,
      protocol: pool.protocol,
      ...(pool.h2c === true ? { h2c: true } : {}),
      ...(pool.h2 === true ? { h2: true } : {}),
      ...(pool.tls !== undefined ? { tls: pool.tls } : {}),
      endpoints: [{ host: e.host, port: e.port }],
      target: label
    }
    state.backends.set(label, b)
  }
  return b
}

/**
 * Every endpoint backend of a pool (what UpstreamPools.sync is given besides the config's
 * backends): a reload that keeps the pool keeps its endpoints' connections.
 */
export function poolEndpointBackends (pool: BackendIR): BackendIR[] {
  const state = poolState(pool)
  return state.labels.map(label => endpointBackend(pool, state, label))
}

/**
 * Failures to connect: the endpoint never got the request, so the next endpoint of the list
 * may have it. A connection that broke after the request went out (reset, closed) is not
 * among them: the model server may have started on it, and an inference is not replayed.
 */
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT'])

export async function callInferencePool (rt: PipelineRuntime, ctx: RequestContext): Promise<void> {
  const pool = ctx.backend!
  const ir = pool.inferencePool!
  const picker = ir.picker
  const state = poolState(pool)
  const emit: Emit = (e, warn = false) => {
    ctx.tracer?.emit({ type: 'inferencePick', pool: ir.name, picker: picker.target, ...e }, { severity: warn ? 'warn' : 'info' })
  }

  // The picker reads the model and prompt from the body: read whole, bounded.
  if (ctx.upgrade === null && (ctx.requestBody !== null || requestHasBody(ctx.req.headers))) {
    const read = await readRequestBody(ctx, { maxBytes: picker.maxBodyBytes, whenTooLarge: 'drain' })
    if (read === 'too-large') return respondLocal(rt, ctx, 413, 'payload too large', 'InvalidRequest', `request body larger than the endpoint picker's limit (${picker.maxBodyBytes} bytes)`)
    if (read instanceof Error) {
      const f = bodyReadFailure(read)
      return respondLocal(rt, ctx, f.status, f.body, f.reason, `reading the request body: ${read.message}`, f.headers)
    }
  }
  if (ctx.res.destroyed) return

  const stream = new ExtProcStream(pickerClient(picker), picker.timeoutMs)
  ctx.res.once('close', () => stream.close())
  const span = startChildSpan(ctx, 'envoy.service.ext_proc.v3.ExternalProcessor/Process inferencePick', state.spanAttrs ??= { ...grpcClientAttributes('envoy.service.ext_proc.v3.ExternalProcessor', 'Process', picker.target), 'portico.inference_pool': ir.name })
  // The stream opens with the pick: the picker's spans join the request's trace under this one.
  stream.traceHeaders = callTraceHeaders(ctx, span)
  const started = performance.now()
  const answer = await askPicker(stream, ctx, {
    pseudo: { ':authority': ctx.host, ':method': ctx.method, ':path': ctx.pathAndQuery, ':scheme': ctx.scheme },
    headers: ctx.headers,
    subset: ir.subsetHint ? state.labels : null,
    deadline: Date.now() + picker.timeoutMs,
    maxBodyBytes: picker.maxBodyBytes
  })
  const latencyMs = performance.now() - started
  if (ctx.res.destroyed) {
    stream.close()
    endDecisionSpan(span, 'abandoned')
    return
  }

  let list: string[]
  let failure: string | null = null
  let refused: string[] = []
  if (answer.kind === 'immediate') {
    stream.close()
    endDecisionSpan(span, 'immediate')
    ctx.inferencePick = { pool: ir.name, outcome: 'immediate', pickerSeconds: latencyMs / 1000, endpoint: null, served: false, fallbacks: [] }
    emit({ outcome: 'immediate', status: answer.status, latencyMs, ...(answer.details !== '' ? { reason: answer.details } : {}) }, true)
    ctx.responseBody = answer.body
    return respondLocal(rt, ctx, answer.status, '', 'EndpointPicker', `endpoint picker ${picker.target} answered ${answer.status}${answer.details !== '' ? `: ${answer.details}` : ''}`, answer.headers)
  }
  if (answer.kind === 'failed') failure = answer.reason
  else {
    const parsed = endpointList(answer.value, state.set)
    if (!parsed.ok) failure = `unusable pick "${printable(answer.value)}": ${parsed.reason}`
    else {
      refused = parsed.refused
      list = parsed.endpoints
    }
  }

  if (failure !== null) {
    stream.close()
    endDecisionSpan(span, 'error', failure)
    if (picker.failureMode === 'FailClose') {
      ctx.inferencePick = { pool: ir.name, outcome: 'failClose', pickerSeconds: latencyMs / 1000, endpoint: null, served: false, fallbacks: [] }
      emit({ outcome: 'failClose', latencyMs, reason: failure }, true)
      return respondLocal(rt, ctx, 503, UNAVAILABLE, 'EndpointPicker', `endpoint picker ${picker.target} of pool ${ir.name} failed: ${failure}`)
    }
    list = rotation(state.labels, state.next)
    state.next = (state.next + 1) % state.labels.length
    ctx.inferencePick = { pool: ir.name, outcome: 'failOpen', pickerSeconds: latencyMs / 1000, endpoint: null, served: false, fallbacks: [] }
    emit({ outcome: 'failOpen', endpoint: list[0], endpoints: list, source: 'gateway', latencyMs, reason: failure }, true)
  } else {
    endDecisionSpan(span, 'picked')
    const picked = answer as Extract<typeof answer, { kind: 'picked' }>
    // The picker's header mutations and body are in ctx already; the pod gets the pick as Envoy's header mutation gives it.
    ctx.headers[DESTINATION_ENDPOINT] = list!.join(',')
    ctx.inferencePick = { pool: ir.name, outcome: 'picked', pickerSeconds: latencyMs / 1000, endpoint: null, served: false, fallbacks: [] }
    emit({ outcome: 'picked', endpoint: list![0], endpoints: list!, source: picked.source, latencyMs, ...(refused.length > 0 ? { refused, reason: 'refused: not endpoints of the pool, never connected to' } : {}) }, refused.length > 0)
  }

  // The picker hears the response's headers (and which endpoint served); with FailOpen after a failure it is gone.
  if (failure === null) addResponseInterceptor(ctx, responsePhase(ctx, stream, picker, (answer as Extract<typeof answer, { kind: 'picked' }>).responseBodyMode, emit))
  callEndpoint(rt, ctx, pool, state, list!, 0, emit)
}

/** Calls endpoint `i` of `list`; a connection failure moves on to `i + 1`. */
function callEndpoint (rt: PipelineRuntime, ctx: RequestContext, pool: BackendIR, state: PoolState, list: string[], i: number, emit: Emit): void {
  const label = list[i]!
  const facts = ctx.inferencePick!
  facts.endpoint = label
  ctx.backend = endpointBackend(pool, state, label)
  const wrap: CallWrapper = (inner, release) => {
    let dropped = false
    let passed = false
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: (c, context) => inner.onRequestStart?.(c, context),
      onRequestUpgrade: (c, status, headers, socket) => {
        passed = true
        facts.served = true
        inner.onRequestUpgrade?.(c, status, headers, socket)
      },
      onResponseStart: (c, status, headers, message) => {
        passed = true
        facts.served = true
        inner.onResponseStart?.(c, status, headers, message)
      },
      onResponseData: (c, chunk) => { if (!dropped) inner.onResponseData?.(c, chunk) },
      onResponseEnd: (c, trailers) => { if (!dropped) inner.onResponseEnd?.(c, trailers) },
      onResponseError: (c, err) => {
        if (dropped) return
        const code = (err as NodeJS.ErrnoException).code ?? ''
        if (!passed && i + 1 < list.length && CONNECT_FAILURES.has(code) && !ctx.done && !ctx.res.destroyed) {
          dropped = true
          release()
          const detail = classifyFailure(err, null).detail
          traceCallResult(ctx, null, detail, 'warn')
          facts.fallbacks.push(label)
          emit({ outcome: 'fallback', from: label, endpoint: list[i + 1], reason: detail }, true)
          callEndpoint(rt, ctx, pool, state, list, i + 1, emit)
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
 * The response side, on extProc's response phase (http/ext-proc-response-phase.ts): the
 * endpoint's headers go to the picker with the endpoint that served
 * (metadata_context["envoy.lb"]["x-gateway-destination-endpoint-served"]), its header changes
 * apply (checked as the pick's, the framing left alone); the body goes to it only when it
 * asked (mode_override) — streamed and full duplex chunk by chunk as the endpoint sends it,
 * buffered held whole (at most maxBodyBytes). A picker failing before any body went to it is
 * traced and the endpoint's answer stands (the request was served); once it holds bytes of
 * a full-duplex body the answer fails (500 before the client's first byte, cut after it).
 * The gateway's own answer (every endpoint failed) does not go to the picker.
 */
function responsePhase (ctx: RequestContext, stream: ExtProcStream, picker: InferencePoolIR['picker'], responseBodyMode: BodyMode, emit: Emit): ResponseInterceptor {
  const facts = ctx.inferencePick!
  return extProcResponseInterceptor({
    stream,
    modes: { responseHeaderMode: 'send', responseBodyMode },
    maxBodyBytes: picker.maxBodyBytes,
    failureMode: 'failOpen',
    target: picker.target,
    failed: reason => ({ action: 'fail', status: 500, body: PICKER_FAILED, reason: 'EndpointPicker', error: `endpoint picker ${picker.target} failed on the response: ${reason}` }),
    trace: (_result, _details, problem) => {
      if (problem !== undefined) emit({ outcome: 'picked', endpoint: facts.endpoint ?? undefined, reason: `response not processed by the picker: ${problem}` }, true)
    },
    applies: () => facts.served && facts.endpoint !== null,
    metadataContext: () => ({ [DESTINATION_NAMESPACE]: { [SERVED_KEY]: facts.endpoint } }),
    checkMutation: m => {
      const checked = checkMutation(m)
      return typeof checked === 'string' ? checked : null
    },
    keeps: keptFromPicker
  })
}

type Emit = (e: Omit<InferencePickEvent, 'type' | 'pool' | 'picker'>, warn?: boolean) => void

function printable (s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s).slice(1, -1)
}
