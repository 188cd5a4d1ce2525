/**
 * The Gateway's `portico.dev/Mesh` condition, from what its proxies report of their mesh
 * identity (xDS node metadata, @portico/xds mesh-state.ts):
 *
 * - True `InMesh`: every connected proxy holds a mesh certificate;
 * - False `NotInMesh`: the Gateway is not in the mesh (chart mesh.autoEnabled, PorticoParameters spec.mesh);
 * - False `Pending`: no proxy has reported yet, or one is waiting for its first certificate;
 * - False `CAUnreachable` / `TokenRefused` / `MeshIdentityFailed`: a proxy cannot get a
 *   certificate (from the identity's reason); its non-mesh traffic is unaffected.
 */

import type { MeshStateReport } from '@portico/xds'
import { condition, MESH_CONDITION } from '../translate/conditions.ts'
import type { Condition } from '../translate/gateway-api.ts'

/** A failed identity's reason → the condition's reason (the identity source words them so). */
export function failureReason (reason: string | undefined): string {
  if (reason !== undefined && /^token refused/i.test(reason)) return 'TokenRefused'
  if (reason !== undefined && /^CA unreachable/i.test(reason)) return 'CAUnreachable'
  return 'MeshIdentityFailed'
}

export function meshCondition (inMesh: boolean, reports: Array<{ pod: string, report: MeshStateReport }>, generation: number | undefined): Condition {
  if (!inMesh) return condition(MESH_CONDITION, false, 'NotInMesh', 'mesh integration is off for this Gateway (chart mesh.autoEnabled, PorticoParameters spec.mesh)', generation)
  const sorted = [...reports].sort((a, b) => a.pod.localeCompare(b.pod))
  const failed = sorted.find(r => r.report.state === 'failed')
  if (failed !== undefined) return condition(MESH_CONDITION, false, failureReason(failed.report.reason), `proxy ${failed.pod}: ${failed.report.reason ?? 'mesh identity failed'}`, generation)
  if (sorted.length === 0) return condition(MESH_CONDITION, false, 'Pending', 'waiting for a proxy to report its mesh identity', generation)
  const pending = sorted.find(r => r.report.state === 'pending')
  if (pending !== undefined) return condition(MESH_CONDITION, false, 'Pending', `proxy ${pending.pod}: ${pending.report.reason ?? 'waiting for a mesh certificate'}`, generation)
  return condition(MESH_CONDITION, true, 'InMesh', `${sorted.length === 1 ? 'the proxy holds' : `all ${sorted.length} proxies hold`} a mesh identity`, generation)
}
