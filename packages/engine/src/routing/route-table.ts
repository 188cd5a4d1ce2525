/**
 * Route selection with the Gateway API's precedence, compiled once per config:
 *
 *  1. hostname: routes for the exact host, then wildcard hostnames from the longest, then
 *     routes with no hostname (a more specific hostname group is tried first; when none of
 *     its matches fit the request, the next group is tried);
 *  2. within a group: the route's own hostname, most specific first (in a cluster a route for
 *     `*.example.com` on a listener for `abc.example.com` serves `abc.example.com` but ranks
 *     as `*.example.com`: RouteIR.hostnameOrigins); then exact path > longest prefix > regex; then a method match; then more
 *     header matches; then more query matches; then route order (file position or creation
 *     time); then match order within the route.
 *
 * Each (route, match) pair is one entry; entries are pre-sorted so selection is a scan that
 * stops at the first hit.
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { RouteIR, RouteMatchIR, ValueMatchIR } from '../ir/types.ts'
import { compileLinearRegex } from '../util/linear-regex.ts'
import { hostnameMatches, servedHostnameSpecificity } from './hostname.ts'

export interface MatchInput {
  method: string
  /** Path without the query. */
  path: string
  /** Raw query string without `?` ('' when absent). */
  query: string
  headers: IncomingHttpHeaders
}

export interface RouteSelection<R> {
  route: R | null
  /** The path match of the (route, match) pair that selected the request (null with no route). */
  matchedPath: RouteMatchIR['path'] | null
  /** Keys of routes whose matches were tried, in order (only when asked for: traces). */
  evaluated: string[]
}

interface Entry<R> {
  route: R
  key: string
  path: RouteMatchIR['path']
  test: (input: MatchInput, query: QueryCache) => boolean
  rank: number[]
}

/** Parses the query string at most once per request, and only if some match needs it. */
class QueryCache {
  private params: URLSearchParams | undefined
  private readonly raw: string
  constructor (raw: string) {
    this.raw = raw
  }
  get (name: string): string | null {
    this.params ??= new URLSearchParams(this.raw)
    return this.params.get(name)
  }
}

export class RouteTable<R extends { ir: RouteIR }> {
  private readonly exact = new Map<string, Entry<R>[]>()
  private readonly wildcard: Array<{ pattern: string, entries: Entry<R>[] }> = []
  private readonly any: Entry<R>[] = []
  readonly size: number

  constructor (routes: readonly R[]) {
    const wildcard = new Map<string, Entry<R>[]>()
    for (const route of routes) {
      const entries = route.ir.matches.map((m, i) => compileEntry(route, m, i))
      if (route.ir.hostnames.length === 0) this.any.push(...entries.map(e => ({ ...e, rank: [0, ...e.rank] })))
      route.ir.hostnames.forEach((h, i) => {
        const group = h.startsWith('*.') ? getOrInit(wildcard, h) : getOrInit(this.exact, h)
        // Within a hostname group, the route's own hostname ranks first (GatewayRouteHostnameIntersectionPrecedence).
        const specificity = servedHostnameSpecificity(route.ir.hostnames, route.ir.hostnameOrigins, i)
        group.push(...entries.map(e => ({ ...e, rank: [-specificity, ...e.rank] })))
      })
    }
    for (const group of this.exact.values()) group.sort(compareEntries)
    for (const [pattern, entries] of wildcard) this.wildcard.push({ pattern, entries: entries.sort(compareEntries) })
    this.wildcard.sort((a, b) => b.pattern.length - a.pattern.length)
    this.any.sort(compareEntries)
    this.size = routes.length
  }

  select (host: string, input: MatchInput, wantEvaluated: boolean): RouteSelection<R> {
    const evaluated: string[] = []
    const query = new QueryCache(input.query)
    const scan = (entries: Entry<R>[] | undefined): Entry<R> | null => {
      if (entries === undefined) return null
      for (const entry of entries) {
        if (wantEvaluated && evaluated[evaluated.length - 1] !== entry.key && !evaluated.includes(entry.key)) evaluated.push(entry.key)
        if (entry.test(input, query)) return entry
      }
      return null
    }
    let hit = scan(this.exact.get(host))
    if (hit === null) {
      for (const group of this.wildcard) {
        if (!hostnameMatches(group.pattern, host)) continue
        hit = scan(group.entries)
        if (hit !== null) break
      }
    }
    hit ??= scan(this.any)
    return { route: hit?.route ?? null, matchedPath: hit?.path ?? null, evaluated }
  }
}

function getOrInit<K, V> (map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key)
  if (list === undefined) map.set(key, list = [])
  return list
}

function compileEntry<R extends { ir: RouteIR }> (route: R, m: RouteMatchIR, index: number): Entry<R> {
  const pathTest = compilePath(m.path)
  const method = m.method
  const headers = m.headers.map(compileValue)
  const query = m.query.map(compileValue)
  const test = (input: MatchInput, q: QueryCache): boolean => {
    if (!pathTest(input.path)) return false
    if (method !== undefined && input.method !== method) return false
    for (const h of headers) {
      const v = input.headers[h.name]
      if (v === undefined || !h.test(Array.isArray(v) ? v.join(',') : v)) return false
    }
    for (const p of query) {
      const v = q.get(p.name)
      if (v === null || !p.test(v)) return false
    }
    return true
  }
  const kindRank = m.path.kind === 'exact' ? 0 : m.path.kind === 'prefix' ? 1 : 2
  const prefixLength = m.path.kind === 'prefix' ? normalizePrefix(m.path.value).length : 0
  return {
    route,
    key: route.ir.key,
    path: m.path,
    test,
    rank: [kindRank, -prefixLength, method === undefined ? 1 : 0, -headers.length, -query.length, route.ir.order, index]
  }
}

function compareEntries<R> (a: Entry<R>, b: Entry<R>): number {
  for (let i = 0; i < a.rank.length; i++) {
    const d = a.rank[i]! - b.rank[i]!
    if (d !== 0) return d
  }
  return 0
}

/** `/abc/` -> `/abc`; `/` stays `/`. A trailing slash of a prefix is ignored (Gateway API). */
function normalizePrefix (prefix: string): string {
  return prefix.length > 1 && prefix.endsWith('/') ? prefix.replace(/\/+$/, '') || '/' : prefix
}

export function compilePath (path: RouteMatchIR['path']): (p: string) => boolean {
  switch (path.kind) {
    case 'exact': {
      const value = path.value
      return p => p === value
    }
    case 'prefix': {
      const prefix = normalizePrefix(path.value)
      if (prefix === '/') return () => true
      const withSlash = prefix + '/'
      return p => p === prefix || p.startsWith(withSlash)
    }
    case 'regex': {
      // Whole-path match, in linear time (a backtracking engine would let one request's
      // path hold the event loop: see util/linear-regex.ts).
      const re = compileLinearRegex(path.value)
      return p => re.matchesWhole(p)
    }
  }
}

function compileValue (m: ValueMatchIR): { name: string, test: (v: string) => boolean } {
  if (m.kind === 'exact') {
    const value = m.value
    return { name: m.name, test: v => v === value }
  }
  const re = compileLinearRegex(m.value)
  return { name: m.name, test: v => re.matchesWhole(v) }
}
