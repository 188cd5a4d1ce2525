/**
 * Endpoints of an InferencePool as the endpoint picker protocol writes them
 * (docs/proposals/004-endpoint-picker-protocol of the Gateway API Inference Extension):
 * `ip:port` (`[v6]:port`), several as an ordered, comma-separated fallback list.
 *
 * Everything the picker sends is hostile: a list is bounded in length and entries, each
 * entry must be an IP address and port (no names: the gateway resolves nothing the picker
 * says), and only the pool's own endpoints may be connected to — the rest are refused here,
 * before any socket is opened.
 */

import { isIP } from 'node:net'
import { hostPort } from '../util/host-port.ts'

/** Longest `x-gateway-destination-endpoint` value read (a list of 32 IPv6 endpoints fits). */
export const MAX_ENDPOINT_LIST_BYTES = 2048

/** Most endpoints of one list that are tried. */
export const MAX_ENDPOINT_LIST_ENTRIES = 32

export interface PoolEndpoint {
  host: string
  port: number
}

/**
 * One endpoint, `ip:port` or `[v6]:port`, in its canonical spelling (`hostPort`), or null
 * when it is not an IP address and a port. `defaultPorts`: the ports of an entry without one
 * (a pool's targetPorts); an entry then stands for one endpoint per port.
 */
export function parseEndpoint (text: string, defaultPorts: readonly number[] = []): PoolEndpoint[] | null {
  const t = text.trim()
  let host: string
  let portText: string | null
  if (t.startsWith('[')) {
    const end = t.indexOf(']')
    if (end < 0) return null
    host = t.slice(1, end)
    const rest = t.slice(end + 1)
    if (rest === '') portText = null
    else if (rest.startsWith(':')) portText = rest.slice(1)
    else return null
    if (isIP(host) !== 6) return null
  } else if (isIP(t) === 6) {
    host = t
    portText = null
  } else {
    const at = t.lastIndexOf(':')
    host = at < 0 ? t : t.slice(0, at)
    portText = at < 0 ? null : t.slice(at + 1)
    if (isIP(host) !== 4) return null
  }
  if (portText === null) return defaultPorts.length === 0 ? null : defaultPorts.map(port => ({ host, port }))
  if (!/^\d{1,5}$/.test(portText)) return null
  const port = Number(portText)
  if (port < 1 || port > 65535) return null
  return [{ host, port }]
}

/** The canonical `ip:port` of an endpoint (what lists are compared by). */
export function endpointLabel (e: PoolEndpoint): string {
  return hostPort(e.host, e.port)
}

export type EndpointList =
  | { ok: true, endpoints: string[], refused: string[] }
  | { ok: false, reason: string }

/**
 * The picker's answer (`x-gateway-destination-endpoint`, header or metadata) as the ordered
 * list the gateway may connect to: entries of the pool in order (duplicates once), and the
 * entries refused (not of the pool, or not `ip:port`). Not ok when the value is too long, has
 * too many entries, or names no endpoint of the pool at all.
 */
export function endpointList (value: string, pool: ReadonlySet<string>): EndpointList {
  // The usual answer, one endpoint of the pool as its canonical ip:port: nothing to parse.
  if (pool.has(value)) return { ok: true, endpoints: [value], refused: [] }
  if (Buffer.byteLength(value) > MAX_ENDPOINT_LIST_BYTES) return { ok: false, reason: `endpoint list longer than ${MAX_ENDPOINT_LIST_BYTES} bytes` }
  const entries = value.split(',').map(s => s.trim()).filter(s => s !== '')
  if (entries.length === 0) return { ok: false, reason: 'empty endpoint list' }
  if (entries.length > MAX_ENDPOINT_LIST_ENTRIES) return { ok: false, reason: `more than ${MAX_ENDPOINT_LIST_ENTRIES} endpoints in the list` }
  const endpoints: string[] = []
  const refused: string[] = []
  for (const entry of entries) {
    const parsed = parseEndpoint(entry)
    const label = parsed === null ? null : endpointLabel(parsed[0]!)
    if (label === null || !pool.has(label)) refused.push(printable(entry))
    else if (!endpoints.includes(label)) endpoints.push(label)
  }
  if (endpoints.length === 0) return { ok: false, reason: `no endpoint of the pool in the list (refused: ${refused.join(', ')})` }
  return { ok: true, endpoints, refused }
}

/** An entry as traces show it: at most 64 characters, control characters escaped. */
function printable (s: string): string {
  const cut = s.length > 64 ? `${s.slice(0, 64)}…` : s
  return JSON.stringify(cut).slice(1, -1)
}

/**
 * The pool's endpoints starting at `start` and wrapping round: the fallback list of a
 * request the gateway places itself (FailOpen), round robin by `start`.
 */
export function rotation (endpoints: readonly string[], start: number): string[] {
  const n = endpoints.length
  const out: string[] = []
  for (let i = 0; i < Math.min(n, MAX_ENDPOINT_LIST_ENTRIES); i++) out.push(endpoints[(start + i) % n]!)
  return out
}
