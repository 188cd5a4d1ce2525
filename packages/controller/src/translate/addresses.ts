/**
 * A Gateway's spec.addresses: which addresses it asks for. Portico supports `IPAddress`
 * entries only (the type's default): with a value, a static address the proxy Service asks
 * its load balancer for (deployer/render.ts); without one, "assign me an address", which is
 * what the Service's load balancer does anyway. Any other type (Hostname, NamedAddress,
 * vendor types) cannot be requested through a Service: the Gateway is not accepted
 * (`UnsupportedAddress`), as the spec requires.
 */

import { isIP } from 'node:net'
import type { Gateway } from './gateway-api.ts'

export type RequestedAddresses = { ips: string[] } | { error: string }

export function requestedAddresses (gw: Gateway): RequestedAddresses {
  const ips: string[] = []
  for (const a of gw.spec.addresses ?? []) {
    const type = a.type ?? 'IPAddress'
    if (type !== 'IPAddress') return { error: `address type ${type} is not supported: only IPAddress (with or without a value) can be requested` }
    const value = a.value ?? ''
    if (value === '') continue // "assign me one": the load balancer assigns the Service's address
    if (isIP(value) === 0) return { error: `${value} is not an IP address` }
    if (!ips.includes(value)) ips.push(value)
  }
  return { ips }
}
