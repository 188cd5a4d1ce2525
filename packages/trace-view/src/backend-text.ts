/**
 * How a backend reads in a list: its TYPE and ENDPOINT in `porticoctl proxy config backends`
 * and the web UI's Backends view, from one place so both say the same thing. Input is a
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
  return b.target ?? ''
}
