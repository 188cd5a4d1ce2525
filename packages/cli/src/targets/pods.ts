/**
 * Which pods a command talks to: the labels the deployer puts on proxy and controller pods,
 * and readiness as kubectl shows it.
 */

import type { V1Pod } from '@kubernetes/client-node'

/** Label on every proxy pod of a Gateway (the Gateway API's own convention). */
export const GATEWAY_NAME_LABEL = 'gateway.networking.k8s.io/gateway-name'
/** Label on the controller's pods. */
export const CONTROLLER_LABEL = 'app.kubernetes.io/name'
export const CONTROLLER_LABEL_VALUE = 'portico-controller'
export const CONTROLLER_NAMESPACE = 'portico-system'
/** Admin ports inside the pods (loopback only there, so reached by port-forward). */
export const PROXY_ADMIN_PORT = 15000
export const CONTROLLER_ADMIN_PORT = 9095

export function gatewaySelector (gateway: string): string {
  return `${GATEWAY_NAME_LABEL}=${gateway}`
}

export const controllerSelector = `${CONTROLLER_LABEL}=${CONTROLLER_LABEL_VALUE}`

/** Running, not terminating, and its Ready condition is True. */
export function isPodReady (pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp != null) return false
  if (pod.status?.phase !== 'Running') return false
  return (pod.status.conditions ?? []).some(c => c.type === 'Ready' && c.status === 'True')
}

/** Names of the ready pods, sorted (so "the first pod" is stable). */
export function readyPodNames (pods: V1Pod[]): string[] {
  return pods.filter(isPodReady).map(p => p.metadata?.name ?? '').filter(n => n !== '').sort()
}
