import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { DirectResponseIR } from '../ir/policy.ts'

/** Answers from the proxy with a fixed status, body and headers; no backend is called. */
export function directResponse (ir: DirectResponseIR): CompiledPolicy {
  const outcome: PolicyOutcome = {
    action: 'respond',
    status: ir.status,
    body: ir.body ?? '',
    headers: Object.fromEntries(Object.entries(ir.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
    reason: 'DirectResponse'
  }
  return {
    kind: 'directResponse',
    onRequest: () => outcome
  }
}
