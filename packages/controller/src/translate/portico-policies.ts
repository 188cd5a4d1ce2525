/**
 * PorticoPolicy → the policies of listeners, routes and backend references in the IR
 * (Gateway API policy attachment, GEP-713 / GEP-2648 direct policies).
 *
 * A policy's `policies` block is the standalone config's `policies:` block at its target's
 * level — a Gateway (or one listener, `sectionName`) takes gateway policies, an HTTPRoute (or
 * one rule by name) route policies, a Service or a PorticoBackend backend policies — and it is converted by the
 * engine's own loader: the block is placed in a one-gateway config at that level and loaded
 * (schema, semantic checks and conversion to IR all as for a file), so a cluster policy means
 * exactly what the same lines mean standalone. Secret references are resolved first: a
 * secret file (a JWKS) is read through the loader's file reader from the Secret, a secret
 * value (htpasswd lines, a client secret, an API key) is put in place.
 *
 * Precedence: a policy on a section (listener, rule) wins over one on the whole object, field
 * by field; among policies on the same target the oldest (creationTimestamp, then name) wins,
 * and a newer one that sets a field the older already sets is not applied there (Conflicted).
 * What the resource itself says (an HTTPRoute's filters) wins over any policy. Statuses:
 * per Gateway reached (`ancestors`), Accepted True, or False with TargetNotFound, Invalid
 * (the field and the loader's message) or Conflicted.
 */

import { loadConfigText, configJsonSchema, type ConfigDiagnostic } from '@portico/engine/config'
import type { PolicySetIR, ProxyIR, RouteIR, ListenerIR, BackendIR, FrontendIR, AiBackendSpecIR } from '@portico/engine/ir'
import { extProcBuffersResponses } from '@portico/engine/ir'
import { GATEWAY_GROUP, nsName, type Condition, type ObjectMeta, type Secret } from './gateway-api.ts'
import { condition } from './conditions.ts'
import type { PolicyAncestorStatus } from './backend-tls.ts'
import { configParts, FRONTEND_FIELDS } from '../crds/portico-crds.ts'
import { secretMark, type JsonSchema } from '../crds/structural-schema.ts'
import type { GatewayFrontend, GatewayState } from './gateways.ts'

export interface PolicyTargetRef {
  group?: string
  kind: 'Gateway' | 'HTTPRoute' | 'Service' | 'PorticoBackend' | string
  name: string
  sectionName?: string
}

export interface PorticoPolicy {
  metadata: ObjectMeta
  spec: { targetRefs: PolicyTargetRef[], policies?: Record<string, unknown>, frontend?: Record<string, unknown> }
}


export interface PorticoPolicyResult {
  namespace: string
  name: string
  uid?: string
  generation: number | undefined
  ancestors: PolicyAncestorStatus[]
}

type Level = 'gateway' | 'route' | 'backend'
/** A backend level is converted against the kind of backend it attaches to (token limits need an `ai` one). */
type ConvertLevel = Level | 'backend-ai'

/** A policy converted for one level: its IR, or why it cannot be used. */
type Converted = { ok: true, policies: PolicySetIR, route: Pick<RouteIR, 'timeouts' | 'retry'>, backend: Pick<BackendIR, 'health' | 'ai'> } | { ok: false, message: string }

/** Where a policy applies: a listener, a route (rule), or a backend reference of a route. */
interface Attachment {
  policy: PorticoPolicy
  /** 0: the whole Gateway / HTTPRoute / Service; 1: a section of it. */
  specificity: number
  converted: Converted
}

let levelSchemas: Record<Level, JsonSchema> | undefined
function schemaOf (level: Level): JsonSchema {
  levelSchemas ??= configParts(configJsonSchema())
  return levelSchemas[level]
}

/** Oldest first: creationTimestamp, then namespace/name (GEP-713's tie-break). */
function byAge (a: PorticoPolicy, b: PorticoPolicy): number {
  const ta = a.metadata.creationTimestamp ?? ''
  const tb = b.metadata.creationTimestamp ?? ''
  return ta < tb ? -1 : ta > tb ? 1 : nsName(a.metadata).localeCompare(nsName(b.metadata))
}

/**
 * Applies every policy to the Gateways' listeners, routes and backend references (in place,
 * before gatewayIR() assembles each Gateway's IR) and returns each policy's status.
 */
export function applyPorticoPolicies (policies: PorticoPolicy[], gateways: Map<string, GatewayState>, secrets: Map<string, Secret>, controllerName: string): PorticoPolicyResult[] {
  const sorted = [...policies].sort(byAge)
  const cache = new Map<string, Converted>()
  const convert = (p: PorticoPolicy, level: ConvertLevel, ai?: Record<string, unknown>): Converted => {
    const key = `${nsName(p.metadata)}\0${level}\0${ai !== undefined ? JSON.stringify(ai) : ''}`
    let c = cache.get(key)
    if (c === undefined) {
      c = convertPolicy(p, level, secrets, ai)
      cache.set(key, c)
    }
    return c
  }
  // Per policy and Gateway reached: the conditions found.
  const ancestors = new Map<PorticoPolicy, Map<string, Condition[]>>(sorted.map(p => [p, new Map()]))
  const note = (p: PorticoPolicy, gateway: string, c: Condition) => {
    const byGw = ancestors.get(p)!
    const list = byGw.get(gateway) ?? []
    if (!list.some(o => o.reason === c.reason && o.message === c.message)) list.push(c)
    byGw.set(gateway, list)
  }
  const found = new Set<PorticoPolicy>()

  for (const [gwKey, g] of gateways) {
    const gwNs = g.gw.metadata.namespace ?? ''
    const listeners = [...g.listeners, ...(g.listenerSetListeners ?? [])]
    g.frontend = gatewayFrontend(g, sorted, gwKey, note, found)
    for (const l of listeners) {
      if (l.ir !== null && l.ir.streamRoutes === undefined && g.frontend.listener !== undefined) l.ir.frontend = g.frontend.listener
    }
    for (const l of listeners) {
      if (l.ir === null) continue
      // Gateway level: policies on this Gateway, or on this listener of it.
      const onListener: Attachment[] = []
      for (const p of sorted) {
        if ((p.metadata.namespace ?? '') !== gwNs) continue
        for (const ref of p.spec.targetRefs) {
          if (ref.kind !== 'Gateway' || (ref.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || ref.name !== g.gw.metadata.name) continue
          if (ref.sectionName !== undefined && ref.sectionName !== l.listener.name) continue
          found.add(p)
          onListener.push({ policy: p, specificity: ref.sectionName !== undefined ? 1 : 0, converted: convert(p, 'gateway') })
        }
      }
      const mcpRoute = l.ir.routes.find(r => r.backends.some(b => g.backends.get(b.backend)?.kind === 'mcp'))
      mergeInto(l.ir, refuseBodyModeOnMcp(onListener, mcpRoute === undefined ? null : `route ${mcpRoute.key} on this Gateway has an MCP backend`, gwKey, note), gwKey, note, g.gw.metadata.generation)
      for (const route of l.ir.routes) applyToRoute(route, sorted, gwKey, convert, note, found, g)
    }
  }

  const results: PorticoPolicyResult[] = []
  for (const p of sorted) {
    const gen = p.metadata.generation
    const byGw = ancestors.get(p)!
    const out: PolicyAncestorStatus[] = []
    for (const [gw, conditions] of [...byGw].sort(([a], [b]) => a.localeCompare(b))) {
      const [ns, name] = gw.split('/') as [string, string]
      const refused = conditions.find(c => c.status === 'False')
      out.push({ ancestorRef: { group: GATEWAY_GROUP, kind: 'Gateway', namespace: ns, name }, controllerName, conditions: [refused ?? condition('Accepted', true, 'Accepted', 'the policy applies', gen)] })
    }
    if (!found.has(p)) {
      // Nothing it names is served by our Gateways: said on the first target itself.
      const t = p.spec.targetRefs[0]
      const ns = p.metadata.namespace ?? ''
      if (t !== undefined) out.push({ ancestorRef: { group: t.group ?? (t.kind === 'Service' ? '' : GATEWAY_GROUP), kind: t.kind, namespace: ns, name: t.name }, controllerName, conditions: [condition('Accepted', false, 'TargetNotFound', `no ${t.kind} ${ns}/${t.name}${t.sectionName !== undefined ? ` (section ${t.sectionName})` : ''} served by a Gateway of this controller`, gen)] })
    }
    results.push({ namespace: p.metadata.namespace ?? '', name: p.metadata.name, ...(p.metadata.uid !== undefined ? { uid: p.metadata.uid } : {}), generation: gen, ancestors: out })
  }
  return results
}

/**
 * The client-connection settings of the PorticoPolicies whose `frontend` targets the whole
 * Gateway, laid over each other as any policies are (mergeInto: field by field the oldest
 * policy's value, a newer one setting a field an older one sets Conflicted). All have the
 * same specificity: one listener cannot have its own, since several listeners share a port
 * and these settings are read before a listener is known.
 */
function gatewayFrontend (g: GatewayState, sorted: PorticoPolicy[], gwKey: string, note: (p: PorticoPolicy, gateway: string, c: Condition) => void, found: Set<PorticoPolicy>): GatewayFrontend {
  const gwNs = g.gw.metadata.namespace ?? ''
  const attached: Attachment[] = []
  for (const p of sorted) {
    if (p.spec.frontend === undefined || (p.metadata.namespace ?? '') !== gwNs) continue
    const refs = p.spec.targetRefs.filter(ref => ref.kind === 'Gateway' && (ref.group ?? GATEWAY_GROUP) === GATEWAY_GROUP && ref.name === g.gw.metadata.name)
    if (refs.length === 0) continue
    found.add(p)
    const converted: Converted = refs.some(ref => ref.sectionName !== undefined)
      ? { ok: false, message: 'spec.frontend: applies to a whole Gateway (listeners sharing a port share these settings): target the Gateway without sectionName' }
      : convertFrontend(p)
    attached.push({ policy: p, specificity: 0, converted })
  }
  const merged: { policies: PolicySetIR } = { policies: {} }
  mergeInto(merged, attached, gwKey, note, undefined)
  const out: GatewayFrontend = {}
  for (const [f, v] of Object.entries(merged.policies)) {
    if (f.startsWith('listener.')) (out.listener ??= {} as FrontendIR)[f.slice('listener.'.length) as keyof FrontendIR] = v as never
    else (out as Record<string, unknown>)[f] = v
  }
  return out
}

/**
 * A policy's `frontend`, loaded as the same fields of a standalone gateway are, as one key per
 * setting (`listener.path`, `requestHeadersTimeoutMs`, `http2`): the unit of precedence.
 */
function convertFrontend (p: PorticoPolicy): Converted {
  const block = Object.fromEntries(FRONTEND_FIELDS.filter(f => p.spec.frontend?.[f] !== undefined).map(f => [f, p.spec.frontend![f]]))
  const result = loadConfigText(JSON.stringify({ gateways: { frontend: { port: 1, ...block } } }), { baseDir: '/', readFile: noFiles })
  if (!result.ok) return { ok: false, message: describe(result.diagnostics, 'frontend', []) }
  const bind = result.config.ir.binds[0]!
  const settings: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(bind.listeners[0]!.frontend ?? {})) settings[`listener.${k}`] = v
  if (bind.requestHeadersTimeoutMs !== undefined) settings.requestHeadersTimeoutMs = bind.requestHeadersTimeoutMs
  if (bind.http2 === false) settings.http2 = false
  return { ok: true, policies: settings as PolicySetIR, route: {}, backend: {} }
}

function noFiles (): never {
  throw Object.assign(new Error('no files in a cluster'), { code: 'ENOENT' })
}

/** Per Gateway, the backends whose health a PorticoPolicy set (not their own). */
const healthFromPolicy = new WeakMap<GatewayState, Set<string>>()

function applyToRoute (
  route: RouteIR,
  sorted: PorticoPolicy[],
  gwKey: string,
  convert: (p: PorticoPolicy, level: ConvertLevel, ai?: Record<string, unknown>) => Converted,
  note: (p: PorticoPolicy, gateway: string, c: Condition) => void,
  found: Set<PorticoPolicy>,
  g: GatewayState
): void {
  const onRoute: Attachment[] = []
  // A GRPCRoute's rules carry its kind in their keys (routes.ts): `kind: GRPCRoute` targets them.
  const routeKind = route.key.startsWith('GRPCRoute/') ? 'GRPCRoute' : 'HTTPRoute'
  for (const p of sorted) {
    if ((p.metadata.namespace ?? '') !== (route.namespace ?? '')) continue
    for (const ref of p.spec.targetRefs) {
      if (ref.kind !== routeKind || (ref.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || ref.name !== route.name) continue
      if (ref.sectionName !== undefined && ref.sectionName !== route.ruleName) continue
      found.add(p)
      onRoute.push({ policy: p, specificity: ref.sectionName !== undefined ? 1 : 0, converted: convert(p, 'route') })
    }
  }
  const mcp = route.backends.some(b => g.backends.get(b.backend)?.kind === 'mcp') ? 'this route has an MCP backend' : null
  // timeouts and retry sit beside the route's policies, merged as they are (the rule's own win).
  const ownSettings = (['timeouts', 'retry'] as const).filter(f => route[f] !== undefined)
  const settings = mergeInto(route, refuseBodyModeOnMcp(onRoute, mcp, gwKey, note), gwKey, note, undefined, ownSettings)
  const timeouts = settings.get('timeouts')?.converted
  if (timeouts?.ok === true) route.timeouts = timeouts.route.timeouts
  const retry = settings.get('retry')?.converted
  if (retry?.ok === true) route.retry = retry.route.retry
  // A PorticoBackend with failover groups: a policy attached to it reaches each provider.
  const refTargets = route.backends.flatMap(r => r.failover !== undefined ? r.failover.flat() : [r])
  for (const refIR of refTargets) {
    const backend = g.backends.get(refIR.backend)
    // A Service, or a PorticoBackend (whose keys start portico/, portico-backends.ts).
    const target = backend?.kind === 'service' ? { group: '', kind: 'Service' } : backend?.key.startsWith('portico/') === true ? { group: 'portico.dev', kind: 'PorticoBackend' } : null
    if (backend === undefined || target === null) continue
    // A failover provider's backend is named <PorticoBackend>/<provider>.
    const name = backend.name.split('/')[0]!
    const onBackend: Attachment[] = []
    for (const p of sorted) {
      if ((p.metadata.namespace ?? '') !== (backend.namespace ?? '')) continue
      for (const ref of p.spec.targetRefs) {
        if (ref.kind !== target.kind || (ref.group ?? '') !== target.group || ref.name !== name) continue
        found.add(p)
        // Bedrock signs its requests with the credentials its own resource names: a backendAuth
        // here would be sent as a header the signature replaces.
        const bedrockAuth = backend.ai?.provider === 'bedrock' && p.spec.policies?.backendAuth !== undefined
        onBackend.push({ policy: p, specificity: 0, converted: bedrockAuth ? { ok: false, message: 'spec.policies.backendAuth: a bedrock backend takes its credentials from the PorticoBackend\'s own spec.policies.backendAuth' } : backend.kind === 'ai' ? convert(p, 'backend-ai', aiBlockOf(backend.ai)) : convert(p, 'backend') })
      }
    }
    // health sits on the backend, merged as the policies are (the backend's own wins). The
    // backend is shared by every route that calls it: health a policy set for an earlier route
    // is not the backend's own, so each route's merge reports the same conflicts.
    const fromPolicy = healthFromPolicy.get(g) ?? new Set<string>()
    healthFromPolicy.set(g, fromPolicy)
    const ownHealth = backend.health !== undefined && !fromPolicy.has(backend.key)
    const settings = mergeInto(refIR, refuseBodyModeOnMcp(onBackend, backend.kind === 'mcp' ? 'this backend is MCP' : null, gwKey, note), gwKey, note, undefined, ownHealth ? ['health'] : [])
    const health = settings.get('health')?.converted
    if (health?.ok === true && health.backend.health !== undefined) {
      fromPolicy.add(backend.key)
      g.backends.set(backend.key, { ...g.backends.get(backend.key)!, health: health.backend.health })
    }
    for (const c of onBackend) {
      if (!c.converted.ok) continue
      const b = c.converted.backend
      // A Vertex service-account key (backendAuth.gcp) lands in the backend's ai settings, unless its own policies set one.
      const current = g.backends.get(backend.key)!
      if (b.ai?.vertex?.credential !== undefined && current.ai?.vertex !== undefined && current.ai.vertex.credential === undefined) {
        g.backends.set(backend.key, { ...current, ai: { ...current.ai, vertex: { ...current.ai.vertex, credential: b.ai.vertex.credential } } })
      }
      // Azure Entra ID settings and passthrough land there too, when this policy's backendAuth is
      // the one taken: its header policy (which removes the client's credentials) is the reference's.
      const taken = refIR.policySources?.requestHeaderModifier === `PorticoPolicy ${nsName(c.policy.metadata)}`
      if (taken && current.ai !== undefined && current.ai.passthrough === undefined && current.ai.azure?.auth === undefined) {
        if (b.ai?.azure?.auth !== undefined && current.ai.azure !== undefined) g.backends.set(backend.key, { ...current, ai: { ...current.ai, azure: { ...current.ai.azure, auth: b.ai.azure.auth } } })
        else if (b.ai?.passthrough === true) g.backends.set(backend.key, { ...current, ai: { ...current.ai, passthrough: true } })
      }
    }
  }
}

/**
 * An `ai` block standing for a served backend when a PorticoPolicy attached to it is loaded:
 * its provider (and what the provider requires), so that backendAuth goes that provider's way.
 */
function aiBlockOf (ai: AiBackendSpecIR | undefined): Record<string, unknown> | undefined {
  if (ai === undefined) return undefined
  const model = ai.model !== undefined ? { model: ai.model } : {}
  const settings = ai.provider === 'vertex' && ai.vertex !== undefined
    ? { projectId: ai.vertex.projectId, region: ai.vertex.region, ...model }
    : ai.provider === 'bedrock' && ai.bedrock !== undefined
      ? { region: ai.bedrock.region }
      : ai.provider === 'custom' ? { format: ai.format } : {}
  return { name: 'policy', provider: { [ai.provider]: settings }, hostOverride: 'http://127.0.0.1:1' }
}

/**
 * extProc's response body mode cannot apply where the answers are MCP (`mcp` says why they
 * are; null: they are not): MCP answers may be SSE streams that never end. An attachment
 * that sets it there is refused (Accepted False, Invalid) — as the file's loader refuses
 * it — rather than reaching the proxies, which would refuse the whole config (validateIR).
 */
function refuseBodyModeOnMcp (attached: Attachment[], mcp: string | null, gwKey: string, note: (p: PorticoPolicy, gateway: string, c: Condition) => void): Attachment[] {
  if (mcp === null) return attached
  return attached.filter(a => {
    if (!a.converted.ok || !extProcBuffersResponses(a.converted.policies)) return true
    note(a.policy, gwKey, condition('Accepted', false, 'Invalid', `spec.policies.extProc.processingMode.responseBodyMode: ${a.converted.policies.extProc?.processingMode.responseBodyMode ?? ''} cannot apply: ${mcp}, whose answers may be SSE streams that are never whole (use none; the response headers are still sent to the processor)`, a.policy.metadata.generation))
    return false
  })
}

/**
 * The settings a converted policy sets outside its policy set (a route's timeouts and retry, a
 * backend's health): fields like the policies', so that a newer policy setting one is
 * Conflicted and a refused or Conflicted policy sets none.
 */
function settingFields (c: Converted & { ok: true }): string[] {
  return [...(['timeouts', 'retry'] as const).filter(f => c.route[f] !== undefined), ...(c.backend.health !== undefined ? ['health'] : [])]
}

/**
 * Lays the attached policies over `target.policies`: more specific first, then older, each
 * field taken once; what the target already has (its own filters, `ownSettings`) stays.
 * Returns which attachment took each setting (settingFields), for the caller to apply.
 */
function mergeInto (target: { policies: PolicySetIR, policySources?: Record<string, string> }, attached: Attachment[], gwKey: string, note: (p: PorticoPolicy, gateway: string, c: Condition) => void, _generation: number | undefined, ownSettings: readonly string[] = []): Map<string, Attachment> {
  const settings = new Map<string, Attachment>()
  if (attached.length === 0) return settings
  const own = new Set([...Object.keys(target.policies), ...ownSettings])
  const ordered = [...attached].sort((a, b) => b.specificity - a.specificity || byAge(a.policy, b.policy))
  const taken = new Map<string, Attachment>()
  for (const a of ordered) {
    const gen = a.policy.metadata.generation
    if (!a.converted.ok) {
      note(a.policy, gwKey, condition('Accepted', false, 'Invalid', a.converted.message, gen))
      continue
    }
    const extra = settingFields(a.converted)
    const fields = [...Object.keys(a.converted.policies), ...extra]
    const clash = fields.map(f => taken.get(f)).find(t => t !== undefined && t.specificity === a.specificity)
    if (clash !== undefined) {
      note(a.policy, gwKey, condition('Accepted', false, 'Conflicted', `PorticoPolicy ${nsName(clash.policy.metadata)} (older) sets the same policies on the same target`, gen))
      continue
    }
    for (const f of fields) {
      if (own.has(f) || taken.has(f)) continue
      taken.set(f, a)
      if (extra.includes(f)) {
        settings.set(f, a)
        continue
      }
      ;(target.policies as Record<string, unknown>)[f] = (a.converted.policies as Record<string, unknown>)[f]
      ;(target.policySources ??= {})[f] = `PorticoPolicy ${nsName(a.policy.metadata)}`
    }
    note(a.policy, gwKey, condition('Accepted', true, 'Accepted', 'the policy applies', gen))
  }
  return settings
}

/**
 * The policy's block at `level`, loaded as the same block of a standalone file would be.
 */
/**
 * `ai`: the `ai` block of the backend the policy belongs to (a PorticoBackend's own policies),
 * so that backendAuth goes its provider's way (x-api-key, x-goog-api-key; a Vertex
 * service-account key into the backend's `ai` settings, returned in `backend.ai`); without it an
 * OpenAI-style provider stands in.
 */
export function convertPolicy (p: PorticoPolicy, convertLevel: ConvertLevel, secrets: Map<string, Secret>, ai?: Record<string, unknown>): Converted {
  const level: Level = convertLevel === 'backend-ai' ? 'backend' : convertLevel
  const { resolve, files, values, problem: resolveProblem } = secretResolver(p.metadata.namespace ?? '', secrets)
  // Fields a Gateway API resource already says, which would otherwise be dropped here.
  const elsewhere = level === 'backend'
    ? { backendTLS: 'TLS to a Service is set with a BackendTLSPolicy', http: 'the Service port\'s appProtocol (kubernetes.io/h2c) chooses HTTP/2' }
    : level === 'route' ? { requestMirror: 'mirrors are the HTTPRoute\'s RequestMirror filter' } : {}
  for (const [field, why] of Object.entries(elsewhere)) {
    if ((p.spec.policies ?? {})[field] !== undefined) return { ok: false, message: `spec.policies.${field}: not taken from a PorticoPolicy: ${why}` }
  }
  if (level !== 'gateway' && p.spec.frontend !== undefined) return { ok: false, message: 'spec.frontend: client-connection settings apply to a Gateway, not to a route or a backend' }
  const block = withSecrets(p.spec.policies ?? {}, schemaOf(level), '', resolve)
  const problem = resolveProblem()
  if (problem !== undefined) return { ok: false, message: problem }
  const config = level === 'gateway'
    ? { gateways: { policy: { port: 1, policies: block } } }
    : level === 'route'
      ? { gateways: { default: { port: 1 } }, routes: [{ name: 'policy', policies: block }] }
      : { gateways: { default: { port: 1 } }, routes: [{ name: 'policy', backends: [{ ...(convertLevel === 'backend-ai' ? { ai: ai ?? { name: 'policy', provider: { openAI: {} } } } : { host: '127.0.0.1:1' }), policies: block }] }] }
  const result = loadConfigText(JSON.stringify(config), {
    baseDir: '/',
    // A fragment: backendAuth.passthrough's jwtAuth may come from a PorticoPolicy on the route.
    fragment: true,
    readFile: path => {
      const text = files.get(path)
      if (text === undefined) throw Object.assign(new Error('not a Secret of this policy'), { code: 'ENOENT' })
      return text
    }
  })
  if (!result.ok) return { ok: false, message: describe(result.diagnostics, level, values) }
  const ir: ProxyIR = result.config.ir
  const listener: ListenerIR = ir.binds[0]!.listeners[0]!
  if (level === 'gateway') return { ok: true, policies: listener.policies, route: {}, backend: {} }
  const route = listener.routes[0]!
  if (level === 'route') {
    const extra: Pick<RouteIR, 'timeouts' | 'retry'> = {}
    if (route.timeouts !== undefined) extra.timeouts = route.timeouts
    if (route.retry !== undefined) extra.retry = route.retry
    return { ok: true, policies: route.policies, route: extra, backend: {} }
  }
  const backend = ir.backends.find(b => b.key === route.backends[0]!.backend)
  const settings: Pick<BackendIR, 'health' | 'ai'> = {}
  if (backend?.health !== undefined) settings.health = backend.health
  if (ai !== undefined && backend?.ai !== undefined) settings.ai = backend.ai
  return { ok: true, policies: route.backends[0]!.policies, route: {}, backend: settings }
}

/**
 * The loader's diagnostics at `spec.policies.…` (or `spec.frontend.…`: the fields of the
 * one-gateway config `convertFrontend` loads), secret values masked.
 */
function describe (diagnostics: ConfigDiagnostic[], level: Level | 'frontend', secretValues: string[]): string {
  const lines = diagnostics.slice(0, 5).map(d => {
    const at = level === 'frontend' ? d.path.indexOf('frontend') : d.path.indexOf('policies')
    const field = at === -1 ? '' : d.path.slice(at + 1).map(p => typeof p === 'number' ? `[${p}]` : `.${p}`).join('')
    let message = d.message
    for (const v of secretValues) if (v.length > 0) message = message.split(v).join('<secret>')
    if (/unknown field/.test(message)) message += level === 'frontend' ? ' (not a frontend setting, or misspelt)' : ` (not a ${level}-level policy, or misspelt)`
    return `spec.${level === 'frontend' ? 'frontend' : 'policies'}${field}: ${message}`
  })
  return lines.join('; ') + (diagnostics.length > 5 ? `; and ${diagnostics.length - 5} more` : '')
}

type Resolve = (ref: unknown, kind: 'file' | 'value', at: string) => unknown

/**
 * Reads secretRefs from the Secrets of a namespace: a value as itself, a file as a path under
 * /secrets/ whose text is kept in `files`; the first problem is kept (`problem()`).
 */
function secretResolver (ns: string, secrets: Map<string, Secret>): { resolve: Resolve, files: Map<string, string>, values: string[], problem: () => string | undefined } {
  const files = new Map<string, string>()
  const values: string[] = []
  let problem: string | undefined
  const resolve: Resolve = (ref, kind, at) => {
    const r = (ref as { secretRef?: { name?: string, key?: string } } | undefined)?.secretRef
    if (r?.name === undefined || r.key === undefined) {
      problem ??= `spec.policies.${at}: needs secretRef with name and key`
      return kind === 'file' ? '/missing' : 'missing'
    }
    const data = secrets.get(`${ns}/${r.name}`)?.data?.[r.key]
    if (data === undefined) {
      problem ??= `spec.policies.${at}: Secret ${ns}/${r.name} has no key ${r.key}`
      return kind === 'file' ? '/missing' : 'missing'
    }
    const text = Buffer.from(data, 'base64').toString('utf8')
    if (kind === 'value') {
      values.push(text)
      return text
    }
    const path = `/secrets/${ns}/${r.name}/${r.key}`
    files.set(path, text)
    return path
  }
  return { resolve, files, values, problem: () => problem }
}

/**
 * A resource's `backendAuth` with its secretRefs read (for a provider that takes it into its
 * backend rather than as a header: bedrock), or why it cannot be read. Never holds a secret in
 * its message.
 */
export function resolveBackendAuth (meta: PorticoPolicy['metadata'], backendAuth: unknown, secrets: Map<string, Secret>): { ok: true, backendAuth: unknown, values: string[] } | { ok: false, message: string } {
  const { resolve, problem, values } = secretResolver(meta.namespace ?? '', secrets)
  const properties = schemaOf('backend').properties as Record<string, JsonSchema> | undefined
  const out = withSecrets(backendAuth, properties?.backendAuth, 'backendAuth', resolve)
  const failed = problem()
  return failed !== undefined ? { ok: false, message: failed } : { ok: true, backendAuth: out, values }
}

/**
 * A PorticoBackend's `ai` block with failover groups and its own `policies`, their secretRefs
 * read (each provider's backendAuth among them): values in place, files as paths whose text
 * is in `files`. Never holds a secret in its message.
 */
export function resolveAiGroupSecrets (meta: PorticoPolicy['metadata'], ai: unknown, policies: unknown, secrets: Map<string, Secret>): { ok: true, ai: unknown, policies: unknown, files: Map<string, string>, values: string[] } | { ok: false, message: string } {
  const { resolve, files, values, problem } = secretResolver(meta.namespace ?? '', secrets)
  const outAi = withSecrets(ai, configParts(configJsonSchema()).ai, 'ai', resolve)
  const outPolicies = policies === undefined ? undefined : withSecrets(policies, schemaOf('backend'), '', resolve)
  const failed = problem()
  // The resolver names fields under spec.policies; the ai block's are under spec.ai.
  if (failed !== undefined) return { ok: false, message: failed.replace(/^spec\.policies\.ai\b/, 'spec.ai') }
  return { ok: true, ai: outAi, policies: outPolicies, files, values }
}

/** `value` with every secretRef of a field marked secret replaced by what `resolve` gives. */
function withSecrets (value: unknown, schema: JsonSchema | undefined, at: string, resolve: Resolve): unknown {
  if (schema === undefined || value === null || typeof value !== 'object') return value
  const mark = secretMark(schema)
  if (mark !== null) return resolve(value, mark === 'portico:secret-file' ? 'file' : 'value', at)
  if (Array.isArray(value)) return value.map((v, i) => withSecrets(v, schema.items as JsonSchema | undefined, `${at}[${i}]`, resolve))
  const properties = schema.properties as Record<string, JsonSchema> | undefined
  if (properties === undefined) return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const path = at === '' ? k : `${at}.${k}`
    // `{secretRef}` where the standalone block has `{file: path}` (a JWKS from a Secret).
    if (k === 'secretRef' && properties.file !== undefined && secretMark(properties.file) === 'portico:secret-file') out.file = resolve({ secretRef: v }, 'file', path)
    else out[k] = withSecrets(v, properties[k], path, resolve)
  }
  return out
}
