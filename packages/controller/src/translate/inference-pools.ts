/**
 * InferencePools (Gateway API Inference Extension, `inference.networking.k8s.io/v1`) as
 * HTTPRoute backends → the engine's `inferencePool` backend (pipeline/inference-pool.ts
 * serves it, as it serves the standalone `inferencePool:` backend).
 *
 * - The pool's endpoints are its selector's ready Pods (in the pool's namespace) × each of its
 *   `targetPorts`: the picker answers with a pod IP and port, and the proxy connects only to
 *   an endpoint of this list, so a pod that stops matching (relabelled, not ready, deleted)
 *   stops receiving traffic at the next push.
 * - The endpoint picker (`endpointPickerRef`, a Service and a port) is reached the way the
 *   proxy reaches every other Service: through its EndpointSlices (a ready endpoint), so it
 *   works without kube-proxy; an EPP run for high availability keeps only its leader ready.
 *   Without a ready endpoint, the Service's cluster DNS name (the request then fails as the
 *   pool's failureMode says). TLS without verification by default: the reference picker
 *   serves a self-signed certificate and the pool has no field for a CA.
 * - Problems come back as `Reason: message`, the route's ResolvedRefs reasons
 *   (`BackendNotFound`), or the pool's own (`InvalidExtensionRef`, which is the pool's
 *   status, not the route's).
 */

import { createHash } from 'node:crypto'
import { isIP } from 'node:net'
import { MAX_FALLBACK_TARGETS, type BackendIR, type EndpointIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, nsName, type Condition, type EndpointSlice, type HTTPRoute, type ObjectMeta, type Service } from './gateway-api.ts'
import { endpointsOf } from './backends.ts'
import { condition } from './conditions.ts'
import type { ListenerSetState } from './listener-sets.ts'
import type { ReferenceGrants } from './reference-grants.ts'
import type { RouteResult } from './status.ts'

export const INFERENCE_GROUP = 'inference.networking.k8s.io'
export const INFERENCE_POOL_KIND = 'InferencePool'

/** The picker's per-message wait and body limit: the standalone backend's defaults. */
const PICKER_TIMEOUT_MS = 10_000
const PICKER_MAX_BODY_BYTES = 10 * 1024 * 1024

/** The v1 InferencePool fields the translation reads. */
export interface InferencePool {
  metadata: ObjectMeta
  spec: {
    selector?: { matchLabels?: Record<string, string> }
    targetPorts?: Array<{ number?: number }>
    appProtocol?: string
    endpointPickerRef?: {
      group?: string
      kind?: string
      name?: string
      port?: { number?: number }
      failureMode?: 'FailOpen' | 'FailClose'
    }
  }
  status?: unknown
}

export interface Pod {
  metadata: ObjectMeta & { deletionTimestamp?: string }
  /** The service account names the pod's mesh identity (translate/mesh.ts). */
  spec?: { serviceAccountName?: string }
  status?: { podIP?: string, phase?: string, conditions?: Array<{ type: string, status: string }> }
}

/** What the translation sees of the extension: absent when it is off (chart inferenceExtension.enabled). */
export interface InferencePoolIndex {
  pools: Map<string, InferencePool>
  /** Pods by namespace. */
  pods: Map<string, Pod[]>
}

export function inferencePoolIndex (pools: InferencePool[], pods: Pod[]): InferencePoolIndex {
  const byNs = new Map<string, Pod[]>()
  for (const p of pods) {
    const ns = p.metadata.namespace ?? ''
    let list = byNs.get(ns)
    if (list === undefined) byNs.set(ns, list = [])
    list.push(p)
  }
  return { pools: new Map(pools.map(p => [nsName(p.metadata), p])), pods: byNs }
}

/** A pod serves only when it is Running, Ready, has an IP and is not being deleted. */
function ready (p: Pod): boolean {
  return p.metadata.deletionTimestamp === undefined &&
    p.status?.phase === 'Running' &&
    p.status.podIP !== undefined && isIP(p.status.podIP) !== 0 &&
    (p.status.conditions ?? []).some(c => c.type === 'Ready' && c.status === 'True')
}

/** The pool's endpoints: its ready pods' IPs × its target ports, sorted (stable IR). */
export function poolEndpoints (pool: InferencePool, pods: Pod[]): EndpointIR[] {
  const selector = pool.spec.selector?.matchLabels ?? {}
  // An empty selector would select every pod of the namespace: the API forbids it (MinProperties=1).
  if (Object.keys(selector).length === 0) return []
  const ports = [...new Set((pool.spec.targetPorts ?? []).map(p => p.number).filter((n): n is number => Number.isInteger(n) && n! >= 1 && n! <= 65535))]
  const out: EndpointIR[] = []
  for (const pod of pods) {
    if (!ready(pod)) continue
    const labels = pod.metadata.labels ?? {}
    if (!Object.entries(selector).every(([k, v]) => labels[k] === v)) continue
    for (const port of ports) out.push({ host: pod.status!.podIP!, port })
  }
  return out.sort((a, b) => a.host.localeCompare(b.host) || a.port - b.port)
}

export interface ServiceLookup {
  services: Map<string, Service>
  slices: Map<string, EndpointSlice[]>
}

/**
 * The pool's endpoint picker addresses (`host:port`): every ready endpoint of its Service
 * of the first one's address family (the proxy's channel connects to the first that accepts
 * and falls back down the list: engine ir/picker-targets.ts), at most 1 +
 * MAX_FALLBACK_TARGETS; or `InvalidExtensionRef: why` (the v1 API's ResolvedRefs reason for
 * a pool whose endpointPickerRef does not resolve).
 */
export function pickerTargets (pool: InferencePool, index: ServiceLookup): [string, ...string[]] | string {
  const ns = pool.metadata.namespace ?? ''
  const ref = pool.spec.endpointPickerRef
  if (ref === undefined) return 'EndpointPickerRefMissing: it has no endpointPickerRef; Portico needs an endpoint picker'
  const group = ref.group ?? ''
  const kind = ref.kind ?? 'Service'
  if (group !== '' || kind !== 'Service') return `InvalidExtensionRef: endpointPickerRef kind ${group === '' ? '' : `${group}/`}${kind} is not supported (Service)`
  if (ref.name === undefined || ref.name === '') return 'InvalidExtensionRef: endpointPickerRef has no name'
  const portNumber = ref.port?.number
  if (portNumber === undefined) return `InvalidExtensionRef: endpointPickerRef to Service ${ns}/${ref.name} needs a port`
  const svc = index.services.get(`${ns}/${ref.name}`)
  if (svc === undefined) return `InvalidExtensionRef: endpoint picker Service ${ns}/${ref.name} not found`
  const port = (svc.spec.ports ?? []).find(p => p.port === portNumber)
  if (port === undefined) return `InvalidExtensionRef: endpoint picker Service ${ns}/${ref.name} has no port ${portNumber}`
  const ready = endpointsOf(index.slices.get(`${ns}/${ref.name}`) ?? [], port)
  if (ready.length > 0) {
    const family = isIP(ready[0]!.host)
    return ready.filter(e => isIP(e.host) === family).slice(0, 1 + MAX_FALLBACK_TARGETS).map(e => family === 6 ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`) as [string, ...string[]]
  }
  return [`${ref.name}.${ns}.svc.cluster.local:${portNumber}`]
}

/** The first of pickerTargets (what traces name the picker by), or its `Reason: message`. */
export function pickerTarget (pool: InferencePool, index: ServiceLookup): string {
  const targets = pickerTargets(pool, index)
  return typeof targets === 'string' ? targets : targets[0]
}

/** `Reason: message` when the target is one (pickerTarget's errors), else null. */
export function pickerProblem (target: string): { reason: string, message: string } | null {
  const m = /^(InvalidExtensionRef|EndpointPickerRefMissing): (.*)$/s.exec(target)
  return m === null ? null : { reason: m[1]!, message: m[2]! }
}

/**
 * The engine backend for a pool, or `Reason: message` for the route's ResolvedRefs when the
 * pool cannot serve (its picker does not resolve: the route's backend is then invalid and
 * its share of traffic gets 500, as for any unresolved backendRef).
 */
export function inferencePoolBackend (pool: InferencePool, pools: InferencePoolIndex, services: ServiceLookup): BackendIR | string {
  const ns = pool.metadata.namespace ?? ''
  const name = pool.metadata.name
  const targets = pickerTargets(pool, services)
  // The route's view: a backend it names that cannot be used is not found (Gateway API has no
  // finer reason); the pool's status says why.
  if (typeof targets === 'string') return `BackendNotFound: InferencePool ${ns}/${name}: ${pickerProblem(targets)?.message ?? targets}`
  const failureMode = pool.spec.endpointPickerRef?.failureMode === 'FailOpen' ? 'FailOpen' : 'FailClose'
  const [target, ...fallbackTargets] = targets
  const picker = { target, ...(fallbackTargets.length > 0 ? { fallbackTargets } : {}), tls: { insecureSkipVerify: true }, failureMode, timeoutMs: PICKER_TIMEOUT_MS, maxBodyBytes: PICKER_MAX_BODY_BYTES } as const
  // The key names what the proxy's picker client depends on; endpoints change under it, as a Service's do.
  const digest = createHash('sha256').update(JSON.stringify(picker)).digest('hex').slice(0, 8)
  return {
    key: `inferencepool/${ns}/${name}#${digest}`,
    kind: 'static',
    name,
    namespace: ns,
    protocol: 'http',
    ...(pool.spec.appProtocol === 'kubernetes.io/h2c' ? { h2c: true } : {}),
    endpoints: poolEndpoints(pool, pools.pods.get(ns) ?? []),
    target: `${ns}/${name}`,
    inferencePool: { name: `${ns}/${name}`, picker: { ...picker, tls: { insecureSkipVerify: true } }, subsetHint: false }
  }
}

/** A pool's status as Portico writes it: one entry per Gateway of ours whose routes name it. */
export interface InferencePoolResult {
  namespace: string
  name: string
  uid?: string
  generation: number | undefined
  parents: Array<{ parentRef: { group: string, kind: string, namespace: string, name: string }, controllerName: string, conditions: Condition[] }>
}

/**
 * `status.parents[]` of the pools HTTPRoutes of our Gateways name (v1 InferencePool status):
 * for each Gateway, `Accepted` (True/Accepted when a route naming the pool is accepted there,
 * else False/HTTPRouteNotAccepted; False/EndpointPickerRefMissing without a picker) and
 * `ResolvedRefs` (True/ResolvedRefs, or False/InvalidExtensionRef when the picker does not
 * resolve). Routes whose reference the pool cannot honour (another namespace without a
 * ReferenceGrant) do not make it a parent. A route attached through a ListenerSet makes the
 * ListenerSet's Gateway the parent: the pool's parentRef kind is Gateway only (the v1 API's
 * ParentReference defaults to it), and that Gateway's proxies are the ones serving the pool.
 */
export function inferencePoolResults (routes: readonly HTTPRoute[], results: readonly RouteResult[], index: InferencePoolIndex, services: ServiceLookup, grants: ReferenceGrants, controllerName: string, listenerSets?: ReadonlyMap<string, ListenerSetState>): InferencePoolResult[] {
  const resultOf = new Map(results.filter(r => r.kind === undefined).map(r => [`${r.namespace}/${r.name}`, r]))
  // pool key → gateway key → accepted by some route there
  const parents = new Map<string, Map<string, boolean>>()
  for (const route of routes) {
    if (route.kind !== undefined && route.kind !== 'HTTPRoute') continue
    const routeNs = route.metadata.namespace ?? ''
    const result = resultOf.get(`${routeNs}/${route.metadata.name}`)
    if (result === undefined) continue
    for (const rule of route.spec.rules ?? []) {
      for (const ref of rule.backendRefs ?? []) {
        if (ref.group !== INFERENCE_GROUP || ref.kind !== INFERENCE_POOL_KIND) continue
        const ns = ref.namespace ?? routeNs
        const key = `${ns}/${ref.name}`
        if (!index.pools.has(key)) continue
        if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: 'HTTPRoute', fromNamespace: routeNs, toGroup: INFERENCE_GROUP, toKind: INFERENCE_POOL_KIND, toNamespace: ns, toName: ref.name })) continue
        for (const p of result.parents) {
          if (p.controllerName !== controllerName) continue
          if ((p.parentRef.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP) continue
          const kind = p.parentRef.kind ?? 'Gateway'
          const parentKey = `${p.parentRef.namespace ?? routeNs}/${p.parentRef.name}`
          // A ListenerSet parent: its Gateway (the route's status already says whether the
          // ListenerSet took it).
          const gw = kind === 'Gateway' ? parentKey : kind === 'ListenerSet' ? listenerSets?.get(parentKey)?.gateway : undefined
          if (gw === undefined) continue
          const accepted = p.conditions.some(c => c.type === 'Accepted' && c.status === 'True')
          let byGw = parents.get(key)
          if (byGw === undefined) parents.set(key, byGw = new Map())
          byGw.set(gw, (byGw.get(gw) ?? false) || accepted)
        }
      }
    }
  }
  const out: InferencePoolResult[] = []
  for (const [key, byGw] of [...parents].sort((a, b) => a[0].localeCompare(b[0]))) {
    const pool = index.pools.get(key)!
    const gen = pool.metadata.generation
    const problem = pickerProblem(pickerTarget(pool, services))
    const resolved = problem === null
      ? condition('ResolvedRefs', true, 'ResolvedRefs', 'The endpoint picker resolved', gen)
      : condition('ResolvedRefs', false, 'InvalidExtensionRef', problem.message, gen)
    out.push({
      namespace: pool.metadata.namespace ?? '',
      name: pool.metadata.name,
      ...(pool.metadata.uid !== undefined ? { uid: pool.metadata.uid } : {}),
      generation: gen,
      // The API keeps at most 32 parents.
      parents: [...byGw].sort((a, b) => a[0].localeCompare(b[0])).slice(0, 32).map(([gw, accepted]) => {
        const [namespace, name] = gw.split('/') as [string, string]
        const acceptedCondition = problem?.reason === 'EndpointPickerRefMissing'
          ? condition('Accepted', false, 'EndpointPickerRefMissing', problem.message, gen)
          : accepted
            ? condition('Accepted', true, 'Accepted', 'InferencePool accepted as a backend of an accepted HTTPRoute', gen)
            : condition('Accepted', false, 'HTTPRouteNotAccepted', 'no HTTPRoute naming this InferencePool is accepted by this Gateway; see the routes\' status', gen)
        return { parentRef: { group: GATEWAY_GROUP, kind: 'Gateway', namespace, name }, controllerName, conditions: [acceptedCondition, resolved] }
      })
    })
  }
  return out
}
