/**
 * A backend's `mesh:` (HTTP routes' and connection routes' backends alike): its endpoints
 * become mesh workloads reached through HBONE (mesh/hbone-pool.ts, docs/mesh.md).
 */

import type { BackendIR } from '../ir/types.ts'

/** Istio's HBONE port. */
const HBONE_PORT = 15008

/**
 * Every endpoint carries the peer identity and HBONE port. The key differs from the same
 * host's plain backend (another route may reach it without the mesh): each gets its own pool.
 */
export function meshBackend (backend: BackendIR, mesh: { identity: string, hbonePort?: number | undefined }): BackendIR {
  const m = { identity: mesh.identity, hbonePort: mesh.hbonePort ?? HBONE_PORT }
  return { ...backend, key: `${backend.key} hbone ${m.identity} ${m.hbonePort}`, endpoints: backend.endpoints.map(e => ({ ...e, mesh: m })) }
}
