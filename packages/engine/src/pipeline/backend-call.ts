/**
 * The pipeline's side of the backend call (http/upstream-call.ts). http/ does not import
 * the pipeline: the call gets from here the hooks through which it hands the answer back --
 * the response policies and trace snapshots when the backend's head arrives, the proxy's own
 * answer when the call cannot be made or fails -- and the optional handlers this request
 * needs (an `ai` backend's usage reader; retries pass theirs as `outer`).
 */

import type { RequestContext } from '../request/context.ts'
import type { BackendIR } from '../ir/types.ts'
import type { PipelineRuntime } from './run.ts'
import type { UpstreamHooks } from '../http/call-context.ts'
import { callUpstream, type CallOptions, type CallWrapper } from '../http/upstream-call.ts'
import { llm as llmModules } from './llm-modules.ts'
import { applyResponsePolicies, finishResponse, respondLocal } from './respond.ts'
import { responseSnapshot } from '../trace/snapshot.ts'
import { setBackendCallAttributes, startChildSpan, urlOrigin, type SpanAttributes } from '../trace/otel.ts'

/** One constant object for every call: its functions take the runtime and context. */
const hooks: UpstreamHooks<PipelineRuntime, RequestContext> = {
  respondLocal,
  responseHead (rt, ctx) {
    ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'raw response', requestState: responseSnapshot(ctx, rt.env, true) })
    applyResponsePolicies(ctx, 'backend')
    ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'backend response ready', requestState: responseSnapshot(ctx, rt.env, false) })
    finishResponse(rt, ctx, 'outer')
  },
  upgradeHead (rt, ctx) {
    // The 101 goes to the client as the backend sent it: no response policies.
    ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'raw response', requestState: responseSnapshot(ctx, rt.env, true) })
    ctx.tracer?.emit({ type: 'responseSnapshot', stage: 'final response', requestState: responseSnapshot(ctx, rt.env, false) })
  }
}

/** An LLM call's options, made at the first (llm/ is loaded by then: its config was compiled). */
let llmCall: CallOptions<RequestContext> | undefined
/** The backend call's span starts bare; its attributes come as a layout (setBackendCallAttributes). */
const NO_ATTRIBUTES: SpanAttributes = {}

/** Calls `ctx.backend`; `outer` wraps the call's handler (retries). */
export function callBackend (rt: PipelineRuntime, ctx: RequestContext, outer?: CallWrapper): void {
  // An LLM call, or a model list whose answer is rewritten for the client (no usage to count).
  // Only an AI backend's request has an answer rewrite, and llm/ is loaded before any such
  // request (compile time): a plain request never asks llm/.
  const llm = ctx.llm !== null || (llmModules.loaded() && llmModules().llmAnswerRewrite(ctx) !== undefined)
  if (ctx.span !== null) startCallSpan(ctx, ctx.span)
  const options = outer !== undefined ? { inner: llm ? llmModules().withLlmUsage : undefined, outer } : llm ? (llmCall ??= { inner: llmModules().withLlmUsage }) : undefined
  callUpstream(rt, ctx, hooks, options)
}

/**
 * Each backend's host, port and the start of its `url.full` as its call spans give them,
 * worked out once (the IR does not change).
 */
const ADDRESSES = new WeakMap<BackendIR, { host: string, port: number, origin: string }>()

function backendAddress (backend: BackendIR): { host: string, port: number, origin: string } {
  let address = ADDRESSES.get(backend)
  if (address === undefined) {
    const at = backend.target.lastIndexOf(':')
    const { host, port } = at > 0
      ? { host: backend.target.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(backend.target.slice(at + 1)) }
      : { host: backend.target, port: backend.protocol === 'https' ? 443 : 80 }
    address = { host, port, origin: urlOrigin(backend.protocol, host, port) }
    ADDRESSES.set(backend, address)
  }
  return address
}

/**
 * The backend call's client span (an `ai` backend's is the GenAI span) and the trace
 * context the backend gets: the call's span when the request is recorded, else the
 * request's own (unsampled, so the backend does not start a trace of its own).
 */
function startCallSpan (ctx: RequestContext, span: NonNullable<RequestContext['span']>): void {
  if (!span.recording) {
    // Not recorded: no client span, so nothing to describe; the backend still gets the trace.
    span.inject(ctx.headers, null)
    return
  }
  const backend = ctx.backend!
  const { host, port, origin } = backendAddress(backend)
  const attempt = ctx.upstreamAttempts++
  const call = startChildSpan(ctx, ctx.llm !== null ? llmModules().llmSpanName(ctx.llm) : ctx.method, NO_ATTRIBUTES)
  if (call !== null) {
    setBackendCallAttributes(call, ctx.method, { scheme: backend.protocol, host, port, pathAndQuery: ctx.pathAndQuery, origin }, attempt, backend.name)
    if (ctx.llm !== null) call.setAttributes(llmModules().llmRequestAttributes(ctx.llm))
  }
  ctx.callSpan?.end()
  ctx.callSpan = call
  span.inject(ctx.headers, call)
}
