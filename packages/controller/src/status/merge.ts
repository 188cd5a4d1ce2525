/**
 * Portico's status merged into what an object's status is now, so that what other
 * controllers wrote stays as they wrote it:
 *
 * - conditions: Portico's types (OWNED_CONDITION_TYPES) are replaced by Portico's, with
 *   lastTransitionTime carried over while a condition's status holds; every other type is
 *   kept untouched, in its place after Portico's.
 * - listeners (a Gateway's, a ListenerSet's): one per listener Portico reports, each with its
 *   conditions merged as above with the current entry of the same name.
 * - route parents and policy ancestors: entries whose controllerName is another controller's
 *   are kept; Portico's are replaced, each with its conditions merged with Portico's current
 *   entry for the same reference.
 *
 * Pure functions; status/writer.ts reads the object, merges, and writes it back with the
 * resourceVersion read, so a concurrent writer makes the write fail (409) and be redone from
 * a fresh read instead of being overwritten.
 */

import type { Condition } from '../translate/gateway-api.ts'
import { OWNED_CONDITION_TYPES, withTransitionTimes } from '../translate/conditions.ts'

const OWNED = new Set<string>(OWNED_CONDITION_TYPES)

/** Whether a condition type is one Portico writes (and so may replace or remove). */
export function ownedConditionType (type: string): boolean {
  return OWNED.has(type)
}

export function mergeConditions (ours: Condition[], current: Condition[] | undefined, now: string): Condition[] {
  const foreign = (current ?? []).filter(c => !OWNED.has(c.type))
  return [...withTransitionTimes(ours, current, now), ...foreign]
}

export function mergeListeners<L extends { name: string, conditions: Condition[] }> (ours: L[], current: Array<{ name: string, conditions?: Condition[] }> | undefined, now: string): L[] {
  return ours.map(l => ({ ...l, conditions: mergeConditions(l.conditions, current?.find(x => x.name === l.name)?.conditions, now) }))
}

/**
 * A route's `status.parents` or a policy's `status.ancestors` (each entry told apart by
 * `refField` and controllerName): other controllers' entries first, as they are, then ours.
 */
export function mergeEntries<R extends string, E extends Record<R, unknown> & { controllerName: string, conditions: Condition[] }> (ours: E[], current: Array<Record<R, unknown> & { controllerName: string, conditions?: Condition[] }> | undefined, controllerName: string, refField: R, now: string): Array<E | NonNullable<typeof current>[number]> {
  const existing = current ?? []
  const others = existing.filter(e => e.controllerName !== controllerName)
  const merged = ours.map(e => {
    const before = existing.find(x => x.controllerName === controllerName && JSON.stringify(x[refField]) === JSON.stringify(e[refField]))
    return { ...e, conditions: mergeConditions(e.conditions, before?.conditions, now) }
  })
  return [...others, ...merged]
}
