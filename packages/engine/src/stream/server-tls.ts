/**
 * Server TLS contexts built from TlsServerIR, cached by content: the HTTPS listeners' SNI
 * callback and the TLS listeners' termination use the same certificates, versions, suites
 * and client CAs the same way.
 */

import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls'
import type { TlsServerIR } from '../ir/types.ts'
import { secureContextOptions } from '../util/tls-names.ts'

/** Contexts for certificates in use; a config with more than this many distinct ones rebuilds them. */
const MAX_CACHED_CONTEXTS = 1000
const contexts = new Map<string, SecureContext>()

/**
 * `tls.createSecureContext` options for a server: certificate, versions and suites, and (with
 * `ca`) the CAs client certificates are verified against.
 */
export function serverContextOptions (tls: TlsServerIR, ca?: string): SecureContextOptions {
  return { cert: tls.cert, key: tls.key, ...secureContextOptions(tls), ...(ca !== undefined ? { ca } : {}) }
}

/** The context for `tls` (with client CAs `ca`), built once per distinct content. */
export function serverSecureContext (tls: TlsServerIR, ca?: string): SecureContext {
  const key = `${tls.cert}\0${tls.key}\0${ca ?? ''}\0${tls.minVersion ?? ''}\0${tls.maxVersion ?? ''}\0${(tls.ciphers ?? []).join(':')}`
  let context = contexts.get(key)
  if (context === undefined) {
    context = createSecureContext(serverContextOptions(tls, ca))
    if (contexts.size >= MAX_CACHED_CONTEXTS) contexts.clear()
    contexts.set(key, context)
  }
  return context
}
