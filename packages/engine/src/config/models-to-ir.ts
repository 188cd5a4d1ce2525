/**
 * The model API's `models:` (the file) → each route's model table (RouteIR.models), checked
 * as agentgateway checks AgentgatewayModels: exactly one of provider or virtualModel;
 * wildcards only `*`, `x-*`, `*-x`; no tie between equally specific patterns on one parent;
 * virtual models public, without policies, their targets existing and free of cycles;
 * baseURL absolute http(s) with a host (and, with `refuseLocalBaseURL` — the controller's —
 * not loopback, link-local or a metadata service: util/ssrf.ts).
 *
 * A concrete model is an `ai` backend like any: it is translated as a route backend entry
 * (`translateBackends`, config/to-ir.ts's own route translation, so keys, policies,
 * credentials and passive health are the same code), its errors reported at the model's own
 * fields. A failover virtual model becomes an `ai` backend's failover groups the same way
 * (pipeline/failover.ts serves them), one provider per target.
 */

import type { ModelConfig, RouteBackendConfig, RouteConfig } from './schema.ts'
import type { AiBackendSpecIR, BackendIR, BackendRefIR, ListenerIR, ModelIR, RouteIR, VirtualModelIR } from '../ir/types.ts'
import { compileCel } from '../cel/expression.ts'
import { BODY_EDIT_CEL_VARIABLES } from '../llm/body-edits.ts'
import { ssrfRefusal } from '../util/ssrf.ts'
import { matchProblem, tiesWith } from '../llm/model-match.ts'

type Path = Array<string | number>
type Report = (path: Path, message: string) => void

/** Variables conditional rules and transformations see: the request's, and `llm.request` (model, messageCount, body). */
const MODEL_CEL_VARIABLES = BODY_EDIT_CEL_VARIABLES

export interface ModelsContext {
  report: Report
  /** config/to-ir.ts's route translation: the route's backends built into the IR's backends. */
  translateBackends: (route: RouteConfig, path: Path, report: Report) => RouteIR
  /** The IR's backends by key (a model's transformations go into its ai backend's spec). */
  backends: Map<string, BackendIR>
  /** Cluster mode: refuse baseURLs at loopback, link-local or metadata addresses. */
  refuseLocalBaseURL?: boolean
}

/**
 * The paths a gateway's models answer (llm/formats/index.ts tells the client format by the
 * same endings): chat completions, Responses, Messages, embeddings, model lists, Gemini's and
 * Bedrock's per-model paths. Any other path of the gateway is not the models' (404 as before).
 */
export const MODEL_API_PATHS = '/(.*/)?(chat/completions|responses|messages|embeddings|models)/?|/(.*/)?models/[^/:]+:(generateContent|streamGenerateContent)|/(.*/)?model/[^/]+/(converse|converse-stream)'

const FORBIDDEN_FIELDS = new Set(['__proto__', 'constructor', 'prototype'])

/** A model's transformations as the ai backend's IR carries them (llm/body-edits.ts applies them). */
function transformationsIR (m: ModelConfig): AiBackendSpecIR['transformations'] | undefined {
  const request = m.policies?.transformations?.request
  if (request === undefined) return undefined
  const out: NonNullable<AiBackendSpecIR['transformations']> = {}
  for (const step of ['beforeConversion', 'afterConversion'] as const) {
    const edit = request[step]
    if (edit === undefined) continue
    out[step] = { set: Object.entries(edit.set ?? {}).map(([field, expression]) => ({ field, expression })), remove: [...(edit.remove ?? [])] }
  }
  return Object.keys(out).length > 0 ? out : undefined
}

const ROUTE_FIELDS_OF_CONCRETE = ['baseURL', 'pathOverride', 'tokenize', 'pricing'] as const

/** The model each virtual model names, with where it names it. */
function targetsOf (m: ModelConfig, at: Path): Array<{ model: string, at: Path }> {
  const v = m.virtualModel
  if (v === undefined) return []
  const out: Array<{ model: string, at: Path }> = []
  v.weighted?.forEach((t, i) => out.push({ model: t.model, at: [...at, 'virtualModel', 'weighted', i, 'model'] }))
  v.failover?.groups.forEach((g, gi) => g.models.forEach((name, i) => out.push({ model: name, at: [...at, 'virtualModel', 'failover', 'groups', gi, 'models', i] })))
  v.conditional?.rules.forEach((r, i) => out.push({ model: r.model, at: [...at, 'virtualModel', 'conditional', 'rules', i, 'model'] }))
  if (v.conditional !== undefined) out.push({ model: v.conditional.fallback, at: [...at, 'virtualModel', 'conditional', 'fallback'] })
  return out
}

/** Maps a path of the stand-in route a model is translated on to the model's own field. */
function modelPath (at: Path, standIn: Path) {
  return (p: Path): Path => {
    if (p.length < standIn.length || standIn.some((x, i) => p[i] !== x)) return p
    let rest = p.slice(standIn.length)
    if (rest[0] === 'backends' && rest[1] === 0) rest = rest.slice(2)
    if (rest[0] === 'ai') {
      rest = rest.slice(1)
      if (rest[0] === 'hostOverride' || rest[0] === 'pathPrefix') rest = ['baseURL']
    }
    return [...at, ...rest]
  }
}

/** The provider's own settings (model, deploymentName, ...) of a concrete model. */
function providerSettings (m: ModelConfig): Record<string, unknown> | undefined {
  const p = m.provider as Record<string, Record<string, unknown> | undefined> | undefined
  if (p === undefined) return undefined
  const names = Object.keys(p).filter(k => p[k] !== undefined)
  return names.length === 1 ? p[names[0]!] : undefined
}

/**
 * The route backend entry a concrete model is: its provider, baseURL as hostOverride +
 * pathPrefix, its policies (transformations aside). An exact match is the model sent to the
 * provider unless the provider names one, so a virtual model's choice asks for the right one.
 */
function backendEntry (m: ModelConfig, match: string, aiName: string): RouteBackendConfig {
  const ai: NonNullable<RouteBackendConfig['ai']> = { name: aiName }
  let provider = m.provider!
  const settings = providerSettings(m)
  if (settings !== undefined && settings.model === undefined && settings.deploymentName === undefined && !match.includes('*')) {
    const name = Object.keys(provider).find(k => (provider as Record<string, unknown>)[k] !== undefined)!
    provider = { ...provider, [name]: { ...settings, model: match } }
  }
  ai.provider = provider
  if (m.baseURL !== undefined) {
    const url = new URL(m.baseURL)
    ai.hostOverride = `${url.protocol}//${url.host}`
    const path = url.pathname.replace(/\/+$/, '')
    if (path !== '') ai.pathPrefix = path
  }
  if (m.pathOverride !== undefined) ai.pathOverride = m.pathOverride
  if (m.tokenize !== undefined) ai.tokenize = m.tokenize
  if (m.pricing !== undefined) ai.pricing = m.pricing
  const entry: RouteBackendConfig = { ai }
  const { transformations: _t, ...policies } = m.policies ?? {}
  if (Object.keys(policies).length > 0) entry.policies = policies as RouteBackendConfig['policies']
  return entry
}

/** Checks one model's own fields; false when it cannot be used. */
function checkModel (m: ModelConfig, at: Path, ctx: ModelsContext): boolean {
  const { report } = ctx
  let ok = true
  const fail = (p: Path, message: string) => { report(p, message); ok = false }
  if ((m.provider === undefined) === (m.virtualModel === undefined)) {
    fail(at, 'needs exactly one of provider (a concrete model) or virtualModel')
    return false
  }
  const match = m.match?.model ?? m.name
  const problem = matchProblem(match)
  if (problem !== null) fail(m.match !== undefined ? [...at, 'match', 'model'] : [...at, 'name'], problem)
  if (m.virtualModel !== undefined) {
    if (m.visibility === 'Internal') fail([...at, 'visibility'], 'a virtual model is Public (internal models are reached through one)')
    if (m.policies !== undefined) fail([...at, 'policies'], 'a virtual model carries no policies: set them on its concrete models')
    for (const field of ROUTE_FIELDS_OF_CONCRETE) if (m[field] !== undefined) fail([...at, field], 'applies to concrete models (with provider), not to a virtual model')
    const v = m.virtualModel
    const kinds = (['weighted', 'failover', 'conditional'] as const).filter(k => v[k] !== undefined)
    if (kinds.length !== 1) fail([...at, 'virtualModel'], `needs exactly one of weighted, failover or conditional${kinds.length > 1 ? ` (got ${kinds.join(', ')})` : ''}`)
    if (v.weighted !== undefined && !v.weighted.some(t => t.weight > 0)) fail([...at, 'virtualModel', 'weighted'], 'needs a target with a weight above 0')
    v.conditional?.rules.forEach((r, i) => {
      try {
        compileCel(r.when, MODEL_CEL_VARIABLES, { expectBool: true })
      } catch (err) {
        fail([...at, 'virtualModel', 'conditional', 'rules', i, 'when'], (err as Error).message)
      }
    })
    if (v.failover !== undefined) {
      const seen = new Set<string>()
      v.failover.groups.forEach((g, gi) => g.models.forEach((name, i) => {
        if (seen.has(name)) fail([...at, 'virtualModel', 'failover', 'groups', gi, 'models', i], `model "${name}" is listed twice`)
        seen.add(name)
      }))
    }
    return ok
  }
  if (m.baseURL !== undefined) {
    let url: URL | null = null
    try {
      url = new URL(m.baseURL)
    } catch {}
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') fail([...at, 'baseURL'], 'must be an absolute http(s) URL with a host')
    else if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') fail([...at, 'baseURL'], 'must not carry credentials, a query or a fragment (the key goes in policies.backendAuth)')
    else if (ctx.refuseLocalBaseURL === true) {
      const refusal = ssrfRefusal(m.baseURL)
      if (refusal !== null) fail([...at, 'baseURL'], `${refusal}: refused in cluster mode`)
    }
  }
  const request = m.policies?.transformations?.request
  for (const step of ['beforeConversion', 'afterConversion'] as const) {
    const edit = request?.[step]
    if (edit === undefined) continue
    const stepAt = [...at, 'policies', 'transformations', 'request', step]
    for (const [field, expression] of Object.entries(edit.set ?? {})) {
      if (field.split('.').some(k => FORBIDDEN_FIELDS.has(k))) fail([...stepAt, 'set', field], 'names a field no body edit may write (__proto__, constructor, prototype)')
      try {
        compileCel(expression, MODEL_CEL_VARIABLES)
      } catch (err) {
        fail([...stepAt, 'set', field], (err as Error).message)
      }
    }
    ;(edit.remove ?? []).forEach((field, i) => {
      if (field.split('.').some(k => FORBIDDEN_FIELDS.has(k))) fail([...stepAt, 'remove', i], 'names a field no body edit may write (__proto__, constructor, prototype)')
    })
  }
  return ok
}

/** Puts a model's transformations into its ai backend's spec (the backend is the model's own: no other shares it). */
function withTransformations (backends: Map<string, BackendIR>, key: string, m: ModelConfig): void {
  const t = transformationsIR(m)
  const backend = backends.get(key)
  if (t === undefined || backend?.ai === undefined) return
  backends.set(key, { ...backend, ai: { ...backend.ai, transformations: t } })
}

/** Reports cycles among virtual models (each once, as a → b → a); returns the models on one. */
function findCycles (byName: Map<string, { m: ModelConfig, at: Path }>, report: Report): Set<string> {
  const state = new Map<string, 'visiting' | 'done'>()
  const onCycle = new Set<string>()
  const stack: string[] = []
  const visit = (name: string) => {
    state.set(name, 'visiting')
    stack.push(name)
    const entry = byName.get(name)!
    for (const t of targetsOf(entry.m, entry.at)) {
      if (!byName.has(t.model)) continue
      const s = state.get(t.model)
      if (s === 'visiting') {
        const cycle = [...stack.slice(stack.indexOf(t.model)), t.model]
        cycle.forEach(n => onCycle.add(n))
        report(t.at, `virtual models form a cycle: ${cycle.join(' → ')}`)
      } else if (s === undefined) visit(t.model)
    }
    stack.pop()
    state.set(name, 'done')
  }
  for (const name of byName.keys()) if (state.get(name) === undefined) visit(name)
  return onCycle
}

export interface TranslatedModels {
  /** Every usable model by name, `attached` false (attachModels sets it per route). */
  models: Map<string, ModelIR>
  /** The file's entries by name (for attachment), with their paths. */
  entries: Map<string, { m: ModelConfig, at: Path }>
}

export function modelsToIR (models: ModelConfig[], ctx: ModelsContext): TranslatedModels {
  const { report } = ctx
  const entries = new Map<string, { m: ModelConfig, at: Path }>()
  const usable = new Set<string>()
  models.forEach((m, i) => {
    const at: Path = ['models', i]
    if (entries.has(m.name)) {
      report([...at, 'name'], `another model is named "${m.name}"`)
      return
    }
    entries.set(m.name, { m, at })
    if (checkModel(m, at, ctx)) usable.add(m.name)
  })

  // Targets exist; failover targets are concrete (they are providers of failover groups), and
  // a virtual model's concrete targets with a wildcard match name their provider's model.
  for (const { m, at } of entries.values()) {
    for (const t of targetsOf(m, at)) {
      const target = entries.get(t.model)
      if (target === undefined) {
        report(t.at, `no model named "${t.model}"${entries.size > 0 ? ` (models: ${[...entries.keys()].slice(0, 20).join(', ')}${entries.size > 20 ? ', ...' : ''})` : ''}`)
        usable.delete(m.name)
        continue
      }
      if (target.m.provider === undefined && m.virtualModel?.failover !== undefined) {
        report(t.at, `"${t.model}" is a virtual model: failover groups list concrete models`)
        usable.delete(m.name)
      }
      const match = target.m.match?.model ?? target.m.name
      const settings = providerSettings(target.m)
      if (target.m.provider !== undefined && match.includes('*') && settings?.model === undefined && settings?.deploymentName === undefined) {
        report(t.at, `"${t.model}" matches "${match}": as a virtual model's target it needs provider.<name>.model (which model to ask the provider for)`)
        usable.delete(m.name)
      }
    }
  }
  for (const name of findCycles(entries, report)) usable.delete(name)

  const out = new Map<string, ModelIR>()
  const backendOf = new Map<string, BackendRefIR>()
  for (const [name, { m, at }] of entries) {
    if (!usable.has(name) || m.provider === undefined) continue
    const standIn: Path = [...at, '#model']
    const match = m.match?.model ?? name
    const route = ctx.translateBackends({ name: `model:${name}`, backends: [backendEntry(m, match, `model:${name}`)] }, standIn, (p, message) => report(modelPath(at, standIn)(p), message))
    const ref = route.backends[0]
    if (ref === undefined) {
      usable.delete(name)
      continue
    }
    withTransformations(ctx.backends, ref.backend, m)
    backendOf.set(name, ref)
    out.set(name, { name, match, visibility: m.visibility ?? 'Public', attached: false, backend: ref })
  }
  // A virtual model whose target could not be built is not served either (the target's own
  // error says why); repeated until nothing changes, for virtual models of virtual models.
  const virtuals = [...entries.values()].filter(e => e.m.virtualModel !== undefined && usable.has(e.m.name))
  let changed = true
  while (changed) {
    changed = false
    for (const { m, at } of virtuals) {
      if (!usable.has(m.name)) continue
      if (targetsOf(m, at).some(t => !usable.has(t.model))) {
        usable.delete(m.name)
        changed = true
      }
    }
  }
  for (const { m, at } of virtuals) {
    if (!usable.has(m.name)) continue
    const v = m.virtualModel!
    let virtual: VirtualModelIR | undefined
    if (v.weighted !== undefined) virtual = { kind: 'weighted', targets: v.weighted.map(t => ({ model: t.model, weight: t.weight })) }
    else if (v.conditional !== undefined) virtual = { kind: 'conditional', rules: v.conditional.rules.map(r => ({ when: r.when, model: r.model })), fallback: v.conditional.fallback }
    else {
      // Failover: the targets as providers of an ai backend's groups, passive health on.
      const groups = v.failover!.groups.map(g => ({
        providers: g.models.map(name => {
          const { ai, policies } = backendEntry(entries.get(name)!.m, out.get(name)!.match, name)
          const { name: _n, ...where } = ai!
          return { name, ...where, ...(policies !== undefined ? { policies } : {}) } as never
        })
      }))
      const standIn: Path = [...at, '#failover']
      // The targets' own errors were reported when they were built: not again here.
      const route = ctx.translateBackends({ name: `model:${m.name}`, backends: [{ ai: { name: `model:${m.name}`, groups } }] }, standIn, () => {})
      const failover = route.backends[0]?.failover
      if (failover === undefined) continue
      failover.forEach((g, gi) => g.forEach((p, i) => withTransformations(ctx.backends, p.backend, entries.get(v.failover!.groups[gi]!.models[i]!)!.m)))
      virtual = { kind: 'failover', groups: failover, models: v.failover!.groups.map(g => [...g.models]) }
    }
    out.set(m.name, { name: m.name, match: m.match?.model ?? m.name, visibility: 'Public', attached: false, virtual })
  }
  return { models: out, entries }
}

/** Every model `name` can reach (itself, and its targets' targets). */
function reachable (name: string, models: Map<string, ModelIR>, into: Set<string>): void {
  if (into.has(name)) return
  const m = models.get(name)
  if (m === undefined) return
  into.add(name)
  const v = m.virtual
  if (v === undefined) return
  const next = v.kind === 'weighted' ? v.targets.map(t => t.model) : v.kind === 'failover' ? v.models.flat() : [...v.rules.map(r => r.model), v.fallback]
  for (const t of next) reachable(t, models, into)
}

export interface ModelParents {
  listenersByGateway: Map<string, ListenerIR>
  declaredGateways: ReadonlySet<string>
  defaultGateway: string
}

/**
 * Attaches each model to its parents: a gateway gets a route of its own (`models:<gateway>`,
 * on the LLM APIs' paths, after the file's routes), a route named by an HTTPRoute ref gets the table
 * in place of backends. Ties between attached public models of one parent are refused.
 */
export function attachModels (translated: TranslatedModels, parents: ModelParents, report: Report): void {
  const { models, entries } = translated
  /** Route copies on listeners (a route on several gateways is one copy per gateway) → model names. */
  const attached = new Map<RouteIR, string[]>()
  const gatewayRoutes = new Map<string, RouteIR>()
  const add = (route: RouteIR, name: string) => {
    const list = attached.get(route) ?? []
    if (!list.includes(name)) list.push(name)
    attached.set(route, list)
  }
  for (const [name, { m, at }] of entries) {
    // An internal model without parentRefs is only a target: it attaches nowhere.
    const refs = m.parentRefs ?? (m.visibility === 'Internal' ? [] : [{ name: parents.defaultGateway }])
    refs.forEach((ref, k) => {
      const refAt: Path = m.parentRefs === undefined ? at : [...at, 'parentRefs', k]
      const kind = (ref as { kind?: string }).kind ?? 'Gateway'
      for (const field of ['namespace', 'sectionName'] as const) {
        if ((ref as Record<string, unknown>)[field] !== undefined) report([...refAt, field], 'applies in cluster mode (in the file a gateway is one listener and a route one rule)')
      }
      const group = (ref as { group?: string }).group
      if (group !== undefined && group !== '' && group !== 'gateway.networking.k8s.io') report([...refAt, 'group'], `a ${kind} of group gateway.networking.k8s.io is expected in the file`)
      if (kind === 'ListenerSet') {
        report([...refAt, 'kind'], 'ListenerSet parents exist in cluster mode only')
        return
      }
      if (kind === 'Gateway') {
        const listener = parents.listenersByGateway.get(ref.name)
        if (listener === undefined) {
          // Declared but failed (or no gateways at all): the cause has its own error.
          if (parents.declaredGateways.has(ref.name) || parents.declaredGateways.size === 0) return
          const msg = m.parentRefs === undefined ? `no gateway named "${ref.name}"; a model without parentRefs attaches to it` : `no gateway named "${ref.name}"`
          report(m.parentRefs === undefined ? refAt : [...refAt, 'name'], `${msg} (gateways: ${[...parents.declaredGateways].join(', ')})`)
          return
        }
        if (listener.protocol === 'TCP' || listener.protocol === 'TLS') {
          report([...refAt, 'name'], `gateway "${ref.name}" has protocol ${listener.protocol}: it forwards connections, not HTTP requests`)
          return
        }
        if (!models.has(name)) return
        let route = gatewayRoutes.get(listener.key)
        if (route === undefined) {
          route = {
            key: `models:${ref.name}`,
            name: `models:${ref.name}`,
            hostnames: [],
            matches: [{ path: { kind: 'regex', value: MODEL_API_PATHS }, headers: [], query: [] }],
            policies: {},
            backends: [],
            // After every route of the file: a route of its own with the same match wins.
            order: Number.MAX_SAFE_INTEGER
          }
          gatewayRoutes.set(listener.key, route)
          listener.routes.push(route)
        }
        add(route, name)
        return
      }
      // HTTPRoute: each copy of the route on its gateways.
      let found = false
      for (const listener of parents.listenersByGateway.values()) {
        for (const route of listener.routes) {
          if (route.key !== ref.name) continue
          found = true
          if (route.backends.length > 0) {
            report([...refAt, 'name'], `route "${ref.name}" has backends: a route models attach to has none (its requests go to the models)`)
            continue
          }
          if (models.has(name)) add(route, name)
        }
      }
      if (!found) report([...refAt, 'name'], `no route named "${ref.name}"`)
    })
  }

  for (const [route, names] of attached) {
    const parent = route.key.startsWith('models:') ? `gateway "${route.key.slice(7)}"` : `route "${route.key}"`
    for (const { model, other } of modelTies(names, models)) {
      const { m, at } = entries.get(model.name)!
      report(m.match !== undefined ? [...at, 'match', 'model'] : [...at, 'name'], `"${model.match}" ties with model "${other.name}" ("${other.match}") on ${parent}: equally specific patterns that can match the same model`)
    }
    route.models = routeModelTable(names, models)
  }
}

/**
 * Ties among the models attached to one parent: two public models no request could tell
 * apart (the later one of each pair, with the earlier). The cluster's translation checks its
 * parents with the same function.
 */
export function modelTies (attached: string[], models: Map<string, ModelIR>): Array<{ model: ModelIR, other: ModelIR }> {
  const selectable = attached.map(n => models.get(n)).filter((m): m is ModelIR => m !== undefined && m.visibility === 'Public')
  const out: Array<{ model: ModelIR, other: ModelIR }> = []
  for (let j = 0; j < selectable.length; j++) {
    for (let i = 0; i < j; i++) {
      if (tiesWith(selectable[i]!.match, selectable[j]!.match)) out.push({ model: selectable[j]!, other: selectable[i]! })
    }
  }
  return out
}

/**
 * A route's model table (RouteIR.models): the attached models and every model they reach
 * through virtual ones (`attached` false). The cluster's translation builds its parents' tables
 * with the same function.
 */
export function routeModelTable (attached: string[], models: Map<string, ModelIR>): ModelIR[] {
  const all = new Set<string>()
  for (const n of attached) reachable(n, models, all)
  return [...all].map(n => ({ ...models.get(n)!, attached: attached.includes(n) }))
}
