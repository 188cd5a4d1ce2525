/**
 * The IR compiled for the hot path: route tables built, policies compiled, regexes made,
 * backends indexed. Built once per config version; requests hold on to the version they
 * started with, so a reload never changes a request mid-flight.
 */

import type { BackendIR, BackendRefIR, BindIR, ListenerIR, ProxyIR, RouteIR } from '../ir/types.ts'
import type { CompiledPolicySet } from '../policy/types.ts'
import type { RequestMirrorIR } from '../ir/traffic.ts'
import { compilePolicySet } from '../policy/compile.ts'
import type { PolicyServices } from '../policy/services.ts'
import { RouteTable } from '../routing/route-table.ts'
import { hostnameMatches, hostnameSpecificity } from '../routing/hostname.ts'
import { WeightedPicker } from '../routing/weighted.ts'
import { frontendSettings, type FrontendSettings } from '../http/frontend.ts'

export interface CompiledBackendRef {
  ir: BackendRefIR
  backend: BackendIR | undefined
  policies: CompiledPolicySet
}

export interface CompiledRoute {
  ir: RouteIR
  key: string
  /** Every backend is an MCP backend: authorization defers item rules to the MCP layer. */
  isMcp: boolean
  policies: CompiledPolicySet
  backends: WeightedPicker<CompiledBackendRef>
  /** RequestMirror targets (empty without mirrors). */
  mirrors: Array<{ ir: RequestMirrorIR, backend: BackendIR | undefined }>
}

export interface CompiledListener {
  ir: ListenerIR
  policies: CompiledPolicySet
  table: RouteTable<CompiledRoute>
  /** What the listener accepts from clients (X-Forwarded-* trust, upgrades, body idle), defaults filled in. */
  frontend: FrontendSettings
  /** Some route has mcpAuthentication: the listener serves protected-resource metadata. */
  mcpAuthRoutes: boolean
  routes: CompiledRoute[]
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

export function compileConfig (ir: ProxyIR, services: PolicyServices): CompiledConfig {
  const backends = new Map(ir.backends.map(b => [b.key, b]))
  const binds = new Map<string, CompiledBind>()
  for (const bind of ir.binds) binds.set(bind.key, compileBind(bind, backends, services))
  return { ir, binds, backends }
}

function compileBind (ir: BindIR, backends: Map<string, BackendIR>, services: PolicyServices): CompiledBind {
  const listeners = ir.listeners
    .map(l => compileListener(l, backends, services))
    .sort((a, b) => hostnameSpecificity(b.ir.hostname) - hostnameSpecificity(a.ir.hostname))
  const single = listeners.length === 1 && listeners[0]!.ir.hostname === undefined ? listeners[0] : undefined
  const none = compileListener({ key: '', gateway: '', name: '', protocol: ir.protocol, policies: {}, routes: [] }, backends, services)
  return {
    ir,
    listeners,
    selectListener: single !== undefined
      ? () => single
      : (host: string) => listeners.find(l => l.ir.hostname === undefined || hostnameMatches(l.ir.hostname, host)) ?? none
  }
}

function compileListener (ir: ListenerIR, backends: Map<string, BackendIR>, services: PolicyServices): CompiledListener {
  const routes = ir.routes.map(r => compileRoute(r, backends, services))
  return { ir, policies: compilePolicySet(ir.policies, services), frontend: frontendSettings(ir.frontend), table: new RouteTable(routes), routes, mcpAuthRoutes: routes.some(r => r.ir.policies.mcpAuthentication !== undefined) }
}

function compileRoute (ir: RouteIR, backends: Map<string, BackendIR>, services: PolicyServices): CompiledRoute {
  const refs: CompiledBackendRef[] = ir.backends.map(ref => ({
    ir: ref,
    backend: backends.get(ref.backend),
    policies: compilePolicySet(ref.policies, services)
  }))
  return {
    ir,
    key: ir.key,
    isMcp: refs.length > 0 && refs.every(r => r.backend?.kind === 'mcp'),
    policies: compilePolicySet(ir.policies, services),
    backends: new WeightedPicker(refs.map(r => ({ item: r, weight: r.ir.weight }))),
    mirrors: (ir.mirrors ?? []).map(m => ({ ir: m, backend: backends.get(m.backend) }))
  }
}
