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
 *
 * With Cluster routability (spec.addresses, translate/addresses.ts) the Service is a
 * ClusterIP one and its cluster IPs are published with `routability: Cluster`, a load
 * balancer's ingress (a leftover of the Service's former type) never.
 */

import type { Service } from '../translate/gateway-api.ts'

export interface GatewayAddress {
  type: 'IPAddress' | 'Hostname'
  value: string
  routability?: 'Cluster'
}

function clusterIPs (svc: Service): string[] {
  const ips = svc.spec.clusterIPs ?? (svc.spec.clusterIP !== undefined ? [svc.spec.clusterIP] : [])
  return ips.filter(ip => ip !== '' && ip !== 'None')
}

export function gatewayAddresses (svc: Service | undefined, routability?: 'Cluster'): GatewayAddress[] {
  if (svc === undefined) return []
  if (routability === 'Cluster') return clusterIPs(svc).map(ip => ({ type: 'IPAddress', value: ip, routability: 'Cluster' }))
  const ingress = (svc.status?.loadBalancer?.ingress ?? []).flatMap((i): GatewayAddress[] =>
    i.ip !== undefined && i.ip !== '' ? [{ type: 'IPAddress', value: i.ip }] : i.hostname !== undefined && i.hostname !== '' ? [{ type: 'Hostname', value: i.hostname }] : [])
  if (ingress.length > 0) return ingress
  if (svc.spec.type === 'LoadBalancer') return [] // pending
  return clusterIPs(svc).map(ip => ({ type: 'IPAddress', value: ip }))
}

/**
 * Why the Gateway's requested static IPs (spec.addresses) are not in use, or undefined when
 * every one is published by the proxy Service's load balancer. The Service asks for the first
 * (spec.loadBalancerIP, deployer/render.ts); a load balancer that cannot use it leaves the
 * ingress pending or assigns another address, which is all the controller can see, so "not
 * yet assigned" and "refused" read the same: Programmed=False, AddressNotUsable, naming the
 * addresses.
 */
export function unusableAddresses (requested: string[] | undefined, svc: Service | undefined, routability?: 'Cluster'): string | undefined {
  if (requested === undefined || requested.length === 0) return undefined
  const published = new Set(gatewayAddresses(svc, routability).map(a => a.value))
  const missing = requested.filter(ip => !published.has(ip))
  if (missing.length === 0) return undefined
  if (routability === 'Cluster') {
    // The Service asks for the first as its spec.clusterIP (immutable once allocated); more cannot be asked for.
    if (svc === undefined) return `requested cluster IP ${requested[0]}: the proxy Service is not created yet`
    const extra = missing.filter(ip => ip !== requested[0])
    if (extra.length > 0) return `requested address(es) ${extra.join(', ')} cannot be used: the proxy Service asks for one cluster IP (spec.clusterIP ${requested[0]})`
    return `requested cluster IP ${requested[0]} is not the proxy Service's (${clusterIPs(svc).join(', ') || 'none'}): outside the service CIDR, in use, or the Service was created before with another`
  }
  const type = svc?.spec.type ?? 'LoadBalancer'
  if (type !== 'LoadBalancer') return `requested address(es) ${missing.join(', ')} cannot be used: the proxy Service is of type ${type}, and only a LoadBalancer Service can ask for an address`
  const extra = missing.filter(ip => ip !== requested[0])
  if (extra.length > 0) return `requested address(es) ${extra.join(', ')} cannot be used: the proxy Service asks its load balancer for one address (spec.loadBalancerIP ${requested[0]})`
  return `requested address ${requested[0]} is not assigned by the load balancer of Service ${svc?.metadata.name ?? '(not created yet)'}: it is outside the load balancer's pools or in use (or not yet assigned)`
}
