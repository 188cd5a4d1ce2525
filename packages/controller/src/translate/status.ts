/**
 * What a translation reports: the status of every GatewayClass, Gateway (with its listeners)
 * and HTTPRoute parent, and each Gateway's IR and proxy ports. The controller writes these
 * statuses (Programmed comes later, from the proxies' ACKs) and provisions from the rest.
 */

import type { ProxyIR } from '@portico/engine/ir'
import type { Condition, GatewayClass, ParentReference, ProxyParameters } from './gateway-api.ts'
import type { ParametersResolution } from './parameters.ts'
import type { GatewayMesh } from './mesh.ts'
import { gatewayIR, servicePorts, type GatewayState } from './gateways.ts'
import type { ListenerSetResult } from './listener-sets.ts'
import { condition } from './conditions.ts'
import { insecureFrontendValidation } from './frontend-tls.ts'
import type { BackendTLSPolicyResult } from './backend-tls.ts'
import type { PorticoPolicyResult } from './portico-policies.ts'
import type { PorticoModelResult } from './portico-models.ts'
import type { InferencePoolResult } from './inference-pools.ts'

export interface ListenerStatus {
  name: string
  supportedKinds: Array<{ group: string, kind: string }>
  attachedRoutes: number
  conditions: Condition[]
}

export interface GatewayResult {
  namespace: string
  name: string
  /** metadata.uid (absent in tests' objects): the status writer tells re-created objects apart by it. */
  uid?: string
  generation: number | undefined
  /** Accepted, and (without Programmed, which needs a proxy's ACK) the listeners' state. */
  conditions: Condition[]
  listeners: ListenerStatus[]
  /** ListenerSets attached (accepted); absent when ListenerSets are not read (listener-sets.ts). */
  attachedListenerSets?: number
  /** Whether the Gateway is accepted at all (a proxy is provisioned only then). */
  accepted: boolean
  ir: ProxyIR
  /** Ports of valid listeners, for the proxy Service. */
  ports: Array<{ name: string, port: number, protocol: string }>
  /** Proxy settings from PorticoParameters (the Gateway's own, else its class's). */
  parameters?: ProxyParameters
  /** Static IPs spec.addresses asks for (absent: none; the load balancer assigns one). */
  requestedAddresses?: string[]
  /** spec.addresses asks for Cluster routability: the proxy Service is a ClusterIP one, its addresses reported as such. */
  addressRoutability?: 'Cluster'
  /** The Gateway is in the Istio mesh with these settings (translate/mesh.ts); absent: not in the mesh. */
  mesh?: GatewayMesh
}

export interface RouteParentStatus {
  parentRef: ParentReference
  controllerName: string
  conditions: Condition[]
}

export interface RouteResult {
  /** Absent for HTTPRoutes; the kind of any other route. */
  kind?: 'GRPCRoute' | 'TLSRoute' | 'TCPRoute' | 'UDPRoute'
  namespace: string
  name: string
  uid?: string
  generation: number | undefined
  parents: RouteParentStatus[]
}

export interface ClassResult {
  name: string
  uid?: string
  generation: number | undefined
  conditions: Condition[]
}

export interface TranslationResult {
  classes: ClassResult[]
  gateways: GatewayResult[]
  routes: RouteResult[]
  /** ListenerSets whose parent is one of the Gateways; absent when ListenerSets are not read. */
  listenerSets?: ListenerSetResult[]
  /** Statuses of the BackendTLSPolicies that apply to backends of our Gateways. */
  backendTLSPolicies: BackendTLSPolicyResult[]
  /** Statuses of the PorticoPolicies; absent when they are not read (no CRD). */
  porticoPolicies?: PorticoPolicyResult[]
  /** Statuses of the PorticoModels; absent when they are not read (gatewayModels off, or no CRD). */
  porticoModels?: PorticoModelResult[]
  /** Statuses of the InferencePools our routes name; absent when the inference extension is off. */
  inferencePools?: InferencePoolResult[]
}

export function classResult (c: GatewayClass, params: ParametersResolution): ClassResult {
  return {
    name: c.metadata.name,
    ...(c.metadata.uid !== undefined ? { uid: c.metadata.uid } : {}),
    generation: c.metadata.generation,
    conditions: ['error' in params
      ? condition('Accepted', false, 'InvalidParameters', params.error, c.metadata.generation)
      : condition('Accepted', true, 'Accepted', 'GatewayClass accepted by the portico controller', c.metadata.generation)]
  }
}

export function gatewayResult (g: GatewayState): GatewayResult {
  const { gw } = g
  const gen = gw.metadata.generation
  const ir = gatewayIR(g)
  const invalid = g.listeners.filter(l => !l.valid).length
  const conditions: Condition[] = []
  if ('error' in g.parameters) {
    conditions.push(condition('Accepted', false, 'InvalidParameters', g.parameters.error, gen))
  } else if ('error' in g.addresses) {
    conditions.push(condition('Accepted', false, 'UnsupportedAddress', g.addresses.error, gen))
  } else if (invalid === 0) {
    conditions.push(condition('Accepted', true, 'Accepted', 'Gateway is accepted', gen))
  } else {
    conditions.push(condition('Accepted', g.accepted, 'ListenersNotValid', `${invalid} of ${g.listeners.length} listeners are not valid`, gen))
  }
  if (insecureFrontendValidation(gw)) {
    // GEP-91: said loudly, as clients without a valid certificate are let through.
    conditions.push(condition('InsecureFrontendValidationMode', true, 'ConfigurationChanged', 'client certificate validation is AllowInsecureFallback on some port: clients without a valid certificate are served', gen))
  }
  return {
    namespace: gw.metadata.namespace ?? '',
    name: gw.metadata.name,
    ...(gw.metadata.uid !== undefined ? { uid: gw.metadata.uid } : {}),
    generation: gen,
    conditions,
    listeners: g.listeners.map(l => ({ name: l.listener.name, supportedKinds: l.kinds, attachedRoutes: l.attached.size, conditions: l.conditions })),
    accepted: g.accepted,
    ir,
    ports: servicePorts(g.listeners.filter(l => l.valid)),
    ...('parameters' in g.parameters && g.parameters.parameters !== undefined ? { parameters: g.parameters.parameters } : {}),
    ...('ips' in g.addresses && g.addresses.ips.length > 0 ? { requestedAddresses: g.addresses.ips } : {}),
    ...('ips' in g.addresses && g.addresses.routability !== undefined ? { addressRoutability: g.addresses.routability } : {})
  }
}
