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
  return intersectHostnamesWithOrigins(listener, route)?.hostnames ?? null
}

/**
 * intersectHostnames, with the route's own hostname each served one came from when any differs
 * (`hostnameOrigins`, RouteIR's): the most specific one when several give the same name
 * (`*.example.com` and `abc.example.com` on a listener for `abc.example.com` both give
 * `abc.example.com`, which then ranks as exact). Spread it into the route's IR.
 */
export function intersectHostnamesWithOrigins (listener: string | undefined, route: readonly string[]): { hostnames: string[], hostnameOrigins?: string[] } | null {
  if (listener === undefined || route.length === 0) return { hostnames: [...route] }
  const served = new Map<string, string>()
  const add = (h: string, origin: string): void => {
    const had = served.get(h)
    if (had === undefined || hostnameSpecificity(origin) > hostnameSpecificity(had)) served.set(h, origin)
  }
  for (const h of route) {
    if (hostnameMatches(listener, h) || h === listener) add(h, h)
    else if (h.startsWith('*.') && hostnameMatches(h, listener)) add(listener, h)
    else if (h.startsWith('*.') && listener.startsWith('*.') && listener.endsWith(h.slice(1))) add(listener, h)
  }
  if (served.size === 0) return null
  const hostnames = [...served.keys()]
  const origins = [...served.values()]
  return origins.some((o, i) => o !== hostnames[i]) ? { hostnames, hostnameOrigins: origins } : { hostnames }
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

/**
 * The specificity a route's i-th served hostname ranks by: that of the route's own hostname it
 * came from (`origins[i]`, cluster mode), else its own. Anything but a hostname string there
 * (hostile or stale IR) counts as the served hostname.
 */
export function servedHostnameSpecificity (hostnames: readonly string[], origins: readonly string[] | undefined, i: number): number {
  const origin = origins?.[i]
  return hostnameSpecificity(typeof origin === 'string' && origin !== '' ? origin : hostnames[i])
}
