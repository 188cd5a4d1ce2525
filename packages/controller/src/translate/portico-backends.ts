/**
 * PorticoBackend → an engine backend of kind `mcp` or `ai`: what a Service cannot express.
 * HTTPRoute backendRefs reach it with `group: portico.dev, kind: PorticoBackend` (another
 * namespace's with a ReferenceGrant, as for Services).
 *
 * The spec is the standalone backend block (`mcp:` or `ai:`, the CRD schema generated from
 * the same JSON Schema) and is loaded by the engine's own loader, so targets, naming, limits
 * and session settings mean the same in both modes. In a cluster an MCP target may also name
 * a Service of the backend's namespace (`service: {name, port, path, protocol}`): it becomes
 * the URL of one ready endpoint from its EndpointSlices (a session stays on the server it
 * started on). A command to run (`stdio`) is refused: a proxy pod does not start programs a
 * resource names.
 */

import { loadConfigText } from '@portico/engine/config'
import type { BackendIR, FailoverProviderIR, PolicySetIR } from '@portico/engine/ir'
import type { ObjectMeta } from './gateway-api.ts'
import { endpointsOf, type ServiceIndex } from './backends.ts'
import { convertPolicy, resolveAiGroupSecrets, resolveBackendAuth } from './portico-policies.ts'

export const PORTICO_GROUP = 'portico.dev'

export interface PorticoBackend {
  metadata: ObjectMeta
  spec: { mcp?: { targets?: Array<Record<string, unknown>>, [field: string]: unknown }, ai?: Record<string, unknown>, policies?: Record<string, unknown> }
}

/**
 * A PorticoBackend served: its backend, and the backend policies of its own `spec.policies`
 * that every reference to it gets (converted as a PorticoPolicy's backend block: the same
 * schema, Secrets of the backend's namespace). The resource's own policies win over a
 * PorticoPolicy attached to it, as an HTTPRoute's filters win over one attached to the route.
 */
export interface PorticoBackendServed {
  backend: BackendIR
  policies: PolicySetIR
  /**
   * An `ai` backend with failover groups: every provider's backend (`backend` is the first)
   * and the groups as a backend reference carries them (BackendRefIR.failover), the
   * resource's own policies already in each provider's.
   */
  failover?: { backends: BackendIR[], groups: FailoverProviderIR[][] }
}

/** The backend, or `reason: message` when it cannot be served. */
export function porticoBackendIR (pb: PorticoBackend, index: ServiceIndex): PorticoBackendServed | string {
  const ns = pb.metadata.namespace ?? ''
  const kinds = (['mcp', 'ai'] as const).filter(k => pb.spec[k] !== undefined)
  if (kinds.length !== 1) return `InvalidKind: PorticoBackend ${ns}/${pb.metadata.name} needs exactly one of mcp or ai`
  let block: Record<string, unknown> = pb.spec[kinds[0]!]!
  if (kinds[0] === 'ai' && block.groups !== undefined) return aiGroupsIR(pb, block, index)
  if (kinds[0] === 'mcp') {
    const targets: Array<Record<string, unknown>> = []
    for (const t of pb.spec.mcp!.targets ?? []) {
      if (t.stdio !== undefined) return `InvalidKind: PorticoBackend ${ns}/${pb.metadata.name} target ${String(t.name)}: stdio targets are not available in a cluster (a proxy pod does not start programs a resource names); use a Service or a URL`
      const service = t.service as { name: string, port: number, path?: string, protocol?: 'mcp' | 'sse' } | undefined
      if (service === undefined) {
        targets.push(t)
        continue
      }
      const svc = index.services.get(`${ns}/${service.name}`)
      const port = svc?.spec.ports?.find(p => p.port === service.port)
      if (svc === undefined) return `BackendNotFound: PorticoBackend ${ns}/${pb.metadata.name} target ${String(t.name)}: Service ${ns}/${service.name} not found`
      if (port === undefined) return `BackendNotFound: PorticoBackend ${ns}/${pb.metadata.name} target ${String(t.name)}: Service ${ns}/${service.name} has no port ${service.port}`
      const endpoint = endpointsOf(index.slices.get(`${ns}/${service.name}`) ?? [], port)[0]
      if (endpoint === undefined) return `BackendNotFound: PorticoBackend ${ns}/${pb.metadata.name} target ${String(t.name)}: Service ${ns}/${service.name} has no ready endpoint`
      const protocol = service.protocol ?? 'mcp'
      const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host
      const { service: _, ...rest } = t
      targets.push({ ...rest, [protocol]: { host: `http://${host}:${endpoint.port}${service.path ?? (protocol === 'sse' ? '/sse' : '/mcp')}` } })
    }
    block = { ...pb.spec.mcp, targets }
  }
  // A bedrock backend takes its backendAuth (AWS keys, a Bedrock API key) into its own IR, not
  // as a header policy: it is loaded with the backend, its secretRefs read first.
  let ownPolicies = pb.spec.policies
  let selfAuth: Record<string, unknown> = {}
  let secretValues: string[] = []
  const provider = kinds[0] === 'ai' ? block.provider as Record<string, unknown> | undefined : undefined
  if (provider?.bedrock !== undefined && ownPolicies?.backendAuth !== undefined) {
    const { backendAuth, ...rest } = ownPolicies
    const resolved = resolveBackendAuth(pb.metadata, backendAuth, index.secrets)
    if (!resolved.ok) return `UnsupportedValue: PorticoBackend ${ns}/${pb.metadata.name}: ${resolved.message}`
    selfAuth = { policies: { backendAuth: resolved.backendAuth } }
    secretValues = resolved.values
    ownPolicies = Object.keys(rest).length > 0 ? rest : undefined
  }
  const config = { gateways: { default: { port: 1 } }, routes: [{ name: pb.metadata.name, backends: [{ [kinds[0]!]: block, ...selfAuth }] }] }
  const result = loadConfigText(JSON.stringify(config), { baseDir: '/', fragment: true, readFile: () => { throw Object.assign(new Error('no files in a cluster'), { code: 'ENOENT' }) } })
  if (!result.ok) {
    const d = result.diagnostics[0]!
    // A problem of the backendAuth taken in (bedrock) is named at spec.policies; its values are not in the messages.
    const at = d.path.includes('backendAuth') ? d.path.indexOf('policies') : d.path.indexOf(kinds[0]!)
    const field = at === -1 ? '' : d.path.slice(at).map(p => typeof p === 'number' ? `[${p}]` : `.${p}`).join('')
    let message = d.message
    for (const v of secretValues) if (v.length > 0) message = message.split(v).join('<secret>')
    return `UnsupportedValue: PorticoBackend ${ns}/${pb.metadata.name}: spec${field}: ${message}`
  }
  const backend = result.config.ir.backends[0]!
  let policies: PolicySetIR = {}
  if (ownPolicies !== undefined) {
    // Loaded with the backend's own `ai` block: backendAuth then goes its provider's way.
    const converted = convertPolicy({ metadata: pb.metadata, spec: { targetRefs: [], policies: ownPolicies } }, kinds[0] === 'ai' ? 'backend-ai' : 'backend', index.secrets, kinds[0] === 'ai' ? block : undefined)
    if (!converted.ok) return `UnsupportedValue: PorticoBackend ${ns}/${pb.metadata.name}: ${converted.message}`
    policies = converted.policies
    // A Vertex service-account key (backendAuth.gcp) lives in the backend's `ai` settings.
    if (converted.backend.ai !== undefined) backend.ai = converted.backend.ai
  }
  return { backend: { ...backend, key: `portico/${ns}/${pb.metadata.name}`, name: pb.metadata.name, namespace: ns }, policies }
}

/**
 * A PorticoBackend whose `ai` has failover groups: loaded as the standalone block (each
 * provider a backend of its own, the resource's `spec.policies` under each provider's own
 * `policies`), with the secretRefs of both read first. Providers' backends are keyed
 * `portico/<namespace>/<name>/<provider>` and named `<name>/<provider>`.
 */
function aiGroupsIR (pb: PorticoBackend, block: Record<string, unknown>, index: ServiceIndex): PorticoBackendServed | string {
  const ns = pb.metadata.namespace ?? ''
  const where = `PorticoBackend ${ns}/${pb.metadata.name}`
  const resolved = resolveAiGroupSecrets(pb.metadata, block, pb.spec.policies, index.secrets)
  if (!resolved.ok) return `UnsupportedValue: ${where}: ${resolved.message}`
  const entry: Record<string, unknown> = { ai: resolved.ai }
  if (resolved.policies !== undefined) entry.policies = resolved.policies
  const config = { gateways: { default: { port: 1 } }, routes: [{ name: pb.metadata.name, backends: [entry] }] }
  const result = loadConfigText(JSON.stringify(config), {
    baseDir: '/',
    readFile: path => {
      const text = resolved.files.get(path)
      if (text === undefined) throw Object.assign(new Error('no files in a cluster'), { code: 'ENOENT' })
      return text
    }
  })
  if (!result.ok) {
    const d = result.diagnostics[0]!
    const at = d.path.indexOf('ai') !== -1 ? d.path.indexOf('ai') : d.path.indexOf('policies')
    const field = at === -1 ? '' : d.path.slice(at).map(p => typeof p === 'number' ? `[${p}]` : `.${p}`).join('')
    let message = d.message
    for (const v of resolved.values) if (v.length > 0) message = message.split(v).join('<secret>')
    return `UnsupportedValue: ${where}: spec${field}: ${message}`
  }
  const ir = result.config.ir
  const ref = ir.binds[0]!.listeners[0]!.routes[0]!.backends[0]!
  const keys = new Map<string, string>()
  const backends = ir.backends.map(b => {
    // The loader names a provider's backend `<ai name>/<provider name>`.
    const provider = b.name.slice(b.name.indexOf('/') + 1)
    const key = `portico/${ns}/${pb.metadata.name}/${provider}`
    keys.set(b.key, key)
    return { ...b, key, name: `${pb.metadata.name}/${provider}`, namespace: ns }
  })
  const groups = ref.failover!.map(g => g.map(p => ({ backend: keys.get(p.backend)!, policies: p.policies })))
  return { backend: backends.find(b => b.key === groups[0]![0]!.backend)!, policies: {}, failover: { backends, groups } }
}
