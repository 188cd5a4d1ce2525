/**
 * A proxy's mesh identity state, reported to the controller in the xDS node metadata
 * (`mesh_state`, `mesh_reason`): on the stream's first request, and in a request carrying
 * only the node whenever the state changes. The controller turns it into the Gateway's
 * `portico.dev/Mesh` condition. Both ends bound what they accept: a reason is a status
 * message, not a log.
 */

import type { XdsNode } from './messages.ts'

export type MeshState = 'pending' | 'ready' | 'failed'

export interface MeshStateReport {
  state: MeshState
  reason?: string
}

export const MESH_STATE_FIELD = 'mesh_state'
export const MESH_REASON_FIELD = 'mesh_reason'
/** A Kubernetes condition message holds 32 KiB; a reason is one line of it. */
export const MAX_MESH_REASON = 1024

export function meshStateFields (report: MeshStateReport): Record<string, { stringValue: string }> {
  return {
    [MESH_STATE_FIELD]: { stringValue: report.state },
    ...(report.reason !== undefined && report.reason !== '' ? { [MESH_REASON_FIELD]: { stringValue: report.reason.slice(0, MAX_MESH_REASON) } } : {})
  }
}

/** The report a node carries, or null (none, or not one of the states). */
export function readMeshState (node: XdsNode | null | undefined): MeshStateReport | null {
  const fields = node?.metadata?.fields
  const state = fields?.[MESH_STATE_FIELD]?.stringValue
  if (state !== 'pending' && state !== 'ready' && state !== 'failed') return null
  const reason = fields?.[MESH_REASON_FIELD]?.stringValue
  return { state, ...(reason !== undefined && reason !== '' ? { reason: reason.slice(0, MAX_MESH_REASON) } : {}) }
}
