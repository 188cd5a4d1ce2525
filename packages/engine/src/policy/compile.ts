/**
 * Policy IR → compiled policies, in the fixed order they run within a phase. One table maps
 * each implemented kind to its compiler; kinds not implemented yet cannot appear in the IR
 * (the config schema and the controller's translation reject them).
 */

import type { CompiledPolicy, CompiledPolicySet, ImplementedPolicyKind, PolicyIRByKind, PolicySetIR } from './types.ts'
import { requestHeaderModifier, responseHeaderModifier } from './header-modifier.ts'
import { directResponse } from './direct-response.ts'

type Compilers = { [K in ImplementedPolicyKind]: (ir: PolicyIRByKind[K]) => CompiledPolicy }

const COMPILERS: Compilers = {
  requestHeaderModifier,
  responseHeaderModifier,
  directResponse
}

/**
 * Execution order within a phase: identity first, then admission, then request rewriting,
 * then local answers. Kinds from the effective-policy list that are not implemented yet are
 * listed for their future place.
 */
const ORDER: readonly ImplementedPolicyKind[] = [
  'requestHeaderModifier',
  'directResponse',
  'responseHeaderModifier'
]

export const EMPTY_POLICY_SET: CompiledPolicySet = Object.freeze({ policies: [], ir: {}, empty: true })

export function compilePolicySet (ir: PolicySetIR): CompiledPolicySet {
  const policies: CompiledPolicy[] = []
  for (const kind of ORDER) {
    const value = ir[kind]
    if (value === undefined) continue
    const compile = COMPILERS[kind] as (ir: unknown) => CompiledPolicy
    policies.push(compile(value))
  }
  return policies.length === 0 ? EMPTY_POLICY_SET : { policies, ir, empty: false }
}
