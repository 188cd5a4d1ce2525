/**
 * A Gateway's spec.addresses: which addresses it asks for. Portico supports `IPAddress`
 * entries only (the type's default): with a value, a static address the proxy Service asks
 * its load balancer for (deployer/render.ts); without one, "assign me an address", which is
 * what the Service's load balancer does anyway. Any other type (Hostname, NamedAddress,
 * vendor types) cannot be requested through a Service: the Gateway is not accepted
 * (`UnsupportedAddress`), as the spec requires.
 *
 * Routability (Gateway API v1.7.0, GatewayAddressRoutability): empty is the default above;
 * `Cluster` — "an IPAddress is a Kubernetes Service ClusterIP" — makes the proxy Service a
 * ClusterIP Service (reachable inside the cluster only), a value being the ClusterIP it asks
 * for. One Gateway has one proxy Service, so its addresses must share one routability; an
 * implementation-specific (prefixed) routability is not one Portico defines: UnsupportedAddress.
 */

import { isIP } from 'node:net'
import type { Gateway } from './gateway-api.ts'

export type RequestedAddresses = { ips: string[], routability?: 'Cluster' } | { error: string }

export function requestedAddresses (gw: Gateway): RequestedAddresses {
  const ips: string[] = []
  const routabilities = new Set((gw.spec.addresses ?? []).map(a => a.routability ?? ''))
  for (const r of routabilities) {
    if (r !== '' && r !== 'Cluster') return { error: `address routability ${r} is not supported: only the default (empty) or Cluster (a Service ClusterIP)` }
  }
  if (routabilities.size > 1) return { error: 'addresses of different routabilities cannot be mixed: the Gateway has one proxy Service, either a ClusterIP one (Cluster) or the default' }
  for (const a of gw.spec.addresses ?? []) {
    const type = a.type ?? 'IPAddress'
    if (type !== 'IPAddress') return { error: `address type ${type} is not supported: only IPAddress (with or without a value) can be requested` }
    const value = a.value ?? ''
    if (value === '') continue // "assign me one": the load balancer assigns the Service's address
    if (isIP(value) === 0) return { error: `${value} is not an IP address` }
    if (!ips.includes(value)) ips.push(value)
  }
  return routabilities.has('Cluster') ? { ips, routability: 'Cluster' } : { ips }
}
