/**
 * A LoadBalancer stand-in (what MetalLB or a cloud controller does): every Service of type
 * LoadBalancer gets `status.loadBalancer.ingress` = the IPs of the Ready pods it selects, so
 * the Gateway publishes an address the suite can dial. Service ports equal target ports for
 * the proxies Portico's deployer writes, so a pod's IP serves the Service's ports as they are.
 * Polls (twice a second): a watch would save little for a few dozen Services.
 */

import type { Cluster, KubeObject } from '../cluster/harness.ts'

export function startLoadBalancer (cluster: Cluster, log: (line: string) => void): () => void {
  let stopped = false
  const published = new Map<string, string>()

  const selects = (selector: Record<string, string>, pod: KubeObject): boolean =>
    Object.entries(selector).every(([k, v]) => pod.metadata?.labels?.[k] === v)
  const ready = (pod: KubeObject): boolean =>
    pod.metadata?.deletionTimestamp === undefined && typeof pod.status?.podIP === 'string' &&
    (pod.status?.conditions ?? []).some((c: { type: string, status: string }) => c.type === 'Ready' && c.status === 'True')

  async function once (): Promise<void> {
    const services = await cluster.api<{ items: KubeObject[] }>('GET', '/api/v1/services')
    const lbs = services.items.filter(s => s.spec?.type === 'LoadBalancer')
    if (lbs.length === 0) return
    const pods = (await cluster.api<{ items: KubeObject[] }>('GET', '/api/v1/pods')).items.filter(ready)
    for (const svc of lbs) {
      const ns = String(svc.metadata?.namespace)
      const name = String(svc.metadata?.name)
      const selector = (svc.spec?.selector ?? {}) as Record<string, string>
      if (Object.keys(selector).length === 0) continue
      const ips = pods.filter(p => p.metadata?.namespace === ns && selects(selector, p)).map(p => String(p.status.podIP)).sort()
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

  void (async () => {
    while (!stopped) {
      await once().catch(() => {})
      await new Promise(resolve => setTimeout(resolve, 500))
    }
  })()
  return () => { stopped = true }
}
