/** Status conditions with the Gateway API's types and reasons. */

import type { Condition } from './gateway-api.ts'

export function condition (type: string, ok: boolean, reason: string, message: string, generation: number | undefined): Condition {
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
