/**
 * PorticoParameters (`portico.dev/v1alpha1`, the chart's CRD): proxy settings referenced by a
 * GatewayClass (`spec.parametersRef`, for every Gateway of the class) or by a Gateway
 * (`spec.infrastructure.parametersRef`, which wins). Resolution follows the Gateway API: a
 * reference that is not a PorticoParameters, or names one that does not exist, makes the
 * class (or the Gateway) `Accepted=False` with reason `InvalidParameters`.
 */

import { loadConfigText } from '@portico/engine/config'
import type { GatewayClass, Gateway, PorticoParameters, ProxyParameters } from './gateway-api.ts'

export const PARAMETERS_GROUP = 'portico.dev'
export const PARAMETERS_KIND = 'PorticoParameters'

/** The settings, or why they cannot be had. */
export type ParametersResolution = { parameters: ProxyParameters | undefined } | { error: string }

export class ParametersIndex {
  private readonly byKey: Map<string, PorticoParameters>

  constructor (objects: PorticoParameters[]) {
    this.byKey = new Map(objects.map(p => [`${p.metadata.namespace ?? ''}/${p.metadata.name}`, p]))
  }

  /** A GatewayClass's parametersRef (cluster-scoped class: the reference names the namespace). */
  forClass (cls: GatewayClass): ParametersResolution {
    const ref = cls.spec.parametersRef
    if (ref === undefined) return { parameters: undefined }
    if (ref.namespace === undefined || ref.namespace === '') return { error: `parametersRef ${ref.kind} ${ref.name} needs a namespace` }
    return this.lookup(ref.group, ref.kind, ref.namespace, ref.name)
  }

  /** A Gateway's own reference (same namespace), else its class's resolution. */
  forGateway (gw: Gateway, classResolution: ParametersResolution): ParametersResolution {
    const ref = gw.spec.infrastructure?.parametersRef
    if (ref === undefined) {
      return 'error' in classResolution ? { error: `the GatewayClass's parameters are invalid: ${classResolution.error}` } : classResolution
    }
    return this.lookup(ref.group, ref.kind, gw.metadata.namespace ?? '', ref.name)
  }

  private lookup (group: string, kind: string, namespace: string, name: string): ParametersResolution {
    if (group !== PARAMETERS_GROUP || kind !== PARAMETERS_KIND) return { error: `parametersRef must be a ${PARAMETERS_GROUP} ${PARAMETERS_KIND}, not ${group === '' ? 'core' : group} ${kind}` }
    const found = this.byKey.get(`${namespace}/${name}`)
    if (found === undefined) return { error: `${PARAMETERS_KIND} ${namespace}/${name} not found` }
    const problem = proxyConfigProblem(found.spec ?? {})
    if (problem !== null) return { error: `${PARAMETERS_KIND} ${namespace}/${name}: ${problem}` }
    return { parameters: found.spec ?? {} }
  }
}

/**
 * `tracing`, `accessLog` and `workers` are the proxy's `config:` fields, checked here against the
 * config file's schema: a bad one makes the class or Gateway InvalidParameters instead of a
 * proxy that cannot start.
 */
export function proxyConfigProblem (spec: ProxyParameters): string | null {
  const mesh = meshProblem(spec.mesh)
  if (mesh !== null) return mesh
  const config: Record<string, unknown> = {}
  if (spec.tracing !== undefined) config.tracing = spec.tracing
  if (spec.accessLog !== undefined) config.accessLog = spec.accessLog
  if (spec.workers !== undefined) config.workers = spec.workers
  if (Object.keys(config).length === 0) return null
  const result = loadConfigText(JSON.stringify({ config }), { baseDir: '.' })
  const problems = result.ok ? [] : result.diagnostics.filter(d => d.path[0] === 'config')
  return problems.length === 0 ? null : problems.map(d => `${d.path.slice(1).join('.')}: ${d.message}`).join('; ')
}

/** `spec.mesh`, checked where the CRD's schema may be missing (an older CRD keeps unknown fields). */
function meshProblem (mesh: unknown): string | null {
  if (mesh === undefined) return null
  if (mesh === null || typeof mesh !== 'object' || Array.isArray(mesh)) return 'mesh: must be an object'
  for (const [key, value] of Object.entries(mesh)) {
    if (key === 'enabled') {
      if (typeof value !== 'boolean') return 'mesh.enabled: must be a boolean'
    } else if (['caAddress', 'clusterId', 'namespace', 'network', 'revision', 'trustDomain'].includes(key)) {
      if (typeof value !== 'string' || value.length > 253) return `mesh.${key}: must be a string of at most 253 characters`
    } else {
      return `mesh.${key}: unknown field (enabled, caAddress, clusterId, namespace, network, revision, trustDomain)`
    }
  }
  return null
}
