/**
 * PorticoModels (the model API, chart gatewayModels.enabled) → the route model tables of the
 * engine's IR (RouteIR.models), and each model's status per parent.
 *
 * A PorticoModel's spec is the standalone file's `models:` entry (one JSON Schema generates
 * both), so each namespace's models are loaded by the engine's own loader as the entries of a
 * file (config/models-to-ir.ts: the checks, concrete models as `ai` backends, virtual models,
 * targets, cycles) — secretRefs read first, as a PorticoBackend's are, and baseURLs checked
 * against the engine's SSRF rule (util/ssrf.ts), which the CRD's CEL can only approximate.
 * They are attached to one stand-in gateway there, so the loader builds every model; where a
 * model is served is decided here, from its parentRefs, the cluster's way:
 *   - a Gateway or ListenerSet (or one listener: sectionName) whose HTTP/HTTPS listener admits
 *     routes from the model's namespace (allowedRoutes, as for an HTTPRoute): the listener gets
 *     a route of its own for the LLM APIs' paths, after every HTTPRoute of it (as the file's);
 *   - an HTTPRoute of the model's namespace: its rules whose only backendRef is `{group:
 *     portico.dev, kind: PorticoModel, name: "*"}` (backends.ts isModelsRule), or the one
 *     sectionName names, on every listener the route is attached to.
 * A virtual model's targets are PorticoModels of its namespace. Two public models that tie on
 * one parent (the same pattern, or a prefix and a suffix of one length): the older keeps it,
 * the newer is not Accepted there (reason ModelConflict).
 *
 * Status per parent, as a route's: Accepted (Accepted, NoMatchingParent, NotAllowedByListeners,
 * UnsupportedValue, ModelConflict) and ResolvedRefs (ResolvedRefs, BackendNotFound for a
 * target that does not exist or cannot be served, SecretNotFound). A model with no parentRefs
 * (an internal model, a target only) has no parent to report on: its problems are reported on
 * the virtual models that name it.
 */

import { loadConfigText, MODEL_API_PATHS, modelTies, patternRank, routeModelTable, ssrfRefusal } from '@portico/engine/config'
import type { BackendIR, BackendRefIR, ListenerIR, ModelIR, RouteIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, nsName, type Condition, type HTTPRoute, type Namespace, type ObjectMeta, type ParentReference, type Secret } from './gateway-api.ts'
import { routeAllowed, type GatewayState, type ListenerState } from './gateways.ts'
import type { ListenerSetState } from './listener-sets.ts'
import { isModelsRule, unresolvedExtensionRef } from './backends.ts'
import { resolveAiGroupSecrets } from './portico-policies.ts'
import { byAge } from './routes.ts'
import { condition } from './conditions.ts'
import type { RouteParentStatus } from './status.ts'

export interface PorticoModel {
  metadata: ObjectMeta
  spec: {
    parentRefs?: ParentReference[]
    match?: { model?: string }
    visibility?: 'Public' | 'Internal'
    provider?: Record<string, unknown>
    baseURL?: string
    policies?: Record<string, unknown>
    virtualModel?: { weighted?: Array<{ model: string }>, failover?: { groups: Array<{ models: string[] }> }, conditional?: { rules: Array<{ model: string }>, fallback: string } }
    [field: string]: unknown
  }
}

export interface PorticoModelResult {
  namespace: string
  name: string
  uid?: string
  generation: number | undefined
  /** The model names it matches (spec.match.model, else its name): the printer column. */
  model: string
  parents: RouteParentStatus[]
}

/** Why a model cannot be served anywhere: the condition it sets on every parent. */
interface Problem { type: 'Accepted' | 'ResolvedRefs', reason: string, message: string }

/** Every namespace's models as the loader built them (`namespace/name` → model), and their backends by key. */
interface Built {
  models: Map<string, ModelIR>
  backends: Map<string, BackendIR>
}

const LISTENER_SET_GROUPS = new Set([GATEWAY_GROUP, 'gateway.networking.x-k8s.io'])
const MODEL_ROUTE_ORDER = Number.MAX_SAFE_INTEGER

export function applyPorticoModels (
  models: PorticoModel[],
  ctx: {
    gateways: Map<string, GatewayState>
    listenerSets: Map<string, ListenerSetState> | undefined
    routes: HTTPRoute[]
    namespaces: Map<string, Namespace>
    secrets: Map<string, Secret>
    controllerName: string
  }
): PorticoModelResult[] {
  const problems = new Map<string, Problem>()
  const byNamespace = new Map<string, PorticoModel[]>()
  for (const m of [...models].sort(byAge as never as (a: PorticoModel, b: PorticoModel) => number)) {
    const ns = m.metadata.namespace ?? ''
    const list = byNamespace.get(ns) ?? []
    list.push(m)
    byNamespace.set(ns, list)
  }
  const built: Built = { models: new Map(), backends: new Map() }
  for (const [ns, list] of byNamespace) buildNamespace(ns, list, ctx.secrets, problems, built)

  // Parents: where each model is attached, by target (a listener's IR, or a route rule's IR on one listener).
  type Target = { gateway: GatewayState, listener?: ListenerIR, route?: RouteIR, label: string }
  const targets = new Map<string, { target: Target, models: Array<{ key: string, parent: number }> }>()
  const results: PorticoModelResult[] = []
  const parentStatus = new Map<string, Array<{ ref: ParentReference, accepted: Condition, resolved: Condition, targets: string[] }>>()
  const routesByKey = new Map(ctx.routes.map(r => [nsName(r.metadata), r]))

  for (const list of byNamespace.values()) {
    for (const m of list) {
      const key = nsName(m.metadata)
      const ns = m.metadata.namespace ?? ''
      const gen = m.metadata.generation
      const problem = problems.get(key)
      const resolved = problem?.type === 'ResolvedRefs' ? condition('ResolvedRefs', false, problem.reason, problem.message, gen) : condition('ResolvedRefs', true, 'ResolvedRefs', 'All references resolved', gen)
      const entries: Array<{ ref: ParentReference, accepted: Condition, resolved: Condition, targets: string[] }> = []
      for (const ref of m.spec.parentRefs ?? []) {
        const found = parentTargets(ref, ns, ctx, routesByKey)
        if (found === null) continue // not one of ours: another controller reports on it
        const entry = { ref, accepted: condition('Accepted', true, 'Accepted', 'Model is accepted', gen), resolved, targets: [] as string[] }
        entries.push(entry)
        if ('problem' in found) {
          entry.accepted = condition('Accepted', false, found.reason, found.problem, gen)
          continue
        }
        // As a route's: a reference that does not resolve leaves it Accepted with ResolvedRefs
        // False (and not served: the table has no such model, the client gets the unknown-model answer).
        if (problem !== undefined) {
          if (problem.type === 'Accepted') entry.accepted = condition('Accepted', false, problem.reason, problem.message, gen)
          continue
        }
        for (const t of found.targets) {
          const id = t.route !== undefined ? `${t.label}#${t.route.key}` : t.label
          const slot = targets.get(id) ?? { target: t, models: [] }
          slot.models.push({ key, parent: entries.length - 1 })
          targets.set(id, slot)
          entry.targets.push(id)
        }
      }
      parentStatus.set(key, entries)
    }
  }

  // Ties on one target (the engine's rule, modelTies, on the models in age order): the older
  // model keeps it; a newer one that ties with a model still served there is not accepted.
  const byKey = new Map(models.map(m => [nsName(m.metadata), m]))
  for (const [, slot] of targets) {
    // Older first across namespaces too (creation time, then namespace/name).
    slot.models.sort((a, b) => byAge(byKey.get(a.key)! as never, byKey.get(b.key)! as never))
    const rivals = new Map<string, ModelIR[]>()
    for (const { model, other } of modelTies(slot.models.map(m => m.key), built.models)) rivals.set(model.name, [...(rivals.get(model.name) ?? []), other])
    if (rivals.size === 0) continue
    const lost = new Set<string>()
    for (const { key, parent } of slot.models) {
      const tie = rivals.get(key)?.find(o => !lost.has(o.name))
      if (tie === undefined) continue
      lost.add(key)
      const model = built.models.get(key)!
      const entry = parentStatus.get(key)![parent]!
      entry.accepted = condition('Accepted', false, 'ModelConflict', `"${model.match}" ties with PorticoModel ${tie.name} ("${tie.match}") on ${slot.target.label}: equally specific patterns that match the same model (rank ${patternRank(model.match)}); the older model is served`, entry.accepted.observedGeneration)
    }
  }
  // A parent not accepted on one of its targets (a tie) is not served on any: one status, one truth.
  for (const [, slot] of targets) {
    slot.models = slot.models.filter(({ key, parent }) => parentStatus.get(key)![parent]!.accepted.status === 'True')
  }

  // The tables.
  const listenerRoutes = new Map<ListenerIR, RouteIR>()
  for (const [, { target, models: attached }] of targets) {
    let route = target.route
    if (route === undefined) {
      if (attached.length === 0) continue
      route = listenerRoutes.get(target.listener!)
      if (route === undefined) {
        route = {
          key: `models:${target.label}`,
          name: 'models',
          namespace: target.gateway.gw.metadata.namespace ?? '',
          hostnames: [],
          // The LLM APIs' paths only, as a gateway's models in the file (other paths 404 as before).
          matches: [{ path: { kind: 'regex', value: MODEL_API_PATHS }, headers: [], query: [] }],
          policies: {},
          backends: [],
          // After every HTTPRoute of the listener: a route of its own with the same match wins.
          order: MODEL_ROUTE_ORDER
        }
        listenerRoutes.set(target.listener!, route)
        target.listener!.routes.push(route)
      }
    }
    // The engine's table (routeModelTable): the attached models and every model they reach.
    route.models = routeModelTable(attached.map(a => a.key), built.models)
    for (const m of route.models) for (const b of backendsOf(m)) target.gateway.backends.set(b, built.backends.get(b)!)
  }

  for (const list of byNamespace.values()) {
    for (const m of list) {
      const key = nsName(m.metadata)
      results.push({
        namespace: m.metadata.namespace ?? '',
        name: m.metadata.name,
        ...(m.metadata.uid !== undefined ? { uid: m.metadata.uid } : {}),
        generation: m.metadata.generation,
        model: m.spec.match?.model ?? m.metadata.name,
        parents: parentStatus.get(key)!.map(e => ({ parentRef: e.ref, controllerName: ctx.controllerName, conditions: [e.accepted, e.resolved] }))
      })
    }
  }
  return results.sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`))
}

/** Backend keys a model's IR names (its own, or a failover virtual model's providers). */
function backendsOf (m: ModelIR): string[] {
  const out: string[] = []
  if (m.backend !== undefined) out.push(m.backend.backend, ...(m.backend.failover ?? []).flat().map(p => p.backend))
  if (m.virtual?.kind === 'failover') out.push(...m.virtual.groups.flat().map(p => p.backend))
  return out
}

/**
 * Where a parentRef serves a model: the listeners (or route rules on listeners), or why it
 * cannot; null when the parent is not one of ours.
 */
function parentTargets (
  ref: ParentReference,
  modelNs: string,
  ctx: { gateways: Map<string, GatewayState>, listenerSets: Map<string, ListenerSetState> | undefined, namespaces: Map<string, Namespace> },
  routes: Map<string, HTTPRoute>
): { targets: Array<{ gateway: GatewayState, listener?: ListenerIR, route?: RouteIR, label: string }> } | { problem: string, reason: string } | null {
  const kind = ref.kind ?? 'Gateway'
  const group = ref.group ?? GATEWAY_GROUP
  const parentKey = `${ref.namespace ?? modelNs}/${ref.name}`
  if (kind === 'HTTPRoute') {
    if (group !== GATEWAY_GROUP) return null
    const route = routes.get(parentKey)
    if ((ref.namespace ?? modelNs) !== modelNs) {
      // Only ours to say when the route is attached to one of our Gateways.
      if (route === undefined || !servedByUs(route, ctx.gateways)) return null
      return { reason: 'NotAllowedByListeners', problem: `HTTPRoute ${parentKey} is in another namespace: a model attaches to routes of its own namespace` }
    }
    if (route === undefined) return null
    if (!servedByUs(route, ctx.gateways)) return null
    const rules = (route.spec.rules ?? []).map((rule, i) => ({ rule, i })).filter(({ rule }) => ref.sectionName === undefined || rule.name === ref.sectionName)
    if (rules.length === 0) return { reason: 'NoMatchingParent', problem: `HTTPRoute ${parentKey} has no rule named ${ref.sectionName}` }
    const allModelRules = rules.filter(({ rule }) => isModelsRule(rule))
    if (allModelRules.length === 0) return { reason: 'NoMatchingParent', problem: `HTTPRoute ${parentKey}${ref.sectionName !== undefined ? ` rule ${ref.sectionName}` : ''} has no rule whose only backendRef is {group: portico.dev, kind: PorticoModel, name: "*"}` }
    // A rule with an ExtensionRef answers 500 to every request (backends.ts): models must not serve it past the filter.
    const modelRules = allModelRules.filter(({ rule, i }) => unresolvedExtensionRef(rule.filters, `spec.rules[${i}].filters`) === null)
    if (modelRules.length === 0) {
      const { rule, i } = allModelRules[0]!
      return { reason: 'NoMatchingParent', problem: `HTTPRoute ${parentKey}: ${unresolvedExtensionRef(rule.filters, `spec.rules[${i}].filters`)!}` }
    }
    const keys = new Set(modelRules.map(({ rule, i }) => `${parentKey}.${rule.name ?? i}`))
    const targets: Array<{ gateway: GatewayState, listener?: ListenerIR, route?: RouteIR, label: string }> = []
    for (const g of ctx.gateways.values()) {
      for (const l of [...g.listeners, ...(g.listenerSetListeners ?? [])]) {
        for (const r of l.ir?.routes ?? []) if (keys.has(r.key)) targets.push({ gateway: g, route: r, label: `${nsName(g.gw.metadata)}/${l.listener.name}` })
      }
    }
    if (targets.length === 0) return { reason: 'NoMatchingParent', problem: `HTTPRoute ${parentKey} is not accepted on any listener` }
    return { targets }
  }
  let listeners: ListenerState[]
  let gateway: GatewayState
  let owner: { metadata: { namespace?: string } }
  if (kind === 'Gateway' && group === GATEWAY_GROUP) {
    const g = ctx.gateways.get(parentKey)
    if (g === undefined) return null
    gateway = g
    listeners = g.listeners
    owner = g.gw
  } else if (kind === 'ListenerSet' && LISTENER_SET_GROUPS.has(group)) {
    const set = ctx.listenerSets?.get(parentKey)
    if (set === undefined) return null
    if (set.problem !== null && set.problem.reason !== 'ListenersNotValid') return { reason: 'NoMatchingParent', problem: `ListenerSet ${parentKey} is not accepted: ${set.problem.message}` }
    gateway = set.gatewayState
    listeners = set.listeners
    owner = set.ls
  } else {
    return null
  }
  const candidates = listeners.filter(l => ref.sectionName === undefined || l.listener.name === ref.sectionName)
  if (candidates.length === 0) return { reason: 'NoMatchingParent', problem: `no listener named ${ref.sectionName}` }
  // A model is admitted as an HTTPRoute of its namespace would be: HTTP listeners, allowedRoutes.
  const stand = { kind: 'HTTPRoute', metadata: { name: '', namespace: modelNs }, spec: {} } as HTTPRoute
  const allowed = candidates.filter(l => l.attachable && routeAllowed(l, stand, owner, ctx.namespaces))
  if (allowed.length === 0) return { reason: 'NotAllowedByListeners', problem: 'no HTTP listener allows routes from this namespace' }
  const served = allowed.filter(l => l.ir !== null)
  if (served.length === 0) return { reason: 'NoMatchingParent', problem: 'no listener is programmed (see the Gateway\'s listener conditions)' }
  return { targets: served.map(l => ({ gateway, listener: l.ir!, label: `${nsName(gateway.gw.metadata)}/${l.listener.name}` })) }
}

/** Whether one of our Gateways (or their ListenerSets) serves some rule of the route. */
function servedByUs (route: HTTPRoute, gateways: Map<string, GatewayState>): boolean {
  const prefix = `${nsName(route.metadata)}.`
  for (const g of gateways.values()) for (const l of [...g.listeners, ...(g.listenerSetListeners ?? [])]) if (l.ir?.routes.some(r => r.key.startsWith(prefix))) return true
  return false
}

/**
 * A namespace's models through the engine's loader, attached to one stand-in gateway. A model the loader refuses is left out and the rest loaded again (a virtual model whose
 * target was left out then fails on it, and so on), so one bad resource never stops the others.
 */
function buildNamespace (ns: string, list: PorticoModel[], secrets: Map<string, Secret>, problems: Map<string, Problem>, out: Built): void {
  const files = new Map<string, string>()
  /** Secret values read: never in a message. */
  const values: string[] = []
  const scrub = (message: string) => values.reduce((m, v) => v.length > 0 ? m.split(v).join('<secret>') : m, message)
  const entries = new Map<string, Record<string, unknown>>()
  for (const m of list) {
    const key = nsName(m.metadata)
    const { parentRefs: _p, ...spec } = m.spec
    if (spec.baseURL !== undefined) {
      const refusal = ssrfRefusal(spec.baseURL)
      if (refusal !== null) {
        problems.set(key, { type: 'Accepted', reason: 'UnsupportedValue', message: `spec.baseURL ${refusal}: refused in a cluster (SSRF)` })
        continue
      }
    }
    let policies = spec.policies
    if (policies !== undefined) {
      const resolved = resolveAiGroupSecrets(m.metadata, undefined, policies, secrets)
      if (!resolved.ok) {
        problems.set(key, { type: 'ResolvedRefs', reason: 'SecretNotFound', message: resolved.message })
        continue
      }
      policies = resolved.policies as Record<string, unknown>
      for (const [path, text] of resolved.files) files.set(path, text)
      values.push(...resolved.values)
    }
    entries.set(m.metadata.name, { name: m.metadata.name, ...spec, ...(policies !== undefined ? { policies } : {}), match: { model: m.spec.match?.model ?? m.metadata.name } })
  }
  const nameOf = (name: string) => `${ns}/${name}`
  for (let round = 0; round <= list.length && entries.size > 0; round++) {
    const names = [...entries.keys()]
    // All on one stand-in gateway, none able to tie with another there (ties are decided per
    // real parent, above): concrete models as Internal (never selectable, so never tied),
    // virtual models (Public by rule) under a unique stand-in name. Both are put back after.
    const config = {
      gateways: { models: { port: 1 } },
      models: names.map((n, i) => {
        const e = entries.get(n)!
        return e.virtualModel !== undefined
          ? { ...e, match: { model: `portico-stand-in-${i}` }, parentRefs: [{ name: 'models' }] }
          : { ...e, visibility: 'Internal', parentRefs: [{ name: 'models' }] }
      })
    }
    const result = loadConfigText(JSON.stringify(config), {
      baseDir: '/',
      readFile: path => {
        const text = files.get(path)
        if (text === undefined) throw Object.assign(new Error('no files in a cluster'), { code: 'ENOENT' })
        return text
      }
    })
    if (!result.ok) {
      let blamed = false
      for (const d of result.diagnostics) {
        if (d.path[0] !== 'models' || typeof d.path[1] !== 'number') continue
        const name = names[d.path[1]]!
        if (!entries.has(name)) continue
        entries.delete(name)
        blamed = true
        const field = d.path.slice(2).map(p => typeof p === 'number' ? `[${p}]` : `.${p}`).join('')
        const missing = /^no model named "(.*)"/.exec(d.message)
        // A target that exists but was left out for a problem of its own: say which.
        const targetProblem = missing === null ? undefined : problems.get(nameOf(missing[1]!))
        problems.set(nameOf(name), missing === null
          ? { type: 'Accepted', reason: 'UnsupportedValue', message: scrub(`spec${field}: ${d.message}`) }
          : targetProblem !== undefined
            ? { type: 'ResolvedRefs', reason: 'BackendNotFound', message: scrub(`spec${field}: model "${missing[1]}" cannot be served: ${targetProblem.message}`) }
            : { type: 'ResolvedRefs', reason: 'BackendNotFound', message: scrub(`spec${field}: ${d.message.replace(/ \(models: .*\)$/, '')} in namespace ${ns} (a virtual model's targets are PorticoModels of its own namespace)`) })
        // A cycle is every member's problem, not only the one whose reference closes it.
        const cycle = /virtual models form a cycle: (.*)$/.exec(d.message)
        for (const member of cycle?.[1]!.split(' → ') ?? []) {
          if (!entries.delete(member)) continue
          problems.set(nameOf(member), { type: 'Accepted', reason: 'UnsupportedValue', message: `spec.virtualModel: ${d.message}` })
        }
      }
      if (!blamed) {
        // Not one model's fault (cannot happen with a valid schema): every model says so.
        for (const name of names) problems.set(nameOf(name), { type: 'Accepted', reason: 'UnsupportedValue', message: scrub(result.diagnostics[0]?.message ?? 'cannot be loaded') })
        return
      }
      continue
    }
    // Keys: unique in the cluster (another namespace may have a model of the same name).
    const rekey = (k: string) => `model/${ns}/${k}`
    const ref = (r: BackendRefIR): BackendRefIR => ({ ...r, backend: rekey(r.backend), ...(r.failover !== undefined ? { failover: r.failover.map(g => g.map(p => ({ ...p, backend: rekey(p.backend) }))) } : {}) })
    for (const b of result.config.ir.backends) out.backends.set(rekey(b.key), { ...b, key: rekey(b.key), namespace: ns })
    for (const bind of result.config.ir.binds) {
      for (const l of bind.listeners) {
        for (const route of l.routes) {
          if (route.models === undefined) continue
          for (const mm of route.models) {
            if (out.models.has(nameOf(mm.name))) continue
            const v = mm.virtual
            const e = entries.get(mm.name)!
            out.models.set(nameOf(mm.name), {
              ...mm,
              name: nameOf(mm.name),
              match: (e.match as { model: string }).model,
              visibility: e.visibility === 'Internal' ? 'Internal' : 'Public',
              attached: false,
              ...(mm.backend !== undefined ? { backend: ref(mm.backend) } : {}),
              ...(v === undefined
                ? {}
                : {
                    virtual: v.kind === 'weighted'
                      ? { kind: 'weighted', targets: v.targets.map(t => ({ ...t, model: nameOf(t.model) })) }
                      : v.kind === 'conditional'
                        ? { kind: 'conditional', rules: v.rules.map(r => ({ ...r, model: nameOf(r.model) })), fallback: nameOf(v.fallback) }
                        : { kind: 'failover', groups: v.groups.map(g => g.map(p => ({ ...p, backend: rekey(p.backend) }))), models: v.models.map(g => g.map(nameOf)) }
                  })
            })
          }
        }
      }
    }
    return
  }
}
