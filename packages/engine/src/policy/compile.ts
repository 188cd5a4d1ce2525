/**
 * Policy IR -> compiled policies, in the fixed order they run within a phase. One table maps
 * each implemented kind to its compiler; kinds not implemented yet cannot appear in the IR
 * (the config schema and the controller's translation reject them).
 */

import type { CompiledPolicy, CompiledPolicySet } from '../request/policy.ts'
import type { ImplementedPolicyKind, PolicyIRByKind, PolicySetIR } from '../ir/policy.ts'
import { requestHeaderModifier, responseHeaderModifier } from './header-modifier.ts'
import { directResponse } from './direct-response.ts'
import { PolicyServices } from './services.ts'
import { requestRedirect } from './request-redirect.ts'
import { urlRewrite } from './url-rewrite.ts'
import { cors } from './cors.ts'
import { lazyRequire } from '../util/lazy-require.ts'

// The kinds with much code of their own -- ext_proc (its gRPC client, codec and request and
// response phases), the rate limit service's client, OIDC -- load with the first config that
// has one, when it is compiled (never by a request); a config without them never loads them
// (issue 54, start-up). Paths are util/'s (lazyRequire).
const extProcModule = lazyRequire<typeof import('./ext-proc.ts')>('../policy/ext-proc.ts')
const remoteRateLimitModule = lazyRequire<typeof import('./remote-rate-limit.ts')>('../policy/remote-rate-limit.ts')
const oidcModule = lazyRequire<typeof import('./oidc.ts')>('../policy/oidc.ts')
// So do the kinds a config of plain routes does not use -- JWT (its verifier and key sets), authorization, basic auth, API keys,
// ext_authz (its gRPC and HTTP clients), the local rate limit, transformations (CEL), CSRF:
// each data-plane worker holds every module it loads once more, in its own isolate (its
// source, bytecode and Node's compile-cache entry; docs/multicore.md, Memory).
const jwtAuthModule = lazyRequire<typeof import('./jwt-auth.ts')>('../policy/jwt-auth.ts')
const authorizationModule = lazyRequire<typeof import('./authorization.ts')>('../policy/authorization.ts')
const basicAuthModule = lazyRequire<typeof import('./basic-auth.ts')>('../policy/basic-auth.ts')
const apiKeyModule = lazyRequire<typeof import('./api-key.ts')>('../policy/api-key.ts')
const extAuthzModule = lazyRequire<typeof import('./ext-authz.ts')>('../policy/ext-authz.ts')
const localRateLimitModule = lazyRequire<typeof import('./local-rate-limit.ts')>('../policy/local-rate-limit.ts')
const transformationModule = lazyRequire<typeof import('./transformation.ts')>('../policy/transformation.ts')
const csrfModule = lazyRequire<typeof import('./csrf.ts')>('../policy/csrf.ts')

type Compilers = { [K in ImplementedPolicyKind]: (ir: PolicyIRByKind[K], services: PolicyServices) => CompiledPolicy }

const COMPILERS: Compilers = {
  requestHeaderModifier,
  responseHeaderModifier,
  directResponse,
  jwt: (ir, services) => jwtAuthModule().jwtAuth(ir, services),
  mcpAuthentication: (ir, services) => jwtAuthModule().mcpAuthentication(ir, services),
  authorization: ir => authorizationModule().authorization(ir),
  basicAuth: ir => basicAuthModule().basicAuth(ir),
  apiKey: ir => apiKeyModule().apiKey(ir),
  extAuthz: (ir, services) => extAuthzModule().extAuthz(ir, services),
  oidc: (ir, services) => oidcModule().oidc(ir, services),
  remoteRateLimit: (ir, services) => remoteRateLimitModule().remoteRateLimit(ir, services),
  extProc: (ir, services) => extProcModule().extProc(ir, services),
  localRateLimit: (ir, services) => localRateLimitModule().localRateLimit(ir, services),
  transformation: ir => transformationModule().transformation(ir),
  csrf: ir => csrfModule().csrf(ir),
  requestRedirect,
  urlRewrite,
  cors
}

/**
 * Execution order within a phase: identity first, then admission, then request rewriting,
 * then local answers. Kinds from the effective-policy list that are not implemented yet are
 * listed for their future place.
 */
const ORDER: readonly ImplementedPolicyKind[] = [
  // CORS first: a preflight carries no credentials, and every answer (a 401, a 429) needs
  // the CORS headers for the browser to read it. Then the cheap admission checks.
  'cors',
  'csrf',
  'localRateLimit',
  'mcpAuthentication',
  'jwt',
  'oidc',
  'basicAuth',
  'apiKey',
  'extAuthz',
  'authorization',
  // After identity and authorization: descriptors may use jwt claims, refused requests use no quota.
  'remoteRateLimit',
  'urlRewrite',
  'requestHeaderModifier',
  'transformation',
  // The processor sees the request as it would go upstream.
  'extProc',
  // The local answers last, after extProc (as Envoy's router answers a route's redirect or
  // direct response behind its filters): the processor sees the request and their answer.
  'requestRedirect',
  'directResponse',
  'responseHeaderModifier'
]

export const EMPTY_POLICY_SET: CompiledPolicySet = Object.freeze({ policies: [], ir: {}, empty: true })

export function compilePolicySet (ir: PolicySetIR, services: PolicyServices = new PolicyServices(), sources?: Record<string, string>): CompiledPolicySet {
  const policies: CompiledPolicy[] = []
  for (const kind of ORDER) {
    const value = ir[kind]
    if (value === undefined) continue
    const compile = COMPILERS[kind] as (ir: unknown, services: PolicyServices) => CompiledPolicy
    policies.push(compile(value, services))
  }
  if (policies.length === 0) return EMPTY_POLICY_SET
  return sources !== undefined ? { policies, ir, empty: false, sources } : { policies, ir, empty: false }
}
