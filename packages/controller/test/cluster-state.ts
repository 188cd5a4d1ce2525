/**
 * Cluster objects as YAML documents → the ClusterState the translator reads: what the
 * controller's tests share (golden files, filters, regex checks).
 */

import { parseAllDocuments } from 'yaml'
import type { ClusterState } from '../src/translate/translate.ts'

const LISTS: Record<string, keyof ClusterState> = {
  BackendTLSPolicy: 'backendTLSPolicies', ConfigMap: 'configMaps',
  GatewayClass: 'gatewayClasses', Gateway: 'gateways', HTTPRoute: 'httpRoutes', ReferenceGrant: 'referenceGrants',
  Service: 'services', EndpointSlice: 'endpointSlices', Secret: 'secrets', Namespace: 'namespaces',
  PorticoParameters: 'parameters', ListenerSet: 'listenerSets', PorticoPolicy: 'porticoPolicies', PorticoBackend: 'porticoBackends', PorticoModel: 'porticoModels', GRPCRoute: 'grpcRoutes', TLSRoute: 'tlsRoutes', TCPRoute: 'tcpRoutes', UDPRoute: 'udpRoutes',
  InferencePool: 'inferencePools', Pod: 'pods', ClusterTrustBundle: 'clusterTrustBundles'
}

export function clusterState (text: string): ClusterState {
  const state: ClusterState = { gatewayClasses: [], gateways: [], httpRoutes: [], referenceGrants: [], services: [], endpointSlices: [], secrets: [], namespaces: [], parameters: [], backendTLSPolicies: [], configMaps: [] }
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS() as { kind: string }
    const list = LISTS[obj.kind]
    if (list === undefined) throw new Error(`unexpected kind ${obj.kind}`)
    // Optional kinds (ListenerSets) are in the state only when a document has one.
    if (list === 'listenerSets') state.listenerSets ??= []
    if (list === 'porticoPolicies') state.porticoPolicies ??= []
    if (list === 'porticoBackends') state.porticoBackends ??= []
    if (list === 'porticoModels') state.porticoModels ??= []
    if (list === 'grpcRoutes') state.grpcRoutes ??= []
    if (list === 'tlsRoutes') state.tlsRoutes ??= []
    if (list === 'tcpRoutes') state.tcpRoutes ??= []
    // ClusterTrustBundles are served only with their feature gate: in the state when a document has one.
    if (list === 'clusterTrustBundles') state.clusterTrustBundles ??= []
    if (list === 'udpRoutes') state.udpRoutes ??= []
    // An InferencePool or a Pod stands for the inference extension being on (chart inferenceExtension.enabled).
    if (list === 'inferencePools' || list === 'pods') {
      state.inferencePools ??= []
      state.pods ??= []
    }
    ;(state[list] as unknown[] | undefined)?.push(obj)
  }
  return state
}

export const CONTROLLER = 'portico.dev/gateway-controller'

/** The GatewayClass `portico` and a Gateway `apps/web` with one HTTP listener on 8080, as YAML. */
export const CLASS_AND_GATEWAY = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: portico, generation: 1 }
spec: { controllerName: ${CONTROLLER} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: web, namespace: apps, generation: 1 }
spec:
  gatewayClassName: portico
  listeners: [{ name: http, port: 8080, protocol: HTTP }]
`
