/**
 * The contract a policy implementation fulfils in the pipeline: compiled from its IR
 * (ir/policy.ts), it reads and changes a RequestContext and may answer the request. The
 * implementations live in policy/; the contract lives here, beside the RequestContext it
 * names, so the compiled config (request/compiled.ts) and the pipeline need not read policy/.
 */

import type { RequestContext } from './context.ts'
import type { PolicyKind, PolicySetIR } from '../ir/policy.ts'

/**
 * What a policy does to a request. `continue` lets the pipeline go on; `respond` ends the
 * request here with a local response (the trace still completes).
 */
export type PolicyOutcome =
  | { action: 'continue' }
  | { action: 'respond', status: number, body: string, headers?: Record<string, string | string[]>, reason: string }

/** A policy compiled from its IR, ready for the hot path. */
export interface CompiledPolicy {
  /** The effective-policy key the trace reports it under. */
  readonly kind: PolicyKind
  /** Runs in the request phase it is attached to. */
  onRequest?(ctx: RequestContext): PolicyOutcome | Promise<PolicyOutcome>
  /** Runs on the way back, before the response headers go to the client (reverse phase order). */
  onResponse?(ctx: RequestContext): void
}

/** A phase's compiled policies in execution order, plus the IR for the trace. */
export interface CompiledPolicySet {
  readonly policies: readonly CompiledPolicy[]
  readonly ir: PolicySetIR
  readonly empty: boolean
  /** Where attached policies came from (IR `policySources`), for the trace. */
  readonly sources?: Readonly<Record<string, string>>
}
