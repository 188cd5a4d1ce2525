/**
 * How a backend reads in a list: its TYPE and ENDPOINT in `porticoctl proxy config backends`
 * and the web UI's Backends view, from one place so both say the same thing (a mesh backend:
 * `hbone → <SPIFFE ID> (<target>)`). Input is a
 * `/config_dump` backend, read defensively (it may come from a newer proxy).
 */

export interface BackendShape {
  kind: string
  target?: string
  invalidReason?: string
  endpoints?: unknown[]
  mcp?: { targets?: Array<{ name: string, kind?: unknown }> }
  /** An InferencePool backend (a static backend whose endpoint an endpoint picker chooses). */
  inferencePool?: { picker?: { target?: string } }
}

const TYPES: Record<string, string> = { static: 'Backend', service: 'Service', invalid: 'Invalid', mcp: 'MCP', ai: 'AI' }

export function backendTypeText (b: BackendShape): string {
  if (b.inferencePool !== undefined && b.inferencePool !== null) return 'InferencePool'
  return TYPES[b.kind] ?? b.kind
}

export function backendTargetText (b: BackendShape): string {
  if (b.kind === 'invalid') return b.invalidReason ?? 'invalid'
  if (b.kind === 'mcp') return (b.mcp?.targets ?? []).map(t => `${t.name} (${String(t.kind)})`).join(', ')
  if (b.inferencePool !== undefined && b.inferencePool !== null) {
    // The pool's name is already in NAME; what a reader needs is who picks and among how many.
    const n = Array.isArray(b.endpoints) ? b.endpoints.length : 0
    return `picker ${String(b.inferencePool.picker?.target ?? '?')}, ${n} endpoint${n === 1 ? '' : 's'}`
  }
  const mesh = meshIdentities(b.endpoints)
  if (mesh !== null) {
    // An HBONE tunnel to a peer that must prove an identity: the identity is what a reader
    // checks against the destination's service account; the address follows.
    const target = b.target ?? ''
    return `hbone → ${mesh}${target !== '' ? ` (${target})` : ''}`
  }
  return b.target ?? ''
}

/**
 * The SPIFFE IDs a backend's mesh endpoints must present (`endpoints[].mesh.identity`),
 * distinct, in order, with `(n of m endpoints)` when only some endpoints are in the mesh;
 * null when none is.
 */
function meshIdentities (endpoints: unknown[] | undefined): string | null {
  if (!Array.isArray(endpoints)) return null
  const ids: string[] = []
  let meshed = 0
  for (const e of endpoints) {
    const identity = (e as { mesh?: { identity?: unknown } } | null)?.mesh?.identity
    if (typeof identity !== 'string') continue
    meshed++
    if (!ids.includes(identity)) ids.push(identity)
  }
  if (meshed === 0) return null
  return ids.join(', ') + (meshed < endpoints.length ? ` (${meshed} of ${endpoints.length} endpoints)` : '')
}
