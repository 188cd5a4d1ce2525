/**
 * A Gateway's status.addresses, from its proxy Service. The order is defined:
 *
 * 1. a LoadBalancer Service publishes its load-balancer ingress, in the order the Service
 *    lists it (`ip` → IPAddress, else `hostname` → Hostname) — and **nothing** while the
 *    ingress is pending: its cluster IP is reachable only inside the cluster, so publishing
 *    it would send clients (and conformance tests) to an address that is about to change;
 * 2. any other type (ClusterIP, NodePort) publishes its cluster IPs (`spec.clusterIPs`, else
 *    `spec.clusterIP`), primary first; a headless Service (`None`) publishes nothing;
 * 3. no Service yet: nothing.
 *
 * A Service of another type that nevertheless carries a load-balancer ingress (e.g. one
 * changed from LoadBalancer) still publishes that ingress first.
 */

import type { Service } from '../translate/gateway-api.ts'

export interface GatewayAddress {
  type: 'IPAddress' | 'Hostname'
  value: string
}

export function gatewayAddresses (svc: Service | undefined): GatewayAddress[] {
  if (svc === undefined) return []
  const ingress = (svc.status?.loadBalancer?.ingress ?? []).flatMap((i): GatewayAddress[] =>
    i.ip !== undefined && i.ip !== '' ? [{ type: 'IPAddress', value: i.ip }] : i.hostname !== undefined && i.hostname !== '' ? [{ type: 'Hostname', value: i.hostname }] : [])
  if (ingress.length > 0) return ingress
  if (svc.spec.type === 'LoadBalancer') return [] // pending
  const ips = svc.spec.clusterIPs ?? (svc.spec.clusterIP !== undefined ? [svc.spec.clusterIP] : [])
  return ips.filter(ip => ip !== '' && ip !== 'None').map(ip => ({ type: 'IPAddress', value: ip }))
}
