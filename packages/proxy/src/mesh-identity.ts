/**
 * The gateway's mesh identity for one thread of the proxy: from files (config.mesh.certificate:
 * each thread reads and watches them itself) or from the mesh CA (config.mesh.ca /
 * MESH_ENABLED): the main thread alone asks the CA (one key, one certificate, one renewal
 * for the process) and hands each certificate to the data-plane workers, whose identity is
 * then a StaticMeshIdentity rotated by those messages (workers/protocol.ts 'mesh-certificate').
 */

import { X509Certificate } from 'node:crypto'
import { createRequire } from 'node:module'
import type { IstioCaIdentity, MeshCertificate, StaticMeshIdentity } from '@portico/engine'
import type { Logger } from 'pino'
import type { Settings } from './settings.ts'
import type { ProxyMetrics } from './metrics.ts'

/** What crosses to a worker: the PEM texts (in process memory only). */
export interface MeshPem {
  cert: string
  key: string
  root: string
}

export function meshPem (cert: MeshCertificate): MeshPem {
  return { cert: cert.certChain, key: cert.key, root: cert.roots }
}

/** A worker's side of meshPem: the certificate the primary sent (a worker with a mesh identity). */
export function meshCertificateOf (pem: MeshPem): MeshCertificate {
  return mesh().meshCertificate(pem)
}

const require = createRequire(import.meta.url)
/**
 * The engine's mesh identity code (`@portico/engine/mesh`: the CA client, the CSR, the
 * certificate files' watch), required when a config has a mesh identity, never otherwise
 * (issue 54: a gateway without one does not load it at start).
 */
let meshModule: typeof import('@portico/engine/mesh') | null = null
const mesh = (): typeof import('@portico/engine/mesh') => (meshModule ??= require('@portico/engine/mesh') as typeof import('@portico/engine/mesh'))

/** The identity, if it is from the mesh CA (none can be before the module loaded). */
export function caIdentity (identity: StaticMeshIdentity | null): IstioCaIdentity | null {
  return meshModule !== null && identity instanceof meshModule.IstioCaIdentity ? identity : null
}

export function meshIdentityFor (settings: Settings, worker: boolean, log: Logger, metrics: ProxyMetrics): StaticMeshIdentity | null {
  if (settings.meshCertificate !== null) {
    const identity = new (mesh().FileMeshIdentity)(settings.meshCertificate)
    log.info({ spiffeId: identity.current()?.spiffeId }, `mesh identity ${identity.current()?.spiffeId ?? ''} from ${settings.meshCertificate.cert}`)
    identity.watch(5_000, (err, rotated) => {
      if (err !== null) log.error({ err: err.message }, 'mesh certificate files changed but cannot be read: the current certificate stays in force')
      else if (rotated) log.info({ spiffeId: identity.current()?.spiffeId }, 'mesh certificate rotated: new HBONE connections use it')
    })
    return identity
  }
  if (settings.meshCa === null) return null
  if (worker) return new (mesh().StaticMeshIdentity)(null)
  const { network: _network, ...ca } = settings.meshCa
  return new (mesh().IstioCaIdentity)({
    settings: ca,
    onCall: result => metrics.observeMeshCaCall(result),
    log: {
      info: (fields, msg) => log.info(fields, msg),
      warn: (fields, msg) => log.warn(fields, msg)
    }
  })
}

/** The identity's state for /config_dump and /debug/mesh: never the key or the token. */
export function meshStatus (settings: Settings, identity: StaticMeshIdentity | null): Record<string, unknown> {
  if (identity === null) return { source: 'none' }
  const cert = identity.current()
  const ca = caIdentity(identity)
  if (ca !== null) {
    const { network } = settings.meshCa!
    const s = ca.settings
    return {
      source: 'ca',
      ...ca.state(),
      spiffeId: ca.spiffeId,
      ...(cert !== null ? { trustDomain: cert.trustDomain } : {}),
      ca: { address: s.address, serverName: s.serverName, trustDomain: s.trustDomain, clusterId: s.clusterId, network, namespace: s.namespace, serviceAccount: s.serviceAccount, tokenFile: s.tokenFile, rootFile: s.rootFile, certificateTtlSeconds: s.validitySeconds, renewFraction: s.renewFraction }
    }
  }
  return { source: 'files', state: cert === null ? 'pending' : 'ready', ...(cert !== null ? { spiffeId: cert.spiffeId, trustDomain: cert.trustDomain, notAfter: notAfterOf(cert.certChain) } : {}), files: settings.meshCertificate }
}

/** The leaf's expiry as ISO time (as the CA identity's state has it); undefined if unparsable. */
function notAfterOf (certChain: string): string | undefined {
  try {
    return new Date(new X509Certificate(certChain).validTo).toISOString()
  } catch {
    return undefined
  }
}
