/**
 * The pipeline's side of the backend call (http/upstream-call.ts). http/ does not import
 * the pipeline: the call gets from here the hooks through which it hands the answer back —
 * the response policies and trace snapshots when the backend's head arrives, the proxy's own
 * answer when the call cannot be made or fails — and the optional handlers this request
 * needs (an `ai` backend's usage reader; retries pass theirs as `outer`).
 */

import type { RequestContext } from '../request/context.ts'
import type { PipelineRuntime } from './run.ts'
import type { UpstreamHooks } from '../http/call-context.ts'
import { callUpstream, type CallOptions, type CallWrapper } from '../http/upstream-call.ts'
import { withLlmUsage } from '../llm/usage-handler.ts'
import { applyResponsePolicies, finishResponse, respondLocal } from './respond.ts'
import { responseSnapshot } from '../trace/snapshot.ts'

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

const LLM_CALL: CallOptions<RequestContext> = { inner: withLlmUsage }

/** Calls `ctx.backend`; `outer` wraps the call's handler (retries). */
export function callBackend (rt: PipelineRuntime, ctx: RequestContext, outer?: CallWrapper): void {
  const llm = ctx.llm !== null
  const options = outer !== undefined ? { inner: llm ? withLlmUsage : undefined, outer } : llm ? LLM_CALL : undefined
  callUpstream(rt, ctx, hooks, options)
}
