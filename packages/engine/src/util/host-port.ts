/**
 * `host:port` as URLs and Host headers spell it: an IPv6 address in brackets. One place for
 * the rule, used by backend labels, origins and authorities.
 */

/** `host:port`, or `[v6]:port`. */
/** An address as people write it: an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) as IPv4. */
export function plainAddress (address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address
}

export function hostPort (host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** The Host header for `host:port` over `protocol`: the port is left out when it is the scheme's default. */
export function authority (host: string, port: number, protocol: 'http' | 'https'): string {
  const withPort = hostPort(host, port)
  return port === (protocol === 'https' ? 443 : 80) ? withPort.slice(0, withPort.lastIndexOf(':')) : withPort
}
