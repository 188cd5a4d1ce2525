/**
 * One access token held for a provider's requests, fetched again before it expires: the cache
 * both cloud token sources use (google-token.ts for Vertex AI, azure-token.ts for Entra ID).
 * Concurrent requests that need a new token share one fetch.
 *
 * Within `marginMs` of expiry the token is renewed. With `backgroundRefresh` the still-valid
 * token is sent meanwhile and the renewal runs on its own (a failed one is retried after
 * `retryAfterFailureMs`); requests wait only once fewer than 10 s of it are left. Without it,
 * requests wait for the renewal, as google-auth-library's eager refresh does.
 */

export interface CachedToken { token: string, expiresAt: number }

export interface TokenCacheOptions {
  /** Fetches a fresh token (throws on failure: the error reaches the request that waited). */
  fetch: () => Promise<CachedToken>
  /** Renew this long before expiry (ms). */
  marginMs: number
  backgroundRefresh?: boolean
  retryAfterFailureMs?: number
  /** Clock (ms), for tests. */
  now?: () => number
}

/** Past this close to expiry a token is not sent while a background renewal runs. */
const LAST_USE_MS = 10_000

export function tokenCache (options: TokenCacheOptions): () => Promise<string> {
  const now = options.now ?? Date.now
  const retryAfterFailure = options.retryAfterFailureMs ?? 5_000
  let cached: CachedToken | null = null
  let inflight: Promise<CachedToken> | null = null
  let lastFailure = -Infinity

  const refresh = (): Promise<CachedToken> => {
    inflight ??= options.fetch()
      .then(t => { cached = t; return t }, (err: unknown) => { lastFailure = now(); throw err })
      .finally(() => { inflight = null })
    return inflight
  }

  return async () => {
    const t = now()
    if (cached !== null && t < cached.expiresAt - options.marginMs) return cached.token
    if (options.backgroundRefresh === true && cached !== null && t < cached.expiresAt - LAST_USE_MS) {
      // Still valid: send it, and renew in the background (its failure is retried later).
      if (inflight === null && t - lastFailure >= retryAfterFailure) refresh().catch(() => {})
      return cached.token
    }
    return (await refresh()).token
  }
}
