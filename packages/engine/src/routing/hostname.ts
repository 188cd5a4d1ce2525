/**
 * Hostname rules of the Gateway API: a leading `*.` is a suffix wildcard that needs at least
 * one more label (`*.example.com` matches `a.example.com` and `a.b.example.com`, not
 * `example.com`). Names are compared lower-case, without a port.
 */

/** Does `host` (a concrete request host) match `pattern` (exact or wildcard)? */
export function hostnameMatches (pattern: string, host: string): boolean {
  if (pattern.startsWith('*.')) return host.length > pattern.length - 1 && host.endsWith(pattern.slice(1))
  return pattern === host
}

/**
 * The hostnames a route serves on a listener: the intersection of the two sets, where either
 * side may be empty (meaning any host). `[]` = no restriction beyond the listener's;
 * `null` = nothing in common, so the route does not attach to that listener.
 */
export function intersectHostnames (listener: string | undefined, route: readonly string[]): string[] | null {
  if (listener === undefined || route.length === 0) return [...route]
  const out: string[] = []
  for (const h of route) {
    if (hostnameMatches(listener, h) || h === listener) out.push(h)
    else if (h.startsWith('*.') && hostnameMatches(h, listener)) out.push(listener)
    else if (h.startsWith('*.') && listener.startsWith('*.') && listener.endsWith(h.slice(1))) out.push(listener)
  }
  return out.length > 0 ? [...new Set(out)] : null
}

/** The host of a Host header value: lower-case, port and trailing dot removed. */
export function hostOnly (hostHeader: string | undefined): string {
  if (hostHeader === undefined || hostHeader === '') return ''
  let host = hostHeader
  if (host.startsWith('[')) {
    const end = host.indexOf(']')
    host = end === -1 ? host : host.slice(0, end + 1)
  } else {
    const colon = host.lastIndexOf(':')
    if (colon !== -1) host = host.slice(0, colon)
  }
  if (host.endsWith('.')) host = host.slice(0, -1)
  return host.toLowerCase()
}

/** Specificity for precedence: exact names beat wildcards, longer beats shorter. */
export function hostnameSpecificity (pattern: string | undefined): number {
  if (pattern === undefined) return 0
  return pattern.startsWith('*.') ? pattern.length : 1_000_000 + pattern.length
}
