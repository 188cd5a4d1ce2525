/**
 * A gateway's TLS versions and cipher suites (`tls.minTLSVersion`, `maxTLSVersion`,
 * `cipherSuites`) to IR. A combination OpenSSL cannot serve (1.3 as the oldest and 1.2 as
 * the newest, only TLS 1.3 suites while 1.2 is allowed, a suite the build lacks) is refused
 * here, at load, by building the context the listener will use.
 */

import { createSecureContext } from 'node:tls'
import type { TlsServerIR } from '../ir/types.ts'
import { cipherSuiteName, isTls13Suite, secureContextOptions, tlsVersion } from '../util/tls-names.ts'

type Path = Array<string | number>

export interface ServerTlsOptionsConfig {
  minTLSVersion?: '1.2' | '1.3'
  maxTLSVersion?: '1.2' | '1.3'
  cipherSuites?: string[]
}

/** Writes the options into `tls`; false (after reporting) when they can never work. */
export function serverTlsOptionsToIR (c: ServerTlsOptionsConfig, tls: TlsServerIR, path: Path, report: (path: Path, message: string) => void): boolean {
  if (c.minTLSVersion !== undefined) tls.minVersion = tlsVersion(c.minTLSVersion)
  if (c.maxTLSVersion !== undefined) tls.maxVersion = tlsVersion(c.maxTLSVersion)
  if (c.minTLSVersion === '1.3' && c.maxTLSVersion === '1.2') {
    report([...path, 'maxTLSVersion'], 'is older than minTLSVersion 1.3: no version is left to offer')
    return false
  }
  if (c.cipherSuites !== undefined) {
    const names: string[] = []
    let ok = true
    c.cipherSuites.forEach((name, i) => {
      const r = cipherSuiteName(name)
      if ('error' in r) {
        report([...path, 'cipherSuites', i], r.error)
        ok = false
      } else if (!names.includes(r.name)) names.push(r.name)
    })
    if (!ok) return false
    const tls12Allowed = (tls.minVersion ?? 'TLSv1.2') === 'TLSv1.2'
    if (tls12Allowed && names.every(isTls13Suite)) {
      report([...path, 'cipherSuites'], 'lists only TLS 1.3 suites while TLS 1.2 is allowed: add a TLS 1.2 suite or set minTLSVersion: "1.3"')
      return false
    }
    if (!tls12Allowed && !names.some(isTls13Suite)) {
      report([...path, 'cipherSuites'], 'lists only TLS 1.2 suites while minTLSVersion is 1.3: they would never be used')
      return false
    }
    tls.ciphers = names
  }
  try {
    createSecureContext(secureContextOptions(tls))
  } catch (err) {
    report(path, `OpenSSL refuses these TLS settings: ${(err as Error).message}`)
    return false
  }
  return true
}

export function sameServerTlsOptions (a: TlsServerIR | undefined, b: TlsServerIR | undefined): boolean {
  return a?.minVersion === b?.minVersion && a?.maxVersion === b?.maxVersion && (a?.ciphers ?? []).join(':') === (b?.ciphers ?? []).join(':')
}
