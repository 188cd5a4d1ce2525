/**
 * The cluster target: finds the pods (a Gateway's proxies, or the controller) with the
 * Kubernetes API and port-forwards to their admin port (both in kube.ts / port-forward.ts,
 * loaded on first use so local commands never load @kubernetes/client-node).
 *
 * What it expects of the cluster (see packages/cli/README.md):
 * - proxies: a `gateways.gateway.networking.k8s.io` object NAME in the namespace, and pods
 *   labelled `gateway.networking.k8s.io/gateway-name=NAME` there, admin on port 15000;
 * - controller: pods labelled `app.kubernetes.io/name=portico-controller` in
 *   `portico-system` (or `-n`), admin on port 9095.
 */

import type { KubeConfig } from '@kubernetes/client-node'
import { cliError } from '../errors.ts'
import type { KubeOptions } from './kubeconfig.ts'
import { CONTROLLER_ADMIN_PORT, CONTROLLER_NAMESPACE, controllerSelector, gatewaySelector, PROXY_ADMIN_PORT, readyPodNames } from './pods.ts'
import type { PortForwardHandle, PortForwardOptions } from './port-forward.ts'
import { formatAddr } from './local.ts'
import type { Connection, Instance, Target } from './types.ts'

export type Forwarder = (kc: KubeConfig, options: PortForwardOptions) => Promise<PortForwardHandle>

export interface ClusterTargetOptions {
  role: 'proxy' | 'controller'
  /** The Gateway's name (role proxy). */
  gateway?: string
  /** `-n`; default: the context's namespace (proxy) or `portico-system` (controller). */
  namespace?: string
  kube: KubeOptions
  /** How to port-forward; client-node's PortForward unless a test swaps it. */
  forwarder?: Forwarder
}

export function clusterTarget (options: ClusterTargetOptions): Target {
  const what = options.role === 'proxy'
    ? `gateway ${options.namespace === undefined ? '' : `${options.namespace}/`}${options.gateway ?? ''}`
    : `controller in ${options.namespace ?? CONTROLLER_NAMESPACE}`
  return {
    kind: 'cluster',
    description: what,
    connect: async ({ all }) => await connectCluster(options, all)
  }
}

async function connectCluster (options: ClusterTargetOptions, all: boolean): Promise<Connection> {
  const kube = await import('./kube.ts')
  const kc = await kube.loadKubeConfig(options.kube)
  const forwarder = options.forwarder ?? (await import('./port-forward.ts')).startPortForward
  let namespace: string
  let selector: string
  let adminPort: number
  let owner: string
  if (options.role === 'proxy') {
    namespace = options.namespace ?? kube.defaultNamespace(kc)
    const gateway = options.gateway ?? ''
    owner = `gateway ${namespace}/${gateway}`
    await kube.checkGateway(kc, namespace, gateway)
    selector = gatewaySelector(gateway)
    adminPort = PROXY_ADMIN_PORT
  } else {
    namespace = options.namespace ?? CONTROLLER_NAMESPACE
    owner = `the controller in namespace ${namespace}`
    selector = controllerSelector
    adminPort = CONTROLLER_ADMIN_PORT
  }
  const pods = await kube.listPods(kc, namespace, selector)
  const ready = readyPodNames(pods)
  if (ready.length === 0) {
    const seen = pods.length === 0 ? 'no pods' : `${pods.length} pod${pods.length === 1 ? '' : 's'}, none ready`
    throw cliError('PORTICOCTL_NO_READY_POD', `no ready pod for ${owner} (label ${selector} in namespace ${namespace}: ${seen})`)
  }
  const chosen = all ? ready : ready.slice(0, 1)
  const forwards: PortForwardHandle[] = []
  let closing: Promise<void> | null = null
  const close = (): Promise<void> => {
    closing ??= Promise.all(forwards.map(f => f.close())).then(() => {})
    return closing
  }
  const forward = async (pod: string, port: number) => {
    try {
      const handle = await forwarder(kc, { namespace, pod, port })
      forwards.push(handle)
      return handle.address
    } catch (err) {
      throw cliError('PORTICOCTL_PORT_FORWARD', `cannot port-forward to ${pod}.${namespace}:${port}: ${(err as Error).message}`, err)
    }
  }
  try {
    const instances: Instance[] = []
    for (const pod of chosen) {
      const admin = await forward(pod, adminPort)
      instances.push({
        label: `${pod}.${namespace}`,
        adminUrl: `http://${formatAddr(admin)}`,
        unreachable: `cannot reach the admin server of pod ${pod}.${namespace} on port ${adminPort} through the port-forward (is it running? is the admin server enabled?)`,
        reach: async port => await forward(pod, port)
      })
    }
    return { instances, close }
  } catch (err) {
    await close()
    throw err
  }
}
