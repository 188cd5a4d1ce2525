/**
 * `@portico/engine/mesh`: the gateway's mesh identity, from files or from the mesh CA. Not in
 * the engine barrel: the proxy loads it when its config has a mesh identity (proxy
 * mesh-identity.ts), so a gateway without one never loads the CA client, the CSR or the
 * certificate handling (issue 54). The barrel has their types and ISTIO_CA_DEFAULTS.
 */
export { FileMeshIdentity, StaticMeshIdentity, meshCertificate, spiffeIdOf } from './identity.ts'
export { IstioCaIdentity, caServerName } from './istio-ca-identity.ts'
