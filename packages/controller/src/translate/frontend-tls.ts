/**
 * Gateway spec.tls.frontend: client certificate validation of HTTPS listeners (GEP-91).
 * `default` applies to every HTTPS port, a `perPort` entry replaces it on its port. The CA
 * certificates come from ConfigMaps (key `ca.crt`; a ref to another namespace needs a
 * ReferenceGrant) or ClusterTrustBundles (cluster-scoped: no namespace, no grant). The result is per port, as the engine's ClientValidationIR is per bind.
 */

import type { ClientValidationIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, type Gateway } from './gateway-api.ts'
import type { ReferenceGrants } from './reference-grants.ts'
import { clusterTrustBundleCa, configMapCa, isClusterTrustBundleRef, type ClusterTrustBundle } from './ca-certificates.ts'

/** Gateway API FrontendTLSValidation. */
export interface FrontendTlsValidation {
  caCertificateRefs?: Array<{ group?: string, kind?: string, name: string, namespace?: string }>
  mode?: 'AllowValidOnly' | 'AllowInsecureFallback'
}

/** Gateway spec.tls (only the frontend part is read). */
export interface GatewayTlsConfig {
  frontend?: {
    default?: { validation?: FrontendTlsValidation }
    perPort?: Array<{ port: number, tls?: { validation?: FrontendTlsValidation } }>
  }
}

/** Why some CA refs could not be used; `caCerts` is empty when none could (the listener is not accepted). */
export interface FrontendValidationProblem {
  reason: 'InvalidCACertificateRef' | 'InvalidCACertificateKind' | 'RefNotPermitted'
  message: string
}

export interface FrontendValidation {
  /** The validation to program; absent when no ref resolved. */
  ir?: ClientValidationIR
  /** The first problem among the refs, if any (ResolvedRefs False on the port's HTTPS listeners). */
  problem?: FrontendValidationProblem
}

/** The validation config of `port`: its perPort entry, else the default; undefined = none. */
export function frontendValidationConfig (gw: Gateway, port: number): FrontendTlsValidation | undefined {
  const frontend = (gw.spec as { tls?: GatewayTlsConfig }).tls?.frontend
  const perPort = frontend?.perPort?.find(p => p.port === port)
  if (perPort !== undefined) return perPort.tls?.validation
  return frontend?.default?.validation
}

/**
 * Resolves the validation of `port`: undefined when the Gateway asks for none there, else
 * the CA bundle of the refs that resolved and the first problem of those that did not.
 */
export function frontendValidation (gw: Gateway, port: number, grants: ReferenceGrants, configMaps: ReadonlyMap<string, { data?: Record<string, string> }>, trustBundles?: ReadonlyMap<string, ClusterTrustBundle>): FrontendValidation | undefined {
  const config = frontendValidationConfig(gw, port)
  if (config === undefined) return undefined
  const gwNs = gw.metadata.namespace ?? ''
  const pems: string[] = []
  let problem: FrontendValidationProblem | undefined
  for (const ref of config.caCertificateRefs ?? []) {
    if (isClusterTrustBundleRef(ref)) {
      // "For cluster-scoped resources (such as ClusterTrustBundle), the `namespace` field MUST be unset."
      const ca = ref.namespace !== undefined
        ? { problem: `ClusterTrustBundle ${ref.name} is cluster-scoped: namespace must be unset` }
        : clusterTrustBundleCa(trustBundles, ref.name)
      if ('problem' in ca) problem ??= { reason: 'InvalidCACertificateRef', message: `caCertificateRef: ${ca.problem}` }
      else pems.push(ca.pem)
      continue
    }
    const ns = ref.namespace ?? gwNs
    const what = `${ref.kind ?? ''} ${ns}/${ref.name}`
    if ((ref.group ?? '') !== '' || ref.kind !== 'ConfigMap') {
      problem ??= { reason: 'InvalidCACertificateKind', message: `caCertificateRef ${what}: only ConfigMap (core group) and certificates.k8s.io ClusterTrustBundle are supported` }
      continue
    }
    if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: 'Gateway', fromNamespace: gwNs, toGroup: '', toKind: 'ConfigMap', toNamespace: ns, toName: ref.name })) {
      problem ??= { reason: 'RefNotPermitted', message: `caCertificateRef ${what} is in another namespace without a ReferenceGrant` }
      continue
    }
    const ca = configMapCa(configMaps, ns, ref.name)
    if ('problem' in ca) {
      problem ??= { reason: 'InvalidCACertificateRef', message: `caCertificateRef: ${ca.problem}` }
      continue
    }
    pems.push(ca.pem)
  }
  if (pems.length === 0 && problem === undefined) problem = { reason: 'InvalidCACertificateRef', message: 'no caCertificateRefs' }
  const out: FrontendValidation = {}
  if (pems.length > 0) out.ir = { caCerts: pems.join(''), mode: config.mode ?? 'AllowValidOnly' }
  if (problem !== undefined) out.problem = problem
  return out
}

/** Does any port of the Gateway validate in AllowInsecureFallback mode (InsecureFrontendValidationMode)? */
export function insecureFrontendValidation (gw: Gateway): boolean {
  const frontend = (gw.spec as { tls?: GatewayTlsConfig }).tls?.frontend
  const validations = [frontend?.default?.validation, ...(frontend?.perPort ?? []).map(p => p.tls?.validation)]
  return validations.some(v => v?.mode === 'AllowInsecureFallback')
}
