/**
 * Signing keys of an identity provider (JWKS), fetched with undici and cached:
 *  - keys are refreshed after `maxAgeMs`, and at once when a token names a `kid` we do not
 *    have (key rotation) — at most once per `minRefreshMs` (2 s), so a flood of tokens with
 *    made-up kids costs the provider one fetch every two seconds at worst;
 *  - when the provider is down, the last keys keep serving (stale is better than 401 for
 *    every caller).
 * Inline or file keys never refresh.
 */

import { undici } from '../util/undici.ts'
import type * as Jose from 'jose'
import type { JSONWebKeySet, JWSHeaderParameters, FlattenedJWSInput, CryptoKey, KeyObject } from 'jose'
import { lazyRequire } from '../util/lazy-require.ts'
import { PorticoError } from '../util/errors.ts'

export type JwksSource = { url: string } | { keys: JSONWebKeySet }

export interface JwksOptions {
  /** Keys older than this are refreshed on next use (default 5 min). */
  maxAgeMs?: number
  /** Minimum time between fetches (default 2 s). */
  minRefreshMs?: number
  /** Fetch timeout (default 5 s). */
  timeoutMs?: number
}

type Resolver = (header: JWSHeaderParameters, input: FlattenedJWSInput) => Promise<CryptoKey | KeyObject | Uint8Array>

/** jose, loaded when a config first has a JWT policy (a JwksCache is made at compile time). */
export const jose = lazyRequire<typeof Jose>('jose')

export class JwksCache {
  private readonly source: JwksSource
  private readonly maxAgeMs: number
  private readonly minRefreshMs: number
  private readonly timeoutMs: number
  private local: ReturnType<typeof Jose.createLocalJWKSet> | null = null
  private fetchedAt = 0
  /**
   * The last fetch from `url` (ms since the epoch) and how it went, with a count of them: the
   * JWT policy turns a fetch a request waited for into a span of that request.
   */
  lastFetch: { url: string, start: number, end: number, status: number | null, error: string | null } | null = null
  fetches = 0
  private lastAttempt = -Infinity
  private inflight: Promise<void> | null = null
  /** Why the last fetch failed (null after a success). */
  lastError: string | null = null

  constructor (source: JwksSource, options: JwksOptions = {}) {
    this.source = source
    this.maxAgeMs = options.maxAgeMs ?? 5 * 60_000
    this.minRefreshMs = options.minRefreshMs ?? 2_000
    this.timeoutMs = options.timeoutMs ?? 5_000
    // Loaded now, while the config compiles, rather than by the first request that needs it.
    jose()
    if ('keys' in source) {
      this.local = jose().createLocalJWKSet(source.keys)
      this.fetchedAt = Infinity
    }
  }

  /** The key resolver jose's jwtVerify wants. */
  readonly resolve: Resolver = async (header, input) => {
    if (this.local === null || (this.fetchedAt + this.maxAgeMs < Date.now() && 'url' in this.source)) await this.refresh(false)
    if (this.local === null) throw new PorticoError('PORTICO_JWKS_UNAVAILABLE', `signing keys unavailable: ${this.lastError ?? 'not fetched'}`)
    try {
      return await this.local(header, input)
    } catch (err) {
      if (!(err instanceof jose().errors.JWKSNoMatchingKey) || !('url' in this.source)) throw err
      // An unknown kid: the provider may have rotated its keys.
      if (await this.refresh(true)) return await this.local(header, input)
      throw err
    }
  }

  /** Fetches the key set; returns true if new keys were loaded. */
  private async refresh (onUnknownKid: boolean): Promise<boolean> {
    if (!('url' in this.source)) return false
    const now = Date.now()
    if (this.inflight !== null) {
      await this.inflight
      return this.lastError === null
    }
    if (now - this.lastAttempt < this.minRefreshMs && (this.local !== null || onUnknownKid)) return false
    this.lastAttempt = now
    const url = this.source.url
    this.inflight = (async () => {
      const fetch: NonNullable<JwksCache['lastFetch']> = { url, start: Date.now(), end: 0, status: null, error: null }
      try {
        const res = await undici().request(url, { headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs, headers: { accept: 'application/json' } })
        fetch.status = res.statusCode
        const text = await res.body.text()
        if (res.statusCode !== 200) throw new PorticoError('PORTICO_JWKS_UNAVAILABLE', `HTTP ${res.statusCode} from ${url}`)
        const jwks = JSON.parse(text) as JSONWebKeySet
        if (!Array.isArray(jwks.keys)) throw new PorticoError('PORTICO_BAD_JWKS', `no "keys" in the document at ${url}`)
        this.local = jose().createLocalJWKSet(jwks)
        this.fetchedAt = Date.now()
        this.lastError = null
      } catch (err) {
        this.lastError = (err as Error).message
      } finally {
        this.inflight = null
        fetch.end = Date.now()
        fetch.error = this.lastError
        this.lastFetch = fetch
        this.fetches++
      }
    })()
    await this.inflight
    return this.lastError === null
  }
}
