/**
 * CA certificates from ConfigMaps (key `ca.crt`) and from ClusterTrustBundles
 * (certificates.k8s.io, cluster-scoped, `spec.trustBundle`), as BackendTLSPolicy's
 * caCertificateRefs and a Gateway's spec.tls.frontend name them. One reading for both: a
 * bundle that does not parse is refused here, with the ref's condition, rather than by the
 * proxy's TLS setup.
 */

import { X509Certificate } from 'node:crypto'

/** The PEM text of `ns/name`'s ca.crt (ending in a newline), or why it cannot be used. */
export function configMapCa (configMaps: ReadonlyMap<string, { data?: Record<string, string> }>, ns: string, name: string): { pem: string } | { problem: string } {
  const pem = configMaps.get(`${ns}/${name}`)?.data?.['ca.crt']
  if (pem === undefined) return { problem: `ConfigMap ${ns}/${name} is missing or has no ca.crt` }
  if (!validPem(pem)) return { problem: `ConfigMap ${ns}/${name}: ca.crt is not a PEM certificate` }
  return { pem: pem.endsWith('\n') ? pem : `${pem}\n` }
}

export const CLUSTER_TRUST_BUNDLE_GROUP = 'certificates.k8s.io'

/** certificates.k8s.io ClusterTrustBundle (v1beta1; the fields read are the same in v1). */
export interface ClusterTrustBundle {
  metadata: { name: string }
  spec?: { signerName?: string, trustBundle?: string }
}

/** Whether a caCertificateRef names a ClusterTrustBundle (the Gateway API's ClusterTrustBundle feature). */
export function isClusterTrustBundleRef (ref: { group?: string, kind?: string }): boolean {
  return ref.group === CLUSTER_TRUST_BUNDLE_GROUP && ref.kind === 'ClusterTrustBundle'
}

/**
 * The PEM text of ClusterTrustBundle `name`'s trustBundle (ending in a newline), or why it
 * cannot be used. `bundles` is undefined when the API server does not serve the kind.
 */
export function clusterTrustBundleCa (bundles: ReadonlyMap<string, ClusterTrustBundle> | undefined, name: string): { pem: string } | { problem: string } {
  if (bundles === undefined) return { problem: `ClusterTrustBundle ${name}: the API server does not serve certificates.k8s.io/v1beta1 ClusterTrustBundles` }
  const pem = bundles.get(name)?.spec?.trustBundle
  if (pem === undefined) return { problem: `ClusterTrustBundle ${name} is missing or has no trustBundle` }
  if (!validPem(pem)) return { problem: `ClusterTrustBundle ${name}: trustBundle is not a PEM certificate` }
  return { pem: pem.endsWith('\n') ? pem : `${pem}\n` }
}

/** Does the text hold at least one parsable PEM certificate? */
export function validPem (pem: string): boolean {
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) return false
  try {
    void new X509Certificate(pem)
    return true
  } catch {
    return false
  }
}
