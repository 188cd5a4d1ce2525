/**
 * Cluster objects as YAML documents → the ClusterState the translator reads: what the
 * controller's tests share (golden files, filters, regex checks).
 */

import { parseAllDocuments } from 'yaml'
import type { ClusterState } from '../src/translate/translate.ts'

const LISTS: Record<string, keyof ClusterState> = {
  GatewayClass: 'gatewayClasses', Gateway: 'gateways', HTTPRoute: 'httpRoutes', ReferenceGrant: 'referenceGrants',
  Service: 'services', EndpointSlice: 'endpointSlices', Secret: 'secrets', Namespace: 'namespaces',
  PorticoParameters: 'parameters'
}

export function clusterState (text: string): ClusterState {
  const state: ClusterState = { gatewayClasses: [], gateways: [], httpRoutes: [], referenceGrants: [], services: [], endpointSlices: [], secrets: [], namespaces: [], parameters: [] }
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS() as { kind: string }
    const list = LISTS[obj.kind]
    if (list === undefined) throw new Error(`unexpected kind ${obj.kind}`)
    ;(state[list] as unknown[] | undefined)?.push(obj)
  }
  return state
}
