/**
 * Applies a Gateway's proxy objects with server-side apply (field manager
 * `portico-deployer`), so repeated applies are idempotent and fields other managers own
 * are left alone.
 */

import type { KubeHttp } from '../kube/http.ts'

const API_PREFIX: Record<string, string> = {
  ServiceAccount: '/api/v1',
  ConfigMap: '/api/v1',
  Service: '/api/v1',
  Deployment: '/apis/apps/v1'
}

const PLURAL: Record<string, string> = {
  ServiceAccount: 'serviceaccounts',
  ConfigMap: 'configmaps',
  Service: 'services',
  Deployment: 'deployments'
}

export const FIELD_MANAGER = 'portico-deployer'

export async function applyObjects (api: KubeHttp, objects: Array<Record<string, unknown>>): Promise<void> {
  for (const obj of objects) {
    const kind = obj.kind as string
    const meta = obj.metadata as { name: string, namespace: string }
    await api.apply(`${API_PREFIX[kind]}/namespaces/${meta.namespace}/${PLURAL[kind]}/${meta.name}`, obj, FIELD_MANAGER)
  }
}
