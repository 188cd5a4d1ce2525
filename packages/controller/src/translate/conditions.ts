/** Status conditions with the Gateway API's types and reasons. */

import type { Condition } from './gateway-api.ts'

/** A Gateway's place in the Istio mesh (status/mesh.ts). */
export const MESH_CONDITION = 'portico.dev/Mesh'

/**
 * The condition types Portico writes, on every object it writes status to (GatewayClasses,
 * Gateways and their listeners, ListenerSets, route parents, policy ancestors). Only these
 * are Portico's: any other type on those objects belongs to another controller and is kept
 * as it is (status/merge.ts). `condition` takes only these, so a type Portico starts writing
 * is owned, and removed when Portico stops writing it, without another list to keep.
 */
export const OWNED_CONDITION_TYPES = ['Accepted', 'Programmed', 'ResolvedRefs', 'Conflicted', 'InsecureFrontendValidationMode', MESH_CONDITION] as const
export type OwnedConditionType = typeof OWNED_CONDITION_TYPES[number]

export function condition (type: OwnedConditionType, ok: boolean, reason: string, message: string, generation: number | undefined): Condition {
  const c: Condition = { type, status: ok ? 'True' : 'False', reason, message }
  if (generation !== undefined) c.observedGeneration = generation
  return c
}

/**
 * Keeps lastTransitionTime when a condition's status did not change (the API requires it to
 * move only on transitions), and sets it to `now` otherwise.
 */
export function withTransitionTimes (next: Condition[], previous: Condition[] | undefined, now: string): Condition[] {
  return next.map(c => {
    const before = previous?.find(p => p.type === c.type)
    return { ...c, lastTransitionTime: before !== undefined && before.status === c.status && before.lastTransitionTime !== undefined ? before.lastTransitionTime : now }
  })
}
