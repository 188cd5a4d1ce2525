/**
 * Listener filters (Gateway API `listener.filters.requests`, GatewayListenerFilters): an
 * ordered list of external authorization calls run on every request of a listener before
 * its gateway policies and before route matching. They run in the order given, each seeing
 * the header changes of those before it; the first that denies answers. Header changes an
 * allow makes are what route matching reads (ctx.routingHeaders) -- except Host and
 * :authority, which no filter can change (so the listener, chosen by them, is never chosen
 * again). Route matching happens once, after the last filter.
 */

import type { ListenerIR } from '../ir/types.ts'
import type { CompiledPolicySet } from '../request/policy.ts'
import type { PolicyServices } from '../policy/services.ts'
import { lazyRequire } from '../util/lazy-require.ts'

// ext_authz and its clients load with the first listener that has filters (as with the policy:
// policy/compile.ts). Paths are util/'s (lazyRequire).
const extAuthzModule = lazyRequire<typeof import('../policy/ext-authz.ts')>('../policy/ext-authz.ts')

/**
 * The filters as a policy set run like a phase (in order, stopping at the first answer; their
 * response hooks add the response headers a service asked for). Null: none.
 */
export function compileListenerFilters (ir: ListenerIR, services: PolicyServices): CompiledPolicySet | null {
  const requests = ir.filters?.requests ?? []
  if (requests.length === 0) return null
  const { extAuthz } = extAuthzModule()
  const policies = requests.map((f, i) => extAuthz(f.extAuthz, services, { label: `listener filter ${i + 1} of ${requests.length}`, routing: true }))
  return { policies, ir: {}, empty: false }
}
