/**
 * Header hygiene at the proxy boundary: hop-by-hop headers (RFC 9110 §7.6.1, plus every name
 * listed in `Connection`) stay on their own hop, and the X-Forwarded-* headers tell the
 * backend who asked.
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import { plainAddress } from '../util/host-port.ts'

/**
 * The hop-by-hop names: connection, keep-alive, proxy-connection, transfer-encoding, te,
 * trailer, upgrade, http2-settings, and expect (Node answers `Expect: 100-continue` itself;
 * undici refuses to forward it). By length first, as most names are none of them: a Set's
 * lookup hashed every header name of every request and answer (~90 instructions each,
 * bench/README.md, 2026-12-06).
 */
function isHopByHop (name: string): boolean {
  switch (name.length) {
    case 2: return name === 'te'
    case 6: return name === 'expect'
    case 7: return name === 'trailer' || name === 'upgrade'
    case 10: return name === 'connection' || name === 'keep-alive'
    case 14: return name === 'http2-settings'
    case 16: return name === 'proxy-connection'
    case 17: return name === 'transfer-encoding'
    default: return false
  }
}

function connectionTokens (value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined) return undefined
  const text = Array.isArray(value) ? value.join(',') : value
  // The common values first, as sent (lowering costs more than these compares).
  if (text === '' || text === 'keep-alive' || text === 'close' || text === 'Keep-Alive' || text === 'Close') return undefined
  const lower = text.toLowerCase()
  if (lower === 'keep-alive' || lower === 'close') return undefined
  return new Set(lower.split(',').map(t => t.trim()).filter(t => t !== ''))
}

/**
 * Fields a request's `Connection` header may not name. RFC 9110 §7.6.1 lets a client name any
 * field it wants dropped at the next hop; naming one the gateway itself relies on turns the
 * request into another one behind it (a backend or a proxy further on that honours the list
 * sees no Host, no framing, or forwarding headers stripped of the hops this gateway trusted).
 * Envoy refuses X-Forwarded-For/-Host/-Proto and pseudo-headers, and ten names or more; Host,
 * Content-Length, Transfer-Encoding and Forwarded are added here because the gateway routes,
 * frames and identifies the client by them. Such a request is a 400 (and the connection closes).
 */
const NOT_NOMINABLE = new Set(['host', 'content-length', 'transfer-encoding', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto'])
const MAX_CONNECTION_TOKENS = 10

/** Null when a request's `Connection` header names nothing it may not (NOT_NOMINABLE); else why. */
export function connectionHeaderProblem (value: string | string[] | undefined): string | null {
  const listed = connectionTokens(value)
  if (listed === undefined) return null
  let count = 0
  for (const token of (Array.isArray(value) ? value.join(',') : value!).split(',')) {
    if (token.trim() !== '') count++
  }
  if (count >= MAX_CONNECTION_TOKENS) return `the Connection header names ${count} fields (the limit is ${MAX_CONNECTION_TOKENS - 1})`
  for (const name of listed) {
    if (NOT_NOMINABLE.has(name) || name.charCodeAt(0) === 58 /* ':' */) return `the Connection header names ${name}, which must reach the backend`
  }
  return null
}

/** Copies end-to-end headers from a received message. `te: trailers` is kept (gRPC needs it). */
export function endToEndHeaders (headers: IncomingHttpHeaders): HeaderMap {
  const out: HeaderMap = {}
  const listed = connectionTokens(headers.connection)
  for (const name in headers) {
    if (isHopByHop(name) || name.charCodeAt(0) === 58 /* ':' */) {
      if (name === 'te' && headers.te === 'trailers') out.te = 'trailers'
      continue
    }
    if (listed?.has(name) === true) continue
    out[name] = headers[name]
  }
  return out
}

/**
 * Removes a header from the request going upstream by setting it to undefined: undici and
 * every reader of the request headers here skip undefined values, while `delete` would turn
 * the object into a slower dictionary for the rest of the request (about 2 µs per request
 * when a JWT is removed, bench/auth.ts). Not for response headers: Node's writeHead refuses
 * undefined values.
 */
export function dropUpstreamHeader (headers: HeaderMap, name: string): void {
  if (headers[name] !== undefined) headers[name] = undefined
}

/**
 * X-Forwarded-For gets the peer address appended (what the client sent stays in front of it,
 * as Envoy does: a reader counts trusted entries from the right). X-Forwarded-Proto and -Host
 * describe the connection and Host this gateway received, unless `trustedHops` > 0 (a proxy
 * in front of the gateway set them): a client could otherwise tell the backend it came over
 * https, or from another host, and change the redirects, cookies and URLs the backend makes.
 */
export function addForwardedHeaders (headers: HeaderMap, clientAddress: string | undefined, scheme: string, host: string, trustedHops = 0): void {
  if (clientAddress !== undefined && clientAddress !== '') {
    const addr = plainAddress(clientAddress)
    const prior = headers['x-forwarded-for']
    headers['x-forwarded-for'] = prior === undefined ? addr : `${Array.isArray(prior) ? prior.join(', ') : prior}, ${addr}`
  }
  const trusted = trustedHops > 0
  if (!trusted || headers['x-forwarded-proto'] === undefined) headers['x-forwarded-proto'] = scheme
  if (!trusted || headers['x-forwarded-host'] === undefined) {
    if (host !== '') headers['x-forwarded-host'] = host
    else dropUpstreamHeader(headers, 'x-forwarded-host')
  }
}

/** Response headers from upstream, without hop-by-hop ones (Node frames the body itself). */
export function responseEndToEnd (headers: Record<string, string | string[] | undefined>): HeaderMap {
  const out: HeaderMap = {}
  const listed = connectionTokens(headers.connection)
  for (const name in headers) {
    if (isHopByHop(name)) continue
    if (listed?.has(name) === true) continue
    out[name] = headers[name]
  }
  return out
}


/**
 * Fields a trailer section must not carry on to the client (RFC 9110 §6.5.1): message
 * framing (Content-Length, Transfer-Encoding), routing (Host), the hop-by-hop fields, and
 * pseudo-headers. A client that merges trailers into the head (some do) must not be handed a
 * second framing, and Node's HTTP/2 server refuses connection-specific fields outright.
 */
function notInTrailers (name: string): boolean {
  return isHopByHop(name) || name === 'content-length' || name === 'host' || name.charCodeAt(0) === 58 /* ':' */
}

/**
 * A backend's trailers without the fields that have no place there (notInTrailers, and the
 * names a `connection` trailer lists): the same object when none is present (the usual case,
 * nothing allocated), a copy without them otherwise.
 */
export function trailerFields<T extends Record<string, string | string[] | undefined> | null | undefined> (trailers: T): T {
  if (trailers === null || typeof trailers !== 'object') return trailers
  let clean = true
  for (const name in trailers) {
    if (notInTrailers(name)) {
      clean = false
      break
    }
  }
  if (clean) return trailers
  const listed = connectionTokens(trailers.connection)
  const out: Record<string, string | string[] | undefined> = {}
  for (const name in trailers) {
    if (notInTrailers(name) || listed?.has(name) === true) continue
    out[name] = trailers[name]
  }
  return out as T
}
