/**
 * TLS version and cipher suite names as users write them, to what Node's TLS (OpenSSL) takes.
 * Config files may use a suite's IANA name (as agentgateway and Go do) or its OpenSSL name (as
 * Envoy does); the IR keeps OpenSSL names, which `tls.createSecureContext({ ciphers })` reads.
 */

import { getCiphers } from 'node:tls'

/** IANA names of the TLS 1.2 suites OpenSSL still offers in Node builds, to OpenSSL names. */
const IANA_TO_OPENSSL: Record<string, string> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: 'ECDHE-ECDSA-AES128-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: 'ECDHE-RSA-AES128-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384: 'ECDHE-ECDSA-AES256-SHA384',
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384: 'ECDHE-RSA-AES256-SHA384',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: 'ECDHE-ECDSA-AES128-SHA',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: 'ECDHE-RSA-AES128-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: 'ECDHE-ECDSA-AES256-SHA',
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: 'ECDHE-RSA-AES256-SHA',
  TLS_DHE_RSA_WITH_AES_128_GCM_SHA256: 'DHE-RSA-AES128-GCM-SHA256',
  TLS_DHE_RSA_WITH_AES_256_GCM_SHA384: 'DHE-RSA-AES256-GCM-SHA384',
  TLS_RSA_WITH_AES_128_GCM_SHA256: 'AES128-GCM-SHA256',
  TLS_RSA_WITH_AES_256_GCM_SHA384: 'AES256-GCM-SHA384'
}

/** TLS 1.3 suites: the same name in IANA and OpenSSL. */
export const TLS13_SUITES = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']

/** `1.2` / `1.3` (config) to Node's version names. */
type TlsVersionName = 'TLSv1.2' | 'TLSv1.3'

export function tlsVersion (text: '1.2' | '1.3'): TlsVersionName {
  return text === '1.2' ? 'TLSv1.2' : 'TLSv1.3'
}

/**
 * The OpenSSL name of a suite given by IANA or OpenSSL name (any case), or an error message
 * naming the closest known suite.
 */
export function cipherSuiteName (name: string): { name: string } | { error: string } {
  const upper = name.toUpperCase()
  if (IANA_TO_OPENSSL[upper] !== undefined) return { name: IANA_TO_OPENSSL[upper] }
  if (TLS13_SUITES.includes(upper)) return { name: upper }
  const openssl = new Set(getCiphers().map(c => c.toUpperCase()))
  if (openssl.has(upper) && !upper.startsWith('TLS_')) return { name: upper }
  const known = [...Object.keys(IANA_TO_OPENSSL), ...TLS13_SUITES, ...Object.values(IANA_TO_OPENSSL)]
  let best: string | undefined
  let bestScore = 0
  // The nearest by shared dash/underscore-separated words: suite names differ in one or two.
  const words = new Set(upper.split(/[-_]/))
  for (const k of known) {
    const score = k.split(/[-_]/).filter(w => words.has(w)).length
    if (score > bestScore) { best = k; bestScore = score }
  }
  return { error: `unknown cipher suite "${name}"${best !== undefined && bestScore >= 3 ? ` (did you mean ${best}?)` : ''}` }
}

/** Whether a suite (OpenSSL name) is a TLS 1.3 one. */
export function isTls13Suite (name: string): boolean {
  return TLS13_SUITES.includes(name)
}

/**
 * The versions and suites part of `tls.createSecureContext` options for a server's TLS
 * settings (TlsServerIR); TLS 1.0 and 1.1 are never offered.
 */
export function secureContextOptions (tls: { minVersion?: TlsVersionName, maxVersion?: TlsVersionName, ciphers?: string[] }): { minVersion: TlsVersionName, maxVersion?: TlsVersionName, ciphers?: string, honorCipherOrder?: boolean } {
  const out: ReturnType<typeof secureContextOptions> = { minVersion: tls.minVersion ?? 'TLSv1.2' }
  if (tls.maxVersion !== undefined) out.maxVersion = tls.maxVersion
  if (tls.ciphers !== undefined) {
    out.ciphers = tls.ciphers.join(':')
    // The list is in the operator's order of preference.
    out.honorCipherOrder = true
  }
  return out
}
