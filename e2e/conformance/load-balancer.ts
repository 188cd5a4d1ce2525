/**
 * A LoadBalancer stand-in (what MetalLB or a cloud controller does): every Service of type
 * LoadBalancer gets `status.loadBalancer.ingress` = the IPs of the Ready pods it selects, so
 * the Gateway publishes an address the suite can dial. Service ports equal target ports for
 * the proxies Portico's deployer writes, so a pod's IP serves the Service's ports as they are.
 * Polls (twice a second): a watch would save little for a few dozen Services.
 *
 * A Service that asks for an address (`spec.loadBalancerIP`, how Portico's deployer passes a
 * Gateway's static address) gets that address alone as its ingress when the address is in
 * the stand-in's pool and no other Service holds it, and `attach` makes it reach the first
 * selected Ready pod (as a real load balancer forwards its VIP); otherwise the ingress stays
 * empty, as MetalLB or a cloud provider leaves a Service whose requested IP it cannot use.
 */

import type { Cluster, KubeObject } from '../cluster/harness.ts'

export interface LoadBalancerOptions {
  /** Addresses a Service may ask for (spec.loadBalancerIP); default none. */
  pool?: (ip: string) => boolean
  /** Makes `address` reach the pod at `podIP`; false when it cannot. */
  attach?: (podIP: string, address: string) => boolean
}

export function startLoadBalancer (cluster: Cluster, log: (line: string) => void, options: LoadBalancerOptions = {}): () => void {
  let stopped = false
  const published = new Map<string, string>()
  /** Requested address → the Service (ns/name) holding it, and the pod it reaches. */
  const held = new Map<string, { service: string, podIP: string }>()

  const selects = (selector: Record<string, string>, pod: KubeObject): boolean =>
    Object.entries(selector).every(([k, v]) => pod.metadata?.labels?.[k] === v)
  const ready = (pod: KubeObject): boolean =>
    pod.metadata?.deletionTimestamp === undefined && typeof pod.status?.podIP === 'string' &&
    (pod.status?.conditions ?? []).some((c: { type: string, status: string }) => c.type === 'Ready' && c.status === 'True')

  async function once (): Promise<void> {
    const services = await cluster.api<{ items: KubeObject[] }>('GET', '/api/v1/services')
    const lbs = services.items.filter(s => s.spec?.type === 'LoadBalancer')
    // An address is free again once its Service no longer asks for it (or is gone).
    const asking = new Set(lbs.map(s => `${String(s.spec?.loadBalancerIP ?? '')}@${String(s.metadata?.namespace)}/${String(s.metadata?.name)}`))
    for (const [ip, h] of held) if (!asking.has(`${ip}@${h.service}`)) held.delete(ip)
    if (lbs.length === 0) return
    const pods = (await cluster.api<{ items: KubeObject[] }>('GET', '/api/v1/pods')).items.filter(ready)
    for (const svc of lbs) {
      const ns = String(svc.metadata?.namespace)
      const name = String(svc.metadata?.name)
      const selector = (svc.spec?.selector ?? {}) as Record<string, string>
      if (Object.keys(selector).length === 0) continue
      let ips = pods.filter(p => p.metadata?.namespace === ns && selects(selector, p)).map(p => String(p.status.podIP)).sort()
      const requested = typeof svc.spec?.loadBalancerIP === 'string' && svc.spec.loadBalancerIP !== '' ? svc.spec.loadBalancerIP : undefined
      if (requested !== undefined) ips = assign(`${ns}/${name}`, requested, ips)
      const want = JSON.stringify(ips)
      const have = JSON.stringify(((svc.status?.loadBalancer?.ingress ?? []) as Array<{ ip?: string }>).map(i => i.ip ?? '').sort())
      if (want === have) continue
      await cluster.api('PATCH', `/api/v1/namespaces/${ns}/services/${name}/status`,
        { status: { loadBalancer: { ingress: ips.map(ip => ({ ip, ipMode: 'VIP' })) } } },
        { contentType: 'application/merge-patch+json' }).catch(() => {})
      if (published.get(`${ns}/${name}`) !== want) log(`load balancer ${ns}/${name}: ${ips.join(', ') || '(none ready)'}`)
      published.set(`${ns}/${name}`, want)
    }
  }

  /** The requested address as the Service's only ingress, or none when it cannot be used. */
  function assign (service: string, requested: string, podIPs: string[]): string[] {
    const holder = held.get(requested)
    if (holder !== undefined && holder.service !== service) return [] // in use
    if (options.pool?.(requested) !== true || podIPs.length === 0) return []
    const podIP = podIPs[0]!
    if (holder?.podIP === podIP) return [requested]
    let attached = false
    try {
      attached = options.attach?.(podIP, requested) === true
    } catch (err) {
      log(`load balancer ${service}: cannot attach ${requested} to pod ${podIP}: ${(err as Error).message}`)
    }
    if (!attached) return []
    held.set(requested, { service, podIP })
    log(`load balancer ${service}: requested ${requested} reaches pod ${podIP}`)
    return [requested]
  }

  void (async () => {
    while (!stopped) {
      await once().catch(() => {})
      await new Promise(resolve => setTimeout(resolve, 500))
    }
  })()
  return () => { stopped = true }
}
