/**
 * Istio ambient mesh integration (docs/mesh.md "In a cluster"): which Gateways are in the mesh
 * (the chart's `mesh.*` defaults, a PorticoParameters `spec.mesh` opting in or out), what their
 * proxies are told (the mesh CA, trust domain, cluster and network), and which destinations
 * are mesh workloads their proxies reach over HBONE.
 *
 * The rules follow the chart's seed: with `mesh.autoEnabled` every Gateway of Portico's
 * built-in class is in, and `spec.mesh.enabled: false` opts one out; without it a Gateway is in
 * only when its parameters say `spec.mesh.enabled: true` (or give a `spec.mesh` without
 * `enabled: false`). A parameters resource may override any of the chart's values.
 */

import type { BackendIR, EndpointIR } from '@portico/engine/ir'
import type { EndpointSlice, Namespace } from './gateway-api.ts'
import type { Pod } from './inference-pools.ts'

/** The chart's `mesh.*` values, as the controller reads them (settings.ts). */
export interface MeshSettings {
  autoEnabled: boolean
  /** Empty: istiod's CA service in `namespace` (per revision when `revision` is set). */
  caAddress: string
  clusterId: string
  /** The mesh control plane's namespace; empty: istio-system. */
  namespace: string
  network: string
  revision: string
}

/** PorticoParameters `spec.mesh`: opt in or out, and overrides of the chart's values. */
export interface MeshParameters {
  enabled?: boolean
  caAddress?: string
  clusterId?: string
  namespace?: string
  network?: string
  revision?: string
  /** The mesh's trust domain (Istio's meshConfig.trustDomain); default cluster.local. */
  trustDomain?: string
}

/** A Gateway's mesh settings, resolved: what its proxies get and how its destinations are read. */
export interface GatewayMesh {
  caAddress: string
  clusterId: string
  network: string
  trustDomain: string
}

export const DEFAULT_MESH_NAMESPACE = 'istio-system'
/** Istio's defaults: meshConfig.trustDomain and the cluster ID of a single-cluster mesh. */
export const DEFAULT_TRUST_DOMAIN = 'cluster.local'
export const DEFAULT_CLUSTER_ID = 'Kubernetes'
/** Where ztunnel and waypoints accept HBONE. */
export const HBONE_PORT = 15008
export const DATAPLANE_MODE_LABEL = 'istio.io/dataplane-mode'
export const NETWORK_LABEL = 'topology.istio.io/network'

/**
 * Whether the chart configures the mesh at all (autoEnabled, or any `mesh.*` value set): only
 * then does the controller read Pods (and the chart grant it), which ambient destinations are
 * read from — a cluster without a mesh is spared a reconcile per pod change.
 */
export function meshConfigured (s: MeshSettings): boolean {
  return s.autoEnabled || s.caAddress !== '' || s.clusterId !== '' || s.namespace !== '' || s.network !== '' || s.revision !== ''
}

/** istiod's CA service: `istiod[-<revision>].<namespace>.svc:15012`. */
export function defaultCaAddress (namespace: string, revision: string): string {
  const ns = namespace === '' ? DEFAULT_MESH_NAMESPACE : namespace
  return `${revision === '' ? 'istiod' : `istiod-${revision}`}.${ns}.svc:15012`
}

/** The Gateway's mesh settings, or null when it is not in the mesh. */
export function gatewayMesh (settings: MeshSettings, builtinClass: boolean, parameters: MeshParameters | undefined): GatewayMesh | null {
  const on = parameters?.enabled ?? (parameters !== undefined ? true : settings.autoEnabled && builtinClass)
  if (!on) return null
  const pick = (key: 'caAddress' | 'clusterId' | 'namespace' | 'network' | 'revision') => {
    const v = parameters?.[key]
    return v !== undefined && v !== '' ? v : settings[key]
  }
  const caAddress = pick('caAddress')
  return {
    caAddress: caAddress !== '' ? caAddress : defaultCaAddress(pick('namespace'), pick('revision')),
    clusterId: pick('clusterId') !== '' ? pick('clusterId') : DEFAULT_CLUSTER_ID,
    network: pick('network'),
    trustDomain: parameters?.trustDomain !== undefined && parameters.trustDomain !== '' ? parameters.trustDomain : DEFAULT_TRUST_DOMAIN
  }
}

/** Pods and Namespaces by what an endpoint address names. */
export interface MeshIndex {
  /** `namespace/name` → pod. */
  pods: Map<string, Pod>
  namespaces: Map<string, Namespace>
  /** `namespace/service` → endpoint address → the pod it is (from the EndpointSlices' targetRef). */
  podOfAddress: Map<string, Map<string, string>>
}

export function meshIndex (pods: Pod[], namespaces: Namespace[], slices: EndpointSlice[]): MeshIndex {
  const podOfAddress = new Map<string, Map<string, string>>()
  for (const slice of slices) {
    const svc = slice.metadata.labels?.['kubernetes.io/service-name']
    if (svc === undefined) continue
    const key = `${slice.metadata.namespace ?? ''}/${svc}`
    let byAddress = podOfAddress.get(key)
    if (byAddress === undefined) podOfAddress.set(key, byAddress = new Map())
    for (const ep of slice.endpoints ?? []) {
      const ref = ep.targetRef
      if (ref?.kind !== 'Pod' || ref.name === undefined) continue
      for (const address of ep.addresses) byAddress.set(address, `${ref.namespace ?? slice.metadata.namespace ?? ''}/${ref.name}`)
    }
  }
  return {
    pods: new Map(pods.map(p => [`${p.metadata.namespace ?? ''}/${p.metadata.name}`, p])),
    namespaces: new Map(namespaces.map(n => [n.metadata.name, n])),
    podOfAddress
  }
}

/** What the mesh makes of one destination pod. */
export type MeshDestination = { kind: 'plain' } | { kind: 'mesh', mesh: NonNullable<EndpointIR['mesh']> } | { kind: 'otherNetwork', network: string }

/**
 * A pod is a mesh workload when it is in ambient mode: its own `istio.io/dataplane-mode`
 * label says `ambient`, or its namespace's does and the pod does not say `none` (Istio's
 * rule). Its network is the pod's `topology.istio.io/network` label, else its namespace's;
 * a pod on another network than the Gateway's is not directly reachable (east-west gateways
 * are not supported), whatever its mode.
 */
export function meshDestination (pod: Pod, namespace: Namespace | undefined, mesh: GatewayMesh): MeshDestination {
  const podLabels = pod.metadata.labels ?? {}
  const nsLabels = namespace?.metadata.labels ?? {}
  const network = podLabels[NETWORK_LABEL] ?? nsLabels[NETWORK_LABEL] ?? ''
  if (network !== '' && mesh.network !== '' && network !== mesh.network) return { kind: 'otherNetwork', network }
  const mode = podLabels[DATAPLANE_MODE_LABEL]
  const ambient = mode === 'ambient' || (mode !== 'none' && nsLabels[DATAPLANE_MODE_LABEL] === 'ambient')
  if (!ambient) return { kind: 'plain' }
  const ns = pod.metadata.namespace ?? ''
  const sa = pod.spec?.serviceAccountName ?? 'default'
  return { kind: 'mesh', mesh: { identity: `spiffe://${mesh.trustDomain}/ns/${ns}/sa/${sa}`, hbonePort: HBONE_PORT } }
}

/**
 * A Gateway's backends as its mesh makes them: Service endpoints that are ambient pods get
 * `mesh` (the proxy tunnels to them over HBONE); endpoints on another network are dropped —
 * never sent in the clear — and a backend left with none of its endpoints is `invalid` with
 * reason MeshNetworkUnreachable (its requests get an error, not a plaintext connection).
 */
export function meshBackends (backends: Map<string, BackendIR>, index: MeshIndex, mesh: GatewayMesh): Map<string, BackendIR> {
  const out = new Map<string, BackendIR>()
  for (const [key, b] of backends) {
    if (b.kind !== 'service' || b.endpoints.length === 0) {
      out.set(key, b)
      continue
    }
    const byAddress = index.podOfAddress.get(`${b.namespace ?? ''}/${b.name}`)
    const endpoints: EndpointIR[] = []
    const unreachable: string[] = []
    for (const ep of b.endpoints) {
      const podKey = byAddress?.get(ep.host)
      const pod = podKey === undefined ? undefined : index.pods.get(podKey)
      if (pod === undefined) {
        endpoints.push(ep)
        continue
      }
      const d = meshDestination(pod, index.namespaces.get(pod.metadata.namespace ?? ''), mesh)
      if (d.kind === 'otherNetwork') unreachable.push(`${podKey} (network ${d.network})`)
      else endpoints.push(d.kind === 'mesh' ? { ...ep, mesh: d.mesh } : ep)
    }
    if (endpoints.length === 0) {
      out.set(key, { key, kind: 'invalid', name: b.name, ...(b.namespace !== undefined ? { namespace: b.namespace } : {}), protocol: b.protocol, endpoints: [], target: b.target, invalidReason: `MeshNetworkUnreachable: every endpoint of ${b.namespace ?? ''}/${b.name} is on another mesh network than the Gateway's (${mesh.network}): ${unreachable.slice(0, 5).join(', ')}; not sent in the clear` })
    } else {
      out.set(key, { ...b, endpoints })
    }
  }
  return out
}
