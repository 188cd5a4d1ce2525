/**
 * The compiled config's shape: the IR compiled for the hot path (route tables built, policies
 * compiled, backends indexed), as the pipeline and a RequestContext read it. Only the types
 * live here, below the pipeline; engine/compiled.ts builds them (compileConfig).
 */

import type { BackendIR, BackendRefIR, BindIR, ListenerIR, ModelIR, ProxyIR, RouteIR, StreamRouteIR } from '../ir/types.ts'
import type { CelProgram } from '../cel/expression.ts'
import type { RequestMirrorIR } from '../ir/traffic.ts'
import type { CompiledPolicySet } from './policy.ts'
import type { RouteTable } from '../routing/route-table.ts'
import type { WeightedPicker } from '../routing/weighted.ts'
import type { FrontendSettings } from '../http/frontend.ts'

export interface CompiledBackendRef {
  ir: BackendRefIR
  backend: BackendIR | undefined
  policies: CompiledPolicySet
  /** An `ai` backend's failover groups (BackendRefIR.failover), each provider compiled as a ref of its own. */
  failover?: CompiledBackendRef[][]
}

export interface CompiledRoute {
  ir: RouteIR
  key: string
  /** Every backend is an MCP backend: authorization defers item rules to the MCP layer. */
  isMcp: boolean
  /** Some backend is an MCP backend (a data-plane worker hands such requests over). */
  hasMcp: boolean
  policies: CompiledPolicySet
  backends: WeightedPicker<CompiledBackendRef>
  /** RequestMirror targets (empty without mirrors). */
  mirrors: Array<{ ir: RequestMirrorIR, backend: BackendIR | undefined }>
  /** The models served here (RouteIR.models), chosen by the request's model (pipeline/models.ts); null: none. */
  models: CompiledModelTable | null
}

/** One model of a route's table, compiled: a concrete model's backend, or a virtual model's choice. */
export interface CompiledModel {
  ir: ModelIR
  /** Concrete models. */
  ref: CompiledBackendRef | null
  /** Failover virtual models: the targets as providers (pipeline/failover.ts). */
  failover: CompiledBackendRef[][] | null
  /** Failover virtual models: each target's backend key → the target model's name. */
  failoverModels: ReadonlyMap<string, string> | null
  /** Weighted virtual models: a target name by weight. */
  weighted: WeightedPicker<string> | null
  /** Conditional virtual models: the rules in order, then the fallback. */
  rules: Array<{ program: CelProgram, model: string }> | null
}

export interface CompiledModelTable {
  byName: Map<string, CompiledModel>
  /** The attached public model that serves a requested name (exact, then the most specific wildcard), or null. */
  select (model: string): CompiledModel | null
  /** What GET /v1/models lists: the attached public models with an exact match, virtual ones included. */
  listed: ModelIR[]
}

export interface CompiledListener {
  ir: ListenerIR
  /** Listener filters (pipeline/listener-filters.ts), run before `policies`; null: none. */
  filters: CompiledPolicySet | null
  policies: CompiledPolicySet
  table: RouteTable<CompiledRoute>
  /** What the listener accepts from clients (X-Forwarded-* trust, upgrades, body idle), defaults filled in. */
  frontend: FrontendSettings
  /** Some route has mcpAuthentication: the listener serves protected-resource metadata. */
  mcpAuthRoutes: boolean
  /**
   * Which requests a data-plane worker hands to the thread that owns MCP: none (no MCP
   * routes), those whose route (chosen up front) has an MCP backend, or all of them (a
   * gateway-phase urlRewrite or a listener filter could change which route a request gets).
   */
  mcpHandoff: 'none' | 'route' | 'all'
  routes: CompiledRoute[]
  /** TCP and TLS listeners: their routes in order (empty otherwise). */
  streamRoutes: CompiledStreamRoute[]
}

export interface CompiledStreamRoute {
  ir: StreamRouteIR
  backends: WeightedPicker<{ ir: BackendRefIR, backend: BackendIR | undefined }>
}

export interface CompiledBind {
  ir: BindIR
  /** Sorted most specific hostname first; the hostname-less listener last. */
  listeners: CompiledListener[]
  /** The listener for a host; a route-less stand-in (every request: 404) when none serves it. */
  selectListener(host: string): CompiledListener
}

export interface CompiledConfig {
  ir: ProxyIR
  binds: Map<string, CompiledBind>
  backends: Map<string, BackendIR>
}
