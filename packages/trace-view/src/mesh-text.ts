/**
 * How the gateway's mesh identity reads: `porticoctl proxy mesh` and the web UI's Overview
 * "Mesh" card, from one place so both say the same thing. Input is the admin server's
 * `/debug/mesh` (also `/config_dump`'s `mesh`, `/api/overview`'s `mesh`), read defensively:
 * it may come from an older or newer proxy. It never holds the key or the token.
 */

export interface MeshStatusShape {
  /** `none` (no mesh configured), `files` (config.mesh.certificate) or `ca` (istiod). */
  source?: string
  state?: string
  reason?: string
  spiffeId?: string
  /** ISO time the certificate in force expires. */
  notAfter?: string
  ca?: { address?: string }
  files?: { cert?: string }
}

/** The state's colour: ready green, pending yellow, anything else (failed) red. */
export type MeshTone = 'ok' | 'warn' | 'bad'

/** Whether the proxy has a mesh identity configured at all (an older proxy has no `mesh`). */
export function meshConfigured (s: MeshStatusShape | null | undefined): s is MeshStatusShape {
  return s !== null && s !== undefined && typeof s.source === 'string' && s.source !== 'none'
}

export function meshTone (state: string | undefined): MeshTone {
  return state === 'ready' ? 'ok' : state === 'pending' ? 'warn' : 'bad'
}

/** `in 23h 59m` / `expired 5m ago`: the largest two units, for a reader deciding whether to worry. */
export function relativeText (ms: number): string {
  const abs = Math.abs(ms)
  const units: Array<[string, number]> = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]]
  // The first unit that is not zero, and the next one when it is not zero: `1d 1h`, `3d`, `45s`.
  let first = units.findIndex(([, size]) => abs >= size)
  if (first === -1) first = units.length - 1
  const parts: string[] = []
  let rest = abs
  for (const [name, size] of units.slice(first, first + 2)) {
    const n = Math.floor(rest / size)
    if (n > 0 || parts.length === 0) parts.push(`${n}${name}`)
    rest -= n * size
  }
  return ms >= 0 ? `in ${parts.join(' ')}` : `expired ${parts.join(' ')} ago`
}

/** The certificate's expiry: `2026-12-06T15:10:00.000Z (in 23h 59m)`, or `-` when there is none yet. */
export function meshExpiryText (notAfter: string | undefined, now: number = Date.now()): string {
  if (notAfter === undefined || notAfter === '') return '-'
  const at = Date.parse(notAfter)
  if (Number.isNaN(at)) return notAfter
  return `${notAfter} (${relativeText(at - now)})`
}

/** Where the identity comes from: `istiod <address>` or `files <cert file>`. */
export function meshSourceText (s: MeshStatusShape): string {
  if (s.source === 'ca') return `istiod CA ${s.ca?.address ?? ''}`.trim()
  if (s.source === 'files') return `files ${s.files?.cert ?? ''}`.trim()
  return s.source ?? 'none'
}

/**
 * The status as label/value rows (STATE, IDENTITY, EXPIRES, SOURCE, and REASON when there
 * is one: why not ready, or why renewals fail while the certificate is still valid).
 */
export function meshStatusRows (s: MeshStatusShape | null | undefined, now: number = Date.now()): Array<[string, string]> {
  if (!meshConfigured(s)) return [['STATE', 'not configured (no config.mesh, MESH_ENABLED not set)']]
  const rows: Array<[string, string]> = [
    ['STATE', s.state ?? 'unknown'],
    ['IDENTITY', s.spiffeId ?? '-'],
    ['EXPIRES', meshExpiryText(s.notAfter, now)],
    ['SOURCE', meshSourceText(s)]
  ]
  if (s.reason !== undefined && s.reason !== '') rows.push(['REASON', s.reason])
  return rows
}
