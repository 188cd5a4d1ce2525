/**
 * The grammar of origins (`scheme://host[:port]`) as policies hold them in the IR: CORS
 * allowOrigins patterns and CSRF additionalOrigins. Front ends check values with these,
 * ir/validate.ts checks every IR with them, and the policies compare request Origins in the
 * same canonical forms, so a value is read the same way at every step.
 */

const DEFAULT_PORT: Record<string, string> = { http: '80', https: '443' }
const ORIGIN = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(\[[0-9A-Fa-f:.]+\]|[^/:?#\s[\]]+)(?::(\d{1,5}))?$/

/** `scheme://host:port` with the default port made explicit, lower-case; null when not an origin. */
export function canonicalOrigin (origin: string): string | null {
  const m = ORIGIN.exec(origin)
  if (m === null) return null
  const scheme = m[1]!.toLowerCase()
  const port = m[3] ?? DEFAULT_PORT[scheme]
  return port === undefined ? `${scheme}://${m[2]!.toLowerCase()}` : `${scheme}://${m[2]!.toLowerCase()}:${port}`
}

/** Is `pattern` a valid allowOrigins entry? A message when not. */
export function checkOriginPattern (pattern: string): string | null {
  if (pattern === '*') return null
  const m = ORIGIN.exec(pattern)
  if (m === null) return `"${pattern}" is not an origin (scheme://host[:port], or *)`
  if (m[1] !== 'http' && m[1] !== 'https') return `"${pattern}": the scheme must be http or https`
  if (m[3] !== undefined && (Number(m[3]) < 1 || Number(m[3]) > 65535)) return `"${pattern}": port out of range`
  return null
}

/** `scheme://host[:port]`, lower-case, without a default port; null when not an origin. */
export function normalizeOrigin (origin: string): string | null {
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\s]+$/.test(origin)) return null
  try {
    const url = new URL(origin)
    return url.origin === 'null' ? null : url.origin
  } catch {
    return null
  }
}
