/**
 * From flags to a Target: `--local [--admin-addr]` for a standalone instance, or a Gateway
 * (`gateway/NAME`, `-n NS`) / the controller (`-n NS`) in a cluster.
 */

import { usageError } from '../errors.ts'
import { clusterTarget, type Forwarder } from './cluster.ts'
import { DEFAULT_CONTROLLER_ADMIN, DEFAULT_PROXY_ADMIN, localTarget } from './local.ts'
import type { Target } from './types.ts'

export interface TargetFlags {
  local?: boolean
  adminAddr?: string
  namespace?: string
  kubeconfig?: string
  context?: string
  /** Tests only: replaces the Kubernetes port-forward. */
  forwarder?: Forwarder
  /** Where KUBECONFIG, HOME and KUBERNETES_SERVICE_HOST are read (process.env by default). */
  env?: NodeJS.ProcessEnv
}

/** `gateway/NAME` (also `gateways/`, `gtw/`) or a bare `NAME` → NAME. */
export function parseGatewayRef (ref: string): string {
  const slash = ref.indexOf('/')
  if (slash === -1) {
    if (ref === '') throw usageError('empty gateway name')
    return ref
  }
  const kind = ref.slice(0, slash).toLowerCase()
  const name = ref.slice(slash + 1)
  if (!['gateway', 'gateways', 'gtw', 'gateway.gateway.networking.k8s.io'].includes(kind)) {
    throw usageError(`"${ref}": only gateways can be targeted (gateway/NAME)`)
  }
  if (name === '' || name.includes('/')) throw usageError(`"${ref}": use gateway/NAME and -n NAMESPACE`)
  return name
}

function kubeOptions (flags: TargetFlags) {
  return { kubeconfig: flags.kubeconfig, context: flags.context, env: flags.env }
}

export function proxyTarget (ref: string | undefined, flags: TargetFlags): Target {
  if (flags.local === true) {
    if (ref !== undefined) throw usageError(`give either ${ref} (a gateway in a cluster) or --local (a standalone instance), not both`)
    return localTarget({ adminAddr: flags.adminAddr ?? DEFAULT_PROXY_ADMIN, role: 'proxy' })
  }
  if (flags.adminAddr !== undefined) throw usageError('--admin-addr goes with --local')
  if (ref === undefined) throw usageError('which proxy? give gateway/NAME [-n NAMESPACE] (in a cluster) or --local (a standalone instance)')
  return clusterTarget({ role: 'proxy', gateway: parseGatewayRef(ref), namespace: flags.namespace, kube: kubeOptions(flags), forwarder: flags.forwarder })
}

export function controllerTarget (flags: TargetFlags): Target {
  if (flags.local === true) return localTarget({ adminAddr: flags.adminAddr ?? DEFAULT_CONTROLLER_ADMIN, role: 'controller' })
  if (flags.adminAddr !== undefined) throw usageError('--admin-addr goes with --local')
  return clusterTarget({ role: 'controller', namespace: flags.namespace, kube: kubeOptions(flags), forwarder: flags.forwarder })
}
