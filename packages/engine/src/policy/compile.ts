/**
 * Policy IR → compiled policies, in the fixed order they run within a phase. One table maps
 * each implemented kind to its compiler; kinds not implemented yet cannot appear in the IR
 * (the config schema and the controller's translation reject them).
 */

import type { CompiledPolicy, CompiledPolicySet, ImplementedPolicyKind, PolicyIRByKind, PolicySetIR } from './types.ts'
import { requestHeaderModifier, responseHeaderModifier } from './header-modifier.ts'
import { directResponse } from './direct-response.ts'
import { jwtAuth, mcpAuthentication } from './jwt-auth.ts'
import { authorization } from './authorization.ts'
import { basicAuth } from './basic-auth.ts'
import { apiKey } from './api-key.ts'
import { extAuthz } from './ext-authz.ts'
import { oidc } from './oidc.ts'
import { PolicyServices } from './services.ts'

type Compilers = { [K in ImplementedPolicyKind]: (ir: PolicyIRByKind[K], services: PolicyServices) => CompiledPolicy }

const COMPILERS: Compilers = {
  requestHeaderModifier,
  responseHeaderModifier,
  directResponse,
  jwt: jwtAuth,
  mcpAuthentication,
  authorization,
  basicAuth,
  apiKey,
  extAuthz,
  oidc
}

/**
 * Execution order within a phase: identity first, then admission, then request rewriting,
 * then local answers. Kinds from the effective-policy list that are not implemented yet are
 * listed for their future place.
 */
const ORDER: readonly ImplementedPolicyKind[] = [
  'mcpAuthentication',
  'jwt',
  'oidc',
  'basicAuth',
  'apiKey',
  'extAuthz',
  'authorization',
  'requestHeaderModifier',
  'directResponse',
  'responseHeaderModifier'
]

export const EMPTY_POLICY_SET: CompiledPolicySet = Object.freeze({ policies: [], ir: {}, empty: true })

export function compilePolicySet (ir: PolicySetIR, services: PolicyServices = new PolicyServices()): CompiledPolicySet {
  const policies: CompiledPolicy[] = []
  for (const kind of ORDER) {
    const value = ir[kind]
    if (value === undefined) continue
    const compile = COMPILERS[kind] as (ir: unknown, services: PolicyServices) => CompiledPolicy
    policies.push(compile(value, services))
  }
  return policies.length === 0 ? EMPTY_POLICY_SET : { policies, ir, empty: false }
}
