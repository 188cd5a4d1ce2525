/**
 * BackendTLSPolicy (Gateway API v1): which Service ports Gateways reach over TLS, with which
 * trusted roots (ConfigMaps' ca.crt or the system's), SNI/verified hostname and
 * subjectAltNames. Each policy is resolved once; backends.ts applies the one that covers a
 * backend's Service port (a policy naming the port wins over one for the whole Service), and
 * the policy's status gets one ancestor per Gateway whose routes use such a backend.
 *
 * Conflicts: policies naming the same Service and sectionName (or both none) — the oldest
 * wins, then namespace/name order; the others are Accepted False (Conflicted) and unused.
 * A policy whose CA references are all invalid is Accepted False (NoValidCACertificate) and
 * its backends become `invalid`: requests get a 500 rather than an unverified connection.
 */

import { clusterTrustBundleCa, configMapCa, isClusterTrustBundleRef, validPem, type ClusterTrustBundle } from './ca-certificates.ts'
import type { BackendTlsIR, BackendTlsSanIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, nsName, type BackendTLSPolicy, type Condition, type ConfigMap, type Gateway, type Secret } from './gateway-api.ts'
import { condition } from './conditions.ts'
import type { ReferenceGrants } from './reference-grants.ts'

export interface PolicyAncestorStatus {
  ancestorRef: { group: string, kind: string, namespace: string, name: string }
  controllerName: string
  conditions: Condition[]
}

export interface BackendTLSPolicyResult {
  namespace: string
  name: string
  uid?: string
  generation: number | undefined
  ancestors: PolicyAncestorStatus[]
}

interface ResolvedPolicy {
  policy: BackendTLSPolicy
  /** The TLS settings, or why backends under this policy cannot be called. */
  tls: BackendTlsIR | { invalid: string }
  accepted: { ok: boolean, reason: string, message: string }
  resolvedRefs: { ok: boolean, reason: string, message: string }
  /** Gateways (namespace/name) whose routes use a backend under this policy. */
  ancestors: Set<string>
}

/** The spec allows at most 16 ancestors per policy status. */
const MAX_ANCESTORS = 16

export class BackendTlsPolicies {
  private readonly resolved: ResolvedPolicy[] = []
  /** `namespace/service#sectionName` (empty sectionName = the whole Service) → the winning policy. */
  private readonly targets = new Map<string, ResolvedPolicy>()
  /** The same key → every policy naming it, the conflicted ones too (they need ancestors for their status). */
  private readonly named = new Map<string, ResolvedPolicy[]>()
  /** Backend key → the policies it reports to (the one applied, and those it beat). */
  private readonly applied = new Map<string, Set<ResolvedPolicy>>()

  /** `trustBundles`: ClusterTrustBundles by name, undefined when the API server does not serve them. */
  constructor (policies: BackendTLSPolicy[], configMaps: ConfigMap[], trustBundles?: ReadonlyMap<string, ClusterTrustBundle>) {
    const maps = new Map(configMaps.map(c => [nsName(c.metadata), c]))
    const conflicted = new Set<ResolvedPolicy>()
    for (const policy of [...policies].sort(olderFirst)) {
      const r = resolvePolicy(policy, maps, trustBundles)
      this.resolved.push(r)
      const ns = policy.metadata.namespace ?? ''
      for (const ref of policy.spec.targetRefs ?? []) {
        if ((ref.group ?? '') !== '' || ref.kind !== 'Service') continue
        const key = `${ns}/${ref.name}#${ref.sectionName ?? ''}`
        const named = this.named.get(key)
        if (named === undefined) this.named.set(key, [r])
        else if (!named.includes(r)) named.push(r)
        if (this.targets.has(key)) conflicted.add(r)
        else this.targets.set(key, r)
      }
    }
    for (const r of conflicted) {
      r.accepted = { ok: false, reason: 'Conflicted', message: 'an older BackendTLSPolicy targets the same Service and sectionName' }
      // A policy that lost one target loses them all: half-applied policies would be hard to read.
      for (const [key, winner] of this.targets) if (winner === r) this.targets.delete(key)
    }
  }

  /**
   * The TLS settings for a backend on Service `namespace/name`, port named `portName`: the
   * policy naming the port, else the one for the whole Service; undefined when none. `use`
   * records the key of the backend it went into (for ancestors).
   */
  forPort (namespace: string, service: string, portName: string | undefined): { tls: BackendTlsIR | { invalid: string }, use: (backendKey: string) => void } | undefined {
    const keys = [...(portName !== undefined && portName !== '' ? [`${namespace}/${service}#${portName}`] : []), `${namespace}/${service}#`]
    const key = keys.find(k => this.targets.has(k))
    if (key === undefined) return undefined
    const r = this.targets.get(key)!
    const reports = new Set([r, ...keys.flatMap(k => this.named.get(k) ?? []).filter(p => p.accepted.reason === 'Conflicted')])
    return { tls: r.tls, use: backendKey => { this.applied.set(backendKey, reports) } }
  }

  /** Records that Gateway `gateway` (namespace/name) uses the backend `backendKey`. */
  used (backendKey: string, gateway: string): void {
    for (const r of this.applied.get(backendKey) ?? []) r.ancestors.add(gateway)
  }

  /** Statuses of the policies used by at least one of our Gateways. */
  results (controllerName: string): BackendTLSPolicyResult[] {
    const out: BackendTLSPolicyResult[] = []
    for (const r of this.resolved) {
      if (r.ancestors.size === 0) continue
      const { metadata } = r.policy
      const gen = metadata.generation
      out.push({
        namespace: metadata.namespace ?? '',
        name: metadata.name,
        ...(metadata.uid !== undefined ? { uid: metadata.uid } : {}),
        generation: gen,
        ancestors: [...r.ancestors].sort().slice(0, MAX_ANCESTORS).map(gw => {
          const [namespace, name] = gw.split('/', 2) as [string, string]
          return {
            ancestorRef: { group: GATEWAY_GROUP, kind: 'Gateway', namespace, name },
            controllerName,
            conditions: [
              condition('Accepted', r.accepted.ok, r.accepted.reason, r.accepted.message, gen),
              condition('ResolvedRefs', r.resolvedRefs.ok, r.resolvedRefs.reason, r.resolvedRefs.message, gen)
            ]
          }
        })
      })
    }
    return out.sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`))
  }
}

function resolvePolicy (policy: BackendTLSPolicy, configMaps: Map<string, ConfigMap>, trustBundles: ReadonlyMap<string, ClusterTrustBundle> | undefined): ResolvedPolicy {
  const ns = policy.metadata.namespace ?? ''
  const v = policy.spec.validation ?? { hostname: '' }
  const r: ResolvedPolicy = {
    policy,
    tls: {},
    accepted: { ok: true, reason: 'Accepted', message: 'BackendTLSPolicy is accepted' },
    resolvedRefs: { ok: true, reason: 'ResolvedRefs', message: 'All references resolved' },
    ancestors: new Set()
  }
  const tls: BackendTlsIR = { serverName: v.hostname }
  const sans: BackendTlsSanIR[] = []
  for (const san of v.subjectAltNames ?? []) {
    if (san.type === 'Hostname' && san.hostname !== undefined) sans.push({ type: 'Hostname', value: san.hostname })
    else if (san.type === 'URI' && san.uri !== undefined) sans.push({ type: 'URI', value: san.uri })
  }
  if (sans.length > 0) tls.subjectAltNames = sans

  const refs = v.caCertificateRefs ?? []
  if (refs.length === 0) {
    if (v.wellKnownCACertificates !== undefined && v.wellKnownCACertificates !== 'System') {
      r.accepted = { ok: false, reason: 'Invalid', message: `wellKnownCACertificates ${v.wellKnownCACertificates} is not supported (System)` }
      r.tls = { invalid: `InvalidBackendTLSPolicy: BackendTLSPolicy ${ns}/${policy.metadata.name}: ${r.accepted.message}` }
      return r
    }
    r.tls = tls // the system's roots
    return r
  }
  const cas: string[] = []
  let problem: { reason: string, message: string } | undefined
  for (const ref of refs) {
    // A ClusterTrustBundle is cluster-scoped: named alone, whatever the policy's namespace.
    const ctb = isClusterTrustBundleRef(ref)
    if (!ctb && ((ref.group ?? '') !== '' || ref.kind !== 'ConfigMap')) {
      problem ??= { reason: 'InvalidKind', message: `caCertificateRef ${ref.group === '' ? '' : `${ref.group}/`}${ref.kind} ${ref.name} is neither a ConfigMap nor a certificates.k8s.io ClusterTrustBundle` }
      continue
    }
    const ca = ctb ? clusterTrustBundleCa(trustBundles, ref.name) : configMapCa(configMaps, ns, ref.name)
    if ('problem' in ca) {
      problem ??= { reason: 'InvalidCACertificateRef', message: ca.problem }
      continue
    }
    cas.push(ca.pem.trim())
  }
  if (problem !== undefined) r.resolvedRefs = { ok: false, ...problem }
  if (cas.length === 0) {
    r.accepted = { ok: false, reason: 'NoValidCACertificate', message: 'none of the caCertificateRefs is a usable CA certificate' }
    r.tls = { invalid: `NoValidCACertificate: BackendTLSPolicy ${ns}/${policy.metadata.name} has no usable CA certificate` }
    return r
  }
  tls.ca = cas.join('\n') + '\n'
  r.tls = tls
  return r
}

/** Gateway spec.tls (only the backend part is read here). */
interface GatewayBackendTls {
  backend?: { clientCertificateRef?: { group?: string, kind?: string, name: string, namespace?: string } }
}

/**
 * Gateway spec.tls.backend.clientCertificateRef: the certificate the Gateway presents to TLS
 * backends, and the Gateway's ResolvedRefs condition about it; undefined when not set. A
 * reference that does not resolve leaves the Gateway Accepted (its backends are then called
 * without a client certificate, which a backend requiring one refuses).
 */
export function backendClientCertificate (gw: Gateway, grants: ReferenceGrants, secrets: Map<string, Secret>): { tls?: { cert: string, key: string }, condition: Condition } | undefined {
  const ref = (gw.spec as { tls?: GatewayBackendTls }).tls?.backend?.clientCertificateRef
  if (ref === undefined) return undefined
  const gen = gw.metadata.generation
  const gwNs = gw.metadata.namespace ?? ''
  const ns = ref.namespace ?? gwNs
  const bad = (reason: string, message: string) => ({ condition: condition('ResolvedRefs', false, reason, message, gen) })
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Secret') !== 'Secret') {
    return bad('InvalidClientCertificateRef', `clientCertificateRef ${ref.group !== undefined && ref.group !== '' ? `${ref.group}/` : ''}${ref.kind ?? 'Secret'} ${ref.name} is not a core Secret`)
  }
  if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: 'Gateway', fromNamespace: gwNs, toGroup: '', toKind: 'Secret', toNamespace: ns, toName: ref.name })) {
    return bad('RefNotPermitted', `Secret ${ns}/${ref.name} is in another namespace without a ReferenceGrant`)
  }
  const secret = secrets.get(`${ns}/${ref.name}`)
  const pem = (b64: string | undefined) => b64 === undefined ? '' : Buffer.from(b64, 'base64').toString('utf8')
  const cert = pem(secret?.data?.['tls.crt'])
  const key = pem(secret?.data?.['tls.key'])
  if (secret === undefined) return bad('InvalidClientCertificateRef', `Secret ${ns}/${ref.name} not found`)
  if (!validPem(cert) || !key.includes('-----BEGIN')) return bad('InvalidClientCertificateRef', `Secret ${ns}/${ref.name} has no PEM tls.crt and tls.key`)
  return { tls: { cert, key }, condition: condition('ResolvedRefs', true, 'ResolvedRefs', 'All references resolved', gen) }
}

/** Older first, then namespace/name: the Gateway API's tie-break between conflicting policies. */
function olderFirst (a: BackendTLSPolicy, b: BackendTLSPolicy): number {
  const ta = a.metadata.creationTimestamp ?? ''
  const tb = b.metadata.creationTimestamp ?? ''
  return ta < tb ? -1 : ta > tb ? 1 : nsName(a.metadata).localeCompare(nsName(b.metadata))
}
