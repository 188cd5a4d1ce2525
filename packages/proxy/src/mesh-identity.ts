/**
 * The gateway's mesh identity for one thread of the proxy: from files (config.mesh.certificate:
 * each thread reads and watches them itself) or from the mesh CA (config.mesh.ca /
 * MESH_ENABLED): the main thread alone asks the CA (one key, one certificate, one renewal
 * for the process) and hands each certificate to the data-plane workers, whose identity is
 * then a StaticMeshIdentity rotated by those messages (workers/protocol.ts 'mesh-certificate').
 */

import { X509Certificate } from 'node:crypto'
import { FileMeshIdentity, IstioCaIdentity, StaticMeshIdentity, type MeshCertificate } from '@portico/engine'
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

export function meshIdentityFor (settings: Settings, worker: boolean, log: Logger, metrics: ProxyMetrics): StaticMeshIdentity | null {
  if (settings.meshCertificate !== null) {
    const mesh = new FileMeshIdentity(settings.meshCertificate)
    log.info({ spiffeId: mesh.current()?.spiffeId }, `mesh identity ${mesh.current()?.spiffeId ?? ''} from ${settings.meshCertificate.cert}`)
    mesh.watch(5_000, (err, rotated) => {
      if (err !== null) log.error({ err: err.message }, 'mesh certificate files changed but cannot be read: the current certificate stays in force')
      else if (rotated) log.info({ spiffeId: mesh.current()?.spiffeId }, 'mesh certificate rotated: new HBONE connections use it')
    })
    return mesh
  }
  if (settings.meshCa === null) return null
  if (worker) return new StaticMeshIdentity(null)
  const { network: _network, ...ca } = settings.meshCa
  return new IstioCaIdentity({
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
  if (identity instanceof IstioCaIdentity) {
    const { network } = settings.meshCa!
    const s = identity.settings
    return {
      source: 'ca',
      ...identity.state(),
      spiffeId: identity.spiffeId,
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
