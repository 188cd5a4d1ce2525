/**
 * A copy of any IR (or config) value safe to show: /config_dump, the UI, traces and logs use
 * it. Secrets are replaced by `<redacted>`: private keys, client secrets, passwords, htpasswd
 * entries, tokens, API keys, and the values policies set for credential headers (a
 * provider's key in `requestHeaderModifier.set.authorization`). Rules are by field name
 * (with the parent for ambiguous names such as `key`), plus a backstop for any PEM private
 * key wherever it sits.
 */

export const REDACTED_VALUE = '<redacted>'

/** Headers whose values are never shown (traces, dumps): credentials and session material. */
export const SENSITIVE_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key'
])

/** Parents whose keys are header names (header modifiers, transformations, direct responses). */
const HEADER_MAPS = new Set(['set', 'add', 'headers'])

/** Field names that always hold secrets. */
const SECRET_FIELDS = new Set(['clientSecret', 'client_secret', 'password', 'htpasswd', 'token', 'secret', 'sessionKey', 'privateKey'])

/** Field names that hold secrets under a given parent field. */
const SECRET_UNDER: Record<string, Set<string>> = {
  tls: new Set(['key']),
  backendTLS: new Set(['key']),
  // apiKey policy: each entry's key (keyHash stays: it is what the file already shows).
  keys: new Set(['key'])
}

export function redactSecrets<T> (value: T): T {
  return walk(value, '') as T
}

function walk (value: unknown, parent: string): unknown {
  if (typeof value === 'string') return /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(value) ? REDACTED_VALUE : value
  if (Array.isArray(value)) return value.map(v => walk(v, parent))
  if (value === null || typeof value !== 'object') return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) {
    const secret = SECRET_FIELDS.has(k) || SECRET_UNDER[parent]?.has(k) === true || (HEADER_MAPS.has(parent) && SENSITIVE_HEADERS.has(k.toLowerCase()))
    if (v !== null && v !== undefined && secret) out[k] = REDACTED_VALUE
    else out[k] = walk(v, k)
  }
  return out
}
