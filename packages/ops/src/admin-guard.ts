/**
 * The admin server has no authentication: what keeps it safe is that only local processes
 * reach it. A web page the operator happens to have open is a local process's puppet, in two
 * ways this module closes:
 *
 * - Cross-site requests. Any page can make the browser send a "simple" request (a POST with
 *   `Content-Type: text/plain` or a form body, no preflight) to 127.0.0.1:15000. It cannot
 *   read the answer, but the request does what it does: /quitquitquit stops the gateway.
 *   So every request that is not GET/HEAD/OPTIONS must not come from another origin: its
 *   `Origin`, when present, is the admin's own, and its `Sec-Fetch-Site`, when present, is
 *   `same-origin` or `none` (typed in the address bar). curl and porticoctl send neither.
 * - DNS rebinding. A page at evil.example whose name then resolves to 127.0.0.1 is
 *   same-origin with the admin as far as the browser is concerned, and reads everything.
 *   The browser still sends `Host: evil.example`, so every request (reads included) whose
 *   Host is a DNS name other than `localhost`/`*.localhost`, the admin's own configured
 *   host, or one of `adminAllowedHosts` is refused. IP literals pass: a browser that sends
 *   `Host: 10.1.2.3` is talking to the origin http://10.1.2.3, which no other site can
 *   script, so accepting any IP costs nothing and keeps NAT, Service IPs, container port
 *   maps and `kubectl port-forward` working.
 */

import { isIP } from 'node:net'
import { hostHeaderProblem } from '@portico/engine/request-target'

export interface AdminGuardOptions {
  /** The host of the admin's own address (ADMIN_ADDR), a name when the operator gave one. */
  bindHost: string
  /** Extra DNS names people reach the admin by (`config.adminAllowedHosts`). */
  allowedHosts: readonly string[]
}

/** What the guard looks at: the request line's method and three headers. */
export interface AdminRequestFacts {
  method: string
  host: string | undefined
  origin: string | undefined
  secFetchSite: string | undefined
}

/** Methods that change nothing here (no admin GET has side effects beyond a trace tap). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/** The hostname of a Host header (no port, no brackets, lower case, no trailing dot). */
export function hostnameOf (host: string): string {
  const h = host.trim().toLowerCase()
  const name = h.startsWith('[') ? h.slice(1, h.indexOf(']') === -1 ? undefined : h.indexOf(']')) : h.replace(/:\d*$/, '')
  return name.endsWith('.') ? name.slice(0, -1) : name
}

/**
 * Null when the admin may read this request line and its Host lines at all; else why, for a
 * 400 that closes the connection (as the listeners answer). The target must be a path: an
 * absolute-form one (`GET http://evil.example/config_dump`) names a host the Host check
 * never sees, and asterisk-form names nothing to serve. At most one Host line, and a valid
 * one: Node keeps the first of two in `headers.host`, and the guard must not approve one
 * Host while something else reads the other.
 */
export function checkAdminMessage (url: string, rawHeaders: readonly string[]): string | null {
  if (url.charCodeAt(0) !== 0x2f /* / */) return 'the request target must be a path (absolute-form and asterisk-form are not served here)'
  return hostHeaderProblem(rawHeaders)
}

/** Null when `host` (a Host header) names this admin server; else why not. */
export function checkAdminHost (host: string | undefined, options: AdminGuardOptions): string | null {
  // HTTP/1.0 clients may send no Host; a browser always does.
  if (host === undefined) return null
  const name = hostnameOf(host)
  if (name === 'localhost' || name.endsWith('.localhost') || isIP(name) !== 0) return null
  if (name === hostnameOf(options.bindHost)) return null
  if (options.allowedHosts.some(h => hostnameOf(h) === name)) return null
  return `Host "${host}" is not allowed: use an IP address or localhost, or add the name to config.adminAllowedHosts (DNS rebinding protection)`
}

/**
 * Null when the request does not come from another origin: `Origin`, if sent, is
 * `http://<the Host it was sent to>`, and `Sec-Fetch-Site`, if sent, is same-origin or none.
 */
export function checkSameOrigin (facts: AdminRequestFacts): string | null {
  const { origin, host } = facts
  if (origin !== undefined) {
    if (origin === 'null') return 'cross-origin request (Origin: null) refused: the admin server is same-origin only'
    if (!sameOrigin(origin, host)) return `cross-origin request from ${origin} refused: the admin server is same-origin only`
  }
  const site = facts.secFetchSite
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return `cross-site request (Sec-Fetch-Site: ${site}) refused`
  return null
}

function sameOrigin (origin: string, host: string | undefined): boolean {
  if (host === undefined) return false
  try {
    const o = new URL(origin)
    // The admin serves plain HTTP; URL() drops a default :80 on both sides.
    return o.protocol === 'http:' && o.host === new URL(`http://${host}`).host
  } catch {
    return false
  }
}

/** Null when the admin may serve the request; else the reason for a 403. */
export function checkAdminRequest (facts: AdminRequestFacts, options: AdminGuardOptions): string | null {
  return checkAdminHost(facts.host, options) ?? (SAFE_METHODS.has(facts.method.toUpperCase()) ? null : checkSameOrigin(facts))
}

/** The facts of a Node/fastify request's headers. */
export function requestFacts (method: string, headers: Record<string, string | string[] | undefined>): AdminRequestFacts {
  const one = (v: string | string[] | undefined) => Array.isArray(v) ? v.join(', ') : v
  return { method, host: one(headers.host), origin: one(headers.origin), secFetchSite: one(headers['sec-fetch-site']) }
}
