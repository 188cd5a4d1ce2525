/**
 * Failover across the providers of an `ai` backend's `groups` (agentgateway's priority
 * groups). Each provider is a backend of its own (its adapter, key, format, usage) with
 * passive health on (http/endpoint-balancer.ts: 5xx, 429, connection errors and backend
 * timeouts count; ejections back off). A request goes to the first group, in priority order,
 * that has a provider not ejected, round robin among those; when that provider fails before
 * the client got a byte, the route's try loop (pipeline/resiliency.ts) drops its answer and
 * sends the request to the next provider chosen the same way, never one it tried already --
 * re-encoded in that provider's format (llm/request.ts keeps the client's body).
 */

import type { BackendIR } from '../ir/types.ts'
import type { CompiledBackendRef } from '../request/compiled.ts'

/** Failover groups of a route's backend choice, in priority order. */
export type ProviderGroups = CompiledBackendRef[][]

/** Round robin position per group (the groups of a config version live as long as it). */
const turns = new WeakMap<CompiledBackendRef[], number>()

function usable (ref: CompiledBackendRef): boolean {
  return ref.backend !== undefined && ref.backend.kind === 'ai'
}

/**
 * The provider the next try goes to: in the first group that has one, a provider not in
 * `tried` and not ejected (`healthy`), round robin within the group. Null when none is left.
 * `peek`: only whether there is one (the group's turn does not move).
 */
export function chooseProvider (groups: ProviderGroups, tried: ReadonlySet<CompiledBackendRef>, healthy: (backend: BackendIR) => boolean, peek = false): CompiledBackendRef | null {
  for (const group of groups) {
    const n = group.length
    const start = turns.get(group) ?? 0
    for (let i = 0; i < n; i++) {
      const at = (start + i) % n
      const ref = group[at]!
      if (tried.has(ref) || !usable(ref) || !healthy(ref.backend!)) continue
      if (!peek) turns.set(group, (at + 1) % n)
      return ref
    }
  }
  return null
}

/**
 * The provider a request starts with. When passive health has ejected every provider, the
 * first one: its call answers 503 `no healthy backends`, as a host backend whose endpoints
 * are all ejected does.
 */
export function firstProvider (groups: ProviderGroups, healthy: (backend: BackendIR) => boolean): CompiledBackendRef {
  return chooseProvider(groups, new Set(), healthy) ?? groups[0]![0]!
}

/** How many providers the groups hold: a request tries each at most once. */
export function providerCount (groups: ProviderGroups): number {
  let n = 0
  for (const g of groups) n += g.length
  return n
}
