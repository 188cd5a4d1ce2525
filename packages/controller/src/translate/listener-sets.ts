/**
 * ListenerSets (GEP-1713): listeners declared outside a Gateway, merged into it. A Gateway
 * takes them only from the namespaces its spec.allowedListeners names (none by default).
 * The merged listeners are checked for conflicts by precedence — the Gateway's own listeners
 * first, then ListenerSets older first (then by namespace/name), each in its list order — and
 * a listener that conflicts with one of higher precedence is the one rejected, so adding a
 * ListenerSet never breaks what already works. Routes attach to a ListenerSet's listeners
 * through a parentRef of kind ListenerSet (routes.ts); a Gateway parentRef reaches only the
 * Gateway's own listeners. The valid listeners are served by the Gateway's proxies
 * (gatewayIR), and each ListenerSet gets its own status.
 */

import type { ListenerIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, matchesSelector, nsName, type AllowedListeners, type Condition, type ListenerSet, type Namespace, type Secret, type Service } from './gateway-api.ts'
import { listenerState, servicePorts, tlsModeOf, type GatewayState, type ListenerState } from './gateways.ts'
import type { ReferenceGrants } from './reference-grants.ts'
import type { GatewayResult, ListenerStatus } from './status.ts'
import { condition } from './conditions.ts'

export interface ListenerSetState {
  ls: ListenerSet
  /** `namespace/name` of the parent Gateway. */
  gateway: string
  gatewayState: GatewayState
  /** Why the ListenerSet is not accepted (its Accepted reason), or null when it is. */
  problem: { reason: 'NotAllowed' | 'ParentNotAccepted' | 'ListenersNotValid', message: string } | null
  /** Its listeners; none when the Gateway does not take the ListenerSet at all. */
  listeners: ListenerState[]
}

export interface ListenerSetResult {
  namespace: string
  name: string
  uid?: string
  generation: number | undefined
  /** `namespace/name` of the parent Gateway: the status is written with the Gateway's (Programmed follows it). */
  gateway: string
  accepted: boolean
  /** Accepted only: Programmed needs the proxies' ACK of the Gateway's config (listenerSetProgrammed). */
  conditions: Condition[]
  listeners: ListenerStatus[]
}

/** Older first, then namespace/name: the precedence between ListenerSets. */
function byAge (a: ListenerSet, b: ListenerSet): number {
  const ta = a.metadata.creationTimestamp ?? ''
  const tb = b.metadata.creationTimestamp ?? ''
  return ta < tb ? -1 : ta > tb ? 1 : nsName(a.metadata).localeCompare(nsName(b.metadata))
}

/** Does the Gateway's spec.allowedListeners take ListenerSets from this namespace? */
function allowedBy (allowed: AllowedListeners | undefined, gwNamespace: string, lsNamespace: string, namespaces: Map<string, Namespace>): boolean {
  const from = allowed?.namespaces?.from ?? 'None'
  if (from === 'All') return true
  if (from === 'Same') return lsNamespace === gwNamespace
  if (from === 'Selector') {
    const selector = allowed?.namespaces?.selector
    return selector !== undefined && matchesSelector(namespaces.get(lsNamespace)?.metadata.labels, selector)
  }
  return false
}

/**
 * Attaches each ListenerSet whose parentRef names one of `gateways`: checks that the Gateway
 * takes it, builds and checks its listeners, and adds the valid ones to the Gateway's
 * (GatewayState.listenerSetListeners). Returns every such ListenerSet's state by `namespace/name`.
 */
export function attachListenerSets (listenerSets: readonly ListenerSet[], gateways: Map<string, GatewayState>, namespaces: Map<string, Namespace>, grants: ReferenceGrants, secrets: Map<string, Secret>, services: ReadonlyMap<string, Service> = new Map()): Map<string, ListenerSetState> {
  const states = new Map<string, ListenerSetState>()
  /** Per Gateway, the listeners that hold their port and hostname, by precedence so far. */
  const taken = new Map<string, ListenerState[]>()
  for (const ls of [...listenerSets].sort(byAge)) {
    const ref = ls.spec.parentRef
    if ((ref.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || (ref.kind ?? 'Gateway') !== 'Gateway') continue
    const lsNs = ls.metadata.namespace ?? ''
    const gwKey = `${ref.namespace ?? lsNs}/${ref.name}`
    const g = gateways.get(gwKey)
    if (g === undefined) continue
    const gen = ls.metadata.generation
    const state: ListenerSetState = { ls, gateway: gwKey, gatewayState: g, problem: null, listeners: [] }
    states.set(nsName(ls.metadata), state)
    if (!allowedBy(g.gw.spec.allowedListeners, g.gw.metadata.namespace ?? '', lsNs, namespaces)) {
      state.problem = { reason: 'NotAllowed', message: `Gateway ${gwKey} does not allow ListenerSets from namespace ${lsNs} (spec.allowedListeners)` }
      continue
    }
    if (!g.accepted) {
      state.problem = { reason: 'ParentNotAccepted', message: `Gateway ${gwKey} is not accepted` }
      continue
    }
    let held = taken.get(gwKey)
    if (held === undefined) taken.set(gwKey, held = [...g.listeners])
    for (const listener of ls.spec.listeners ?? []) {
      const l = listenerState({ kind: 'ListenerSet', namespace: lsNs, generation: gen }, listener, grants, secrets, services)
      const samePort = held.filter(o => o.listener.port === listener.port)
      const conflict = samePort.some(o => o.listener.protocol !== listener.protocol)
        ? 'ProtocolConflict'
        : samePort.some(o => (o.listener.hostname ?? '').toLowerCase() === (listener.hostname ?? '').toLowerCase()) ? 'HostnameConflict' : null
      if (conflict !== null) {
        const message = conflict === 'ProtocolConflict'
          ? `a listener of higher precedence uses port ${listener.port} with another protocol`
          : `a listener of higher precedence on port ${listener.port} has the same hostname`
        l.valid = false
        l.attachable = false
        l.conditions = [
          condition('Accepted', false, conflict, message, gen),
          ...l.conditions.filter(c => c.type !== 'Accepted'),
          condition('Conflicted', true, conflict, message, gen),
          condition('Programmed', false, conflict, message, gen)
        ]
      } else {
        l.conditions.push(condition('Conflicted', false, 'NoConflicts', 'No conflicts', gen))
        l.conditions.push(condition('Programmed', l.valid, l.valid ? 'Programmed' : 'Invalid', l.valid ? 'Listener is programmed' : 'Listener is invalid', gen))
        // An unsupported protocol is not served, so it holds no port against later listeners.
        if (l.kinds.length > 0) held.push(l)
      }
      if (l.valid) l.ir = listenerIR(g, ls, l)
      state.listeners.push(l)
    }
    const valid = state.listeners.filter(l => l.valid).length
    if (valid === 0) {
      state.problem = { reason: 'ListenersNotValid', message: 'no listener of the ListenerSet is valid' }
    } else {
      g.listenerSetListeners = [...(g.listenerSetListeners ?? []), ...state.listeners]
    }
  }
  return states
}

function listenerIR (g: GatewayState, ls: ListenerSet, l: ListenerState): ListenerIR {
  // Keyed by the ListenerSet: its listener names may repeat the Gateway's.
  const ir: ListenerIR = { key: `ListenerSet/${nsName(ls.metadata)}.${l.listener.name}`, gateway: g.gw.metadata.name, name: l.listener.name, protocol: l.listener.protocol as ListenerIR['protocol'], policies: {}, routes: [] }
  if (l.listener.protocol === 'TLS') ir.tlsMode = tlsModeOf(l.listener)
  if (l.listener.protocol === 'TLS' || l.listener.protocol === 'TCP' || l.listener.protocol === 'UDP') ir.streamRoutes = []
  if (l.listener.hostname !== undefined) ir.hostname = l.listener.hostname.toLowerCase()
  if (l.tls !== undefined) ir.tls = l.tls
  if (l.filters !== undefined) ir.filters = { requests: l.filters }
  return ir
}

export function listenerSetResult (s: ListenerSetState): ListenerSetResult {
  const { ls } = s
  const gen = ls.metadata.generation
  const invalid = s.listeners.filter(l => !l.valid).length
  const accepted = s.problem === null
    ? condition('Accepted', true, 'Accepted', invalid === 0 ? 'ListenerSet is accepted' : `${invalid} of ${s.listeners.length} listeners are not valid`, gen)
    : condition('Accepted', false, s.problem.reason, s.problem.message, gen)
  return {
    namespace: ls.metadata.namespace ?? '',
    name: ls.metadata.name,
    ...(ls.metadata.uid !== undefined ? { uid: ls.metadata.uid } : {}),
    generation: gen,
    gateway: s.gateway,
    accepted: s.problem === null,
    conditions: [accepted],
    listeners: s.listeners.map(l => ({ name: l.listener.name, supportedKinds: l.kinds, attachedRoutes: l.attached.size, conditions: l.conditions }))
  }
}

/**
 * The Gateway's result with its ListenerSets: the proxy Service also exposes their valid
 * listeners' ports, and status.attachedListenerSets counts the accepted ones.
 */
export function withListenerSets (result: GatewayResult, g: GatewayState, states: Map<string, ListenerSetState>): GatewayResult {
  const key = `${result.namespace}/${result.name}`
  const listeners = [...g.listeners, ...(g.listenerSetListeners ?? [])].filter(l => l.valid)
  const attached = [...states.values()].filter(s => s.gateway === key && s.problem === null).length
  return {
    ...result,
    ports: servicePorts(listeners),
    attachedListenerSets: attached
  }
}

/**
 * A ListenerSet's Programmed condition: not when it is not accepted (with the same reason);
 * otherwise as its Gateway's (programmed once a proxy ACKed the config with its listeners).
 */
export function listenerSetProgrammed (ls: ListenerSetResult, gateway: Condition): Condition {
  const accepted = ls.conditions.find(c => c.type === 'Accepted')!
  if (!ls.accepted) return condition('Programmed', false, accepted.reason, accepted.message, ls.generation)
  if (gateway.status === 'True') return condition('Programmed', true, 'Programmed', 'ListenerSet is programmed', ls.generation)
  return condition('Programmed', false, gateway.reason === 'Pending' ? 'Pending' : 'Invalid', gateway.message, ls.generation)
}
