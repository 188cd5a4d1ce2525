/**
 * The Kubernetes API calls of the cluster target (@kubernetes/client-node, loaded only when a
 * command targets a cluster): load the kubeconfig, check the Gateway exists, list pods.
 */

import { delimiter } from 'node:path'
import { ApiException, CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node'
import { cliError } from '../errors.ts'
import { kubeconfigSource, type KubeOptions } from './kubeconfig.ts'

export async function loadKubeConfig (options: KubeOptions): Promise<KubeConfig> {
  const source = kubeconfigSource(options)
  const kc = new KubeConfig()
  try {
    if (source.kind === 'in-cluster') {
      kc.loadFromCluster()
    } else {
      kc.loadFromFile(source.files[0]!)
      for (const file of source.files.slice(1)) {
        const more = new KubeConfig()
        more.loadFromFile(file)
        kc.mergeConfig(more, true)
      }
    }
  } catch (err) {
    throw cliError('PORTICOCTL_NO_KUBECONFIG', `no kubeconfig: cannot load ${source.kind === 'files' ? source.files.join(delimiter) : 'the in-cluster config'}: ${(err as Error).message}`, err)
  }
  if (options.context !== undefined) {
    if (kc.getContextObject(options.context) === null) {
      throw cliError('PORTICOCTL_NO_KUBECONFIG', `no kubeconfig context "${options.context}" (have: ${kc.getContexts().map(c => c.name).join(', ') || 'none'})`)
    }
    kc.setCurrentContext(options.context)
  }
  if (kc.getCurrentCluster() === null) {
    throw cliError('PORTICOCTL_NO_KUBECONFIG', `no kubeconfig: ${source.kind === 'files' ? source.files[0] : 'the in-cluster config'} has no current context with a cluster (use --context)`)
  }
  return kc
}

export function defaultNamespace (kc: KubeConfig): string {
  const ctx = kc.getContextObject(kc.getCurrentContext())
  return ctx?.namespace !== undefined && ctx.namespace !== '' ? ctx.namespace : 'default'
}

export function apiServer (kc: KubeConfig): string {
  return kc.getCurrentCluster()?.server ?? '?'
}

/** Throws "gateway not found" unless `gateways.gateway.networking.k8s.io` NAME exists in the namespace. */
export async function checkGateway (kc: KubeConfig, namespace: string, name: string): Promise<void> {
  try {
    await kubeCall(kc, `get gateway ${namespace}/${name}`, () => kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: 'gateway.networking.k8s.io',
      version: 'v1',
      namespace,
      plural: 'gateways',
      name
    }))
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) {
      // A 404 for a missing object carries details; one for a missing resource type does not.
      const body = parseBody(err.body)
      const crdMissing = body?.details === undefined
      throw cliError('PORTICOCTL_GATEWAY_NOT_FOUND', `gateway "${name}" not found in namespace "${namespace}"${crdMissing ? ' (is the Gateway API installed in this cluster?)' : ''}`, err)
    }
    throw err
  }
}

export async function listPods (kc: KubeConfig, namespace: string, labelSelector: string): Promise<V1Pod[]> {
  const list = await kubeCall(kc, `list pods in ${namespace}`, () => kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector }))
  return list.items
}

function parseBody (body: unknown): { reason?: string, message?: string, details?: unknown } | null {
  if (typeof body === 'object' && body !== null) return body as { details?: unknown }
  if (typeof body !== 'string') return null
  try {
    return JSON.parse(body) as { details?: unknown }
  } catch {
    return null
  }
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH'])

/** Runs one API call; turns transport failures and refusals into porticoctl errors. 404s pass through. */
export async function kubeCall<T> (kc: KubeConfig, what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (err) {
    if (err instanceof ApiException) {
      if (err.code === 404) throw err
      // The Status body's message, else the one client-node puts in its own message.
      const said = parseBody(err.body)?.message ?? /\nMessage: (.+)\n/.exec(err.message)?.[1]
      throw cliError('PORTICOCTL_KUBE_API', `${what}: the Kubernetes API server answered ${err.code}${said !== undefined ? `: ${said}` : ''}`, err)
    }
    const e = err as { code?: string, message?: string, cause?: { code?: string, message?: string } }
    const code = e.cause?.code ?? e.code
    if (code !== undefined && UNREACHABLE.has(code)) {
      throw cliError('PORTICOCTL_KUBE_API', `cannot reach the Kubernetes API server at ${apiServer(kc)} (${what}): ${code}`, err)
    }
    throw cliError('PORTICOCTL_KUBE_API', `the Kubernetes API call failed (${what} at ${apiServer(kc)}): ${e.cause?.message ?? e.message ?? String(err)}`, err)
  }
}
