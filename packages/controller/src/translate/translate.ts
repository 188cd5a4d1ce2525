/**
 * Gateway API → engine IR and statuses. A pure function: cluster objects in, per-Gateway
 * ProxyIR (the same IR a standalone YAML file produces) and the status of every Gateway,
 * listener and HTTPRoute parent out. Golden tests pin it.
 *
 * Semantics follow the Gateway API spec (v1). The work is split by kind, as Envoy Gateway's
 * translator is: gateways.ts (listeners by port and hostname, TLS, conflicts, allowedRoutes),
 * routes.ts (parentRefs with sectionName and port, hostname intersection, matches → route
 * IR), backends.ts (backendRefs to Services through EndpointSlices, ReferenceGrant, invalid
 * backends kept as `invalid` so the rest of the route works), filters.ts (filters, retry and
 * mirrors through the engine's own converters) and status.ts (what is reported). This file
 * indexes the cluster objects and runs them in order.
 */

import { matchesSelector, nsName, type GRPCRoute, type StreamRoute, type BackendTLSPolicy, type ConfigMap, type EndpointSlice, type GatewayClass, type Gateway, type HTTPRoute, type LabelSelector, type Namespace, type PorticoParameters, type ReferenceGrant, type Secret, type Service } from './gateway-api.ts'
import { ParametersIndex } from './parameters.ts'
import { ReferenceGrants } from './reference-grants.ts'
import { gatewayState, type GatewayState } from './gateways.ts'
import { serviceIndex, resolveBackends } from './backends.ts'
import { unsupportedFilter, routePolicies } from './filters.ts'
import { attachRoute, byAge, invalidRegex, invalidRouteIR, unsupportedRuleField } from './routes.ts'
import { classResult, gatewayResult, type RouteResult, type TranslationResult } from './status.ts'
import { attachListenerSets, listenerSetResult, withListenerSets } from './listener-sets.ts'
import type { ListenerSet } from './gateway-api.ts'
import { BackendTlsPolicies, backendClientCertificate } from './backend-tls.ts'
import type { ClusterTrustBundle } from './ca-certificates.ts'
import type { Condition } from './gateway-api.ts'
import { condition } from './conditions.ts'
import { applyPorticoPolicies, type PorticoPolicy } from './portico-policies.ts'
import { grpcAsHttpRoute } from './grpc-routes.ts'
import type { PorticoBackend } from './portico-backends.ts'
import { applyPorticoModels, type PorticoModel } from './portico-models.ts'
import { inferencePoolIndex, inferencePoolResults, type InferencePool, type Pod } from './inference-pools.ts'
import { gatewayMesh, meshBackends, meshIndex, type GatewayMesh, type MeshSettings } from './mesh.ts'

export type { BackendTLSPolicyResult, PolicyAncestorStatus } from './backend-tls.ts'
export type { PorticoPolicy, PorticoPolicyResult } from './portico-policies.ts'
export type { PorticoBackend } from './portico-backends.ts'
export type { PorticoModel, PorticoModelResult } from './portico-models.ts'
export type { InferencePool, InferencePoolResult, Pod } from './inference-pools.ts'
export type { ClassResult, GatewayResult, ListenerStatus, RouteParentStatus, RouteResult, TranslationResult } from './status.ts'

export interface ClusterState {
  gatewayClasses: GatewayClass[]
  gateways: Gateway[]
  httpRoutes: HTTPRoute[]
  /** GRPCRoutes (absent when the CRD is not installed). */
  grpcRoutes?: GRPCRoute[]
  /** TLSRoutes, TCPRoutes and UDPRoutes (absent when their CRDs are not installed). */
  tlsRoutes?: StreamRoute[]
  tcpRoutes?: StreamRoute[]
  udpRoutes?: StreamRoute[]
  referenceGrants: ReferenceGrant[]
  services: Service[]
  endpointSlices: EndpointSlice[]
  secrets: Secret[]
  namespaces: Namespace[]
  /** PorticoParameters objects (absent when the CRD is not installed). */
  parameters?: PorticoParameters[]
  /** ListenerSets (absent when they are not read: no CRD). */
  listenerSets?: ListenerSet[]
  /** BackendTLSPolicies (absent when the CRD is not installed) and the ConfigMaps holding their CAs. */
  backendTLSPolicies?: BackendTLSPolicy[]
  configMaps?: ConfigMap[]
  /** ClusterTrustBundles, CAs of BackendTLSPolicies and frontend validation (absent when the API server does not serve them). */
  clusterTrustBundles?: ClusterTrustBundle[]
  /** PorticoPolicies (absent when the CRD is not installed). */
  porticoPolicies?: PorticoPolicy[]
  /** PorticoBackends (absent when the CRD is not installed). */
  porticoBackends?: PorticoBackend[]
  /** PorticoModels (absent unless gatewayModels.enabled and the CRD is installed). */
  porticoModels?: PorticoModel[]
  /**
   * InferencePools and Pods (absent unless inferenceExtension.enabled: pool backendRefs are
   * then InvalidKind; with it on and no CRD, an empty list: pools are then not found).
   */
  inferencePools?: InferencePool[]
  pods?: Pod[]
}

export interface TranslateOptions {
  /** GatewayClasses with this spec.controllerName are ours. */
  controllerName: string
  /** Namespaces considered (OR of selectors); empty = all. */
  discoveryNamespaceSelectors?: LabelSelector[]
  /**
   * The chart's `mesh.*` and the built-in class they apply to (translate/mesh.ts); absent: no
   * Gateway is in the mesh unless its parameters opt it in (with Istio's defaults).
   */
  mesh?: { settings: MeshSettings, builtinClass: string }
}

const NO_MESH: MeshSettings = { autoEnabled: false, caAddress: '', clusterId: '', namespace: '', network: '', revision: '' }

export function translate (state: ClusterState, options: TranslateOptions): TranslationResult {
  const namespaces = new Map(state.namespaces.map(n => [n.metadata.name, n]))
  const selectors = options.discoveryNamespaceSelectors ?? []
  const discovered = (ns: string | undefined) => selectors.length === 0 || selectors.some(s => matchesSelector(namespaces.get(ns ?? '')?.metadata.labels, s))
  const grants = new ReferenceGrants(state.referenceGrants.filter(g => discovered(g.metadata.namespace)))
  const secrets = new Map(state.secrets.map(s => [nsName(s.metadata), s]))
  const services = serviceIndex(state.services.filter(s => discovered(s.metadata.namespace)), state.endpointSlices, (state.porticoBackends ?? []).filter(b => discovered(b.metadata.namespace)), secrets)
  if (state.inferencePools !== undefined) services.inferencePools = inferencePoolIndex(state.inferencePools.filter(p => discovered(p.metadata.namespace)), state.pods ?? [])
  const configMaps = new Map((state.configMaps ?? []).map(c => [nsName(c.metadata), c]))
  const trustBundles = state.clusterTrustBundles === undefined ? undefined : new Map(state.clusterTrustBundles.map(b => [b.metadata.name, b]))
  const tlsPolicies = new BackendTlsPolicies((state.backendTLSPolicies ?? []).filter(p => discovered(p.metadata.namespace)), state.configMaps ?? [], trustBundles)

  const classes = state.gatewayClasses
    .filter(c => c.spec.controllerName === options.controllerName)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
  const ourClasses = new Set(classes.map(c => c.metadata.name))
  const parameters = new ParametersIndex(state.parameters ?? [])
  const classParameters = new Map(classes.map(c => [c.metadata.name, parameters.forClass(c)]))
  const classResults = classes.map(c => classResult(c, classParameters.get(c.metadata.name)!))

  // Gateways and their listeners.
  const gateways = new Map<string, GatewayState>()
  for (const gw of [...state.gateways].sort((a, b) => nsName(a.metadata).localeCompare(nsName(b.metadata)))) {
    if (!ourClasses.has(gw.spec.gatewayClassName) || !discovered(gw.metadata.namespace)) continue
    gateways.set(nsName(gw.metadata), gatewayState(gw, grants, secrets, parameters.forGateway(gw, classParameters.get(gw.spec.gatewayClassName)!), configMaps, trustBundles, services.services))
  }

  // ListenerSets: listeners merged into the Gateways that allow them.
  const listenerSets = state.listenerSets === undefined ? undefined : attachListenerSets(state.listenerSets.filter(ls => discovered(ls.metadata.namespace)), gateways, namespaces, grants, secrets, services.services)

  // Routes, older first: resolve backends, convert policies, attach to listeners.
  const routeResults: RouteResult[] = []
  /** The backend keys each route names (the mesh may make some unreachable from one Gateway). */
  const routeBackends = new Map<HTTPRoute, Set<string>>()
  // GRPCRoutes route as the HTTPRoutes they are (grpc-routes.ts), in one age order with them.
  const grpc = (state.grpcRoutes ?? []).filter(r => discovered(r.metadata.namespace)).map(grpcAsHttpRoute)
  const grpcProblems = new Map(grpc.map(g => [g.route, g.problem]))
  // TLSRoutes, TCPRoutes and UDPRoutes: their rules are backendRefs only; they attach to TLS / TCP / UDP listeners.
  const streams = ([['TLSRoute', state.tlsRoutes ?? []], ['TCPRoute', state.tcpRoutes ?? []], ['UDPRoute', state.udpRoutes ?? []]] as const).flatMap(([kind, list]) => list.filter(r => discovered(r.metadata.namespace)).map((r): HTTPRoute => ({
    kind,
    metadata: r.metadata,
    spec: { ...(r.spec.parentRefs !== undefined ? { parentRefs: r.spec.parentRefs } : {}), ...(r.spec.hostnames !== undefined ? { hostnames: r.spec.hostnames } : {}), rules: (r.spec.rules ?? []).map(rule => ({ ...(rule.name !== undefined ? { name: rule.name } : {}), backendRefs: rule.backendRefs ?? [] })) }
  })))
  const routes = [...state.httpRoutes.filter(r => discovered(r.metadata.namespace)), ...grpc.map(g => g.route), ...streams].sort(byAge)
  routes.forEach((route, rank) => {
    // A BackendTLSPolicy applies to HTTPRoutes, GRPCRoutes and TLSRoutes that terminate TLS
    // (the Gateway API's extended support): a TLSRoute's backends are resolved both ways, the
    // plain ones for Passthrough listeners, whose connections are TLS already; TCPRoutes
    // forward the bytes as they come.
    const resolved = resolveBackends(route, grants, services, route.kind === 'TCPRoute' || route.kind === 'UDPRoute' ? undefined : tlsPolicies)
    const plain = route.kind === 'TLSRoute' ? resolveBackends(route, grants, services) : undefined
    const policies = routePolicies(route)
    const stream = route.kind === 'TLSRoute' || route.kind === 'TCPRoute' || route.kind === 'UDPRoute'
    const unsupported = grpcProblems.get(route) ?? unsupportedFilter(route) ?? unsupportedRuleField(route) ?? policies.problem ?? (stream ? null : invalidRegex(route) ?? invalidRouteIR({ route, rank, resolved, policies }))
    const parents = attachRoute({ route, rank, resolved, ...(plain !== undefined ? { plain } : {}), policies, unsupported }, gateways, namespaces, options.controllerName, listenerSets)
    routeBackends.set(route, new Set([...resolved.refs.flat(), ...resolved.mirrors.flat(), ...resolved.errorRules.filter(k => k !== undefined)]))
    if (parents.length > 0) {
      routeResults.push({ ...(route.kind !== undefined && route.kind !== 'HTTPRoute' ? { kind: route.kind } : {}), namespace: route.metadata.namespace ?? '', name: route.metadata.name, ...(route.metadata.uid !== undefined ? { uid: route.metadata.uid } : {}), generation: route.metadata.generation, parents })
    }
  })

  // A BackendTLSPolicy's ancestors: the Gateways that program a backend it covers.
  for (const [key, g] of gateways) for (const backend of g.backends.keys()) tlsPolicies.used(backend, key)
  // Gateway spec.tls.backend: its client certificate goes to every TLS backend it calls (each
  // Gateway has proxies of its own, so a backend's key may stay the same across Gateways).
  const clientCertConditions = new Map<string, Condition>()
  for (const [key, g] of gateways) {
    const client = backendClientCertificate(g.gw, grants, secrets)
    if (client === undefined) continue
    clientCertConditions.set(key, client.condition)
    if (client.tls !== undefined) for (const [k, b] of g.backends) if (b.tls !== undefined) g.backends.set(k, { ...b, tls: { ...b.tls, ...client.tls } })
  }

  // PorticoPolicies onto listeners, routes and backend references, before each IR is assembled.
  const porticoPolicies = state.porticoPolicies === undefined
    ? undefined
    : applyPorticoPolicies(state.porticoPolicies.filter(p => discovered(p.metadata.namespace)), gateways, secrets, options.controllerName)

  // PorticoModels onto listeners and model rules of routes (after the routes, whose rules they join).
  const porticoModels = state.porticoModels === undefined
    ? undefined
    : applyPorticoModels(state.porticoModels.filter(m => discovered(m.metadata.namespace)), { gateways, listenerSets, routes: routes.filter(r => r.kind === undefined || r.kind === 'HTTPRoute'), namespaces, secrets, controllerName: options.controllerName })

  const inferencePools = services.inferencePools === undefined ? undefined : inferencePoolResults(routes, routeResults, services.inferencePools, services, grants, options.controllerName, listenerSets)

  // The mesh: a Gateway in it reaches ambient pods over HBONE (its own copy of the backends).
  const meshes = new Map<string, GatewayMesh>()
  let index: ReturnType<typeof meshIndex> | undefined
  for (const [key, g] of gateways) {
    if ('error' in g.parameters) continue
    const mesh = gatewayMesh(options.mesh?.settings ?? NO_MESH, g.gw.spec.gatewayClassName === options.mesh?.builtinClass, g.parameters.parameters?.mesh)
    if (mesh === null) continue
    meshes.set(key, mesh)
    index ??= meshIndex(state.pods ?? [], state.namespaces, state.endpointSlices)
    g.backends = meshBackends(g.backends, index, mesh)
  }

  if (meshes.size > 0) meshRouteStatus(routes, routeResults, routeBackends, gateways, meshes)

  const gatewayResults = [...gateways.values()].map(g => listenerSets === undefined ? gatewayResult(g) : withListenerSets(gatewayResult(g), g, listenerSets))
  for (const r of gatewayResults) {
    const mesh = meshes.get(`${r.namespace}/${r.name}`)
    if (mesh !== undefined) r.mesh = mesh
  }
  for (const r of gatewayResults) {
    const c = clientCertConditions.get(`${r.namespace}/${r.name}`)
    if (c !== undefined) r.conditions.push(c)
  }
  return {
    classes: classResults,
    gateways: gatewayResults,
    routes: routeResults.sort((a, b) => `${a.kind ?? ''}/${a.namespace}/${a.name}`.localeCompare(`${b.kind ?? ''}/${b.namespace}/${b.name}`)),
    backendTLSPolicies: tlsPolicies.results(options.controllerName),
    ...(porticoPolicies !== undefined ? { porticoPolicies } : {}),
    ...(porticoModels !== undefined ? { porticoModels } : {}),
    ...(inferencePools !== undefined ? { inferencePools } : {}),
    ...(listenerSets !== undefined ? { listenerSets: [...listenerSets.values()].map(listenerSetResult).sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`)) } : {})
  }
}

/**
 * A route whose backend a mesh Gateway cannot reach (every endpoint on another network: the
 * backend is invalid in that Gateway's IR, translate/mesh.ts) says so in its parent status for
 * that Gateway: ResolvedRefs=False, MeshNetworkUnreachable.
 */
function meshRouteStatus (routes: HTTPRoute[], results: RouteResult[], routeBackends: Map<HTTPRoute, Set<string>>, gateways: Map<string, GatewayState>, meshes: Map<string, GatewayMesh>): void {
  const byKey = new Map(results.map(r => [`${r.kind ?? 'HTTPRoute'}/${r.namespace}/${r.name}`, r]))
  for (const route of routes) {
    const result = byKey.get(`${route.kind ?? 'HTTPRoute'}/${route.metadata.namespace ?? ''}/${route.metadata.name}`)
    const keys = routeBackends.get(route)
    if (result === undefined || keys === undefined) continue
    for (const parent of result.parents) {
      if ((parent.parentRef.kind ?? 'Gateway') !== 'Gateway') continue
      const gateway = `${parent.parentRef.namespace ?? result.namespace}/${parent.parentRef.name}`
      if (!meshes.has(gateway)) continue
      const backends = gateways.get(gateway)?.backends
      const unreachable = [...keys].map(k => backends?.get(k)).find(b => b?.kind === 'invalid' && b.invalidReason?.startsWith('MeshNetworkUnreachable: ') === true)
      if (unreachable === undefined) continue
      const at = parent.conditions.findIndex(c => c.type === 'ResolvedRefs')
      const c = condition('ResolvedRefs', false, 'MeshNetworkUnreachable', unreachable.invalidReason!.slice('MeshNetworkUnreachable: '.length), result.generation)
      if (at === -1) parent.conditions.push(c)
      else if (parent.conditions[at]!.status === 'True') parent.conditions[at] = c
    }
  }
}
