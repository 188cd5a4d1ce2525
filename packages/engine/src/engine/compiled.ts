/**
 * The IR compiled for the hot path: route tables built, policies compiled, regexes made,
 * backends indexed. Built once per config version; requests hold on to the version they
 * started with, so a reload never changes a request mid-flight. The types it builds live in
 * request/compiled.ts, below the pipeline that reads them.
 */

import type { BackendIR, BackendRefIR, BindIR, ListenerIR, ProxyIR, RouteIR } from '../ir/types.ts'
import { compileModelTable } from '../pipeline/models.ts'
import { loadLlm } from '../pipeline/llm-modules.ts'
import type { CompiledBackendRef, CompiledBind, CompiledConfig, CompiledListener, CompiledRoute } from '../request/compiled.ts'
import { compilePolicySet } from '../policy/compile.ts'
import type { PolicyServices } from '../policy/services.ts'
import { RouteTable } from '../routing/route-table.ts'
import { hostnameMatches, hostnameSpecificity } from '../routing/hostname.ts'
import { WeightedPicker } from '../routing/weighted.ts'
import { frontendSettings } from '../http/frontend.ts'
import { compileListenerFilters } from '../pipeline/listener-filters.ts'

export function compileConfig (ir: ProxyIR, services: PolicyServices): CompiledConfig {
  const backends = new Map(ir.backends.map(b => [b.key, b]))
  // The pipeline's LLM code and the wire formats load here, at compile time, for a config
  // that has an AI backend (models resolve to AI backends): a request never requires them.
  if (ir.backends.some(b => b.kind === 'ai')) loadLlm()
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
  const streamRoutes = (ir.streamRoutes ?? []).slice().sort((a, b) => a.order - b.order).map(r => ({
    ir: r,
    backends: new WeightedPicker(r.backends.map(ref => ({ item: { ir: ref, backend: backends.get(ref.backend) }, weight: ref.weight })))
  }))
  const filters = compileListenerFilters(ir, services)
  // A gateway-phase urlRewrite or a listener filter's header changes can change the route.
  const mcpHandoff = !routes.some(r => r.hasMcp) ? 'none' : ir.policies.urlRewrite !== undefined || filters !== null ? 'all' : 'route'
  return { ir, filters, policies: compilePolicySet(ir.policies, services, ir.policySources), frontend: frontendSettings(ir.frontend), table: new RouteTable(routes), routes, mcpAuthRoutes: routes.some(r => r.ir.policies.mcpAuthentication !== undefined), mcpHandoff, streamRoutes }
}

function compileRoute (ir: RouteIR, backends: Map<string, BackendIR>, services: PolicyServices): CompiledRoute {
  const compileRef = (ref: BackendRefIR): CompiledBackendRef => ({
    ir: ref,
    backend: backends.get(ref.backend),
    policies: compilePolicySet(ref.policies, services, ref.policySources)
  })
  const refs: CompiledBackendRef[] = ir.backends.map(ref => {
    const compiled = compileRef(ref)
    if (ref.failover !== undefined) compiled.failover = ref.failover.map(g => g.map(p => compileRef({ backend: p.backend, weight: 1, policies: p.policies, ...(p.policySources !== undefined ? { policySources: p.policySources } : {}) })))
    return compiled
  })
  return {
    ir,
    key: ir.key,
    isMcp: refs.length > 0 && refs.every(r => r.backend?.kind === 'mcp'),
    hasMcp: refs.some(r => r.backend?.kind === 'mcp'),
    policies: compilePolicySet(ir.policies, services, ir.policySources),
    backends: new WeightedPicker(refs.map(r => ({ item: r, weight: r.ir.weight }))),
    mirrors: (ir.mirrors ?? []).map(m => ({ ir: m, backend: backends.get(m.backend) })),
    models: ir.models !== undefined && ir.models.length > 0 ? compileModelTable(ir.models, compileRef) : null
  }
}
