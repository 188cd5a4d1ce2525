/**
 * CA certificates from ConfigMaps (key `ca.crt`), as BackendTLSPolicy's caCertificateRefs
 * and a Gateway's spec.tls.frontend name them. One reading for both: a bundle that does not
 * parse is refused here, with the ref's condition, rather than by the proxy's TLS setup.
 */

import { X509Certificate } from 'node:crypto'

/** The PEM text of `ns/name`'s ca.crt (ending in a newline), or why it cannot be used. */
export function configMapCa (configMaps: ReadonlyMap<string, { data?: Record<string, string> }>, ns: string, name: string): { pem: string } | { problem: string } {
  const pem = configMaps.get(`${ns}/${name}`)?.data?.['ca.crt']
  if (pem === undefined) return { problem: `ConfigMap ${ns}/${name} is missing or has no ca.crt` }
  if (!validPem(pem)) return { problem: `ConfigMap ${ns}/${name}: ca.crt is not a PEM certificate` }
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
